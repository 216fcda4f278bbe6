"""ClientFlow limits: rounds, time (leg, flow, handler), pacing, sizes (digest §2.4, §2.6)."""

from __future__ import annotations

import random
from typing import Any

import attrs
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
    to_handlers,
)

from mrtr_core.client import (
    CancelHandlers,
    ClientFlow,
    ClientLimits,
    Fail,
    FlowState,
    HandlerReturned,
    InputNeeded,
    RoundStarted,
    TimerFired,
    pacing_delay,
)
from mrtr_core.errors import (
    FlowDeadlineError,
    HandlerTimeoutError,
    InputRequestsLimitError,
    LegTimeoutError,
    LimitExceededError,
    LocalProtocolError,
    RoundLimitError,
    StateSizeLimitError,
)
from mrtr_core.wire import InputRequiredResult


def limits(**kwargs: Any) -> ClientLimits:
    return ClientLimits(pacing_jitter=0.0, **kwargs)


# --- defaults and validation -----------------------------------------------------------------


def test_limits_have_defaults() -> None:
    assert ClientLimits() == ClientLimits(
        max_rounds=10, leg_timeout=60.0, flow_timeout=600.0, handler_timeout=300.0,
        pacing_initial=0.05, pacing_max=2.0, pacing_jitter=0.2,
        max_state_bytes=256 * 1024, max_input_requests=64,
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_rounds": 0}, {"max_rounds": 2.5}, {"max_rounds": True},
        {"leg_timeout": 0}, {"leg_timeout": -1.0}, {"flow_timeout": float("nan")},
        {"handler_timeout": "5"}, {"pacing_initial": None}, {"pacing_max": 0},
        {"pacing_jitter": 1.5}, {"pacing_jitter": -0.1},
        {"max_state_bytes": 0}, {"max_input_requests": -3},
    ],
)
def test_invalid_limits_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ClientLimits(**kwargs)


@pytest.mark.parametrize("name", ["leg_timeout", "flow_timeout", "handler_timeout",
                                  "pacing_initial", "pacing_max"])
@pytest.mark.parametrize("seconds", [float("inf"), 1e10, 10**10])
def test_time_limits_beyond_1e9_seconds_are_refused_naming_them(name: str,
                                                                  seconds: float) -> None:
    # A blocking wait that long does not fit the system's time type (the sync HTTP
    # transport's socket timeout raised OverflowError mid-call): None turns a limit off.
    with pytest.raises(ValueError, match=rf"^{name} must be .* up to 1e\+09"):
        ClientLimits(**{name: seconds})
    assert getattr(ClientLimits(**{name: 1e9}), name) == 1e9


def test_time_limits_can_be_turned_off() -> None:
    flow = make_flow(limits=limits(leg_timeout=None, flow_timeout=None, handler_timeout=None))
    flow.start(0.0)
    assert flow.deadline is None
    flow.handle(ok(1, irr({"q": form()}, "s")), 1.0)
    assert flow.deadline is None


# --- rounds (max_rounds counts legs sent) --------------------------------------------------------


def _keep_asking(flow: ClientFlow, legs: int) -> list[Any]:
    """Answer ``legs`` legs with input_required (one entry each); the last commands."""
    commands = flow.start(0.0)
    now = 0.0
    for leg in range(1, legs + 1):
        now += 1.0
        request_id = last_send(commands).request_id
        commands = flow.handle(ok(request_id, irr({f"q{leg}": form()}, f"state-{leg}")), now)
        if leg < legs:
            commands = answer_all(flow, commands, now)
    return commands


def test_max_rounds_counts_legs_sent_and_stops_before_invoking() -> None:
    """max_rounds=N: N legs go out; the input_required answering leg N fails the flow."""
    flow = make_flow(limits=limits(max_rounds=3))
    commands = _keep_asking(flow, 3)
    [fail] = commands
    assert isinstance(fail, Fail) and type(fail.error) is RoundLimitError
    assert flow.rounds == 3
    assert fail.error.limit == "max_rounds" and fail.error.value == 3
    assert isinstance(fail.error.last_result, InputRequiredResult)
    assert fail.error.last_result.request_state == "state-3"
    assert not invokes(commands)


def test_max_rounds_one_means_no_retry_at_all() -> None:
    flow = make_flow(limits=limits(max_rounds=1))
    commands = _keep_asking(flow, 1)
    assert isinstance(commands[0], Fail) and isinstance(commands[0].error, RoundLimitError)
    assert flow.rounds == 1


