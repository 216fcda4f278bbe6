"""The shortcuts of the round's hot path give exactly what the general code gives.

- ``structure_input_required`` reads a well-formed form-mode elicitation entry on its own;
  every other entry, and every error, comes from ``structure_input_request``.
- ``LegBuilder`` copies plain JSON params with a plan made once per flow, which checks them
  as it goes; other values take the general check and copier. Either way every leg is a
  fresh deep copy of what JSON reads back, and what JSON cannot write is refused.
- A flow's verdicts on input request kinds are shared by the flows of the same
  capabilities and handled kinds.
- ``answer_to_wire`` writes an exact ``ElicitResult`` of builtin values on its own; every
  other answer, and every error, comes from the general check and the converter.
- ``ClientFlow.handle`` and ``start`` check each input's usual state by identity before
  the table: that state must be one the table accepts the input in.
"""

from __future__ import annotations

import copy
import functools
import json
from collections import OrderedDict
from typing import Any

import pytest
from client_helpers import (
    ACCEPT,
    ALL_KINDS,
    META,
    Ids,
    form,
    invokes,
    irr,
    last_send,
    make_flow,
    ok,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_core import jsonrpc
from mrtr_core.client import (
    ACCEPTS,
    ClientFlow,
    ClientLimits,
    Fail,
    FlowState,
    HandlerReturned,
    Input,
    LegBuilder,
    answer_to_wire,
)
from mrtr_core.client.retry import _elicit_to_wire, _Unusable
from mrtr_core.errors import CodecError, LocalProtocolError, UnsupportedInputError
from mrtr_core.wire import (
    ClientCapabilities,
    CreateMessageRequest,
    ElicitationCapability,
    ElicitResult,
    InputRequiredResult,
    RequestMeta,
    SamplingCapability,
    structure_input_request,
    structure_input_required,
    unstructure,
)

# --- structure_input_required ------------------------------------------------------------


def _general(value: Any) -> Any:
    """What the general reader makes of one entry: the model, or the error's text."""
    try:
        return structure_input_request(value, path="result.inputRequests.k")
    except CodecError as exc:
        return ("error", str(exc), exc.path)


def _via_result(value: Any) -> Any:
    try:
        return structure_input_required({"inputRequests": {"k": value}})
    except CodecError as exc:
        return ("error", str(exc), exc.path)


class _Dict(dict[str, Any]):
    """A dict subclass: valid, but not the exact type the fast path takes."""


class _Str(str):
    pass


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5),
                    st.sampled_from(["form", "url", "object", "elicitation/create"]))
SCHEMAS = st.one_of(
    st.just({"type": "object", "properties": {"x": {"type": "string"}}}),
    st.just({"type": "object", "properties": {}, "required": []}),
    st.builds(_Dict, st.just({"type": "object", "properties": {}})),
    st.just({"type": "object", "properties": _Dict()}),
    st.just({"type": "object"}),
    st.just({"type": "array", "properties": {}}),
    st.just({"properties": {}}),
    SCALARS,
)


@st.composite
def form_like(draw: st.DrawFn) -> Any:
    """An elicitation entry that is well-formed, or broken in one or more ways."""
    params: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        params["message"] = draw(st.one_of(st.just("Proceed?"), st.just(_Str("sub")),
                                           SCALARS))
    if draw(st.integers(0, 9)):
        params["requestedSchema"] = draw(SCHEMAS)
    mode = draw(st.sampled_from(["absent", "form", "url", "other", "none"]))
    if mode != "absent":
        params["mode"] = {"none": None, "other": "dialog"}.get(mode, mode)
    if mode == "url" and draw(st.booleans()):
        params["url"] = "https://example.com"
    for key in draw(st.lists(st.sampled_from(["title", "_meta", "url", "x"]), max_size=2)):
        params[key] = draw(SCALARS)
    entry: Any = {"method": draw(st.sampled_from(["elicitation/create"] * 4 + [
        "roots/list", "sampling/createMessage", "nope", None])), "params": params}
    shape = draw(st.integers(0, 19))
    if shape == 0:
        entry["params"] = draw(SCALARS)
    elif shape == 1:
        entry = _Dict(entry)
    elif shape == 2:
        entry["params"] = _Dict(params)
    elif shape == 3:
        entry = draw(SCALARS)
    elif shape == 4:
        del entry["method"]  # missing keys: the fast path's KeyError, the general error
    elif shape == 5:
        del entry["params"]
    return entry


