"""Manual mode, saving and restoring a flow, and resuming from a stored result."""

from __future__ import annotations

import json
import random as random_module
from typing import Any

import pytest
from client_helpers import (
    ACCEPT,
    ALL_KINDS,
    META,
    PARAMS,
    Ids,
    answer_all,
    done,
    form,
    invokes,
    irr,
    last_send,
    make_flow,
    names,
    ok,
    roots,
    sampling,
    to_handlers,
)
from deep_values import nested, too_deep

from mrtr_core.client import (
    SAVED_FLOW_FORMAT,
    AwaitAnswers,
    CancelRequested,
    ClientFlow,
    ClientLimits,
    Fail,
    FlowState,
    HandlerReturned,
    InputNeeded,
    RoundStarted,
    SavedFlowVersionError,
    TimerFired,
)
from mrtr_core.client.driver import ClientBase
from mrtr_core.errors import (
    CodecError,
    FlowDeadlineError,
    LocalProtocolError,
    RoundLimitError,
    UnsupportedInputError,
)
from mrtr_core.wire import (
    ClientCapabilities,
    ElicitationCapability,
    ElicitResult,
    Implementation,
    InputRequiredResult,
    ListRootsResult,
    RequestMeta,
    Root,
    unstructure_input_required,
)

NO_JITTER = ClientLimits(pacing_jitter=0.0)
CAPS = "io.modelcontextprotocol/clientCapabilities"


def json_round_trip(data: Any) -> Any:
    """What a store that speaks JSON gives back."""
    return json.loads(json.dumps(data))


def manual_flow(**kwargs: Any) -> ClientFlow:
    return make_flow(manual=True, **kwargs)


# --- manual mode ---------------------------------------------------------------------------------


def test_manual_mode_emits_input_needed_then_await_answers() -> None:
    flow = manual_flow()
    commands = to_handlers(flow, {"a": form(), "b": roots()}, "s1")
    assert names(commands) == ["InputNeeded", "AwaitAnswers"]
    await_ = commands[1]
    assert isinstance(await_, AwaitAnswers) and await_.round == 1
    assert await_.result is flow.last_result
    assert flow.state is FlowState.AWAITING_ANSWERS and flow.pending_keys == ("a", "b")
    assert not invokes(commands)


def test_manual_answers_send_the_retry() -> None:
    flow = manual_flow()
    to_handlers(flow, {"a": form(), "b": roots()}, "s1")
    commands = flow.answer(
        {"a": ACCEPT, "b": ListRootsResult(roots=[Root(uri="file:///w")])}, 5.0
    )
    assert names(commands) == ["RoundFulfilled", "RoundStarted", "SendRequest"]
    params = last_send(commands).message["params"]
    assert params["inputResponses"] == {"a": {"action": "accept", "content": {"ok": True}},
                                        "b": {"roots": [{"uri": "file:///w"}]}}
    assert params["requestState"] == "s1"


def test_manual_answers_may_come_in_parts_and_as_plain_json() -> None:
    flow = manual_flow()
    to_handlers(flow, {"a": form(), "b": form()}, "s1")
    assert flow.answer({"b": {"action": "decline"}}, 2.0) == []
    assert flow.state is FlowState.AWAITING_ANSWERS and flow.pending_keys == ("a",)
    assert flow.answer({}, 2.5) == []
    retry = last_send(flow.answer({"a": ACCEPT}, 3.0))
    assert retry.message["params"]["inputResponses"] == {
        "a": {"action": "accept", "content": {"ok": True}}, "b": {"action": "decline"}}


@pytest.mark.parametrize(
    "answers",
    [
        {"zz": ACCEPT},
        {"a": ACCEPT, "zz": ACCEPT},
        {"a": "yes"},
        {"a": {"action": "perhaps"}},
        {"a": ACCEPT, "b": {"action": "accept", "content": [1]}},
        ["a"],
    ],
    ids=["unknown", "unknown-with-good", "str", "bad-action", "one-bad", "not-mapping"],
)
def test_bad_manual_answers_raise_and_record_nothing(answers: Any) -> None:
    flow = manual_flow()
    to_handlers(flow, {"a": form(), "b": form()}, "s1")
    with pytest.raises(LocalProtocolError):
        flow.answer(answers, 2.0)
    assert flow.pending_keys == ("a", "b") and flow.state is FlowState.AWAITING_ANSWERS