def test_a_flow_completing_on_the_last_allowed_leg_completes() -> None:
    flow = make_flow(limits=limits(max_rounds=2))
    commands = _keep_asking(flow, 1)
    retry = last_send(answer_all(flow, commands, 2.0))
    assert flow.rounds == 2
    assert names(flow.handle(ok(retry.request_id, done()), 3.0)) == ["Complete"]


def test_max_rounds_can_be_overridden_per_call() -> None:
    client_wide = limits(max_rounds=2)
    per_call = attrs.evolve(client_wide, max_rounds=5)
    flow = make_flow(limits=per_call)
    commands = _keep_asking(flow, 4)
    assert len(invokes(commands)) == 1 and flow.limits.max_rounds == 5


# --- time ----------------------------------------------------------------------------------------


def test_leg_timeout_fails_with_leg_timeout_error() -> None:
    flow = make_flow(limits=limits(leg_timeout=5.0))
    flow.start(100.0)
    assert flow.deadline == 105.0
    assert flow.handle(TimerFired(), 104.9) == []  # early: nothing happens
    [fail] = flow.handle(TimerFired(), 105.0)
    assert isinstance(fail, Fail) and type(fail.error) is LegTimeoutError
    assert isinstance(fail.error, TimeoutError)
    assert fail.error.limit == "leg_timeout" and fail.error.value == 5.0
    assert flow.outstanding_request == 1  # still in flight: the adapter cancels it


def test_leg_timeout_restarts_on_every_leg_and_carries_the_last_result() -> None:
    flow = make_flow(limits=limits(leg_timeout=5.0))
    commands = to_handlers(flow, {"q": form()}, "s", now=4.0)
    answer_all(flow, commands, 50.0)
    assert flow.deadline == 55.0
    [fail] = flow.handle(TimerFired(), 55.0)
    assert isinstance(fail, Fail) and isinstance(fail.error, LegTimeoutError)
    assert fail.error.last_result is flow.last_result is not None


def test_timer_fired_early_is_a_no_op_in_every_live_state() -> None:
    flow = make_flow(limits=limits(pacing_initial=1.0))
    flow.start(0.0)
    assert flow.handle(TimerFired(), 0.1) == []
    flow.handle(ok(1, irr(None, "s")), 0.2)
    assert flow.state is FlowState.PACING
    assert flow.handle(TimerFired(), 0.3) == [] and flow.state is FlowState.PACING
    flow.handle(TimerFired(), 1.2)
    flow.handle(ok(2, irr({"q": form()})), 1.3)
    assert flow.handle(TimerFired(), 1.4) == [] and flow.state is FlowState.AWAITING_HANDLERS


def test_flow_deadline_ends_a_slow_leg() -> None:
    flow = make_flow(limits=limits(leg_timeout=50.0, flow_timeout=20.0))
    commands = to_handlers(flow, {"q": form()}, now=1.0)
    answer_all(flow, commands, 15.0)
    assert flow.deadline == 20.0
    [fail] = flow.handle(TimerFired(), 20.0)
    assert isinstance(fail, Fail) and type(fail.error) is FlowDeadlineError
    assert fail.error.last_result is flow.last_result


def test_flow_budget_is_checked_before_any_handler_is_invoked() -> None:
    """A result arriving after the budget is spent prompts nobody (official-sdks §4.2 T2)."""
    flow = make_flow(limits=limits(flow_timeout=10.0, leg_timeout=None))
    flow.start(0.0)
    commands = flow.handle(ok(1, irr({"q": form()}, "s")), 10.0)
    [fail] = commands
    assert isinstance(fail, Fail) and type(fail.error) is FlowDeadlineError
    assert not invokes(commands)
    assert fail.error.last_result is not None and fail.error.last_result.request_state == "s"


def test_flow_budget_is_checked_before_a_retry_is_sent() -> None:
    flow = make_flow(limits=limits(flow_timeout=10.0, handler_timeout=None))
    to_handlers(flow, {"a": form(), "b": form()}, now=1.0)
    flow.handle(HandlerReturned(key="a", answer=ACCEPT), 2.0)
    commands = flow.handle(HandlerReturned(key="b", answer=ACCEPT), 10.5)
    assert names(commands) == ["Fail"]
    assert isinstance(commands[0], Fail) and isinstance(commands[0].error, FlowDeadlineError)