@settings(max_examples=400, deadline=None)
@given(form_like())
def test_an_entry_reads_as_the_general_reader_reads_it(value: Any) -> None:
    before = copy.deepcopy(value)
    got, want = _via_result(value), _general(value)
    if isinstance(want, tuple):
        assert got == want  # the same error, message and path
    else:
        assert not isinstance(got, tuple)
        read = got.input_requests["k"]
        assert type(read) is type(want) and read == want
        if hasattr(want, "requested_schema"):
            assert read.requested_schema is want.requested_schema  # shared, as received
    assert value == before  # nothing is changed in the peer's value


def test_the_fast_path_keeps_unknown_params_in_extra() -> None:
    entry = {"method": "elicitation/create",
             "params": {"mode": "form", "message": "m", "title": "T",
                        "requestedSchema": {"type": "object", "properties": {}}}}
    read = structure_input_required({"inputRequests": {"k": entry}}).input_requests
    assert read is not None and read["k"] == _general(entry)
    assert read["k"].extra == {"title": "T"}


# --- LegBuilder copies -----------------------------------------------------------------------


def _shares_a_container(a: Any, b: Any) -> bool:
    seen: set[int] = set()

    def walk(value: Any, into: set[int]) -> None:
        if isinstance(value, dict | list):
            into.add(id(value))
            for item in value.values() if isinstance(value, dict) else value:
                walk(item, into)

    walk(a, seen)
    other: set[int] = set()
    walk(b, other)
    return bool(seen & other)


def _deep(depth: int) -> Any:
    value: Any = {"leaf": [1]}
    for level in range(depth):
        value = {"d": value, "l": [level, {"n": level}]}
    return value


class _Bool(int):
    """An int subclass: a valid number, but not an exact builtin type."""


class _Real(float):
    """A float subclass: JSON writes its value."""


PARAMS_CASES: dict[str, Any] = {
    "plain": {"name": "x", "arguments": {"a": [1, {"b": [True, None, 2.5]}], "s": "t"}},
    "empty": {},
    "lists": {"name": "x", "arguments": {"m": [[1, 2], [], [{"k": []}]]}},
    "tuple-of-scalars": {"name": "x", "arguments": {"t": (1, "a")}},
    "tuple-of-containers": {"name": "x", "arguments": {"t": ({"a": 1}, [2])}},
    "deep": {"name": "x", "arguments": _deep(40)},
    "other-types": {"name": "x", "arguments": {"o": OrderedDict(a=[1]), "s": _Str("t"),
                                               "n": _Bool(2), "f": _Real(2.5)}},
}


@pytest.mark.parametrize("name", list(PARAMS_CASES))
def test_every_leg_is_a_fresh_deep_copy_of_the_params(name: str) -> None:
    params = PARAMS_CASES[name]
    before = copy.deepcopy(params)
    read = json.loads(json.dumps(params))  # a tuple as a list, a subclass as its type
    legs = LegBuilder("tools/call", params, META)
    first = legs.build(1, None, None)
    second = legs.build(2, {"k": {"action": "accept"}}, "s")
    base = legs.base_params
    for message in (first, second):
        sent = {k: v for k, v in message["params"].items()
                if k not in ("_meta", "inputResponses", "requestState")}
        assert sent == read and _exact(sent)
        assert message["params"]["_meta"] == unstructure(META)
        assert not _shares_a_container(message["params"], params)
        assert not _shares_a_container(message["params"], base)
    assert not _shares_a_container(first, second)
    first["params"]["_meta"]["junk"] = 1
    if name == "plain":
        first["params"]["arguments"]["a"][1]["b"].append("junk")
    third = legs.build(3, None, None)
    assert {k: v for k, v in third["params"].items() if k != "_meta"} == read
    assert "junk" not in third["params"]["_meta"]
    assert params == before


def _exact(value: Any) -> bool:
    """Whether ``value`` holds exact dicts, lists, strings, numbers, booleans and None only."""
    if type(value) is dict:
        return all(type(k) is str and _exact(v) for k, v in value.items())
    if type(value) is list:
        return all(_exact(v) for v in value)
    return type(value) in (str, int, float, bool, type(None))