def test_answering_a_key_twice_raises() -> None:
    flow = manual_flow()
    to_handlers(flow, {"a": form(), "b": form()}, "s1")
    flow.answer({"a": ACCEPT}, 2.0)
    with pytest.raises(LocalProtocolError, match="already answered"):
        flow.answer({"a": ACCEPT}, 2.1)


def test_answer_outside_manual_mode_raises() -> None:
    flow = make_flow()
    to_handlers(flow, {"a": form()})
    with pytest.raises(LocalProtocolError):
        flow.answer({"a": ACCEPT}, 2.0)


def test_handler_events_in_manual_mode_raise() -> None:
    flow = manual_flow()
    to_handlers(flow, {"a": form()})
    with pytest.raises(LocalProtocolError):
        flow.handle(HandlerReturned(key="a", answer=ACCEPT), 2.0)


def test_manual_mode_paces_state_only_rounds_by_itself() -> None:
    flow = manual_flow()
    flow.start(0.0)
    commands = flow.handle(ok(1, irr(None, "s")), 1.0)
    assert names(commands) == ["InputNeeded"]
    assert flow.state is FlowState.PACING


def test_manual_answers_after_the_budget_is_spent_fail() -> None:
    flow = manual_flow(limits=ClientLimits(pacing_jitter=0.0, flow_timeout=60.0))
    to_handlers(flow, {"a": form()}, "s1")
    assert flow.deadline == 60.0  # think time is bounded by the flow budget only
    [fail] = flow.answer({"a": ACCEPT}, 61.0)
    assert isinstance(fail, Fail) and isinstance(fail.error, FlowDeadlineError)


def test_manual_wait_ends_when_the_flow_timer_fires() -> None:
    flow = manual_flow(limits=ClientLimits(pacing_jitter=0.0, flow_timeout=60.0))
    to_handlers(flow, {"a": form()}, "s1")
    [fail] = flow.handle(TimerFired(), 60.0)
    assert isinstance(fail, Fail) and isinstance(fail.error, FlowDeadlineError)


def test_manual_flow_can_be_cancelled_while_awaiting() -> None:
    flow = manual_flow()
    to_handlers(flow, {"a": form()})
    assert names(flow.handle(CancelRequested(), 2.0)) == ["Fail"]


# --- save and restore ----------------------------------------------------------------------------


def test_a_manual_flow_survives_a_json_round_trip_into_another_process() -> None:
    state = 'opaque "state" ✓ {"x": 1}  '
    flow = manual_flow(limits=ClientLimits(pacing_jitter=0.0, flow_timeout=None),
                       ids=Ids(prefix="a-"))
    to_handlers(flow, {"confirm": form(), "where": roots()}, state)
    data = json_round_trip(flow.to_data(1.0))
    assert data["format"] == SAVED_FLOW_FORMAT

    restored = ClientFlow.from_data(data, now=500.0, next_id=Ids(prefix="b-"))
    assert restored.state is FlowState.AWAITING_ANSWERS
    assert restored.pending_keys == ("confirm", "where")
    assert restored.rounds == 1 and restored.manual
    assert restored.last_result == flow.last_result
    commands = restored.answer(
        {"confirm": ACCEPT, "where": {"roots": [{"uri": "file:///p"}]}}, 1000.0
    )
    assert commands[1] == RoundStarted(round=2, request_id="b-1", state_only=False)
    message = last_send(commands).message
    assert message["id"] == "b-1"
    assert message["params"]["requestState"] == state
    assert message["params"]["inputResponses"] == {
        "confirm": {"action": "accept", "content": {"ok": True}},
        "where": {"roots": [{"uri": "file:///p"}]},
    }
    assert {k: message["params"][k] for k in PARAMS} == PARAMS
    assert restored.handle(ok("b-1", done()), 1001.0)[0].rounds == 2  # type: ignore[union-attr]


def test_partial_answers_survive_save_and_restore() -> None:
    flow = manual_flow()
    to_handlers(flow, {"a": form(), "b": form()}, "s1")
    flow.answer({"b": ElicitResult(action="cancel")}, 2.0)
    restored = ClientFlow.from_data(json_round_trip(flow.to_data(2.0)), now=2.0,
                                    next_id=Ids(10))
    assert restored.pending_keys == ("a",)
    retry = last_send(restored.answer({"a": ACCEPT}, 3.0))
    assert retry.message["params"]["inputResponses"]["b"] == {"action": "cancel"}


