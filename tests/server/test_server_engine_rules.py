"""Capabilities (-32021), explicit mode, ctx.once, limits, and API misuse."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from deep_values import too_deep
from server_helpers import T0, Runtime, accept, make_engine, nested_sampled, retry, tool_call

from mrtr_core.errors import INTERNAL_ERROR, INVALID_PARAMS, JsonRpcError, LocalProtocolError
from mrtr_core.server import (
    Completed,
    Context,
    HandlerSpec,
    MissingCapabilityError,
    NeedsInput,
    ServerLimits,
    content,
    form,
    roots,
    sample,
    url,
)
from mrtr_core.state import MemoryReplayGuard, StateRejectedError
from mrtr_core.wire import InputRequiredResult

# --- capabilities (S6, S6a, S6b, S7) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "question", "required"),
    [
        ({}, form("Q", ok=bool), {"elicitation": {}}),
        ({"sampling": {}}, form("Q", ok=bool), {"elicitation": {}}),
        ({"elicitation": {"url": {}}}, form("Q", ok=bool), {"elicitation": {"form": {}}}),
        (
            {"elicitation": {}},
            url("Connect", "https://example.com/c"),
            {"elicitation": {"url": {}}},
        ),
        ({}, sample("hi", 5), {"sampling": {}}),
        (
            {"sampling": {}},
            sample("hi", 5, tools=[{"name": "t", "inputSchema": {"type": "object"}}]),
            {"sampling": {"tools": {}}},
        ),
        ({}, sample("hi", 5, tool_choice={"mode": "auto"}), {"sampling": {"tools": {}}}),
        ({"elicitation": {}}, roots(), {"roots": {}}),
    ],
)
def test_undeclared_kind_is_minus_32021_with_required_capabilities(
    rt: Runtime, caps: dict[str, Any], question: Any, required: dict[str, Any]
) -> None:
    def handler(ctx: Context) -> Any:
        return ctx.ask("k", question)

    with pytest.raises(MissingCapabilityError) as info:
        rt.call(make_engine(), tool_call("t", caps=caps), rt.spec(handler))
    assert info.value.code == -32021
    assert info.value.to_error_object()["data"] == {"requiredCapabilities": required}


def test_ask_all_merges_required_capabilities(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        return ctx.ask_all({"a": form("A", ok=bool), "b": roots(), "c": url("U", "https://x/")})

    with pytest.raises(MissingCapabilityError) as info:
        rt.call(make_engine(), tool_call("t", caps={}), rt.spec(handler))
    assert info.value.required == {"elicitation": {"url": {}}, "roots": {}}


def test_declared_kinds_only_are_emitted(rt: Runtime) -> None:
    """Given sampling only, a handler that can go on without elicitation never asks it."""

    def handler(ctx: Context) -> Any:
        got: dict[str, Any] = {}
        if ctx.can_ask("elicitation/create"):
            got["name"] = ctx.ask("name", form("Name?", name=str))
        if ctx.can_ask(sample("hi", 5)):
            got["sample"] = ctx.ask("sample", sample("hi", 5))
        return sorted(got)

    engine = make_engine()
    first = tool_call("caps", caps={"sampling": {}})
    r1 = rt.call(engine, first, rt.spec(handler))
    assert isinstance(r1, NeedsInput)
    assert r1.keys == ("sample",)
    assert all(v["method"] != "elicitation/create" for v in r1.result["inputRequests"].values())


def test_can_ask_checks_mode_and_sub_capabilities() -> None:
    engine = make_engine()
    run = engine.begin(
        tool_call("t", caps={"elicitation": {}, "sampling": {}}),
        HandlerSpec(handler=lambda ctx: None),
        now=T0,
    )
    ctx = run.context
    assert ctx.can_ask("elicitation/create")
    assert ctx.can_ask(form("Q", ok=bool))
    assert not ctx.can_ask(url("U", "https://x/"))
    assert ctx.can_ask(sample("hi", 5))
    assert not ctx.can_ask(sample("hi", 5, tools=[{"name": "t"}]))
    assert not ctx.can_ask(sample("hi", 5, include_context="thisServer"))
    assert not ctx.can_ask("roots/list")
    assert not ctx.can_ask("tasks/get")


def test_capabilities_are_checked_per_request_not_inferred(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        ctx.ask("a", form("A", ok=bool))
        return ctx.ask("b", form("B", ok=bool)).action

    engine = make_engine()
    first = tool_call("t", caps={"elicitation": {}})
    r1 = rt.call(engine, first, rt.spec(handler))
    assert isinstance(r1, NeedsInput)
    # The retry forgets to declare elicitation: the next question cannot be sent.
    again = tool_call("t", caps={}, responses={"a": accept(ok=True)}, state=r1.request_state)
    with pytest.raises(MissingCapabilityError):
        rt.call(engine, again, rt.spec(handler))


# --- explicit mode -------------------------------------------------------------------------


def test_explicit_mode_round_trip(rt: Runtime) -> None:
    seen: list[Any] = []

    def handler(ctx: Context) -> Any:
        seen.append((dict(ctx.input_responses), ctx.request_state))
        if ctx.request_state is None:
            return ctx.input_required({"user_name": form("Name?", name=str)}, state={"step": 1})
        if ctx.request_state == {"step": 1}:
            name = content(ctx.input_responses["user_name"])["name"]  # type: ignore[index]
            return ctx.input_required(
                {"greeting": form("Greeting?", g=str)}, state={"step": 2, "name": name}
            )
        greeting = content(ctx.input_responses["greeting"])["g"]  # type: ignore[index]
        return f"{greeting}, {ctx.request_state['name']}"

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("explicit")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput) and r1.keys == ("user_name",)
    r2 = rt.call(engine, retry(first, r1, {"user_name": accept(name="Ada")}), spec)
    assert isinstance(r2, NeedsInput) and r2.keys == ("greeting",)
    r3 = rt.call(engine, retry(first, r2, {"greeting": accept(g="Hello")}), spec)
    assert isinstance(r3, Completed) and r3.value == "Hello, Ada"
    # input_responses holds only the previous round's validated answers.
    assert [sorted(responses) for responses, _ in seen] == [[], ["user_name"], ["greeting"]]
    assert seen[2][1] == {"step": 2, "name": "Ada"}


def test_explicit_input_required_result_and_its_state_are_sealed(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        if ctx.request_state is None:
            return InputRequiredResult(
                input_requests={"k": form("Q", ok=bool)}, request_state="progress=50%"
            )
        return ctx.request_state

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("explicit2")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    assert "progress" not in r1.request_state
    r2 = rt.call(engine, retry(first, r1, {"k": accept(ok=True)}), spec)
    assert isinstance(r2, Completed) and r2.value == "progress=50%"


def test_explicit_state_only_round(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        if ctx.request_state is None:
            return ctx.input_required(state={"progress": 50})  # load shedding: state only
        return ctx.request_state["progress"] + 50

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("shed")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    assert set(r1.result) == {"resultType", "requestState"}
    r2 = rt.call(engine, retry(first, r1, None), spec)
    assert isinstance(r2, Completed) and r2.value == 100


def test_explicit_mode_respects_capabilities(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        return ctx.input_required({"r": roots()})

    with pytest.raises(MissingCapabilityError) as info:
        rt.call(make_engine(), tool_call("t", caps={"elicitation": {}}), rt.spec(handler))
    assert info.value.required == {"roots": {}}


# --- ctx.once ---------------------------------------------------------------------------------


def _charging_handler(charges: list[int]) -> Any:
    def handler(ctx: Context) -> Any:
        ctx.ask("confirm", form("Charge the card?", ok=bool))
        receipt = ctx.once("charge", lambda: charges.append(1) or f"receipt-{len(charges)}")
        ctx.ask("rating", form("Rate us", stars=int))
        return receipt

    return handler


def test_once_runs_a_step_exactly_once_per_operation(rt: Runtime) -> None:
    charges: list[int] = []
    spec = rt.spec(_charging_handler(charges), single_use=True)
    engine = make_engine()
    guard = MemoryReplayGuard()
    first = tool_call("pay")
    r1 = rt.call(engine, first, spec, guard=guard)
    assert isinstance(r1, NeedsInput) and charges == []
    r2 = rt.call(
        engine, retry(first, r1, {"confirm": accept(ok=True)}), spec, guard=guard, now=T0 + 1
    )
    assert isinstance(r2, NeedsInput) and charges == [1]
    r3 = rt.call(
        engine, retry(first, r2, {"rating": accept(stars=5)}), spec, guard=guard, now=T0 + 2
    )
    assert isinstance(r3, Completed) and r3.value == "receipt-1"
    assert charges == [1]
    # Echoing an older state again (from before the charge) is refused: single use.
    with pytest.raises(StateRejectedError) as info:
        rt.call(
            engine, retry(first, r1, {"confirm": accept(ok=True)}), spec, guard=guard, now=T0 + 3
        )
    assert info.value.reason == "replayed"
    assert charges == [1]


def test_once_without_single_use_reruns_when_an_older_state_is_replayed(rt: Runtime) -> None:
    """Documented limit: without a replay guard an old token re-enters before the step."""
    charges: list[int] = []
    spec = rt.spec(_charging_handler(charges))
    engine = make_engine()
    first = tool_call("pay")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    for _ in range(2):
        outcome = rt.call(engine, retry(first, r1, {"confirm": accept(ok=True)}), spec)
        assert isinstance(outcome, NeedsInput)
    assert charges == [1, 1]


def test_once_records_nothing_when_the_step_raises(rt: Runtime) -> None:
    attempts: list[int] = []

    def handler(ctx: Context) -> Any:
        def flaky() -> str:
            attempts.append(1)
            if len(attempts) == 1:
                raise RuntimeError("payment gateway down")
            return "ok"

        return ctx.once("step", flaky)

    spec = rt.spec(handler)
    engine = make_engine()
    with pytest.raises(RuntimeError, match="gateway"):
        rt.call(engine, tool_call("flaky"), spec)
    outcome = rt.call(engine, tool_call("flaky"), spec)
    assert isinstance(outcome, Completed) and outcome.value == "ok"


def test_memo_value_must_be_json() -> None:
    run = make_engine().begin(tool_call("t"), HandlerSpec(handler=lambda ctx: None), now=T0)
    with pytest.raises(TypeError, match="not JSON-able"):
        run.context.memo("bad", lambda: {1, 2})
    with pytest.raises(TypeError, match="not JSON-able"):
        run.context.once("nan", lambda: float("nan"))


def test_memo_and_once_values_nested_too_deeply_are_not_json() -> None:
    run = make_engine().begin(tool_call("t"), HandlerSpec(handler=lambda ctx: None), now=T0)
    with pytest.raises(TypeError, match="not JSON-able: nested too deeply"):
        run.context.memo("deep", too_deep)
    with pytest.raises(TypeError, match="not JSON-able: nested too deeply"):
        run.context.once("deep", too_deep)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1, 2}, too_deep()])
def test_explicit_state_must_be_json(bad: object) -> None:
    def handler(ctx: Context) -> Any:
        return ctx.input_required({"k": form("Q", ok=bool)}, state={"v": [bad]})

    engine = make_engine()
    run = engine.begin(tool_call("t"), HandlerSpec(handler=handler), now=T0)
    with pytest.raises(TypeError, match="explicit request state is not JSON-able"):
        run.finish(T0, returned=handler(run.context))


# --- limits -----------------------------------------------------------------------------------


def test_round_limit_stops_an_operation(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        for i in range(10):
            ctx.ask(f"q{i}", form(f"Q{i}", ok=bool))
        return "done"

    spec = rt.spec(handler)
    engine = make_engine(limits=ServerLimits(max_rounds=3))
    params = tool_call("many")
    outcome = rt.call(engine, params, spec)
    for i in range(1, 3):
        assert isinstance(outcome, NeedsInput)
        outcome = rt.call(engine, retry(params, outcome, {f"q{i - 1}": accept(ok=True)}), spec)
    assert isinstance(outcome, NeedsInput) and outcome.rounds == 3
    with pytest.raises(JsonRpcError) as info:
        rt.call(engine, retry(params, outcome, {"q2": accept(ok=True)}), spec)
    assert info.value.code == INTERNAL_ERROR
    assert info.value.data == {"limit": "max_rounds", "value": 3}


def test_input_requests_limit_per_round(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        return ctx.ask_all({f"q{i}": form(f"Q{i}", ok=bool) for i in range(5)})

    with pytest.raises(JsonRpcError) as info:
        rt.call(
            make_engine(limits=ServerLimits(max_input_requests=4)), tool_call("t"), rt.spec(handler)
        )
    assert info.value.data == {"limit": "max_input_requests", "value": 4}


def test_state_size_limit_on_seal_and_before_crypto_on_open(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        ctx.memo("blob", lambda: "x" * 3000)
        return ctx.ask("k", form("Q", ok=bool))

    with pytest.raises(JsonRpcError) as info:
        rt.call(
            make_engine(limits=ServerLimits(max_state_bytes=1024)), tool_call("t"), rt.spec(handler)
        )
    assert info.value.code == INTERNAL_ERROR
    assert info.value.data["limit"] == "max_state_bytes"

    runs = {"n": 0}

    def counted(ctx: Context) -> Any:
        runs["n"] += 1

    huge = tool_call("t", state="v1.k1." + "A" * 5000)
    with pytest.raises(StateRejectedError) as rejected:
        rt.call(make_engine(limits=ServerLimits(max_state_bytes=4096)), huge, rt.spec(counted))
    assert rejected.value.reason == "too_large"
    assert runs["n"] == 0


def test_input_responses_count_and_size_limits(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        return ctx.ask("k", form("Q", ok=bool))

    engine = make_engine(limits=ServerLimits(max_input_responses=2, max_input_responses_bytes=200))
    first = tool_call("t")
    r1 = rt.call(engine, first, rt.spec(handler))
    assert isinstance(r1, NeedsInput)
    too_many = {"k": accept(ok=True), "x": {}, "y": {}}
    with pytest.raises(JsonRpcError) as info:
        rt.call(engine, retry(first, r1, too_many), rt.spec(handler))
    assert info.value.code == INVALID_PARAMS and info.value.data == {"reason": "too_many"}
    too_big = {"k": accept(ok=True), "x": "y" * 300}
    with pytest.raises(JsonRpcError) as info:
        rt.call(engine, retry(first, r1, too_big), rt.spec(handler))
    assert info.value.code == INVALID_PARAMS and info.value.data == {"reason": "too_large"}


def test_an_answer_nested_too_deeply_to_read_is_invalid_params(rt: Runtime) -> None:
    # A transport whose max_depth is raised passes 500 levels; the converter reads each in
    # several frames, deeper than the interpreter recurses: -32602 naming the key, as for
    # any answer of the wrong shape, and the handler does not run.
    runs: list[int] = []

    def handler(ctx: Context) -> Any:
        runs.append(ctx.round)
        return ctx.ask("s", sample("Hi", 10))

    engine, spec = make_engine(), rt.spec(handler)
    first = tool_call("t")
    asked = rt.call(engine, first, spec)
    assert isinstance(asked, NeedsInput)
    with pytest.raises(JsonRpcError) as info:
        rt.call(engine, retry(first, asked, {"s": nested_sampled(500)}), spec)
    assert info.value.code == INVALID_PARAMS
    assert info.value.data == {"reason": "malformed", "key": "s"}
    assert info.value.message == "invalid inputResponses entry 's': nested too deeply to read"
    assert runs == [1]


# --- API misuse ----------------------------------------------------------------------------------


def test_begin_accepts_only_mrtr_params() -> None:
    with pytest.raises(LocalProtocolError):
        make_engine().begin({"name": "t"}, HandlerSpec(handler=lambda ctx: None), now=T0)  # type: ignore[arg-type]


def test_finish_takes_exactly_one_outcome_once() -> None:
    run = make_engine().begin(tool_call("t"), HandlerSpec(handler=lambda ctx: None), now=T0)
    with pytest.raises(LocalProtocolError):
        run.finish(T0)
    assert run.finish(T0, returned=1) == Completed(1, 0)
    with pytest.raises(LocalProtocolError):
        run.finish(T0, returned=1)


def test_same_key_with_two_questions_in_one_run_is_a_handler_bug() -> None:
    run = make_engine().begin(tool_call("t"), HandlerSpec(handler=lambda ctx: None), now=T0)
    ctx = run.context
    with pytest.raises(BaseException):  # noqa: B017 (InputPending, the control-flow signal)
        ctx.ask("k", form("Q1", ok=bool))
    with pytest.raises(ValueError, match="different question"):
        ctx.ask("k", form("Q2", ok=bool))


def test_handler_exceptions_are_reraised(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        rt.call(make_engine(), tool_call("t"), rt.spec(handler))


def test_single_use_without_a_guard_is_refused_by_the_driver(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        return ctx.ask("k", form("Q", ok=bool))

    spec = rt.spec(handler, single_use=True)
    engine = make_engine()
    first = tool_call("t")
    r1 = rt.call(engine, first, spec)  # no state yet: nothing to claim
    assert isinstance(r1, NeedsInput)
    run = engine.begin(retry(first, r1, {"k": accept(ok=True)}), spec, now=T0)
    assert run.claim is not None
    token_id, expires_at = run.claim
    assert expires_at == T0 + 600 + 2 * 60  # exp + 2 * skew: instance clocks differ
    with pytest.raises(ValueError, match="single-use"):
        rt.call(engine, retry(first, r1, {"k": accept(ok=True)}), spec)
    assert attrs.has(type(r1))
    assert isinstance(token_id, str) and len(token_id) == 16