def _keys_are_strings(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _keys_are_strings(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_keys_are_strings(v) for v in value)
    return True


_ANY_LEAF = st.one_of(
    st.text(max_size=3), st.integers(), st.floats(), st.booleans(), st.none(),
    st.builds(_Str, st.text(max_size=2)), st.builds(_Bool, st.integers()),
    st.builds(_Real, st.floats()), st.sets(st.integers(), max_size=1), st.binary(max_size=1),
)
_ANY_VALUE = st.recursive(_ANY_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 2)), inner, max_size=3),
    inner.map(lambda v: functools.reduce(lambda acc, _: [acc], range(40), v)),
), max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=3), _ANY_VALUE, max_size=3))
def test_params_are_refused_or_sent_as_json_reads_them(arguments: dict[str, Any]) -> None:
    # The copy plan's checks and the general check agree with the JSON encoder (and refuse
    # a key it would write as a string): a value is refused where it is given exactly when
    # no transport could send it, and sent otherwise as the peer reads it.
    params = {"name": "x", "arguments": arguments}
    try:
        read = json.loads(json.dumps(params, allow_nan=False))
        sendable = _keys_are_strings(params)
    except (TypeError, ValueError):
        sendable = False
    if not sendable:
        with pytest.raises(LocalProtocolError, match=r"^params.*: not JSON: "):
            LegBuilder("tools/call", params, META)
        return
    legs = LegBuilder("tools/call", params, META)
    for request_id in (1, 2):
        sent = legs.build(request_id, None, None)["params"]
        del sent["_meta"]
        assert sent == read and _exact(sent)


def test_plain_params_are_sent_as_the_json_they_are() -> None:
    params = PARAMS_CASES["plain"]
    message = LegBuilder("tools/call", params, META).build(1, None, None)
    assert json.loads(json.dumps(message))["params"]["arguments"] == params["arguments"]


# --- verdicts ----------------------------------------------------------------------------------


def test_verdicts_are_per_capabilities_and_handled_kinds() -> None:
    caps = ClientCapabilities(elicitation=ElicitationCapability(), roots={})
    meta = RequestMeta(client_capabilities=caps)
    handled = make_flow(meta=meta, kinds={"elicitation/create"})
    commands = handled.handle(ok(last_send(handled.start(0.0)).request_id,
                                 irr({"a": form()}, "s")), 1.0)
    assert [c.key for c in invokes(commands)] == ["a"]
    # Same capabilities, no elicitation handler: a different verdict.
    unhandled = make_flow(meta=meta, kinds={"roots/list"})
    [fail] = unhandled.handle(ok(last_send(unhandled.start(0.0)).request_id,
                                 irr({"a": form()}, "s")), 1.0)
    assert isinstance(fail, Fail) and isinstance(fail.error, UnsupportedInputError)
    assert fail.error.reason == "no handler"
    # And the first verdict still stands for a third flow.
    again = make_flow(meta=meta, kinds={"elicitation/create"})
    commands = again.handle(ok(last_send(again.start(0.0)).request_id,
                               irr({"a": form()}, "s")), 1.0)
    assert [c.key for c in invokes(commands)] == ["a"]


def test_sampling_verdicts_depend_on_each_request() -> None:
    meta = RequestMeta(client_capabilities=ClientCapabilities(sampling=SamplingCapability()))
    sample = {"method": "sampling/createMessage",
              "params": {"messages": [], "maxTokens": 10}}
    with_tools = {"method": "sampling/createMessage",
                  "params": {"messages": [], "maxTokens": 10, "tools": []}}
    for entry, ok_ in ((sample, True), (with_tools, False), (sample, True)):
        flow = make_flow(meta=meta, kinds=ALL_KINDS, limits=ClientLimits(pacing_jitter=0.0),
                         ids=Ids())
        commands = flow.handle(ok(last_send(flow.start(0.0)).request_id,
                                  irr({"s": entry}, "st")), 1.0)
        assert bool(invokes(commands)) is ok_


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), form_like(), max_size=3),
       st.one_of(st.none(), st.just("s"), st.just(""), st.integers(), st.just(["s"])),
       st.one_of(st.none(), st.just({"m": 1}), st.just([1])))