def test_a_pacing_flow_survives_save_and_restore() -> None:
    flow = make_flow(limits=ClientLimits(pacing_jitter=0.0, pacing_initial=2.0))
    flow.start(0.0)
    flow.handle(ok(1, irr(None, "wait")), 1.0)
    restored = ClientFlow.from_data(json_round_trip(flow.to_data(1.0)), now=1.0,
                                    next_id=Ids(5))
    assert restored.state is FlowState.PACING and restored.deadline == flow.deadline == 3.0
    retry = last_send(restored.handle(TimerFired(), 3.0))
    assert retry.request_id == 5 and retry.message["params"]["requestState"] == "wait"


def test_an_idle_flow_survives_save_and_restore() -> None:
    flow = make_flow()
    restored = ClientFlow.from_data(json_round_trip(flow.to_data(0.0)), now=0.0,
                                    next_id=Ids())
    assert restored.state is FlowState.IDLE
    assert last_send(restored.start(0.0)).message == last_send(make_flow().start(0.0)).message


def test_restored_flow_needs_a_new_id_source_that_does_not_repeat_the_last_id() -> None:
    flow = manual_flow()
    to_handlers(flow, {"a": form()})
    restored = ClientFlow.from_data(json_round_trip(flow.to_data(1.0)), now=1.0,
                                    next_id=Ids(1))
    with pytest.raises(LocalProtocolError, match="repeated"):
        restored.answer({"a": ACCEPT}, 2.0)


def test_restored_flow_needs_a_random_source_when_jitter_is_on() -> None:
    flow = make_flow(limits=ClientLimits(pacing_jitter=0.5))
    with pytest.raises(LocalProtocolError):
        ClientFlow.from_data(json_round_trip(flow.to_data(0.0)), now=0.0, next_id=Ids())


@pytest.mark.parametrize("where", ["in-flight", "handlers", "complete", "failed"])
def test_a_flow_cannot_be_saved_while_busy_or_ended(where: str) -> None:
    flow = make_flow()
    flow.start(0.0)
    if where == "handlers":
        flow.handle(ok(1, irr({"a": form()})), 1.0)
    elif where == "complete":
        flow.handle(ok(1, done()), 1.0)
    elif where == "failed":
        flow.handle(CancelRequested(), 1.0)
    with pytest.raises(LocalProtocolError, match="saved"):
        flow.to_data(1.0)


# --- saved data is clock-independent --------------------------------------------------------------


def _awaiting(limits: ClientLimits, *, start: float, response: float) -> ClientFlow:
    """A manual flow started at ``start`` whose round needing input arrived at ``response``."""
    flow = manual_flow(limits=limits)
    first = last_send(flow.start(start))
    flow.handle(ok(first.request_id, irr({"a": form()}, "s1")), response)
    return flow


def test_restoring_on_another_clock_keeps_the_budget_that_was_left() -> None:
    # Clock A: started at 900 with a 600 s budget, saved at 1000: 500 s are left.
    flow = _awaiting(ClientLimits(pacing_jitter=0.0, flow_timeout=600.0),
                     start=900.0, response=950.0)
    assert flow.deadline == 1500.0
    data = json_round_trip(flow.to_data(1000.0))
    assert data["flow_time_left"] == 500.0

    # Clock B reads 5 when the data is restored: the budget ends at 5 + 500.
    restored = ClientFlow.from_data(data, now=5.0, next_id=Ids(prefix="b-"))
    assert restored.deadline == 505.0
    retry = last_send(restored.answer({"a": ACCEPT}, 504.0))
    assert retry.message["params"]["requestState"] == "s1"

    late = ClientFlow.from_data(data, now=5.0, next_id=Ids(prefix="c-"))
    [fail] = late.answer({"a": ACCEPT}, 505.0)
    assert isinstance(fail, Fail) and isinstance(fail.error, FlowDeadlineError)
    timed_out = ClientFlow.from_data(data, now=5.0, next_id=Ids(prefix="d-"))
    [fail] = timed_out.handle(TimerFired(), 505.0)
    assert isinstance(fail, Fail) and isinstance(fail.error, FlowDeadlineError)