def test_flow_deadline_while_handlers_run_cancels_them() -> None:
    flow = make_flow(limits=limits(flow_timeout=10.0, handler_timeout=100.0))
    to_handlers(flow, {"a": form(), "b": form()}, now=1.0)
    assert flow.deadline == 10.0
    commands = flow.handle(TimerFired(), 10.0)
    assert commands[0] == CancelHandlers(keys=("a", "b"))
    assert isinstance(commands[1], Fail) and isinstance(commands[1].error, FlowDeadlineError)


def test_handler_timeout_cancels_the_rest_and_names_the_key() -> None:
    flow = make_flow(limits=limits(handler_timeout=30.0))
    to_handlers(flow, {"a": form(), "b": form(), "c": form()}, now=1.0)
    flow.handle(HandlerReturned(key="a", answer=ACCEPT), 5.0)
    assert flow.deadline == 31.0
    commands = flow.handle(TimerFired(), 31.0)
    assert commands[0] == CancelHandlers(keys=("b", "c"))
    fail = commands[1]
    assert isinstance(fail, Fail) and type(fail.error) is HandlerTimeoutError
    assert fail.error.key == "b" and fail.error.limit == "handler_timeout"
    assert fail.error.value == 30.0 and fail.error.last_result is flow.last_result


def test_the_earliest_expired_limit_is_reported() -> None:
    # The flow budget ran out before the handler limit; the timer fires late, after both.
    flow = make_flow(limits=limits(flow_timeout=20.0, handler_timeout=30.0))
    to_handlers(flow, {"a": form()}, now=1.0)
    commands = flow.handle(TimerFired(), 50.0)
    assert isinstance(commands[-1], Fail)
    assert type(commands[-1].error) is FlowDeadlineError
    # The leg limit ran out first.
    flow = make_flow(limits=limits(flow_timeout=20.0, leg_timeout=5.0))
    flow.start(0.0)
    [fail] = flow.handle(TimerFired(), 50.0)
    assert isinstance(fail, Fail) and type(fail.error) is LegTimeoutError


def test_on_a_tie_the_specific_limit_is_reported() -> None:
    flow = make_flow(limits=limits(flow_timeout=10.0, leg_timeout=10.0))
    flow.start(0.0)
    [fail] = flow.handle(TimerFired(), 10.0)
    assert isinstance(fail, Fail) and type(fail.error) is LegTimeoutError


def test_deadline_follows_the_state() -> None:
    flow = make_flow(limits=limits(leg_timeout=5.0, flow_timeout=100.0, handler_timeout=20.0,
                                   pacing_initial=0.5))
    assert flow.deadline is None  # idle
    flow.start(0.0)
    assert flow.deadline == 5.0  # leg
    flow.handle(ok(1, irr({"q": form()}, "s")), 1.0)
    assert flow.deadline == 21.0  # handler
    flow.handle(HandlerReturned(key="q", answer=ACCEPT), 2.0)
    assert flow.deadline == 7.0  # next leg
    flow.handle(ok(2, irr(None, "s2")), 3.0)
    assert flow.deadline == 3.5  # pacing wake-up
    flow.handle(TimerFired(), 3.5)
    flow.handle(ok(3, {"content": []}), 4.0)
    assert flow.deadline is None  # done


# --- pacing of state-only rounds (digest §2.4) ---------------------------------------------------


def test_a_state_only_round_is_paced_then_retried_with_the_state_alone() -> None:
    flow = make_flow(limits=limits(pacing_initial=0.25))
    flow.start(0.0)
    commands = flow.handle(ok(1, irr(None, "busy")), 1.0)
    assert names(commands) == ["InputNeeded"]
    assert flow.state is FlowState.PACING and flow.deadline == 1.25
    assert flow.handle(TimerFired(), 1.2) == []
    commands = flow.handle(TimerFired(), 1.25)
    assert commands[0] == RoundStarted(round=2, request_id=2, state_only=True)
    params = last_send(commands).message["params"]
    assert params["requestState"] == "busy" and "inputResponses" not in params