def test_a_result_reads_as_its_entries_read(entries: dict[str, Any], state: Any,
                                            meta: Any) -> None:
    """The whole result: entry by entry as the general reader, and its own checks."""
    obj: dict[str, Any] = {"inputRequests": entries}
    if state is not None:
        obj["requestState"] = state
    if meta is not None:
        obj["_meta"] = meta
    before = copy.deepcopy(obj)
    try:
        got: Any = structure_input_required(obj)
    except CodecError as exc:
        got = ("error", str(exc), exc.path)
    assert obj == before
    if state is not None and not isinstance(state, str):
        assert got[0] == "error" and got[2] == "result.requestState"
        assert "requestState must be a string" in got[1]
        return
    if meta is not None and not isinstance(meta, dict):
        assert got[0] == "error" and got[2] == "result._meta"
        assert "_meta must be an object" in got[1]
        return
    want: dict[str, Any] = {}
    for key, value in entries.items():
        try:
            want[key] = structure_input_request(value, path=f"result.inputRequests.{key}")
        except CodecError as exc:
            assert got == ("error", str(exc), exc.path)  # the first bad entry's error
            return
    if not want and state is None:
        assert isinstance(got, tuple) and "neither inputRequests" in got[1]
        return
    assert got == InputRequiredResult(input_requests=want or None, request_state=state,
                                      meta=meta)
    assert repr(got) == repr(InputRequiredResult(input_requests=want or None,
                                                 request_state=state, meta=meta))


# --- answers ---------------------------------------------------------------------------------


ELICIT_VALUES = st.one_of(
    st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=3),
    st.lists(st.text(max_size=2), max_size=2),
    st.lists(st.one_of(st.text(max_size=2), st.integers()), max_size=2),
    st.builds(_Bool, st.integers(0, 1)), st.builds(_Str, st.text(max_size=2)),
    st.none(), st.just({"x": 1}),
)
ELICIT_CONTENT = st.one_of(
    st.none(),
    st.dictionaries(st.one_of(st.text(max_size=3), st.builds(_Str, st.just("k"))),
                    ELICIT_VALUES, max_size=3),
    st.builds(_Dict, st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)),
    st.just([1]), st.just("text"),
)


def _reference(answer: Any) -> Any:
    """The general check and the converter, without the inlined fast path."""
    try:
        return ("ok", _elicit_to_wire(answer))
    except _Unusable as exc:
        return ("error", f"answer for 'k' (elicitation/create): {exc}")


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["accept", "decline", "cancel", "nope", _Str("accept")]), ELICIT_CONTENT)
def test_an_elicit_answer_is_written_as_the_general_writer_writes_it(action: Any,
                                                                     content: Any) -> None:
    answer = ElicitResult(action=action, content=content)
    before = copy.deepcopy(content)
    try:
        got: Any = ("ok", answer_to_wire("elicitation/create", answer, key="k"))
    except LocalProtocolError as exc:
        got = ("error", str(exc))
    want = _reference(answer)
    assert got == want
    if got[0] == "ok":
        assert [type(v) for v in got[1].get("content", {}).values()] == [
            type(v) for v in want[1].get("content", {}).values()]
        assert not _shares_a_container(got[1], content)  # the answer's values are copied
        assert json.loads(json.dumps(got[1])) == got[1]
    assert content == before


def test_an_elicit_answer_for_another_kind_is_refused() -> None:
    with pytest.raises(LocalProtocolError, match="must be a CreateMessageResult"):
        answer_to_wire("sampling/createMessage", ElicitResult(action="accept"), key="k")


# --- state shortcuts -----------------------------------------------------------------------------


def test_the_usual_states_checked_first_accept_their_inputs() -> None:
    assert Input.START in ACCEPTS[FlowState.IDLE]
    assert Input.RESPONSE in ACCEPTS[FlowState.AWAITING_RESPONSE]
    assert Input.HANDLER_RETURNED in ACCEPTS[FlowState.AWAITING_HANDLERS]
    # ... and are the only states that accept them, so the table decides the rest alone.
    assert [s for s in FlowState if Input.START in ACCEPTS[s]] == [FlowState.IDLE]
    assert [s for s in FlowState if Input.RESPONSE in ACCEPTS[s]] == [
        FlowState.AWAITING_RESPONSE]
    assert [s for s in FlowState if Input.HANDLER_RETURNED in ACCEPTS[s]] == [
        FlowState.AWAITING_HANDLERS]