def test_restoring_on_another_clock_keeps_the_pacing_wait_that_was_left() -> None:
    flow = make_flow(limits=ClientLimits(pacing_jitter=0.0, pacing_initial=2.0))
    first = last_send(flow.start(1000.0))
    flow.handle(ok(first.request_id, irr(None, "wait")), 1001.0)
    assert flow.deadline == 1003.0
    data = json_round_trip(flow.to_data(1002.5))
    assert data["pacing_time_left"] == 0.5 and data["flow_time_left"] == 597.5

    restored = ClientFlow.from_data(data, now=5.0, next_id=Ids(7))
    assert restored.state is FlowState.PACING and restored.deadline == 5.5
    assert restored.handle(TimerFired(), 5.4) == []  # early: nothing yet
    retry = last_send(restored.handle(TimerFired(), 5.5))
    assert retry.request_id == 7 and retry.message["params"]["requestState"] == "wait"


def test_saved_data_names_no_time_of_the_saving_clock() -> None:
    # The same flow on two clocks that differ by an offset saves the same data.
    limits = ClientLimits(pacing_jitter=0.0, flow_timeout=60.0)
    on_a = _awaiting(limits, start=0.0, response=1.0)
    on_b = _awaiting(limits, start=4096.0, response=4097.0)
    data = on_a.to_data(2.0)
    assert data == on_b.to_data(4098.0)
    assert data["flow_time_left"] == 58.0 and data["pacing_time_left"] is None
    assert json_round_trip(data) == data  # plain JSON, unchanged by a JSON store


def test_a_budget_spent_before_the_save_stays_spent() -> None:
    flow = _awaiting(ClientLimits(pacing_jitter=0.0, flow_timeout=10.0), start=0.0,
                     response=1.0)
    data = json_round_trip(flow.to_data(30.0))
    assert data["flow_time_left"] == 0.0
    restored = ClientFlow.from_data(data, now=3.0, next_id=Ids(9))
    [fail] = restored.answer({"a": ACCEPT}, 3.0)
    assert isinstance(fail, Fail) and isinstance(fail.error, FlowDeadlineError)


def test_saving_and_restoring_refuse_time_running_backwards() -> None:
    flow = _awaiting(ClientLimits(pacing_jitter=0.0), start=0.0, response=10.0)
    with pytest.raises(LocalProtocolError, match="backwards"):
        flow.to_data(9.0)
    restored = ClientFlow.from_data(flow.to_data(10.0), now=50.0, next_id=Ids(9))
    with pytest.raises(LocalProtocolError, match="backwards"):
        restored.answer({"a": ACCEPT}, 49.0)
    assert restored.pending_keys == ("a",)


@pytest.mark.parametrize("version", ["mrtr.client-flow/1", "mrtr.client-flow/3",
                                     "mrtr.client-flow/"])
def test_data_of_another_format_version_is_refused_with_a_typed_error(version: str) -> None:
    data = {**_saved(), "format": version}
    with pytest.raises(SavedFlowVersionError, match="not supported") as caught:
        ClientFlow.from_data(data, now=0.0, next_id=Ids(100))
    assert isinstance(caught.value, LocalProtocolError)
    assert caught.value.found == version
    assert caught.value.supported == SAVED_FLOW_FORMAT == "mrtr.client-flow/2"


def test_a_version_1_flow_is_refused_with_the_reason() -> None:
    data = {**_saved(), "format": "mrtr.client-flow/1", "flow_deadline": 600.0,
            "wake_at": None}
    with pytest.raises(SavedFlowVersionError, match="rebased"):
        ClientFlow.from_data(data, now=0.0, next_id=Ids(100))


def _driver() -> ClientBase[Any]:
    return ClientBase(client_info=Implementation(name="t", version="1"), elicitation=None,
                      elicitation_form=True, elicitation_url=False, sampling=None, roots=None,
                      capabilities=None, limits=None, random=random_module.Random(0).random,
                      on_event=None, auto=False)


