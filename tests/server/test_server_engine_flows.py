"""Server engine flows, run as sync functions, trio coroutines and asyncio coroutines."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from server_helpers import (
    KEY1,
    KEY2,
    T0,
    Runtime,
    accept,
    make_codec,
    make_engine,
    retry,
    tool_call,
)

from mrtr_core.errors import INTERNAL_ERROR, INVALID_PARAMS, JsonRpcError
from mrtr_core.server import (
    Completed,
    Context,
    NeedsInput,
    ServerEngine,
    accepted,
    content,
    declined,
    form,
    roots,
    sample,
    text,
    url,
)
from mrtr_core.state import KeyRing, StateRejectedError
from mrtr_core.wire import (
    CreateMessageResult,
    ElicitResult,
    GetPromptParams,
    ListRootsResult,
    ReadResourceParams,
    RequestMeta,
    structure_params,
)

WIRE_STATE_ERROR = {
    "code": -32602,
    "message": "Invalid or expired requestState",
    "data": {"reason": "invalid_request_state"},
}


def deploy_handler(calls: dict[str, int]) -> Any:
    """The DESIGN example: a plan computed once, two confirmations asked in one round."""

    def deploy_production(ctx: Context, version: str) -> dict[str, Any]:
        calls["runs"] = calls.get("runs", 0) + 1

        def compute_plan() -> list[str]:
            calls["plans"] = calls.get("plans", 0) + 1
            return [f"drain {version}", f"roll {version}"]

        plan = ctx.memo("plan", compute_plan)
        got = ctx.ask_all(
            {
                "confirm_deploy": form("Deploy to production?", confirm=bool),
                "change_ticket": form("Change ticket number", ticket=str),
            }
        )
        if not content(got["confirm_deploy"]) or not content(got["confirm_deploy"])["confirm"]:
            return {"deployed": False}
        return {
            "deployed": True,
            "version": version,
            "ticket": content(got["change_ticket"])["ticket"],  # type: ignore[index]
            "plan": plan,
        }

    return deploy_production


def test_two_entry_round_completes_across_two_instances(rt: Runtime) -> None:
    calls: dict[str, int] = {}
    spec = rt.spec(deploy_handler(calls))
    ring = KeyRing({"k1": KEY1}, active="k1")
    instance_a = make_engine(ring, seed=1)
    instance_b = make_engine(ring, seed=2)  # shares only the key ring
    first = tool_call("deploy_production", {"version": "2.4.1"})

    round1 = rt.call(instance_a, first, spec)
    assert isinstance(round1, NeedsInput)
    assert round1.result["resultType"] == "input_required"
    assert round1.keys == ("confirm_deploy", "change_ticket")
    assert round1.result["inputRequests"]["confirm_deploy"] == {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "Deploy to production?",
            "requestedSchema": {
                "type": "object",
                "properties": {"confirm": {"type": "boolean"}},
                "required": ["confirm"],
            },
        },
    }
    assert round1.rounds == 1

    answers = {"confirm_deploy": accept(confirm=True), "change_ticket": accept(ticket="CHG-7")}
    second = retry(first, round1, answers)
    round2 = rt.call(instance_b, second, spec, now=T0 + 30)
    assert isinstance(round2, Completed)
    assert round2.value == {
        "deployed": True,
        "version": "2.4.1",
        "ticket": "CHG-7",
        "plan": ["drain 2.4.1", "roll 2.4.1"],
    }
    assert round2.rounds == 1
    assert calls == {"runs": 2, "plans": 1}


def test_three_round_flow_changes_state_every_round(rt: Runtime) -> None:
    seen_rounds: list[int] = []

    def wizard(ctx: Context) -> str:
        seen_rounds.append(ctx.round)
        name = content(ctx.ask("step1", form("Your name?", name=str)))["name"]  # type: ignore[index]
        color = content(ctx.ask("step2", form(f"Favourite colour, {name}?", color=str)))
        return f"{name} likes {color['color']}"  # type: ignore[index]

    spec = rt.spec(wizard)
    engine = make_engine()
    first = tool_call("wizard")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput) and r1.keys == ("step1",)
    p2 = retry(first, r1, {"step1": accept(name="Ada")})
    r2 = rt.call(engine, p2, spec, now=T0 + 1)
    assert isinstance(r2, NeedsInput) and r2.keys == ("step2",)
    assert r2.result["inputRequests"]["step2"]["params"]["message"] == "Favourite colour, Ada?"
    assert r2.request_state != r1.request_state
    assert r2.rounds == 2
    # Answers from earlier rounds are carried in the state: the client sends only step2.
    r3 = rt.call(engine, retry(first, r2, {"step2": accept(color="green")}), spec, now=T0 + 2)
    assert isinstance(r3, Completed)
    assert r3.value == "Ada likes green"
    assert seen_rounds == [1, 2, 3]


def test_memo_is_computed_once_across_rounds(rt: Runtime) -> None:
    counter = {"n": 0}

    def handler(ctx: Context) -> Any:
        def expensive() -> dict[str, Any]:
            counter["n"] += 1
            return {"items": (1, 2, 3)}

        value = ctx.memo("expensive", expensive)
        ctx.ask("a", form("A?", ok=bool))
        ctx.ask("b", form("B?", ok=bool))
        return value

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("memo")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    r2 = rt.call(engine, retry(first, r1, {"a": accept(ok=True)}), spec)
    assert isinstance(r2, NeedsInput)
    r3 = rt.call(engine, retry(first, r2, {"b": accept(ok=True)}), spec)
    assert isinstance(r3, Completed)
    assert r3.value == {"items": [1, 2, 3]}  # as it reads back from the state
    assert counter["n"] == 1


def test_changed_question_is_asked_again(rt: Runtime) -> None:
    price = {"amount": 10}

    def checkout(ctx: Context) -> int:
        answer = ctx.ask("pay", form(f"Pay {price['amount']} EUR?", ok=bool))
        assert accepted(answer)
        return price["amount"]

    spec = rt.spec(checkout)
    engine = make_engine()
    first = tool_call("checkout")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    price["amount"] = 12  # the question changes before the answer comes back
    r2 = rt.call(engine, retry(first, r1, {"pay": accept(ok=True)}), spec)
    assert isinstance(r2, NeedsInput), "an answer to the old question must not be used"
    assert r2.result["inputRequests"]["pay"]["params"]["message"] == "Pay 12 EUR?"
    r3 = rt.call(engine, retry(first, r2, {"pay": accept(ok=True)}), spec)
    assert isinstance(r3, Completed) and r3.value == 12


def test_missing_answer_is_asked_again(rt: Runtime) -> None:
    calls: dict[str, int] = {}
    spec = rt.spec(deploy_handler(calls))
    engine = make_engine()
    first = tool_call("deploy_production", {"version": "1"})
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    # Only one of the two answers comes back: the other is asked again, not an error (S15).
    r2 = rt.call(engine, retry(first, r1, {"confirm_deploy": accept(confirm=True)}), spec)
    assert isinstance(r2, NeedsInput)
    assert r2.keys == ("change_ticket",)
    # No answers at all: asked again.
    r3 = rt.call(engine, retry(first, r2, None), spec)
    assert isinstance(r3, NeedsInput) and r3.keys == ("change_ticket",)
    r4 = rt.call(engine, retry(first, r3, {"change_ticket": accept(ticket="T-1")}), spec)
    assert isinstance(r4, Completed) and r4.value["ticket"] == "T-1"


def test_extra_and_never_asked_keys_are_ignored(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        return content(ctx.ask("user_name", form("Name?", name=str)))

    spec = rt.spec(handler)
    engine = make_engine()
    # Answers on the first request under keys the handler never asks: ignored, and asked.
    first = tool_call("greet", responses={"github_login": accept(name="Mallory"), "x": 1})
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput) and r1.keys == ("user_name",)
    # Extra keys next to the real answer are ignored (S14), even malformed ones.
    r2 = rt.call(
        engine,
        retry(first, r1, {"user_name": accept(name="Ada"), "not_requested": 42}),
        spec,
    )
    assert isinstance(r2, Completed) and r2.value == {"name": "Ada"}


def test_input_responses_null_counts_as_absent(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        return content(ctx.ask("k", form("Name?", name=str)))

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("n")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    again = structure_params(
        "tools/call",
        {
            "name": "n",
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            },
            "inputResponses": None,
            "requestState": r1.request_state,
        },
    )
    r2 = rt.call(engine, again, spec)
    assert isinstance(r2, NeedsInput) and r2.keys == ("k",)


def test_later_ask_is_not_reached_while_an_earlier_one_is_unanswered(rt: Runtime) -> None:
    reached: list[str] = []

    def handler(ctx: Context) -> str:
        ctx.ask("first", form("First?", ok=bool))
        reached.append("after first")
        ctx.ask("second", form("Second?", ok=bool))
        return "done"

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("seq")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput) and r1.keys == ("first",)
    assert reached == []
    r2 = rt.call(engine, retry(first, r1, {"first": accept(ok=True)}), spec)
    assert isinstance(r2, NeedsInput) and r2.keys == ("second",)
    assert reached == ["after first"]


def test_except_exception_in_a_handler_does_not_swallow_the_stop(rt: Runtime) -> None:
    def handler(ctx: Context) -> str:
        try:
            ctx.ask("k", form("Q?", ok=bool))
        except Exception:
            return "swallowed"
        return "answered"

    outcome = rt.call(make_engine(), tool_call("t"), rt.spec(handler))
    assert isinstance(outcome, NeedsInput) and outcome.keys == ("k",)


def test_code_before_the_last_ask_reruns_every_round(rt: Runtime) -> None:
    """Documented: each round re-runs the handler from the top."""
    log: list[int] = []

    def handler(ctx: Context) -> str:
        log.append(ctx.round)
        ctx.ask("a", form("A?", ok=bool))
        ctx.ask("b", form("B?", ok=bool))
        return "ok"

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("rerun")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    r2 = rt.call(engine, retry(first, r1, {"a": accept(ok=True)}), spec)
    assert isinstance(r2, NeedsInput)
    r3 = rt.call(engine, retry(first, r2, {"b": accept(ok=True)}), spec)
    assert isinstance(r3, Completed)
    assert log == [1, 2, 3]


def test_sampling_and_roots_answers_are_typed(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        got = ctx.ask_all({"summary": sample("Summarise", 100), "where": roots()})
        summary = got["summary"]
        where = got["where"]
        assert isinstance(summary, CreateMessageResult)
        assert isinstance(where, ListRootsResult)
        return [text(summary), [r.uri for r in where.roots]]

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("s")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    assert r1.result["inputRequests"]["summary"]["method"] == "sampling/createMessage"
    assert r1.result["inputRequests"]["where"] == {"method": "roots/list"}
    answers = {
        "summary": {
            "role": "assistant",
            "content": {"type": "text", "text": "short"},
            "model": "m",
        },
        "where": {"roots": [{"uri": "file:///srv"}]},
    }
    r2 = rt.call(engine, retry(first, r1, answers), spec)
    assert isinstance(r2, Completed)
    assert r2.value == ["short", ["file:///srv"]]


def test_decline_is_an_ordinary_answer(rt: Runtime) -> None:
    def handler(ctx: Context) -> str:
        answer = ctx.ask("ok", form("Proceed?", ok=bool))
        return "declined" if declined(answer) else "accepted"

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("d")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    r2 = rt.call(engine, retry(first, r1, {"ok": {"action": "decline"}}), spec)
    assert isinstance(r2, Completed) and r2.value == "declined"


# --- key rotation, expiry, binding -----------------------------------------------------------


def test_key_rotation_mid_flow(rt: Runtime) -> None:
    def handler(ctx: Context) -> str:
        ctx.ask("a", form("A?", ok=bool))
        ctx.ask("b", form("B?", ok=bool))
        return "done"

    spec = rt.spec(handler)
    ring1 = KeyRing({"k1": KEY1}, active="k1")
    first = tool_call("rotate")
    r1 = rt.call(make_engine(ring1), first, spec)
    assert isinstance(r1, NeedsInput)
    assert r1.request_state.startswith("v1.k1.")

    # Rotation: k2 becomes active, k1 stays to verify tokens already out there.
    ring12 = ring1.with_key("k2", KEY2, activate=True)
    r2 = rt.call(make_engine(ring12, seed=5), retry(first, r1, {"a": accept(ok=True)}), spec)
    assert isinstance(r2, NeedsInput)
    assert r2.request_state.startswith("v1.k2.")

    # k1 retired: the old token is refused (unknown_key), the re-sealed one still works.
    ring2 = ring12.without("k1")
    engine2 = make_engine(ring2, seed=6)
    with pytest.raises(StateRejectedError) as info:
        rt.call(engine2, retry(first, r1, {"a": accept(ok=True)}), spec)
    assert info.value.reason == "unknown_key"
    r3 = rt.call(engine2, retry(first, r2, {"b": accept(ok=True)}), spec)
    assert isinstance(r3, Completed) and r3.value == "done"


def test_expired_state_is_refused_and_the_handler_does_not_run(rt: Runtime) -> None:
    runs = {"n": 0}

    def handler(ctx: Context) -> str:
        runs["n"] += 1
        ctx.ask("a", form("A?", ok=bool))
        return "done"

    spec = rt.spec(handler)
    engine = make_engine(ttl=600.0, skew=60.0)
    first = tool_call("exp")
    r1 = rt.call(engine, first, spec, now=T0)
    assert isinstance(r1, NeedsInput) and runs["n"] == 1
    late = retry(first, r1, {"a": accept(ok=True)})
    # Just inside ttl + skew: accepted.
    inside = rt.call(engine, late, spec, now=T0 + 659.9)
    assert isinstance(inside, Completed)
    assert runs["n"] == 2
    with pytest.raises(StateRejectedError) as info:
        rt.call(engine, late, spec, now=T0 + 660.0)
    assert info.value.reason == "expired"
    assert info.value.to_error_object() == WIRE_STATE_ERROR
    assert runs["n"] == 2


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("other_tool", "binding_mismatch"),
        ("other_arguments", "binding_mismatch"),
        ("other_principal", "binding_mismatch"),
        ("no_principal", "binding_mismatch"),
        ("other_audience", "binding_mismatch"),
    ],
)
def test_binding_mismatch_is_refused(rt: Runtime, change: str, expected: str) -> None:
    runs = {"n": 0}

    def handler(ctx: Context, **_: Any) -> str:
        runs["n"] += 1
        ctx.ask("a", form("A?", ok=bool))
        return "done"

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("deploy", {"env": "prod"})
    r1 = rt.call(engine, first, spec, principal="alice")
    assert isinstance(r1, NeedsInput)
    answers = {"a": accept(ok=True)}
    principal: str | None = "alice"
    target_engine: ServerEngine = engine
    if change == "other_tool":
        params = tool_call("delete", {"env": "prod"}, responses=answers, state=r1.request_state)
    elif change == "other_arguments":
        params = tool_call("deploy", {"env": "dev"}, responses=answers, state=r1.request_state)
    else:
        params = retry(first, r1, answers)
        if change == "other_principal":
            principal = "mallory"
        elif change == "no_principal":
            principal = None
        else:
            target_engine = make_engine(audience="another-server")
    with pytest.raises(StateRejectedError) as info:
        rt.call(target_engine, params, spec, principal=principal)
    assert info.value.reason == expected
    assert info.value.to_error_object() == WIRE_STATE_ERROR
    assert runs["n"] == 1
    # The same retry with the right binding completes.
    ok = rt.call(engine, retry(first, r1, answers), spec, principal="alice")
    assert isinstance(ok, Completed)


def test_prompt_and_resource_flows(rt: Runtime) -> None:
    def prompt(ctx: Context, topic: str) -> str:
        return f"{topic}: {content(ctx.ask('user_context', form('Context?', text=str)))}"

    def resource(ctx: Context) -> str:
        return f"{ctx.target} {content(ctx.ask('who', form('Who?', name=str)))}"

    engine = make_engine()
    meta = RequestMeta()
    caps_meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    p1 = structure_params(
        "prompts/get", {"name": "brief", "arguments": {"topic": "x"}, "_meta": caps_meta}
    )
    assert isinstance(p1, GetPromptParams) and meta is not None
    r1 = rt.call(engine, p1, rt.spec(prompt))
    assert isinstance(r1, NeedsInput)
    r2 = rt.call(engine, retry(p1, r1, {"user_context": accept(text="t")}), rt.spec(prompt))
    assert isinstance(r2, Completed) and r2.value == "x: {'text': 't'}"

    q1 = structure_params("resources/read", {"uri": "mem://doc", "_meta": caps_meta})
    assert isinstance(q1, ReadResourceParams)
    s1 = rt.call(engine, q1, rt.spec(resource))
    assert isinstance(s1, NeedsInput)
    s2 = rt.call(engine, retry(q1, s1, {"who": accept(name="n")}), rt.spec(resource))
    assert isinstance(s2, Completed) and s2.value == "mem://doc {'name': 'n'}"
    # A state minted for the resource is not good for the prompt.
    with pytest.raises(StateRejectedError):
        rt.call(engine, retry(p1, s1, None), rt.spec(prompt))


# --- inputResponses validation -------------------------------------------------------------


def test_input_response_of_the_wrong_shape_is_invalid_params_naming_the_key(rt: Runtime) -> None:
    runs = {"n": 0}

    def handler(ctx: Context) -> Any:
        runs["n"] += 1
        return ctx.ask_all({"confirm": form("Sure?", ok=bool), "model": sample("hi", 10)})

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("shape")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    bad_answers: list[dict[str, Any]] = [
        {"confirm": {"action": "maybe"}},
        {"confirm": "yes"},
        {"confirm": None},
        {"model": {"role": "assistant"}},  # no content, no model
        {"confirm": {"action": "accept", "content": {"ok": {"nested": 1}}}},
    ]
    for answers in bad_answers:
        with pytest.raises(JsonRpcError) as info:
            rt.call(engine, retry(first, r1, answers), spec)
        key = next(iter(answers))
        assert info.value.code == INVALID_PARAMS
        assert repr(key) in info.value.message
        assert info.value.data["key"] == key
    assert runs["n"] == 1


_TEXT_BLOCK = {"type": "text", "text": "Paris"}


@pytest.mark.parametrize(
    ("key", "answer", "named"),
    [
        # CreateMessageResult: model and stopReason are strings (named by their wire keys),
        # content a block or an array of blocks, each with its string `type` (§1.5 b, §1.6).
        ("model", {"role": "assistant", "content": _TEXT_BLOCK, "model": 5}, "model"),
        ("model", {"role": "assistant", "content": _TEXT_BLOCK, "model": None}, "model"),
        ("model", {"role": "assistant", "content": _TEXT_BLOCK, "model": "m",
                   "stopReason": 7}, "stopReason"),
        ("model", {"role": "assistant", "content": {"text": "Paris"}, "model": "m"}, "type"),
        ("model", {"role": "assistant", "content": [_TEXT_BLOCK, {"type": 3}], "model": "m"},
         "type"),
        # schema.json: an image's or audio's data is base64 (format "byte").
        ("model", {"role": "assistant", "model": "m",
                   "content": {"type": "image", "data": "aGk", "mimeType": "image/png"}},
         "content.data must be a base64 string"),
        ("model", {"role": "assistant", "model": "m", "content": [
            _TEXT_BLOCK, {"type": "audio", "data": "a b=", "mimeType": "audio/wav"}]},
         "content[1].data must be a base64 string"),
        # Annotations (schema.ts): priority is a number from 0 to 1.
        ("model", {"role": "assistant", "model": "m", "content": {
            **_TEXT_BLOCK, "annotations": {"priority": -1}}},
         "content.annotations.priority must be a number from 0 to 1"),
        # ListRootsResult: roots is an array of Root objects, a Root's name a string.
        ("where", {"roots": {}}, "roots"),
        ("where", {"roots": "file:///a"}, "roots"),
        ("where", {"roots": [{"uri": "file:///a", "name": 5}]}, "name"),
    ],
)
def test_an_answer_of_the_wrong_json_type_is_refused_not_coerced(
    rt: Runtime, key: str, answer: dict[str, Any], named: str
) -> None:
    # S13 / digest §2.5: a value of the wrong type in inputResponses is a schema violation,
    # answered with -32602 (never completed on a converted value: 5 is not the string "5",
    # an object is not an empty array, a string is not an array of its characters).
    runs = {"n": 0}

    def handler(ctx: Context) -> Any:
        runs["n"] += 1
        return ctx.ask_all({"model": sample("Capital?", 10), "where": roots()})

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("typed")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    with pytest.raises(JsonRpcError) as info:
        rt.call(engine, retry(first, r1, {key: answer}), spec)
    assert info.value.code == INVALID_PARAMS
    assert info.value.data == {"reason": "malformed", "key": key}
    assert repr(key) in info.value.message and named in info.value.message
    assert runs["n"] == 1


@pytest.mark.parametrize("uri", ["https://evil.example/x", "file:/x", "/srv", ""])
def test_a_root_that_is_not_a_file_uri_is_refused(rt: Runtime, uri: str) -> None:
    # digest §1.6: Root.uri must be a file:// URI.
    def handler(ctx: Context) -> Any:
        return [r.uri for r in ctx.ask("where", roots()).roots]  # type: ignore[union-attr]

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("where")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    answer = {"where": {"roots": [{"uri": "file:///ok"}, {"uri": uri}]}}
    with pytest.raises(JsonRpcError) as info:
        rt.call(engine, retry(first, r1, answer), spec)
    assert info.value.code == INVALID_PARAMS
    assert f"uri must be a file:// URI, not {uri!r}" in info.value.message
    assert info.value.data == {"reason": "malformed", "key": "where"}
    upper = {"where": {"roots": [{"uri": "FILE:///Srv"}]}}  # the scheme is case-insensitive
    ok = rt.call(engine, retry(first, r1, upper), spec)
    assert isinstance(ok, Completed) and ok.value == ["FILE:///Srv"]


def test_elicitation_content_must_match_the_requested_schema(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        return content(
            ctx.ask(
                "order",
                form(
                    "Order",
                    {
                        "type": "object",
                        "properties": {
                            "count": {"type": "integer", "minimum": 1},
                            "size": {"type": "string", "enum": ["S", "M"]},
                        },
                        "required": ["count"],
                    },
                ),
            )
        )

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("order")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    for bad in (accept(count=0), accept(size="S"), accept(count=2, size="XL"), accept(count="2")):
        with pytest.raises(JsonRpcError) as info:
            rt.call(engine, retry(first, r1, {"order": bad}), spec)
        assert info.value.code == INVALID_PARAMS
        assert "'order'" in info.value.message
        assert info.value.data == {"reason": "schema_mismatch", "key": "order"}
    # jsonschema semantics: 2.0 is an integer.
    ok = rt.call(engine, retry(first, r1, {"order": accept(count=2.0, size="M")}), spec)
    assert isinstance(ok, Completed) and ok.value == {"count": 2.0, "size": "M"}
    # Declined answers carry no content to validate.
    declined_outcome = rt.call(engine, retry(first, r1, {"order": {"action": "decline"}}), spec)
    assert isinstance(declined_outcome, Completed) and declined_outcome.value is None


def test_a_url_mode_answer_with_content_is_refused_before_the_handler_sees_it(
    rt: Runtime,
) -> None:
    # Digest §1.6: content accompanies accept in form mode only; a URL-mode accept means
    # consent to open the URL, so content there is no form data for the handler.
    seen: list[ElicitResult] = []

    def handler(ctx: Context) -> Any:
        answer = ctx.ask("link", url("Connect", "https://example.com/c"))
        assert isinstance(answer, ElicitResult)
        seen.append(answer)
        return answer.action

    engine, first, spec = make_engine(), tool_call("link"), rt.spec(handler)
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    for action in ("accept", "decline", "cancel"):
        bad = {"action": action, "content": {"token": "t0k"}}
        with pytest.raises(JsonRpcError) as info:
            rt.call(engine, retry(first, r1, {"link": bad}), spec)
        assert info.value.code == INVALID_PARAMS
        assert info.value.message == (
            "invalid inputResponses entry 'link': a URL-mode elicitation answer carries "
            "no content (content accompanies accept in form mode only)"
        )
        assert info.value.data == {"reason": "malformed", "key": "link"}
    assert seen == []
    ok = rt.call(engine, retry(first, r1, {"link": {"action": "accept"}}), spec)
    assert isinstance(ok, Completed) and ok.value == "accept"
    assert seen == [ElicitResult(action="accept")]


def test_form_answers_must_have_the_formats_the_form_names(rt: Runtime) -> None:
    # S18: the schema's formats are part of what the answer must match.
    def handler(ctx: Context) -> Any:
        return content(ctx.ask("contact", form("Contact", {
            "type": "object",
            "properties": {
                "email": {"type": "string", "format": "email"},
                "site": {"type": "string", "format": "uri"},
                "when": {"type": "string", "format": "date-time"},
            },
        })))

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("contact")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    for bad in (accept(email="nobody"), accept(site="not a uri"), accept(when="tomorrow")):
        with pytest.raises(JsonRpcError) as info:
            rt.call(engine, retry(first, r1, {"contact": bad}), spec)
        assert info.value.code == INVALID_PARAMS
        assert info.value.data == {"reason": "schema_mismatch", "key": "contact"}
    good = accept(email="ops@example.com", site="https://example.com/x",
                  when="2026-07-28T10:00:00Z")
    ok = rt.call(engine, retry(first, r1, {"contact": good}), spec)
    assert isinstance(ok, Completed) and ok.value == good["content"]


@pytest.mark.parametrize(("schema", "names"), [
    ({"type": "object", "properties": {"o": {"type": "object", "properties": {}}}},
     "properties.o: unsupported type 'object'"),
    ({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "integer"}}}},
     "properties.tags: a multi select needs items.enum or items.anyOf"),
    ({"type": "object", "properties": {"at": {"type": "string", "format": "ipv4"}}},
     "properties.at: unknown format 'ipv4'"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
     "required names 'b', which is not a property"),
])
def test_a_form_outside_the_flat_primitive_subset_is_never_sent(
    rt: Runtime, schema: dict[str, Any], names: str
) -> None:
    # digest §1.5: a form's properties are flat primitives; asking anything else is the
    # handler's mistake (-32603), caught before the question leaves the server.
    def handler(ctx: Context) -> Any:
        return ctx.ask_all({"fine": form("Fine", ok=bool), "odd": form("Odd", schema)})

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("odd")
    with pytest.raises(JsonRpcError) as info:
        rt.call(engine, first, spec)
    assert info.value.code == INTERNAL_ERROR
    assert "'odd'" in info.value.message and names in info.value.message
    assert info.value.data == {"key": "odd", "reason": "invalid_form"}


def test_elicit_result_is_typed(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        answer = ctx.ask("k", form("Q", ok=bool))
        assert isinstance(answer, ElicitResult)
        return answer.action

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("typed")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    r2 = rt.call(engine, retry(first, r1, {"k": {"action": "cancel"}}), spec)
    assert isinstance(r2, Completed) and r2.value == "cancel"


def test_state_payload_is_encrypted_by_default(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        ctx.memo("secret", lambda: "plan-XYZZY")
        return ctx.ask("k", form("Q", ok=bool))

    outcome = rt.call(make_engine(), tool_call("enc"), rt.spec(handler))
    assert isinstance(outcome, NeedsInput)
    raw = base64.b64decode(outcome.request_state.split(".", 2)[2], validate=True)
    assert b"XYZZY" not in raw


def test_codec_is_shared_between_two_engines_only_through_the_ring() -> None:
    ring = KeyRing({"k1": KEY1}, active="k1")
    a, b = make_codec(ring, seed=1), make_codec(ring, seed=2)
    assert a is not b and a.ring.ids == b.ring.ids