def test_a_retry_refused_by_next_id_leaves_the_round_as_it_was() -> None:
    """The last answer is taken back out when the retry's id cannot be drawn."""
    drawn = [1, 1, 2]  # the second id repeats the first leg's: refused (C4)

    def next_id() -> int:
        return drawn.pop(0)

    flow = ClientFlow("tools/call", {"name": "t"}, meta=META, handled_kinds=ALL_KINDS,
                      next_id=next_id, limits=ClientLimits(pacing_jitter=0.0))
    flow.start(0.0)
    to_invoke = flow.handle(ok(1, irr({"a": form(), "b": form()}, "s")), 1.0)
    assert [c.key for c in invokes(to_invoke)] == ["a", "b"]
    assert flow.handle(HandlerReturned(key="a", answer=ACCEPT), 2.0) == []
    with pytest.raises(LocalProtocolError, match="repeated"):
        flow.handle(HandlerReturned(key="b", answer=ACCEPT), 3.0)
    assert flow.state is FlowState.AWAITING_HANDLERS
    assert flow.pending_keys == ("b",)
    [_, _, send] = flow.handle(HandlerReturned(key="b", answer=ACCEPT), 4.0)
    assert send.message["params"]["inputResponses"] == {
        "a": {"action": "accept", "content": {"ok": True}},
        "b": {"action": "accept", "content": {"ok": True}},
    }


@pytest.mark.parametrize("max_tokens", [float("inf"), float("-inf"), float("nan"), True, "5"])
def test_a_sampling_request_needs_a_finite_max_tokens(max_tokens: Any) -> None:
    # A typed error, never OverflowError. (On the wire, 1e999 is already refused by
    # jsonrpc.decode as a parse error, before it could parse to infinity.)
    entry = {"method": "sampling/createMessage",
             "params": {"messages": [], "maxTokens": max_tokens}}
    with pytest.raises(CodecError, match="maxTokens must be a finite number"):
        structure_input_request(entry, path="result.inputRequests.k")
    wire = b'{"resultType": "input_required", "requestState": "s", "inputRequests": {"k": ' \
        b'{"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 1e999}}}}'
    with pytest.raises(jsonrpc.ParseError, match="out of range"):
        jsonrpc.decode(wire, max_bytes=1000, max_depth=10)


@pytest.mark.parametrize(
    ("max_tokens", "match"),
    [(0, "maxTokens must be positive, got 0"), (-5, "maxTokens must be positive, got -5"),
     (-2.0, "maxTokens must be positive, got -2.0"),
     (1.5, "maxTokens must be a whole number of tokens, got 1.5"),
     (0.25, "maxTokens must be a whole number of tokens, got 0.25")],
)
def test_a_sampling_request_needs_a_positive_whole_max_tokens(max_tokens: Any, match: str) -> None:
    # Neither truncated nor clamped: the client MUST respect maxTokens (C12), so a value
    # it cannot honour as given is refused at the entry that carries it.
    entry = {"method": "sampling/createMessage",
             "params": {"messages": [], "maxTokens": max_tokens}}
    with pytest.raises(CodecError, match=match) as info:
        structure_input_request(entry, path="result.inputRequests.k")
    assert info.value.path == "result.inputRequests.k.params.maxTokens"


@pytest.mark.parametrize(("max_tokens", "kept"), [(1, 1), (64, 64), (64.0, 64)])
def test_a_sampling_request_keeps_a_whole_max_tokens(max_tokens: Any, kept: int) -> None:
    # 64.0 is an integer to JSON Schema (the schema's type for maxTokens): the same value.
    entry = {"method": "sampling/createMessage",
             "params": {"messages": [], "maxTokens": max_tokens}}
    request = structure_input_request(entry, path="result.inputRequests.k")
    assert isinstance(request, CreateMessageRequest)
    assert request.max_tokens == kept and type(request.max_tokens) is int