def test_a_driver_counts_the_wait_only_on_the_clock_the_round_was_saved_on() -> None:
    flow = manual_flow(limits=ClientLimits(pacing_jitter=0.0, flow_timeout=60.0))
    first = last_send(flow.start(90.0))
    [_, await_] = flow.handle(ok(first.request_id, irr({"a": form()}, "s1")), 100.0)
    assert isinstance(await_, AwaitAnswers)
    clock, other_clock = object(), object()
    pending = _driver().input_required(await_, flow, 100.0, clock)
    assert (pending.saved_at, pending.clock) == (100.0, clock)
    assert pending.data["flow_time_left"] == 50.0
    # Resumed on the same clock: restored as of the save, so the wait counts.
    assert _driver().restore_flow(pending, 130.0, clock).deadline == 150.0
    # Another clock, or the bare data: the budget left carries over from now.
    assert _driver().restore_flow(pending, 130.0, other_clock).deadline == 180.0
    assert _driver().restore_flow(pending.data, 130.0, clock).deadline == 180.0
    assert _driver().restore_flow(pending, 130.0).deadline == 180.0
    # A "same" clock that reads before the save is not the same clock.
    assert _driver().restore_flow(pending, 5.0, clock).deadline == 55.0


def _saved() -> dict[str, Any]:
    flow = manual_flow()
    to_handlers(flow, {"a": form(), "b": form()}, "s1")
    flow.answer({"a": ACCEPT}, 2.0)
    data: dict[str, Any] = json_round_trip(flow.to_data(2.0))
    return data


CORRUPTIONS: dict[str, Any] = {
    "not-mapping": lambda d: ["x"],
    "format": lambda d: {**d, "format": "other/9"},
    "no-method": lambda d: {k: v for k, v in d.items() if k != "method"},
    "method-int": lambda d: {**d, "method": 1},
    "params-list": lambda d: {**d, "params": []},
    "params-meta": lambda d: {**d, "params": {"_meta": {}}},
    "meta-bad": lambda d: {**d, "meta": {"nope": 1}},
    "kinds-int": lambda d: {**d, "handled_kinds": [1]},
    "limits-bad": lambda d: {**d, "limits": {**d["limits"], "max_rounds": 0}},
    "limits-unknown": lambda d: {**d, "limits": {**d["limits"], "color": "red"}},
    "manual-str": lambda d: {**d, "manual": "yes"},
    "state-unknown": lambda d: {**d, "state": "dancing"},
    "state-unsavable": lambda d: {**d, "state": "awaiting_response"},
    "rounds-negative": lambda d: {**d, "rounds": -1},
    "rounds-bool": lambda d: {**d, "rounds": True},
    "id-float": lambda d: {**d, "last_request_id": 1.5},
    "result-complete": lambda d: {**d, "last_result": {"resultType": "complete"}},
    "result-bad": lambda d: {**d, "last_result": {"resultType": "input_required"}},
    "answers-unknown-key": lambda d: {**d, "answers": {"zz": {"action": "accept"}}},
    "answers-bad": lambda d: {**d, "answers": {"a": {"action": "nope"}}},
    "answers-all": lambda d: {**d, "answers": {"a": {"action": "accept"},
                                               "b": {"action": "accept"}}},
    "not-manual": lambda d: {**d, "manual": False},
    "time-left-str": lambda d: {**d, "flow_time_left": "soon"},
    "time-left-negative": lambda d: {**d, "flow_time_left": -1.0},
    "time-left-infinite": lambda d: {**d, "flow_time_left": float("inf")},
    "time-left-over-budget": lambda d: {**d, "flow_time_left": 601.0},
    "time-left-missing": lambda d: {**d, "flow_time_left": None},
    "time-left-without-budget": lambda d: {**d, "limits": {**d["limits"],
                                                           "flow_timeout": None}},
    "no-time-left": lambda d: {k: v for k, v in d.items() if k != "flow_time_left"},
    "pacing-left-while-awaiting": lambda d: {**d, "pacing_time_left": 0.5},
    "streak-negative": lambda d: {**d, "streak": -2},
    "seeded-awaiting": lambda d: {**d, "seeded": True},
    "idle-with-rounds": lambda d: {**d, "state": "idle"},
    "pacing-with-requests": lambda d: {**d, "state": "pacing", "answers": {},
                                       "pacing_time_left": 0.5},
    # A round awaiting answers holds a result the flow took: within its limits, and of
    # kinds it declares (S6) and handles.
    "result-over-entry-limit": lambda d: {**d, "limits": {**d["limits"],
                                                          "max_input_requests": 1}},
    "result-over-state-size": lambda d: {**d, "limits": {**d["limits"], "max_state_bytes": 1}},
    "result-kind-undeclared": lambda d: {**d, "meta": {**d["meta"], CAPS: {"roots": {}}}},
    "result-kind-unhandled": lambda d: {**d, "handled_kinds": []},
}


