"""The TRANSITIONS table: walked directly, swept state x input, every edge exercised."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from client_helpers import (
    ACCEPT,
    ALL_KINDS,
    META,
    PARAMS,
    Ids,
    done,
    error,
    form,
    irr,
    make_flow,
    ok,
    roots,
    to_handlers,
)

from mrtr_core.client import (
    ACCEPTS,
    TERMINAL_STATES,
    TRANSITIONS,
    CancelRequested,
    ClientFlow,
    ClientLimits,
    FlowState,
    HandlerFailed,
    HandlerReturned,
    Input,
    TimerFired,
    Trigger,
    state_diagram_dot,
)
from mrtr_core.client import flow as flow_module
from mrtr_core.errors import LocalProtocolError
from mrtr_core.wire import ClientCapabilities, RequestMeta

LIVE = [s for s in FlowState if s not in TERMINAL_STATES and s is not FlowState.IDLE]


def test_terminal_states_have_no_way_out() -> None:
    assert {FlowState.COMPLETE, FlowState.FAILED} == TERMINAL_STATES
    assert not [key for key in TRANSITIONS if key[0] in TERMINAL_STATES]
    assert all(not ACCEPTS[state] for state in TERMINAL_STATES)


def test_every_state_is_reachable_from_idle() -> None:
    reached, frontier = {FlowState.IDLE}, [FlowState.IDLE]
    while frontier:
        state = frontier.pop()
        for (source, _), target in TRANSITIONS.items():
            if source is state and target not in reached:
                reached.add(target)
                frontier.append(target)
    assert reached == set(FlowState)


def test_every_live_state_accepts_the_timer_and_cancellation() -> None:
    for state in LIVE:
        assert {Input.TIMER, Input.CANCEL} <= ACCEPTS[state]
        assert TRANSITIONS[(state, Trigger.TIMER_EARLY)] is state
        assert TRANSITIONS[(state, Trigger.TIMED_OUT)] is FlowState.FAILED
        assert TRANSITIONS[(state, Trigger.CANCELLED)] is FlowState.FAILED


def test_accepts_is_derived_from_the_table() -> None:
    for state in FlowState:
        expected = {t.input for (s, t) in TRANSITIONS if s is state}
        assert ACCEPTS[state] == expected


def test_every_trigger_appears_in_the_table() -> None:
    assert {t for (_, t) in TRANSITIONS} == set(Trigger)


def test_state_diagram_lists_every_edge() -> None:
    dot = state_diagram_dot()
    assert dot.startswith("digraph ClientFlow {") and dot.endswith("}")
    for (source, trigger), target in TRANSITIONS.items():
        assert f"{source.name} -> {target.name}" in dot
        assert trigger.label in dot
    assert state_diagram_dot() == dot  # deterministic


# --- flows brought into each state ----------------------------------------------------------------


def _idle() -> ClientFlow:
    return make_flow()


def _awaiting_response() -> ClientFlow:
    flow = make_flow()
    flow.start(0.0)
    return flow


def _awaiting_handlers() -> ClientFlow:
    flow = make_flow()
    to_handlers(flow, {"a": form(), "b": form()})
    return flow


def _awaiting_answers() -> ClientFlow:
    flow = make_flow(manual=True)
    to_handlers(flow, {"a": form(), "b": form()})
    return flow


def _pacing() -> ClientFlow:
    flow = make_flow()
    flow.start(0.0)
    flow.handle(ok(1, irr(None, "s")), 1.0)
    return flow


def _complete() -> ClientFlow:
    flow = make_flow()
    flow.start(0.0)
    flow.handle(ok(1, done()), 1.0)
    return flow


def _failed() -> ClientFlow:
    flow = make_flow()
    flow.start(0.0)
    flow.handle(CancelRequested(), 1.0)
    return flow


IN_STATE: dict[FlowState, Callable[[], ClientFlow]] = {
    FlowState.IDLE: _idle,
    FlowState.AWAITING_RESPONSE: _awaiting_response,
    FlowState.AWAITING_HANDLERS: _awaiting_handlers,
    FlowState.AWAITING_ANSWERS: _awaiting_answers,
    FlowState.PACING: _pacing,
    FlowState.COMPLETE: _complete,
    FlowState.FAILED: _failed,
}

FEED: dict[Input, Callable[[ClientFlow, float], Any]] = {
    Input.START: lambda flow, now: flow.start(now),
    Input.RESPONSE: lambda flow, now: flow.handle(ok(flow.outstanding_request or 1, done()), now),
    Input.HANDLER_RETURNED: lambda flow, now: flow.handle(HandlerReturned(key="a", answer=ACCEPT),
                                                          now),
    Input.HANDLER_FAILED: lambda flow, now: flow.handle(HandlerFailed(key="a", error=OSError()),
                                                        now),
    Input.ANSWER: lambda flow, now: flow.answer({"a": ACCEPT}, now),
    Input.TIMER: lambda flow, now: flow.handle(TimerFired(), now),
    Input.CANCEL: lambda flow, now: flow.handle(CancelRequested(), now),
}


def test_the_helpers_reach_the_states_they_name() -> None:
    for state, build in IN_STATE.items():
        assert build().state is state


@pytest.mark.parametrize("now", [1.5, 10_000.0], ids=["early", "late"])
@pytest.mark.parametrize("kind", list(Input), ids=[i.value for i in Input])
@pytest.mark.parametrize("state", list(FlowState), ids=[s.value for s in FlowState])
def test_state_x_input_sweep(state: FlowState, kind: Input, now: float) -> None:
    """Accepted inputs move along a table edge; refused ones raise and change nothing."""
    flow = IN_STATE[state]()
    if kind in ACCEPTS[state]:
        FEED[kind](flow, now)
        allowed = {target for (s, t), target in TRANSITIONS.items()
                   if s is state and t.input is kind}
        assert flow.state in allowed
    else:
        before = (flow.state, flow.rounds, flow.pending_keys, flow.deadline, flow.last_result)
        with pytest.raises(LocalProtocolError):
            FEED[kind](flow, now)
        assert (flow.state, flow.rounds, flow.pending_keys, flow.deadline,
                flow.last_result) == before


# --- every edge of the table is taken by some scenario --------------------------------------------


class _RecordingTable(dict[tuple[FlowState, Trigger], FlowState]):
    """The transition table, noting every edge looked up (each transition is one lookup)."""

    taken: set[tuple[FlowState, Trigger]]

    def __getitem__(self, edge: tuple[FlowState, Trigger]) -> FlowState:
        self.taken.add(edge)
        return super().__getitem__(edge)


class _Recording(ClientFlow):
    taken: set[tuple[FlowState, Trigger]] = set()


def _flow(**kwargs: Any) -> _Recording:
    args: dict[str, Any] = {"meta": META, "handled_kinds": ALL_KINDS, "next_id": Ids(),
                            "limits": ClientLimits(pacing_jitter=0.0)}
    args.update(kwargs)
    return _Recording("tools/call", PARAMS, **args)


def _resumed(result: dict[str, Any], **kwargs: Any) -> ClientFlow:
    args: dict[str, Any] = {"meta": META, "handled_kinds": ALL_KINDS, "next_id": Ids(),
                            "limits": ClientLimits(pacing_jitter=0.0)}
    args.update(kwargs)
    flow = _Recording.resume("tools/call", PARAMS, result, **args)
    assert isinstance(flow, _Recording)
    return flow


def test_every_transition_is_taken_by_some_scenario(monkeypatch: pytest.MonkeyPatch) -> None:
    table = _RecordingTable(TRANSITIONS)
    table.taken = _Recording.taken = set()
    monkeypatch.setattr(flow_module, "TRANSITIONS", table)
    # Fresh start; complete; rejected.
    f = _flow()
    f.start(0.0)
    f.handle(TimerFired(), 0.5)
    f.handle(ok(1, done()), 1.0)
    f = _flow()
    f.start(0.0)
    f.handle(ok(1, {"resultType": "task"}), 1.0)
    # The server refuses the leg's version but lists it: the leg is sent again.
    f = _flow()
    f.start(0.0)
    f.handle(error(1, -32022, "Unsupported protocol version",
                   {"supported": ["2026-07-28"], "requested": "2026-07-28"}), 1.0)
    # Handlers: one returns, the last returns, a bad answer, a failure.
    for finish in ("return", "bad", "fail"):
        f = _flow()
        to_handlers(f, {"a": form(), "b": form()})
        f.handle(TimerFired(), 1.5)
        f.handle(HandlerReturned(key="a", answer=ACCEPT), 2.0)
        if finish == "return":
            f.handle(HandlerReturned(key="b", answer=ACCEPT), 3.0)
        elif finish == "bad":
            f.handle(HandlerReturned(key="b", answer="junk"), 3.0)
        else:
            f.handle(HandlerFailed(key="b", error=OSError()), 3.0)
    # Manual answers: partial, complete, too late; timer; cancel.
    for finish in ("answer", "late", "timer", "cancel"):
        f = _flow(manual=True, limits=ClientLimits(pacing_jitter=0.0, flow_timeout=100.0))
        to_handlers(f, {"a": form(), "b": form()})
        f.handle(TimerFired(), 1.5)
        f.answer({"a": ACCEPT}, 2.0)
        if finish == "answer":
            f.answer({"b": ACCEPT}, 3.0)
        elif finish == "late":
            f.answer({"b": ACCEPT}, 200.0)
        elif finish == "timer":
            f.handle(TimerFired(), 100.0)
        else:
            f.handle(CancelRequested(), 3.0)
    # Pacing: early timer, elapsed, timed out, cancelled.
    for finish in ("elapsed", "timeout", "cancel"):
        f = _flow(limits=ClientLimits(pacing_jitter=0.0, flow_timeout=10.0, pacing_initial=1.0))
        f.start(0.0)
        f.handle(ok(1, irr(None, "s")), 1.0)
        f.handle(TimerFired(), 1.5)
        if finish == "elapsed":
            f.handle(TimerFired(), 2.0)
        elif finish == "timeout":
            f.handle(TimerFired(), 50.0)
        else:
            f.handle(CancelRequested(), 1.6)
    # Timeouts and cancels elsewhere.
    for state_builder in ("response", "handlers"):
        for finish in ("timeout", "cancel"):
            f = _flow()
            if state_builder == "response":
                f.start(0.0)
            else:
                to_handlers(f, {"a": form()})
            if finish == "timeout":
                f.handle(TimerFired(), 10_000.0)
            else:
                f.handle(CancelRequested(), 2.0)
    f = _flow()
    f.handle(CancelRequested(), 0.0)
    f = _flow(manual=True)
    to_handlers(f, {"a": form()})
    # Resumes: with input, manual, state-only, rejected.
    _resumed(irr({"a": form()}, "s")).start(0.0)
    _resumed(irr({"a": form()}, "s"), manual=True).start(0.0)
    _resumed(irr(None, "s")).start(0.0)
    _resumed(irr({"r": roots()}, "s"),
             meta=RequestMeta(client_capabilities=ClientCapabilities())).start(0.0)

    assert set(TRANSITIONS) - _Recording.taken == set()