def test_pacing_doubles_up_to_the_cap_and_resets_after_a_round_with_requests() -> None:
    flow = make_flow(limits=limits(pacing_initial=0.1, pacing_max=0.35, max_rounds=20))
    flow.start(0.0)
    now, delays = 0.0, []
    script = [None, None, None, None, {"q": form()}, None, None]
    for leg, requests in enumerate(script, start=1):
        now += 1.0
        commands = flow.handle(ok(leg, irr(requests, f"s{leg}")), now)
        if requests is None:
            assert flow.deadline is not None
            delays.append(round(flow.deadline - now, 9))
            now = flow.deadline
            flow.handle(TimerFired(), now)
        else:
            answer_all(flow, commands, now)
    assert delays == [0.1, 0.2, 0.35, 0.35, 0.1, 0.2]


def test_pacing_jitter_is_drawn_from_the_injected_random_source() -> None:
    lim = ClientLimits(pacing_initial=1.0, pacing_max=8.0, pacing_jitter=0.5)

    def delays(seed: int) -> list[float]:
        source = random.Random(seed)
        flow = ClientFlow("tools/call", {"name": "x"}, meta=META, handled_kinds=set(),
                          next_id=Ids(), limits=lim, random=source.random)
        flow.start(0.0)
        out, now = [], 0.0
        for leg in range(1, 5):
            flow.handle(ok(leg, irr(None, "s")), now)
            assert flow.deadline is not None
            out.append(flow.deadline - now)
            now = flow.deadline
            flow.handle(TimerFired(), now)
        return out

    first = delays(1)
    assert first == delays(1)  # same seed, same delays
    assert first != delays(2)
    for streak, delay in enumerate(first, start=1):
        base = min(2.0 ** (streak - 1), 8.0)
        assert base * 0.5 <= delay < base


@pytest.mark.parametrize(
    ("streak", "expected"),
    [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.5), (500, 0.5), (0, 0.1)],
)
def test_pacing_delay_without_jitter(streak: int, expected: float) -> None:
    lim = ClientLimits(pacing_initial=0.1, pacing_max=0.5, pacing_jitter=0.0)
    assert pacing_delay(streak, lim, None) == pytest.approx(expected)


def test_pacing_delay_with_jitter_spans_the_jitter_fraction() -> None:
    lim = ClientLimits(pacing_initial=1.0, pacing_max=1.0, pacing_jitter=0.2)
    assert pacing_delay(1, lim, lambda: 0.0) == pytest.approx(0.8)
    assert pacing_delay(1, lim, lambda: 0.5) == pytest.approx(0.9)
    assert pacing_delay(1, lim, lambda: 0.999) < 1.0


def test_jitter_without_a_random_source_is_refused() -> None:
    with pytest.raises(LocalProtocolError, match="random"):
        ClientFlow("tools/call", {"name": "x"}, meta=META, handled_kinds=set(),
                   next_id=Ids(), limits=ClientLimits(pacing_jitter=0.1))
    with pytest.raises(LocalProtocolError):
        pacing_delay(1, ClientLimits(pacing_jitter=0.1), None)


@pytest.mark.parametrize("draw", [1.0, -0.1, "0.5", None, True])
def test_a_random_source_out_of_range_raises_and_changes_nothing(draw: Any) -> None:
    flow = ClientFlow("tools/call", {"name": "x"}, meta=META, handled_kinds=set(),
                      next_id=Ids(), limits=ClientLimits(pacing_jitter=0.3),
                      random=lambda: draw)
    flow.start(0.0)
    with pytest.raises(LocalProtocolError, match="random"):
        flow.handle(ok(1, irr(None, "s")), 1.0)
    assert flow.state is FlowState.AWAITING_RESPONSE and flow.last_result is None


# --- sizes ---------------------------------------------------------------------------------------


def test_request_state_over_the_size_limit_fails_counting_utf8_bytes() -> None:
    flow = make_flow(limits=limits(max_state_bytes=10))
    state = "é" * 6  # 6 code points, 12 UTF-8 bytes
    [fail] = to_handlers(flow, {"q": form()}, state)
    assert isinstance(fail, Fail) and type(fail.error) is StateSizeLimitError
    assert "12 bytes" in str(fail.error)
    assert fail.error.limit == "max_state_bytes" and fail.error.value == 10
    assert fail.error.last_result is not None and fail.error.last_result.request_state == state


def test_request_state_at_the_size_limit_is_accepted() -> None:
    flow = make_flow(limits=limits(max_state_bytes=12))
    commands = to_handlers(flow, {"q": form()}, "é" * 6)
    assert len(invokes(commands)) == 1