@pytest.mark.parametrize("corrupt", list(CORRUPTIONS), ids=list(CORRUPTIONS))
def test_from_data_rejects_bad_data(corrupt: str) -> None:
    data = CORRUPTIONS[corrupt](_saved())
    with pytest.raises(LocalProtocolError, match="saved flow"):
        ClientFlow.from_data(data, now=100.0, next_id=Ids(100))


def test_from_data_rejects_a_saved_answer_nested_too_deeply() -> None:
    flow = manual_flow()
    to_handlers(flow, {"a": sampling(), "b": form()}, "s1")
    data = flow.to_data(2.0)
    data["answers"] = {"a": {"role": "assistant", "model": "m", "_meta": {"d": too_deep()},
                             "content": {"type": "text", "text": "x"}}}
    with pytest.raises(LocalProtocolError, match=r"^saved flow: answers: answer for 'a' "
                       r"\(sampling/createMessage\): not JSON: nested too deeply"):
        ClientFlow.from_data(data, now=100.0, next_id=Ids(100))


_DEEP_SAVED: dict[str, Any] = {
    "params": lambda d: {**d, "params": {**d["params"], "deep": too_deep()}},
    "meta": lambda d: {**d, "meta": {**d["meta"], CAPS: {
        **d["meta"][CAPS], "experimental": {"deep": {"d": nested(1500)}}}}},
    "limits": lambda d: {**d, "limits": {**d["limits"], "max_rounds": nested(1500)}},
}


@pytest.mark.parametrize("field", list(_DEEP_SAVED))
def test_from_data_rejects_a_field_nested_too_deeply(field: str) -> None:
    # Stored data is checked as the caller's arguments are: refused naming the field, not
    # with a RecursionError.
    data = _DEEP_SAVED[field](_saved())
    # A limit is a number: one nested that deep is refused by the copy, or by the limit's own
    # check where the interpreter recurses deep enough to copy it (3.13), the value cut short.
    reason = ("(not JSON: nested too deeply to write as JSON|max_rounds must be an integer"
              r" >= 1, got \[\[\[)" if field == "limits"
              else "not JSON: nested too deeply to write as JSON")
    with pytest.raises(LocalProtocolError, match=f"^saved flow: {field}: {reason}"):
        ClientFlow.from_data(data, now=100.0, next_id=Ids(100))


def test_a_flow_nested_too_deeply_to_save_is_refused_and_runs_on() -> None:
    # Params within what a leg's copy takes, deeper than the saved data's copy recurses:
    # to_data refuses as for a flow it cannot save, and the flow goes on as it was.
    flow = make_flow(params={"name": "x", "arguments": {"deep": nested(1500)}})
    with pytest.raises(LocalProtocolError, match=r"^the flow cannot be saved: not JSON: nested"
                                                 r" too deeply to write as JSON"):
        flow.to_data(0.0)
    assert flow.state is FlowState.IDLE
    flow.start(0.0)
    assert flow.state is FlowState.AWAITING_RESPONSE


def _saved_idle() -> dict[str, Any]:
    data: dict[str, Any] = json_round_trip(make_flow().to_data(0.0))
    return data


def _saved_pacing() -> dict[str, Any]:
    flow = make_flow(limits=ClientLimits(pacing_jitter=0.0, pacing_initial=1.0,
                                         pacing_max=2.0))
    flow.start(0.0)
    flow.handle(ok(1, irr(None, "wait")), 1.0)
    data: dict[str, Any] = json_round_trip(flow.to_data(1.5))
    return data


@pytest.mark.parametrize(
    ("saved", "change"),
    [
        (_saved_idle, {"flow_time_left": 5.0}),
        (_saved_idle, {"pacing_time_left": 1.0}),
        (_saved_pacing, {"pacing_time_left": 2.5}),
        (_saved_pacing, {"pacing_time_left": None}),
        (_saved_pacing, {"pacing_time_left": True}),
    ],
    ids=["idle-budget", "idle-pacing", "pacing-over-max", "pacing-missing", "pacing-bool"],
)
def test_from_data_rejects_timers_the_state_cannot_have(saved: Any,
                                                        change: dict[str, Any]) -> None:
    data = saved()
    ClientFlow.from_data(data, now=0.0, next_id=Ids(100))  # as saved: fine
    with pytest.raises(LocalProtocolError, match="saved flow"):
        ClientFlow.from_data({**data, **change}, now=0.0, next_id=Ids(100))


