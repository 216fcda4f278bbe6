"""Records built by ``record_maker`` and by the hand-written event constructors are the
records the attrs classes describe: equal, hashed and printed alike, and immutable."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr_core.client import ClientLimits
from mrtr_core.client.commands import (
    AwaitAnswers,
    CancelHandlers,
    Complete,
    Fail,
    InputNeeded,
    InvokeHandler,
    RoundFulfilled,
    RoundStarted,
    SendRequest,
)
from mrtr_core.client.events import (
    CancelRequested,
    HandlerFailed,
    HandlerReturned,
    ResponseReceived,
    TimerFired,
)
from mrtr_core.wire import ElicitFormRequest, ElicitResult, InputRequiredResult
from mrtr_core.wire.records import record_maker, slot_setters

FORM = ElicitFormRequest(message="m", requested_schema={"type": "object", "properties": {}})
RESULT = InputRequiredResult(input_requests={"k": FORM}, request_state="s")

VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=4),
                   st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))

RECORDS: list[type] = [
    SendRequest, InvokeHandler, CancelHandlers, AwaitAnswers, Complete, Fail, RoundStarted,
    InputNeeded, RoundFulfilled, ElicitFormRequest, InputRequiredResult,
]


def _assert_same(made: Any, built: Any) -> None:
    assert type(made) is type(built)
    assert made == built
    assert (made != built) is False
    assert repr(made) == repr(built)
    for field in attrs.fields(type(built)):
        assert getattr(made, field.name) is getattr(built, field.name)
    try:
        hashed = hash(built)
    except TypeError:  # a field holds a dict: neither hashes
        with pytest.raises(TypeError):
            hash(made)
    else:
        assert hash(made) == hashed


@pytest.mark.parametrize("cls", RECORDS, ids=lambda cls: cls.__name__)
@given(data=st.data())
def test_a_made_record_is_the_record_its_constructor_builds(cls: type, data: Any) -> None:
    names = [field.name for field in attrs.fields(cls)]
    values = [data.draw(VALUES, label=name) for name in names]
    made = record_maker(cls)(*values)
    _assert_same(made, cls(**dict(zip(names, values, strict=True))))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(made, names[0], 1)


def test_the_maker_takes_every_field_in_order_and_no_other() -> None:
    make = record_maker(RoundStarted)
    assert make(2, "id", True) == RoundStarted(round=2, request_id="id", state_only=True)
    with pytest.raises(TypeError):
        make(2, "id")  # no defaults
    with pytest.raises(TypeError):
        make(2, "id", True, None)


def test_a_record_with_more_fields_takes_the_general_builder() -> None:
    @attrs.frozen
    class Four:
        a: int
        b: int
        c: int
        d: int

    make = record_maker(Four)
    assert make(1, 2, 3, 4) == Four(1, 2, 3, 4)
    with pytest.raises(TypeError, match="takes 4 values"):
        make(1, 2, 3)


def test_a_checked_or_converted_class_gets_no_maker() -> None:
    with pytest.raises(TypeError, match="checked or converted"):
        record_maker(ClientLimits)  # validators must run

    @attrs.frozen
    class Converted:
        a: int = attrs.field(converter=int)

    with pytest.raises(TypeError, match="checked or converted"):
        record_maker(Converted)

    @attrs.frozen
    class PostInit:
        a: int

        def __attrs_post_init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="__attrs_post_init__"):
        record_maker(PostInit)


def test_only_slots_have_setters() -> None:
    @attrs.frozen(slots=False)
    class Plain:
        a: int

    with pytest.raises(TypeError):
        slot_setters(Plain, "a")
    with pytest.raises(TypeError):
        slot_setters(SendRequest, "nope")


# --- the events' hand-written constructors ------------------------------------------------


@attrs.frozen(kw_only=True)
class _Generated:
    """What attrs generates for an event, to compare the hand-written ones with."""

    key: str
    answer: Any


def test_events_keep_the_generated_constructor_signature() -> None:
    answer = ElicitResult(action="accept")
    event = HandlerReturned(key="k", answer=answer)
    assert (event.key, event.answer) == ("k", answer)
    assert repr(event) == repr(_Generated(key="k", answer=answer)).replace(
        "_Generated", "HandlerReturned")
    assert event == HandlerReturned(key="k", answer=answer)
    assert event != HandlerReturned(key="j", answer=answer)
    assert hash(event) == hash(HandlerReturned(key="k", answer=answer))
    assert event != _Generated(key="k", answer=answer)  # another class is never equal
    for build in (
        lambda: HandlerReturned("k", answer),  # type: ignore[misc]
        lambda: HandlerReturned(key="k"),  # type: ignore[call-arg]
        lambda: ResponseReceived(),  # type: ignore[call-arg]
        lambda: ResponseReceived(message={}, extra=1),  # type: ignore[call-arg]
        lambda: HandlerFailed(key="k"),  # type: ignore[call-arg]
        lambda: TimerFired(x=1),  # type: ignore[call-arg]
        lambda: CancelRequested("r"),  # type: ignore[misc]
    ):
        with pytest.raises(TypeError):
            build()


@pytest.mark.parametrize("event", [
    ResponseReceived(message={"id": 1}),
    HandlerReturned(key="k", answer=ElicitResult(action="cancel")),
    HandlerFailed(key="k", error=OSError("x")),
    CancelRequested(reason="r"),
    CancelRequested(),
], ids=repr)
def test_events_are_immutable_and_compare_by_value(event: Any) -> None:
    name = attrs.fields(type(event))[0].name
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(event, name, None)
    copy = attrs.evolve(event)
    assert copy == event and copy is not event
    assert repr(copy) == repr(event)


def test_a_cancel_without_a_reason_has_none() -> None:
    assert CancelRequested().reason is None
    assert CancelRequested() == CancelRequested(reason=None)
    assert TimerFired() == TimerFired() and repr(TimerFired()) == "TimerFired()"