def test_too_many_input_requests_fail_before_anything_is_invoked() -> None:
    flow = make_flow(limits=limits(max_input_requests=2))
    commands = to_handlers(flow, {"a": form(), "b": form(), "c": form()})
    [fail] = commands
    assert isinstance(fail, Fail) and type(fail.error) is InputRequestsLimitError
    assert fail.error.limit == "max_input_requests" and fail.error.value == 2
    # Refused on its count alone: last_result is the result as received.
    assert set(fail.error.last_result["inputRequests"]) == {"a", "b", "c"}


class _CountingRequests(dict[str, Any]):
    """An ``inputRequests`` map that counts how often its entries are read."""

    reads = 0

    def items(self) -> Any:
        type(self).reads += 1
        return super().items()

    def values(self) -> Any:
        type(self).reads += 1
        return super().values()

    def __iter__(self) -> Any:
        type(self).reads += 1
        return super().__iter__()

    def __getitem__(self, key: str) -> Any:
        type(self).reads += 1
        return super().__getitem__(key)


def test_too_many_input_requests_are_refused_before_any_entry_is_read() -> None:
    # The entry past the limit is malformed: reading it would fail with a CodecError.
    flow = make_flow(limits=limits(max_input_requests=2))
    [fail] = to_handlers(flow, {"a": form(), "b": form(), "c": {"method": "no/such"}})
    assert isinstance(fail, Fail) and type(fail.error) is InputRequestsLimitError
    assert fail.error.value == 2 and "3 inputRequests entries" in str(fail.error)
    assert flow.state is FlowState.FAILED
    _CountingRequests.reads = 0
    requests = _CountingRequests(a=form(), b=form(), c=form())
    flow = make_flow(limits=limits(max_input_requests=2))
    [fail] = to_handlers(flow, requests)
    assert type(fail.error) is InputRequestsLimitError
    assert fail.error.last_result["inputRequests"] is requests
    assert _CountingRequests.reads == 0


def test_a_resume_takes_the_result_a_count_limit_refused() -> None:
    flow = make_flow(limits=limits(max_input_requests=1))
    [fail] = to_handlers(flow, {"a": form(), "b": form()})
    assert isinstance(fail, Fail) and type(fail.error) is InputRequestsLimitError
    again = ClientFlow.resume(
        "tools/call", PARAMS, fail.error.last_result, meta=META,
        handled_kinds=ALL_KINDS, next_id=Ids(), limits=limits(),
    )
    assert sorted(names(again.start(2.0))) == ["InputNeeded", "InvokeHandler", "InvokeHandler"]


@pytest.mark.parametrize(
    "case", ["rounds", "state", "requests", "budget", "leg", "handler"]
)
def test_every_limit_error_carries_the_last_result(case: str) -> None:
    lim = {
        "rounds": limits(max_rounds=2),
        "state": limits(max_state_bytes=4),
        "requests": limits(max_input_requests=1),
        "budget": limits(flow_timeout=50.0),
        "leg": limits(leg_timeout=10.0),
        "handler": limits(handler_timeout=10.0),
    }[case]
    flow = make_flow(limits=lim)
    flow.start(0.0)
    # Round 1 always passes; round 2 trips the limit (state and requests grow).
    commands = flow.handle(ok(1, irr({"a": form()}, "s1")), 1.0)
    answer_all(flow, commands, 2.0)
    second = irr({"a": form(), "b": form()}, "state-2")
    if case == "leg":
        commands = flow.handle(TimerFired(), 12.0)
    else:
        commands = flow.handle(ok(2, second), 60.0 if case == "budget" else 3.0)
    if case == "handler":
        commands = flow.handle(TimerFired(), 13.0)
    fail = commands[-1]
    assert isinstance(fail, Fail) and isinstance(fail.error, LimitExceededError)
    expected_state = "s1" if case == "leg" else "state-2"
    if case == "requests":  # refused on its count alone, before it was read
        assert fail.error.last_result == second
        return
    assert isinstance(fail.error.last_result, InputRequiredResult)
    assert fail.error.last_result.request_state == expected_state


def test_input_needed_is_not_emitted_for_a_result_over_a_limit() -> None:
    flow = make_flow(limits=limits(max_input_requests=1))
    commands = to_handlers(flow, {"a": form(), "b": form()})
    assert not any(isinstance(c, InputNeeded) for c in commands)