# --- resume from a stored input_required result --------------------------------------------------


def test_a_flow_resumes_from_the_last_result_of_a_limit_error() -> None:
    flow = make_flow(limits=ClientLimits(pacing_jitter=0.0, max_rounds=1))
    [fail] = to_handlers(flow, {"a": form(), "b": sampling()}, "carry-on")
    assert isinstance(fail, Fail) and isinstance(fail.error, RoundLimitError)
    stored = fail.error.last_result
    assert isinstance(stored, InputRequiredResult)

    resumed = ClientFlow.resume("tools/call", PARAMS, stored, meta=META,
                                handled_kinds=ALL_KINDS, next_id=Ids(50), limits=NO_JITTER)
    assert resumed.state is FlowState.IDLE and resumed.rounds == 0
    commands = resumed.start(100.0)
    assert names(commands) == ["InputNeeded", "InvokeHandler", "InvokeHandler"]
    assert commands[0] == InputNeeded(round=0, result=stored)
    answer = {"role": "assistant", "content": {"type": "text", "text": "t"}, "model": "m"}
    resumed.handle(HandlerReturned(key="b", answer=answer), 101.0)
    commands = resumed.handle(HandlerReturned(key="a", answer=ACCEPT), 102.0)
    assert commands[1] == RoundStarted(round=1, request_id=50, state_only=False)
    params = last_send(commands).message["params"]
    assert params["requestState"] == "carry-on"
    assert set(params["inputResponses"]) == {"a", "b"}
    assert resumed.rounds == 1


def test_a_flow_resumes_from_a_stored_wire_result() -> None:
    stored = json_round_trip(irr({"a": form()}, "st"))
    resumed = ClientFlow.resume("prompts/get", {"name": "p"}, stored, meta=META,
                                handled_kinds=ALL_KINDS, next_id=Ids(), limits=NO_JITTER)
    commands = resumed.start(0.0)
    assert [c.key for c in invokes(commands)] == ["a"]
    without_type = {k: v for k, v in stored.items() if k != "resultType"}
    resumed = ClientFlow.resume("prompts/get", {"name": "p"}, without_type, meta=META,
                                handled_kinds=ALL_KINDS, next_id=Ids(), limits=NO_JITTER)
    assert resumed.last_result == unstructure_and_back(stored)


def unstructure_and_back(result: dict[str, Any]) -> InputRequiredResult:
    from mrtr_core.wire import structure_input_required

    parsed = structure_input_required(result)
    assert unstructure_input_required(parsed) == result
    return parsed


def test_a_resumed_state_only_result_is_paced_then_retried() -> None:
    resumed = ClientFlow.resume("tools/call", PARAMS, irr(None, "later"), meta=META,
                                handled_kinds=ALL_KINDS, next_id=Ids(),
                                limits=ClientLimits(pacing_jitter=0.0, pacing_initial=1.0))
    assert names(resumed.start(0.0)) == ["InputNeeded"]
    assert resumed.state is FlowState.PACING and resumed.deadline == 1.0
    retry = last_send(resumed.handle(TimerFired(), 1.0))
    assert retry.message["params"]["requestState"] == "later"


def test_a_resumed_manual_flow_awaits_answers() -> None:
    resumed = ClientFlow.resume("tools/call", PARAMS, irr({"a": form()}, "s"), meta=META,
                                handled_kinds=ALL_KINDS, next_id=Ids(), limits=NO_JITTER,
                                manual=True)
    assert names(resumed.start(0.0)) == ["InputNeeded", "AwaitAnswers"]
    restored = ClientFlow.from_data(json_round_trip(resumed.to_data(0.0)), now=0.0,
                                    next_id=Ids(9))
    assert restored.pending_keys == ("a",)
    assert last_send(restored.answer({"a": ACCEPT}, 1.0)).request_id == 9


