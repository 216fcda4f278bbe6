"""Answers under keys the sealed state does not record, read when the handler asks them.

A server round may seal no ``requestState`` and its retry then carries answers and no state
(digest §4.2, round 1); a client may also send answers on its first call (the conformance
scenario ``input-required-result-ignore-extra-params``). Such an answer is checked against
the question the handler asks under that key (shape, then the requested schema: S13, S18),
used, and recorded pinned to that question; keys never asked are ignored (S14).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from server_helpers import (
    T0,
    Runtime,
    accept,
    make_codec,
    make_engine,
    nested_sampled,
    retry,
    tool_call,
)

from mrtr_core.app import App, drive_sync
from mrtr_core.errors import INVALID_PARAMS, JsonRpcError
from mrtr_core.server import (
    Completed,
    Context,
    HandlerSpec,
    InputRejected,
    NeedsInput,
    ServerLimits,
    content,
    form,
    root_uris,
    roots,
    sample,
    text,
    url,
)
from mrtr_core.wire import CreateMessageResult, ElicitResult, ListRootsResult

SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}
ROOTS = {"roots": [{"uri": "file:///work", "name": "work"}]}


def greet(ctx: Context) -> str:
    answer = ctx.ask("user_name", form("What is your name?", name=str))
    return f"Hello, {(content(answer) or {}).get('name')}!"


# --- accepted -----------------------------------------------------------------------------------


def test_first_call_answer_without_state_completes(rt: Runtime) -> None:
    first = tool_call("greet", responses={"user_name": accept(name="Ada")})
    outcome = rt.call(make_engine(), first, rt.spec(greet))
    assert isinstance(outcome, Completed)
    assert outcome.value == "Hello, Ada!"
    assert outcome.rounds == 0


def test_first_call_answers_of_every_kind_are_typed(rt: Runtime) -> None:
    seen: dict[str, Any] = {}

    def handler(ctx: Context) -> str:
        got = ctx.ask_all(
            {"name": form("Name?", name=str), "model": sample("Capital?", 10), "roots": roots()}
        )
        seen.update(got)
        model, listed = got["model"], got["roots"]
        assert isinstance(model, CreateMessageResult) and isinstance(listed, ListRootsResult)
        return f"{text(model)} {root_uris(listed)}"

    responses = {"name": accept(name="Ada"), "model": SAMPLED, "roots": ROOTS}
    outcome = rt.call(make_engine(), tool_call("t", responses=responses), rt.spec(handler))
    assert isinstance(outcome, Completed) and outcome.value == "Paris ['file:///work']"
    assert isinstance(seen["name"], ElicitResult)
    assert isinstance(seen["model"], CreateMessageResult)
    assert isinstance(seen["roots"], ListRootsResult)


def test_ask_all_uses_first_call_answers_and_asks_only_the_rest(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        got = ctx.ask_all({"a": form("A?", ok=bool), "b": form("B?", ok=bool)})
        return {k: content(v) for k, v in got.items()}

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("t", responses={"a": accept(ok=True)})
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput) and r1.keys == ("b",)
    # The retry carries only b: a's answer travels in the sealed state.
    r2 = rt.call(engine, retry(first, r1, {"b": accept(ok=False)}), spec)
    assert isinstance(r2, Completed) and r2.value == {"a": {"ok": True}, "b": {"ok": False}}


def test_first_call_answer_is_recorded_in_the_next_state(rt: Runtime) -> None:
    asked_b_after: list[Any] = []

    def handler(ctx: Context) -> Any:
        a = ctx.ask("a", form("A?", ok=bool))
        asked_b_after.append(content(a))
        b = ctx.ask("b", form("B?", ok=bool))
        return [content(a), content(b)]

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("t", responses={"a": accept(ok=True)})
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput) and r1.keys == ("b",)
    r2 = rt.call(engine, retry(first, r1, {"b": accept(ok=False)}), spec)
    assert isinstance(r2, Completed) and r2.value == [{"ok": True}, {"ok": False}]
    assert r2.rounds == 1
    assert asked_b_after == [{"ok": True}, {"ok": True}]


def test_answer_for_a_question_not_yet_reached_is_read_when_reached(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        first = ctx.ask("first", form("First?", ok=bool))
        second = ctx.ask("second", form("Second?", ok=bool))
        return [content(first), content(second)]

    spec = rt.spec(handler)
    engine = make_engine()
    # The handler stops at "first": "second" is not read this round (and not recorded).
    call = tool_call("t", responses={"second": accept(ok=False)})
    r1 = rt.call(engine, call, spec)
    assert isinstance(r1, NeedsInput) and r1.keys == ("first",)
    # A retry with a state that does not record "second": its answer is read when asked.
    r2 = rt.call(
        engine, retry(call, r1, {"first": accept(ok=True), "second": accept(ok=False)}), spec
    )
    assert isinstance(r2, Completed) and r2.value == [{"ok": True}, {"ok": False}]
    # Without it, "second" is simply asked (S15).
    r3 = rt.call(engine, retry(call, r1, {"first": accept(ok=True)}), spec)
    assert isinstance(r3, NeedsInput) and r3.keys == ("second",)


def test_extra_keys_next_to_a_first_call_answer_are_ignored(rt: Runtime) -> None:
    """The conformance scenario: the right answer plus keys nobody asks, even malformed."""
    responses = {
        "user_name": accept(name="Ada"),
        "unexpected_key": accept(name="Mallory"),
        "not_an_answer": 42,
        "null_entry": None,
    }
    outcome = rt.call(make_engine(), tool_call("greet", responses=responses), rt.spec(greet))
    assert isinstance(outcome, Completed) and outcome.value == "Hello, Ada!"


def test_only_extra_keys_on_a_first_call_ask_the_question(rt: Runtime) -> None:
    responses = {"github_login": accept(name="Mallory")}
    outcome = rt.call(make_engine(), tool_call("greet", responses=responses), rt.spec(greet))
    assert isinstance(outcome, NeedsInput) and outcome.keys == ("user_name",)


# --- refused ------------------------------------------------------------------------------------


def test_wrong_shape_first_call_answer_is_invalid_params_naming_the_key(rt: Runtime) -> None:
    after: list[str] = []

    def handler(ctx: Context) -> Any:
        got = ctx.ask_all({"confirm": form("Sure?", ok=bool), "model": sample("hi", 10)})
        after.append("reached")
        return got

    bad_answers: list[dict[str, Any]] = [
        {"confirm": {"action": "maybe"}},
        {"confirm": "yes"},
        {"confirm": None},
        {"model": {"role": "assistant"}},  # no content, no model
        {"confirm": {"action": "accept", "content": {"ok": {"nested": 1}}}},
        {"confirm": accept(ok=True), "model": [SAMPLED]},
    ]
    engine = make_engine()
    for answers in bad_answers:
        key = list(answers)[-1]
        with pytest.raises(JsonRpcError) as info:
            rt.call(engine, tool_call("t", responses=answers), rt.spec(handler))
        assert info.value.code == INVALID_PARAMS
        assert repr(key) in info.value.message
        assert info.value.data == {"reason": "malformed", "key": key}
    assert after == []


def test_first_call_answer_must_match_the_requested_schema(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        schema = {
            "type": "object",
            "properties": {"count": {"type": "integer", "minimum": 1}},
            "required": ["count"],
        }
        return content(ctx.ask("order", form("Order", schema)))

    spec = rt.spec(handler)
    engine = make_engine()
    for bad in (accept(count=0), accept(), accept(count="2")):
        with pytest.raises(JsonRpcError) as info:
            rt.call(engine, tool_call("order", responses={"order": bad}), spec)
        assert info.value.code == INVALID_PARAMS
        assert "'order'" in info.value.message
        assert info.value.data == {"reason": "schema_mismatch", "key": "order"}
    ok = rt.call(engine, tool_call("order", responses={"order": accept(count=3)}), spec)
    assert isinstance(ok, Completed) and ok.value == {"count": 3}
    # A decline carries no content to check.
    no = rt.call(engine, tool_call("order", responses={"order": {"action": "decline"}}), spec)
    assert isinstance(no, Completed) and no.value is None


def test_code_before_the_ask_runs_but_nothing_after_a_rejected_answer(rt: Runtime) -> None:
    """Documented: code before an ``ask`` runs on any round; a bad answer stops it there."""
    log: list[str] = []

    def handler(ctx: Context) -> str:
        log.append("before")
        try:
            ctx.ask("k", form("Q?", ok=bool))
        except Exception:
            log.append("except Exception")
            raise
        log.append("after")
        return "done"

    with pytest.raises(JsonRpcError) as info:
        rt.call(make_engine(), tool_call("t", responses={"k": "yes"}), rt.spec(handler))
    assert info.value.data == {"reason": "malformed", "key": "k"}
    assert log == ["before"]


def test_a_rejected_answer_cannot_be_swallowed(rt: Runtime) -> None:
    caught: list[BaseException] = []

    def handler(ctx: Context) -> str:
        try:
            ctx.ask("k", form("Q?", ok=bool))
        except BaseException as exc:  # a handler that catches everything
            caught.append(exc)
        return "swallowed"

    with pytest.raises(JsonRpcError) as info:
        rt.call(make_engine(), tool_call("t", responses={"k": "yes"}), rt.spec(handler))
    assert info.value.code == INVALID_PARAMS and info.value.data["key"] == "k"
    assert len(caught) == 1 and isinstance(caught[0], InputRejected)
    assert caught[0].error is info.value


def test_a_rejected_answer_in_a_trio_nursery_still_fails_the_request() -> None:
    async def ask_in_task(ctx: Context) -> None:
        await trio.lowlevel.checkpoint()
        ctx.ask("k", form("Q?", ok=bool))

    async def handler(ctx: Context) -> str:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask_in_task, ctx)
        return "unreachable"

    spec = HandlerSpec(handler=handler)
    with pytest.raises(JsonRpcError) as info:
        Runtime("trio").call(make_engine(), tool_call("t", responses={"k": "yes"}), spec)
    assert info.value.data == {"reason": "malformed", "key": "k"}


def test_a_first_call_answer_nested_too_deeply_to_read_is_refused(rt: Runtime) -> None:
    # As for an answer the state expects (test_server_engine_rules): -32602 naming the key.
    def handler(ctx: Context) -> str:
        ctx.ask("s", sample("Hi", 10))
        return "done"

    with pytest.raises(JsonRpcError) as info:
        rt.call(make_engine(), tool_call("t", responses={"s": nested_sampled(500)}),
                rt.spec(handler))
    assert info.value.code == INVALID_PARAMS
    assert info.value.data == {"reason": "malformed", "key": "s"}
    assert info.value.message == "invalid inputResponses entry 's': nested too deeply to read"


def test_a_first_call_url_mode_answer_with_content_is_refused(rt: Runtime) -> None:
    # Digest §1.6: content accompanies accept in form mode only.
    def handler(ctx: Context) -> str:
        answer = ctx.ask("link", url("Connect", "https://example.com/c"))
        assert isinstance(answer, ElicitResult)
        return f"{answer.action} {answer.content}"

    spec = rt.spec(handler)
    bad = {"link": {"action": "accept", "content": {"token": "t0k"}}}
    with pytest.raises(JsonRpcError) as info:
        rt.call(make_engine(), tool_call("t", responses=bad), spec)
    assert info.value.code == INVALID_PARAMS
    assert info.value.data == {"reason": "malformed", "key": "link"}
    good = {"link": {"action": "accept"}}
    ok = rt.call(make_engine(), tool_call("t", responses=good), spec)
    assert isinstance(ok, Completed) and ok.value == "accept None"


def test_input_responses_limits_apply_before_the_handler_runs(rt: Runtime) -> None:
    runs = {"n": 0}

    def handler(ctx: Context) -> Any:
        runs["n"] += 1
        return content(ctx.ask("k", form("Q", ok=bool)))

    engine = make_engine(limits=ServerLimits(max_input_responses=2, max_input_responses_bytes=200))
    too_many = {"k": accept(ok=True), "x": {}, "y": {}}
    with pytest.raises(JsonRpcError) as info:
        rt.call(engine, tool_call("t", responses=too_many), rt.spec(handler))
    assert info.value.code == INVALID_PARAMS and info.value.data == {"reason": "too_many"}
    too_big = {"k": accept(ok=True), "x": "y" * 300}
    with pytest.raises(JsonRpcError) as info:
        rt.call(engine, tool_call("t", responses=too_big), rt.spec(handler))
    assert info.value.code == INVALID_PARAMS and info.value.data == {"reason": "too_large"}
    assert runs["n"] == 0
    ok = rt.call(engine, tool_call("t", responses={"k": accept(ok=True)}), rt.spec(handler))
    assert isinstance(ok, Completed) and ok.value == {"ok": True} and runs["n"] == 1


# --- answers stay pinned to their question -------------------------------------------------------


def test_first_call_answer_is_pinned_to_the_question_it_answered(rt: Runtime) -> None:
    price = {"amount": 10}

    def handler(ctx: Context) -> Any:
        pay = ctx.ask("pay", form(f"Pay {price['amount']} EUR?", ok=bool))
        ticket = ctx.ask("ticket", form("Ticket?", id=str))
        return [price["amount"], content(pay), content(ticket)]

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("t", responses={"pay": accept(ok=True)})
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput) and r1.keys == ("ticket",)
    price["amount"] = 12  # the question changes: the recorded answer is for 10 EUR
    # Resending the old answer does not help: the state records "pay" already.
    r2 = rt.call(
        engine, retry(first, r1, {"ticket": accept(id="T-1"), "pay": accept(ok=True)}), spec
    )
    assert isinstance(r2, NeedsInput) and r2.keys == ("pay",)
    assert r2.result["inputRequests"]["pay"]["params"]["message"] == "Pay 12 EUR?"
    r3 = rt.call(engine, retry(first, r2, {"pay": accept(ok=False)}), spec)
    assert isinstance(r3, Completed) and r3.value == [12, {"ok": False}, {"id": "T-1"}]


def test_resent_answer_to_a_changed_question_is_not_reused_with_state(rt: Runtime) -> None:
    price = {"amount": 10}

    def handler(ctx: Context) -> Any:
        pay = ctx.ask("pay", form(f"Pay {price['amount']} EUR?", ok=bool))
        ship = ctx.ask("ship", form("Ship now?", ok=bool))
        return [price["amount"], content(pay), content(ship)]

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("t")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput) and r1.keys == ("pay",)
    r2 = rt.call(engine, retry(first, r1, {"pay": accept(ok=True)}), spec)
    assert isinstance(r2, NeedsInput) and r2.keys == ("ship",)
    price["amount"] = 12
    # The client resends every answer so far: "pay" answered 10 EUR, not 12 EUR.
    resent = {"ship": accept(ok=True), "pay": accept(ok=True)}
    r3 = rt.call(engine, retry(first, r2, resent), spec)
    assert isinstance(r3, NeedsInput) and r3.keys == ("pay",)
    assert r3.result["inputRequests"]["pay"]["params"]["message"] == "Pay 12 EUR?"
    r4 = rt.call(engine, retry(first, r3, {"pay": accept(ok=True)}), spec)
    assert isinstance(r4, Completed) and r4.value == [12, {"ok": True}, {"ok": True}]


def test_answer_to_an_asked_key_is_checked_against_the_question_the_state_records(
    rt: Runtime,
) -> None:
    """A key the previous round asked is read against that question (the one the client
    saw), never against a changed one the handler asks now."""
    field = {"name": "ok"}

    def handler(ctx: Context) -> Any:
        return content(ctx.ask("k", form("Q?", **{field["name"]: bool})))

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("t")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    field["name"] = "sure"
    # Fits the new form only: refused against the asked one.
    with pytest.raises(JsonRpcError) as info:
        rt.call(engine, retry(first, r1, {"k": accept(sure=True)}), spec)
    assert info.value.data == {"reason": "schema_mismatch", "key": "k"}
    # Fits the asked form: recorded for it, and the changed question is asked again.
    r2 = rt.call(engine, retry(first, r1, {"k": accept(ok=True)}), spec)
    assert isinstance(r2, NeedsInput) and r2.keys == ("k",)
    r3 = rt.call(engine, retry(first, r2, {"k": accept(sure=True)}), spec)
    assert isinstance(r3, Completed) and r3.value == {"sure": True}


# --- through the app ---------------------------------------------------------------------------


def _app() -> App:
    app = App("first-call", "1.0", codec=make_codec())
    app.tool()(greet)
    return app


def _call(responses: dict[str, Any], state: str | None = None, rid: int = 1) -> dict[str, Any]:
    params: dict[str, Any] = {
        "name": "greet",
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        },
        "inputResponses": responses,
    }
    if state is not None:
        params["requestState"] = state
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def test_app_completes_a_first_call_with_its_answer_and_extra_keys() -> None:
    reply = drive_sync(_app(), _call({"user_name": accept(name="Ada"), "extra": {"x": 1}}), now=T0)
    assert reply.status == 200 and reply.message is not None
    result = reply.message["result"]
    assert result["resultType"] == "complete"
    assert result["content"] == [{"type": "text", "text": "Hello, Ada!"}]


def test_app_refuses_a_bad_first_call_answer_like_a_bad_retry_answer() -> None:
    app = _app()
    lazy = drive_sync(
        app, _call({"user_name": {"action": "accept", "content": {"name": 1}}}), now=T0
    )
    asked = drive_sync(app, _call({}), now=T0)
    assert asked.message is not None
    state = asked.message["result"]["requestState"]
    eager = drive_sync(
        app, _call({"user_name": {"action": "accept", "content": {"name": 1}}}, state, 2), now=T0
    )
    assert lazy.message is not None and eager.message is not None
    assert lazy.status == eager.status == 400
    assert lazy.message["error"]["code"] == eager.message["error"]["code"] == INVALID_PARAMS
    assert lazy.message["error"]["data"] == eager.message["error"]["data"]
    assert lazy.message["error"]["data"]["key"] == "user_name"


def test_questions_asked_from_trio_nursery_tasks_end_the_round_with_input_required() -> None:
    async def ask_in_task(ctx: Context, key: str) -> None:
        await trio.lowlevel.checkpoint()
        ctx.ask(key, form(f"{key}?", ok=bool))

    async def handler(ctx: Context) -> str:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask_in_task, ctx, "a")
            nursery.start_soon(ask_in_task, ctx, "b")
        return "unreachable"

    outcome = Runtime("trio").call(make_engine(), tool_call("t"), HandlerSpec(handler=handler))
    assert isinstance(outcome, NeedsInput)
    # Which sibling reached its ask before the nursery cancelled the other is trio's choice.
    assert set(outcome.result["inputRequests"]) <= {"a", "b"}
    assert outcome.result["inputRequests"]


def test_an_exception_group_with_a_real_failure_is_not_taken_for_a_question() -> None:
    async def fails(ctx: Context) -> None:
        raise ValueError("boom")  # no checkpoint: both siblings raise before cancellation

    async def asks(ctx: Context) -> None:
        ctx.ask("a", form("a?", ok=bool))

    async def handler(ctx: Context) -> str:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(asks, ctx)
            nursery.start_soon(fails, ctx)
        return "unreachable"

    with pytest.raises(BaseExceptionGroup) as info:
        Runtime("trio").call(make_engine(), tool_call("t"), HandlerSpec(handler=handler))
    assert info.value.subgroup(ValueError) is not None