def test_a_seeded_idle_flow_survives_save_and_restore() -> None:
    resumed = ClientFlow.resume("tools/call", PARAMS, irr({"a": form()}, "s"), meta=META,
                                handled_kinds=ALL_KINDS, next_id=Ids(), limits=NO_JITTER)
    restored = ClientFlow.from_data(json_round_trip(resumed.to_data(0.0)), now=0.0,
                                    next_id=Ids())
    assert names(restored.start(0.0)) == ["InputNeeded", "InvokeHandler"]


def test_a_resumed_result_is_checked_like_a_received_one() -> None:
    meta = RequestMeta(client_capabilities=ClientCapabilities(
        elicitation=ElicitationCapability()))
    resumed = ClientFlow.resume("tools/call", PARAMS, irr({"r": roots()}, "s"), meta=meta,
                                handled_kinds=ALL_KINDS, next_id=Ids(), limits=NO_JITTER)
    [fail] = resumed.start(0.0)
    assert isinstance(fail, Fail) and isinstance(fail.error, UnsupportedInputError)
    assert resumed.state is FlowState.FAILED


def test_resume_refuses_methods_that_cannot_answer_input_required() -> None:
    with pytest.raises(LocalProtocolError):
        ClientFlow.resume("tools/list", {}, irr({"a": form()}), meta=META,
                          handled_kinds=ALL_KINDS, next_id=Ids(), limits=NO_JITTER)


@pytest.mark.parametrize(
    ("result", "error"),
    [
        ({"resultType": "complete", "content": []}, LocalProtocolError),
        ({"resultType": "input_required"}, CodecError),
        ("input_required", LocalProtocolError),
    ],
)
def test_resume_refuses_a_result_that_is_not_input_required(result: Any,
                                                            error: type[Exception]) -> None:
    with pytest.raises(error):
        ClientFlow.resume("tools/call", PARAMS, result, meta=META, handled_kinds=ALL_KINDS,
                          next_id=Ids(), limits=NO_JITTER)


def test_resumed_flow_gets_a_fresh_round_budget() -> None:
    resumed = ClientFlow.resume("tools/call", PARAMS, irr({"a": form()}, "s"), meta=META,
                                handled_kinds=ALL_KINDS, next_id=Ids(),
                                limits=ClientLimits(pacing_jitter=0.0, max_rounds=1))
    commands = resumed.start(0.0)
    retry = last_send(answer_all(resumed, commands, 1.0))
    assert resumed.rounds == 1
    [fail] = resumed.handle(ok(retry.request_id, irr({"b": form()}, "s2")), 2.0)
    assert isinstance(fail, Fail) and isinstance(fail.error, RoundLimitError)


def _saved_manual_flow(limits: ClientLimits | None = None) -> dict[str, Any]:
    flow = manual_flow(limits=limits or ClientLimits(pacing_jitter=0.0, flow_timeout=None),
                       ids=Ids(prefix="a-"))
    to_handlers(flow, {"confirm": form()}, "s")
    return json_round_trip(flow.to_data(1.0))


def test_a_saved_flow_whose_method_cannot_answer_input_required_is_refused() -> None:
    # digest §1.4: only tools/call, prompts/get and resources/read carry answers and state.
    data = _saved_manual_flow()
    data["method"] = "prompts/list"
    with pytest.raises(LocalProtocolError, match="prompts/list cannot answer input_required"):
        ClientFlow.from_data(data, now=2.0, next_id=Ids(prefix="b-"))


def test_a_saved_flow_with_no_round_left_under_its_limit_is_refused() -> None:
    data = _saved_manual_flow(ClientLimits(max_rounds=3, pacing_jitter=0.0, flow_timeout=None))
    data["rounds"] = 3  # as many legs as max_rounds allows: a retry would be one too many
    with pytest.raises(LocalProtocolError, match="no retry is left under max_rounds 3"):
        ClientFlow.from_data(data, now=2.0, next_id=Ids(prefix="b-"))


def test_a_limit_given_a_long_value_is_refused_with_it_cut_short() -> None:
    # The message names the value as reprlib cuts it: a saved flow's limits may hold anything.
    with pytest.raises(ValueError, match=r"^max_rounds must be an integer >= 1, got \[\[") as info:
        ClientLimits(max_rounds=nested(1500))
    assert len(str(info.value)) < 200
