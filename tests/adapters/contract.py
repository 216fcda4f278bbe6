"""The client-driver contract: scenarios every runtime's ``Client`` must pass unchanged.

Each scenario takes the ``rt`` fixture (a :class:`~adapter_harness.Runtime`), so it runs
against the sync, trio and asyncio drivers alike; what it asserts (results, typed errors,
what the server received, virtual times) is therefore what the three drivers agree on.
``test_adapter_contract.py`` collects them.
"""

from __future__ import annotations

import json
import random
from typing import Any, TypeVar

import pytest
from adapter_harness import Answer, AsyncioRuntime, Outcome, Raise, Runtime, make_runtime

from mrtr_core.app import App, drive_sync
from mrtr_core.client import ClientLimits, InputNeeded, RoundFulfilled, RoundStarted, pacing_delay
from mrtr_core.client.driver import InputRequired
from mrtr_core.errors import (
    FlowDeadlineError,
    HandlerFailedError,
    HandlerTimeoutError,
    JsonRpcError,
    LegTimeoutError,
    LocalProtocolError,
    RemoteProtocolError,
    RoundLimitError,
    StructuredContentError,
    TransportClosedError,
    TransportError,
    UnsupportedInputError,
)
from mrtr_core.server import Context, accepted, content, form
from mrtr_core.state import KeyRing, StateCodec
from mrtr_core.stdio import StdinStalledError
from mrtr_core.testing import (
    ScriptedServer,
    Step,
    elicit_form,
    elicit_url,
    input_required,
    list_roots,
    sample,
    tool_result,
)
from mrtr_core.wire import (
    CreateMessageRequest,
    CreateMessageResult,
    ElicitFormRequest,
    ElicitResult,
    ListRootsRequest,
    ListRootsResult,
    Root,
)

E = TypeVar("E", bound=BaseException)

CAPS = "io.modelcontextprotocol/clientCapabilities"
VERSION = "io.modelcontextprotocol/protocolVersion"

CONFIRM = elicit_form("Deploy 1.4.2 to production?", {"confirm": {"type": "boolean"}}, ["confirm"])
TICKET = elicit_form("Change ticket number", {"ticket": {"type": "string"}}, ["ticket"])
DEPLOY_ROUND = input_required({"confirm_deploy": CONFIRM, "change_ticket": TICKET}, state="s1")
DEPLOYED = tool_result("deployed 1.4.2")

CONFIRMED = ElicitResult(action="accept", content={"confirm": True})
TICKET_DICT = {"action": "accept", "content": {"ticket": "CHG-1234"}}  # the dict form works too
CONFIRMED_WIRE = {"action": "accept", "content": {"confirm": True}}


def deploy_handlers(confirm_after: float = 0.0, ticket_after: float = 0.0) -> dict[str, Answer]:
    return {
        "confirm_deploy": Answer(CONFIRMED, after=confirm_after),
        "change_ticket": Answer(TICKET_DICT, after=ticket_after),
    }


def error_of(outcome: Outcome, kind: type[E]) -> E:
    """The outcome's error, checked to be ``kind`` and never an ``ExceptionGroup``."""
    assert not isinstance(outcome.error, BaseExceptionGroup), outcome.error
    assert isinstance(outcome.error, kind), repr(outcome.error)
    return outcome.error


def assert_fresh_legs(server: ScriptedServer) -> None:
    """Every leg: a new id, the same method and base params, a full ``_meta`` (C4, §1.7)."""
    ids = [r["id"] for r in server.requests]
    assert len(set(ids)) == len(ids)
    assert len({r["method"] for r in server.requests}) == 1
    for params in server.params:
        assert params["_meta"][VERSION] == "2026-07-28"
        assert CAPS in params["_meta"]


# --- rounds ----------------------------------------------------------------------------------


def test_two_round_deploy_production(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOY_ROUND, DEPLOYED])
    h = rt.client(server, elicitation=deploy_handlers())
    out = rt.call(h, "call_tool", "deploy_production", {"version": "1.4.2"})
    assert out.unwrap() == DEPLOYED
    first, retry = server.params
    assert_fresh_legs(server)
    assert "inputResponses" not in first and "requestState" not in first
    assert retry["inputResponses"] == {"confirm_deploy": CONFIRMED_WIRE,
                                       "change_ticket": TICKET_DICT}
    assert retry["requestState"] == "s1"
    assert retry["name"] == "deploy_production" and retry["arguments"] == {"version": "1.4.2"}
    assert retry["_meta"][CAPS] == {"elicitation": {"form": {}}}
    assert isinstance(h.requests["confirm_deploy"], ElicitFormRequest)


def test_three_rounds_carry_only_each_rounds_answers(rt: Runtime) -> None:
    summary = CreateMessageResult(role="assistant", content={"type": "text", "text": "ok"},
                                  model="m1")
    server = ScriptedServer([
        input_required({"confirm": CONFIRM}, state="s1"),
        input_required({"summary": sample("Summarise"), "workspace": list_roots()}, state="s2"),
        DEPLOYED,
    ])
    h = rt.client(
        server,
        elicitation={"confirm": Answer(CONFIRMED)},
        sampling={"summary": Answer(summary)},
        roots={"workspace": Answer(ListRootsResult(roots=[Root(uri="file:///repo")]))},
    )
    assert rt.call(h, "call_tool", "deploy_production").unwrap() == DEPLOYED
    _, second, third = server.params
    assert_fresh_legs(server)
    assert second["inputResponses"] == {"confirm": CONFIRMED_WIRE}
    assert second["requestState"] == "s1"
    assert set(third["inputResponses"]) == {"summary", "workspace"}
    assert third["inputResponses"]["workspace"] == {"roots": [{"uri": "file:///repo"}]}
    assert third["requestState"] == "s2"
    assert third["_meta"][CAPS] == {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
    assert isinstance(h.requests["summary"], CreateMessageRequest)
    assert isinstance(h.requests["workspace"], ListRootsRequest)


def test_prompt_and_resource_calls_run_rounds_too(rt: Runtime) -> None:
    prompt = {"resultType": "complete", "messages": []}
    resource = {"resultType": "complete", "contents": [], "ttlMs": 0, "cacheScope": "private"}
    server = ScriptedServer([input_required({"c": CONFIRM}, state="p"), prompt,
                             input_required({"c": CONFIRM}, state="r"), resource])
    h = rt.client(server, elicitation={"c": Answer(CONFIRMED)})
    assert rt.call(h, "get_prompt", "greet", {"who": "ann"}).unwrap() == prompt
    assert rt.call(h, "read_resource", "file:///plan.txt").unwrap() == resource
    methods = [r["method"] for r in server.requests]
    assert methods == ["prompts/get", "prompts/get", "resources/read", "resources/read"]
    assert server.params[1]["arguments"] == {"who": "ann"}
    assert server.params[3]["uri"] == "file:///plan.txt"


def test_generic_request_is_one_leg(rt: Runtime) -> None:
    server = ScriptedServer([{"resultType": "complete", "tools": []}])
    h = rt.client(server)
    assert rt.call(h, "request", "tools/list").unwrap() == {"resultType": "complete", "tools": []}
    assert server.requests[0]["method"] == "tools/list"


def test_generic_request_refuses_input_required(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOY_ROUND])
    h = rt.client(server, elicitation=deploy_handlers())
    error_of(rt.call(h, "request", "tools/list"), RemoteProtocolError)
    assert h.log == [] and len(server.requests) == 1


# --- output schemas (server/tools.mdx § Output Schema) ---------------------------------------

FORECAST_SCHEMA = {"type": "object", "properties": {"temp": {"type": "number"}},
                   "required": ["temp"]}


def listing(**schemas: Any) -> dict[str, Any]:
    """A ``tools/list`` result: one tool per name, with its ``outputSchema`` when not None."""
    tools = [{"name": name, "inputSchema": {"type": "object"}}
             | ({} if schema is None else {"outputSchema": schema})
             for name, schema in schemas.items()]
    return {"resultType": "complete", "tools": tools}


def forecast(structured: Any = None, **extra: Any) -> dict[str, Any]:
    """A ``forecast`` result, with ``structuredContent`` when not None."""
    if structured is not None:
        extra["structuredContent"] = structured
    return tool_result("forecast", **extra)


def test_a_listed_output_schema_checks_each_structured_result(rt: Runtime) -> None:
    server = ScriptedServer([listing(forecast=FORECAST_SCHEMA, other=None),
                             forecast({"temp": 21.5}), forecast({"temp": "warm"}), forecast(),
                             forecast(isError=True), tool_result("free")])
    h = rt.client(server)
    rt.call(h, "request", "tools/list").unwrap()
    assert rt.call(h, "call_tool", "forecast").unwrap() == forecast({"temp": 21.5})
    wrong = error_of(rt.call(h, "call_tool", "forecast"), StructuredContentError)
    assert wrong.tool == "forecast" and wrong.last_result == forecast({"temp": "warm"})
    assert "'warm' is not of type 'number' (at temp)" in str(wrong) and "'forecast'" in str(wrong)
    missing = error_of(rt.call(h, "call_tool", "forecast"), StructuredContentError)
    assert "no structuredContent" in str(missing) and missing.last_result == forecast()
    assert rt.call(h, "call_tool", "forecast").unwrap() == forecast(isError=True)
    assert rt.call(h, "call_tool", "other").unwrap() == tool_result("free")
    assert len(server.requests) == 6  # the client never lists on its own


def test_without_a_listing_or_with_validation_off_nothing_is_checked(rt: Runtime) -> None:
    unlisted = rt.client(ScriptedServer([forecast({"temp": "warm"})]))
    assert rt.call(unlisted, "call_tool", "forecast").unwrap() == forecast({"temp": "warm"})
    server = ScriptedServer([listing(forecast=FORECAST_SCHEMA), forecast()])
    off = rt.client(server, validate_output=False)
    rt.call(off, "request", "tools/list").unwrap()
    assert rt.call(off, "call_tool", "forecast").unwrap() == forecast()
    with pytest.raises(TypeError, match="validate_output"):
        rt.client(server, validate_output="no")


def test_a_new_listing_replaces_the_remembered_schemas(rt: Runtime) -> None:
    server = ScriptedServer([listing(forecast=FORECAST_SCHEMA), listing(forecast=None),
                             forecast()])
    h = rt.client(server)
    rt.call(h, "request", "tools/list").unwrap()
    rt.call(h, "request", "tools/list").unwrap()
    assert rt.call(h, "call_tool", "forecast").unwrap() == forecast()


def test_the_first_page_of_a_listing_alone_checks_its_tools(rt: Runtime) -> None:
    # A caller that fetches only the first page of a paged listing (it wanted a few tools)
    # still has those tools' results checked, until a whole listing is in.
    server = ScriptedServer([listing(forecast=FORECAST_SCHEMA) | {"nextCursor": "2"},
                             forecast({"temp": "warm"})])
    h = rt.client(server)
    rt.call(h, "request", "tools/list").unwrap()
    wrong = error_of(rt.call(h, "call_tool", "forecast"), StructuredContentError)
    assert wrong.last_result == forecast({"temp": "warm"})


def test_an_invalid_output_schema_from_the_server_is_not_used(rt: Runtime) -> None:
    server = ScriptedServer([listing(forecast={"type": "nope"}, looping={"$ref": "#"}),
                             forecast(), tool_result("looped", structuredContent={})])
    h = rt.client(server)
    assert len(rt.call(h, "request", "tools/list").unwrap()["tools"]) == 2
    assert rt.call(h, "call_tool", "forecast").unwrap() == forecast()
    looped = rt.call(h, "call_tool", "looping").unwrap()
    assert looped["structuredContent"] == {}
    rejected = h.client.output_schemas.rejected
    assert set(rejected) == {"forecast", "looping"}
    assert "not a valid JSON Schema 2020-12" in rejected["forecast"]


def test_manual_mode_and_resume_check_the_output_schema(rt: Runtime) -> None:
    server = ScriptedServer([listing(forecast=FORECAST_SCHEMA),
                             input_required({"c": CONFIRM}, state="s1"), forecast(),
                             input_required({"c": CONFIRM}, state="s2"), forecast({"temp": 3})])
    h = rt.client(server, auto=False, elicitation={"c": Answer(CONFIRMED)})
    rt.call(h, "request", "tools/list").unwrap()
    pending = error_of(rt.call(h, "call_tool", "forecast"), InputRequired)
    error_of(rt.call(h, "resume", pending, {"c": CONFIRMED}), StructuredContentError)
    pending = error_of(rt.call(h, "call_tool", "forecast"), InputRequired)
    saved = json.loads(json.dumps(pending.data))
    assert rt.call(h, "resume", saved, {"c": CONFIRMED}).unwrap() == forecast({"temp": 3})


# --- concurrency and cancellation ------------------------------------------------------------


def test_handlers_of_a_round_run_concurrently(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOY_ROUND, DEPLOYED])
    h = rt.client(server, elicitation=deploy_handlers(confirm_after=10, ticket_after=10))
    out = rt.call(h, "call_tool", "deploy_production")
    assert out.unwrap() == DEPLOYED
    for key in ("confirm_deploy", "change_ticket"):
        assert h.times(key, "start") == [0.0]
        assert h.times(key, "end") == [10.0]
    assert out.at == 10.0  # not 20: both ran at once


def test_first_handler_failure_cancels_its_sibling(rt: Runtime) -> None:
    boom = RuntimeError("no confirmation UI")
    server = ScriptedServer([DEPLOY_ROUND, DEPLOYED])
    h = rt.client(server, elicitation={"confirm_deploy": Raise(boom, after=1),
                                       "change_ticket": Answer(TICKET_DICT, after=10)})
    out = rt.call(h, "call_tool", "deploy_production")
    error = error_of(out, HandlerFailedError)
    assert error.key == "confirm_deploy" and error.cause is boom
    assert error.last_result.request_state == "s1"
    assert h.times("change_ticket", "cancelled") == [1.0]
    assert h.times("change_ticket", "end") == []
    assert out.at == 1.0
    assert len(server.requests) == 1  # no retry


def test_unusable_answer_fails_with_the_key(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOY_ROUND, DEPLOYED])
    h = rt.client(server, elicitation={"confirm_deploy": Answer("yes"),
                                       "change_ticket": Answer(TICKET_DICT, after=5)})
    error = error_of(rt.call(h, "call_tool", "deploy_production"), HandlerFailedError)
    assert error.key == "confirm_deploy"
    # The sibling never finishes; a sync pool may cancel it before its thread picks it up.
    assert [(t, w) for t, k, w in h.log if k == "change_ticket"] in (
        [], [(0.0, "start"), (0.0, "cancelled")]
    )
    assert len(server.requests) == 1


# --- time limits -----------------------------------------------------------------------------


def test_handler_timeout(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOY_ROUND, DEPLOYED])
    h = rt.client(server, elicitation=deploy_handlers(confirm_after=100, ticket_after=1),
                  limits=ClientLimits(handler_timeout=5))
    out = rt.call(h, "call_tool", "deploy_production")
    error = error_of(out, HandlerTimeoutError)
    assert isinstance(error, TimeoutError)
    assert error.key == "confirm_deploy" and error.limit == "handler_timeout"
    assert h.times("change_ticket", "end") == [1.0]
    assert h.times("confirm_deploy", "cancelled") == [5.0]
    assert out.at == 5.0 and len(server.requests) == 1


def test_leg_timeout(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOY_ROUND, Step(result=DEPLOYED, delay=10)])
    h = rt.client(server, latency=server.latency, elicitation=deploy_handlers(),
                  limits=ClientLimits(leg_timeout=3))
    out = rt.call(h, "call_tool", "deploy_production")
    error = error_of(out, LegTimeoutError)
    assert error.limit == "leg_timeout" and error.last_result.request_state == "s1"
    assert out.at == 3.0


def test_flow_timeout_spent_during_a_leg_invokes_no_handler(rt: Runtime) -> None:
    server = ScriptedServer([Step(result=DEPLOY_ROUND, delay=5), DEPLOYED])
    h = rt.client(server, latency=server.latency, elicitation=deploy_handlers(),
                  limits=ClientLimits(flow_timeout=5))
    out = rt.call(h, "call_tool", "deploy_production")
    error_of(out, FlowDeadlineError)
    assert h.log == []  # nobody was asked once the budget was spent
    assert out.at == 5.0 and len(server.requests) == 1


def test_flow_timeout_spans_rounds(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOY_ROUND, Step(result=DEPLOYED, delay=2)])
    h = rt.client(server, latency=server.latency,
                  elicitation=deploy_handlers(confirm_after=4, ticket_after=4))
    out = rt.call(h, "call_tool", "deploy_production", timeout=5)  # per-call override
    error = error_of(out, FlowDeadlineError)
    assert error.last_result.request_state == "s1"
    assert out.at == 5.0 and len(server.requests) == 2


# --- limits ----------------------------------------------------------------------------------


def test_round_limit_carries_the_last_result(rt: Runtime) -> None:
    server = ScriptedServer([input_required({"c": CONFIRM}, state=f"s{n}") for n in (1, 2, 3)])
    h = rt.client(server, elicitation={"c": Answer(CONFIRMED)}, limits=ClientLimits(max_rounds=10))
    out = rt.call(h, "call_tool", "loop_forever", max_rounds=2)
    error = error_of(out, RoundLimitError)
    assert error.value == 2 and error.last_result.request_state == "s2"
    assert len(server.requests) == 2
    assert len(h.times("c", "start")) == 1  # the second ask was never shown


def test_state_only_rounds_are_paced(rt: Runtime) -> None:
    server = ScriptedServer([input_required(state=f"w{n}") for n in (1, 2, 3)] + [DEPLOYED])
    limits = ClientLimits(pacing_initial=1, pacing_max=3, pacing_jitter=0)
    h = rt.client(server, limits=limits)
    out = rt.call(h, "call_tool", "long_job")
    assert out.unwrap() == DEPLOYED
    starts = [(t, c.state_only) for t, c in h.events if isinstance(c, RoundStarted)]
    assert starts == [(0.0, False), (1.0, True), (3.0, True), (6.0, True)]  # 1, 2, then capped
    assert [p.get("requestState") for p in server.params] == [None, "w1", "w2", "w3"]
    assert all("inputResponses" not in p for p in server.params)


def test_pacing_jitter_comes_from_the_seeded_source(rt: Runtime) -> None:
    server = ScriptedServer([input_required(state=f"w{n}") for n in (1, 2, 3)] + [DEPLOYED])
    limits = ClientLimits(pacing_initial=1, pacing_max=8, pacing_jitter=0.5)
    h = rt.client(server, limits=limits, random=random.Random(2026))
    assert rt.call(h, "call_tool", "long_job").unwrap() == DEPLOYED
    twin = random.Random(2026)
    expected, t = [0.0], 0.0
    for streak in (1, 2, 3):
        t += pacing_delay(streak, limits, twin.random)
        expected.append(t)
    starts = [t for t, c in h.events if isinstance(c, RoundStarted)]
    assert starts == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(("options", "message"), [
    ({"timout": 5}, "unexpected call option 'timout'"),
    ({"limits": {"max_rounds": 3}}, "limits must be a ClientLimits or None, not dict"),
    ({"auto": "no"}, "auto must be True, False or None, not str"),  # "no" read as true
])
def test_call_refuses_an_unknown_option_or_limits_of_another_type(
    rt: Runtime, options: dict[str, Any], message: str
) -> None:
    # A misspelt option was ignored: the call ran without the budget it was meant to have.
    server = ScriptedServer([DEPLOYED])
    h = rt.client(server)
    error = error_of(rt.call(h, "call_tool", "deploy_production", **options), TypeError)
    assert message in str(error)
    assert server.requests == []


# --- what the client cannot do ---------------------------------------------------------------


def test_undeclared_kind_fails_before_anything_runs_or_is_sent(rt: Runtime) -> None:
    server = ScriptedServer([input_required({"confirm": CONFIRM, "summary": sample("hi")},
                                            state="s1"), DEPLOYED])
    h = rt.client(server, elicitation={"confirm": Answer(CONFIRMED)})
    error = error_of(rt.call(h, "call_tool", "deploy_production"), UnsupportedInputError)
    assert (error.key, error.kind, error.reason) == ("summary", "sampling/createMessage",
                                                     "not declared")
    assert error.last_result.request_state == "s1"
    assert h.log == []  # not even the supported handler was asked
    assert len(server.requests) == 1  # no retry
    assert server.params[0]["_meta"][CAPS] == {"elicitation": {"form": {}}}


def test_url_elicitation_needs_the_url_mode(rt: Runtime) -> None:
    ask = input_required({"login": elicit_url("Sign in", "https://example.com/x")}, state="u")
    server = ScriptedServer([ask, ask, DEPLOYED])
    form_only = rt.client(server, elicitation={"login": Answer({"action": "accept"})})
    error = error_of(rt.call(form_only, "call_tool", "connect"), UnsupportedInputError)
    assert error.reason == "not declared" and form_only.log == []
    both = rt.client(server, elicitation={"login": Answer({"action": "accept"})},
                     elicitation_url=True)
    assert rt.call(both, "call_tool", "connect").unwrap() == DEPLOYED
    assert server.params[1]["_meta"][CAPS] == {"elicitation": {"form": {}, "url": {}}}


# --- manual mode -----------------------------------------------------------------------------


def test_manual_mode_resumes_from_saved_data(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOY_ROUND, DEPLOYED])
    h = rt.client(server, elicitation=deploy_handlers(), auto=False)
    pending = error_of(rt.call(h, "call_tool", "deploy_production"), InputRequired)
    assert set(pending.input_requests) == {"confirm_deploy", "change_ticket"}
    assert pending.round == 1 and h.log == []
    saved = json.dumps(pending.data)  # plain JSON: store it anywhere
    rt.advance(30)  # a person thinks
    later = rt.client(server)  # another client instance, no handlers needed
    answers = {"confirm_deploy": CONFIRMED, "change_ticket": TICKET_DICT}
    assert rt.call(later, "resume", json.loads(saved), answers).unwrap() == DEPLOYED
    assert_fresh_legs(server)
    assert server.params[1]["inputResponses"] == {"confirm_deploy": CONFIRMED_WIRE,
                                                  "change_ticket": TICKET_DICT}
    assert server.params[1]["requestState"] == "s1"


def test_manual_mode_per_call_and_next_round(rt: Runtime) -> None:
    server = ScriptedServer([input_required({"a": CONFIRM}, state="s1"),
                             input_required({"b": CONFIRM}, state="s2"), DEPLOYED])
    h = rt.client(server, elicitation={"a": Answer(CONFIRMED), "b": Answer(CONFIRMED)})
    first = error_of(rt.call(h, "call_tool", "deploy_production", auto=False), InputRequired)
    second = error_of(rt.call(h, "resume", first, {"a": CONFIRMED_WIRE}), InputRequired)
    assert second.round == 2 and list(second.input_requests) == ["b"]
    assert rt.call(h, "resume", second, {"b": CONFIRMED}).unwrap() == DEPLOYED
    assert h.log == [] and len(server.requests) == 3


def _manual_deploy_round(rt: Runtime) -> tuple[ScriptedServer, Any, InputRequired]:
    """A manual-mode deploy call stopped at its round of two questions: the server, the
    client handle and the pending round."""
    server = ScriptedServer([DEPLOY_ROUND, DEPLOYED])
    h = rt.client(server, auto=False, elicitation=deploy_handlers())
    return server, h, error_of(rt.call(h, "call_tool", "deploy_production"), InputRequired)


@pytest.mark.parametrize("answers", [{"confirm_deploy": CONFIRMED}, {}])
def test_resume_without_every_answer_is_refused_at_once(
    rt: Runtime, answers: dict[str, Any]
) -> None:
    server, h, pending = _manual_deploy_round(rt)
    before = rt.now()
    refused = rt.call(h, "resume", pending, answers)
    error = error_of(refused, LocalProtocolError)
    assert "'change_ticket'" in str(error)
    assert refused.at == before and len(server.requests) == 1  # no wait, nothing sent
    full = {"confirm_deploy": CONFIRMED, "change_ticket": TICKET_DICT}
    assert rt.call(h, "resume", pending, full).unwrap() == DEPLOYED  # the round is intact


@pytest.mark.parametrize("answers", [
    {"confirm_deploy": CONFIRMED, "change_ticket": TICKET_DICT, "other": CONFIRMED},
    {"confirm_deploy": {"action": "maybe"}, "change_ticket": TICKET_DICT},
])
def test_resume_with_an_unknown_key_or_a_malformed_answer_sends_nothing(
    rt: Runtime, answers: dict[str, Any]
) -> None:
    server, h, pending = _manual_deploy_round(rt)
    error = error_of(rt.call(h, "resume", pending, answers), LocalProtocolError)
    assert "'other'" in str(error) or "'confirm_deploy'" in str(error)
    assert len(server.requests) == 1


def test_a_round_is_resumed_once(rt: Runtime) -> None:
    # Its requestState goes to the server once: a second resume of the same InputRequired
    # is refused, naming why, and sends nothing (the server's single-use guard is not needed).
    server, h, pending = _manual_deploy_round(rt)
    assert not pending.resumed
    answers = {"confirm_deploy": CONFIRMED, "change_ticket": TICKET_DICT}
    assert rt.call(h, "resume", pending, answers).unwrap() == DEPLOYED
    assert pending.resumed
    again = rt.call(h, "resume", pending, answers)
    error = error_of(again, LocalProtocolError)
    assert "round 1 was already resumed" in str(error)
    assert len(server.requests) == 2


def test_a_round_is_not_resumed_again_while_its_resume_is_in_flight(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOY_ROUND, DEPLOYED])
    h = rt.client(server, auto=False, elicitation=deploy_handlers(), latency=1.0)
    pending = error_of(rt.call(h, "call_tool", "deploy_production"), InputRequired)
    answers = {"confirm_deploy": CONFIRMED, "change_ticket": TICKET_DICT}
    both = rt.gather(*[(h, "resume", (pending, answers), {})] * 2)
    refused = [o for o in both if o.error is not None]
    assert [o.result for o in both if o.error is None] == [DEPLOYED] and len(refused) == 1
    assert "round 1 was already resumed" in str(error_of(refused[0], LocalProtocolError))
    assert len(server.requests) == 2


@pytest.mark.parametrize("pending", ["round 1", None, 42, ["confirm_deploy"]])
def test_resume_of_something_not_a_pending_round_is_refused_naming_it(
    rt: Runtime, pending: Any
) -> None:
    server, h, _ = _manual_deploy_round(rt)
    answers = {"confirm_deploy": CONFIRMED, "change_ticket": TICKET_DICT}
    error = error_of(rt.call(h, "resume", pending, answers), LocalProtocolError)
    assert "InputRequired" in str(error) and type(pending).__name__ in str(error)
    assert len(server.requests) == 1


@pytest.mark.parametrize("method, args", [
    ("call_tool", ("deploy_production",)),
    ("get_prompt", ("greet",)),
    ("read_resource", ("file:///plan.txt",)),
])
def test_manual_rounds_echo_request_state_byte_for_byte(
    rt: Runtime, method: str, args: tuple[str, ...]
) -> None:
    final = {
        "call_tool": DEPLOYED,
        "get_prompt": {"resultType": "complete", "messages": []},
        "read_resource": {"resultType": "complete", "contents": []},
    }[method]
    states = ["a+/=\u00e9\u2028 \"q\"", "\U0001f680" * 3 + " \t", "x" * 2000]
    server = ScriptedServer([input_required({f"k{n}": CONFIRM}, state=state)
                             for n, state in enumerate(states)] + [final])
    h = rt.client(server, auto=False, elicitation={f"k{n}": Answer(CONFIRMED) for n in range(3)})
    pending = error_of(rt.call(h, method, *args), InputRequired)
    for n in range(3):
        assert pending.round == n + 1 and list(pending.input_requests) == [f"k{n}"]
        assert pending.result.request_state == states[n]
        stored = json.loads(json.dumps(pending.data))  # through storage and back
        outcome = rt.call(h, "resume", stored if n == 1 else pending, {f"k{n}": CONFIRMED})
        if n < 2:
            pending = error_of(outcome, InputRequired)
    assert outcome.unwrap() == final
    assert [p.get("requestState") for p in server.params] == [None, *states]
    assert [list(p.get("inputResponses", {})) for p in server.params] == [[], ["k0"], ["k1"],
                                                                          ["k2"]]
    assert h.log == []
    assert_fresh_legs(server)


def test_late_manual_answer_is_never_sent(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOY_ROUND, DEPLOYED])
    h = rt.client(server, auto=False, elicitation=deploy_handlers(),
                  limits=ClientLimits(flow_timeout=5))
    pending = error_of(rt.call(h, "call_tool", "deploy_production"), InputRequired)
    rt.advance(6)
    late = rt.call(h, "resume", pending, {"confirm_deploy": CONFIRMED,
                                          "change_ticket": TICKET_DICT})
    error_of(late, FlowDeadlineError)
    assert len(server.requests) == 1


def test_saved_data_resumes_on_another_clock_with_the_budget_it_had_left(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOY_ROUND, input_required({"a": CONFIRM}, state="s2"),
                             DEPLOYED])
    rt.advance(1000)  # the saving clock reads 1000 and more
    h = rt.client(server, auto=False, elicitation=deploy_handlers(),
                  limits=ClientLimits(flow_timeout=5))
    pending = error_of(rt.call(h, "call_tool", "deploy_production"), InputRequired)
    saved = json.dumps(pending.data)  # no time of this clock in it
    assert json.loads(saved)["flow_time_left"] == 5.0
    rt.advance(60)  # time in storage is not counted: no clock spans both processes
    elsewhere = make_runtime(rt.name)  # another process: a clock that reads 0
    try:
        later = elsewhere.client(server)
        answers = {"confirm_deploy": CONFIRMED, "change_ticket": TICKET_DICT}
        second = error_of(elsewhere.call(later, "resume", json.loads(saved), answers),
                          InputRequired)
        assert second.round == 2 and second.data["flow_time_left"] == 5.0
        assert server.params[1]["requestState"] == "s1"
        elsewhere.advance(6)  # waited on one clock: counted; the 5 s left are spent
        error_of(elsewhere.call(later, "resume", second, {"a": CONFIRMED}), FlowDeadlineError)
        assert len(server.requests) == 2
    finally:
        if isinstance(elsewhere, AsyncioRuntime):
            elsewhere.shutdown()


# --- observability ---------------------------------------------------------------------------


def test_progress_token_is_sent_on_every_leg(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOY_ROUND, DEPLOYED])
    h = rt.client(server, elicitation=deploy_handlers())
    assert rt.call(h, "call_tool", "deploy_production", progress_token="p-7").unwrap() == DEPLOYED
    assert [p["_meta"]["progressToken"] for p in server.params] == ["p-7", "p-7"]


def test_round_events_arrive_in_order(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOY_ROUND, DEPLOYED])
    h = rt.client(server, latency=1, elicitation=deploy_handlers(confirm_after=2, ticket_after=1))
    assert rt.call(h, "call_tool", "deploy_production").unwrap() == DEPLOYED
    seen = [(t, type(c).__name__, c.round) for t, c in h.events]
    assert seen == [
        (0.0, "RoundStarted", 1),
        (1.0, "InputNeeded", 1),
        (3.0, "RoundFulfilled", 1),
        (3.0, "RoundStarted", 2),
    ]
    needed = next(c for _, c in h.events if isinstance(c, InputNeeded))
    assert needed.result.request_state == "s1"
    fulfilled = next(c for _, c in h.events if isinstance(c, RoundFulfilled))
    assert fulfilled.keys == ("confirm_deploy", "change_ticket")


# --- errors from the server and the wire -----------------------------------------------------


def test_jsonrpc_error_response_raises_jsonrpc_error(rt: Runtime) -> None:
    rejected = {"code": -32602, "message": "Invalid or expired requestState",
                "data": {"reason": "invalid_request_state"}}
    server = ScriptedServer([DEPLOY_ROUND, Step(error=rejected)])
    h = rt.client(server, elicitation=deploy_handlers())
    error = error_of(rt.call(h, "call_tool", "deploy_production"), JsonRpcError)
    assert (error.code, error.message, error.data) == (-32602, rejected["message"],
                                                       rejected["data"])


def test_broken_transport_fails_only_that_call(rt: Runtime) -> None:
    servers = {
        "deploy": ScriptedServer([DEPLOY_ROUND, Step(disconnect=True)]),
        "status": ScriptedServer([input_required({"c": CONFIRM}, state="t1"), DEPLOYED]),
        "ping": ScriptedServer([tool_result("pong")]),
    }

    def route(message: dict[str, Any]) -> dict[str, Any]:
        return servers[message["params"]["name"]](message)

    h = rt.client(route, elicitation={**deploy_handlers(ticket_after=1),
                                      "c": Answer(CONFIRMED, after=3)})
    broken, fine = rt.gather((h, "call_tool", ("deploy",), {}), (h, "call_tool", ("status",), {}))
    error = error_of(broken, TransportError)
    assert isinstance(error.cause, ConnectionError) and error.__cause__ is error.cause
    assert error.last_result.request_state == "s1"
    assert fine.unwrap() == DEPLOYED and fine.at == 3.0
    assert rt.call(h, "call_tool", "ping").unwrap() == tool_result("pong")  # still usable


@pytest.mark.parametrize("limits", [ClientLimits(), ClientLimits(leg_timeout=30)])
def test_transport_failure_that_is_a_timeout_error_fails_at_once(
    rt: Runtime, limits: ClientLimits
) -> None:
    # A stdio transport whose earlier line stalled halfway raises StdinStalledError (also a
    # TimeoutError) at once on every request: the transport is broken, no time ran out.
    stalled = StdinStalledError("the server stopped reading its stdin halfway through a line")

    def server(message: dict[str, Any]) -> dict[str, Any]:
        raise stalled

    h = rt.client(server, limits=limits)
    out = rt.call(h, "call_tool", "deploy_production")
    error = error_of(out, TransportError)
    assert error.cause is stalled and error.__cause__ is stalled
    assert out.at == 0.0


def test_closed_client_fails_with_transport_error(rt: Runtime) -> None:
    server = ScriptedServer([DEPLOYED])
    h = rt.client(server)
    rt.close(h).unwrap()
    error = error_of(rt.call(h, "call_tool", "deploy_production"), TransportError)
    assert error.last_result is None and server.requests == []
    assert isinstance(error.cause, TransportClosedError)
    assert str(error.cause) == "the client was closed"  # refused before the transport


def test_closed_client_refuses_every_call_over_a_transport_that_still_accepts(
    rt: Runtime,
) -> None:
    # The client itself refuses, before anything is sent: a user's transport may go on
    # accepting requests after its close.
    server = ScriptedServer([DEPLOY_ROUND] + [DEPLOYED] * 6)
    h = rt.client(server, auto=False, elicitation=deploy_handlers(), user_transport=True)
    pending = error_of(rt.call(h, "call_tool", "deploy_production"), InputRequired)
    rt.close(h).unwrap()
    assert h.client.transport.closed
    answers = {"confirm_deploy": CONFIRMED, "change_ticket": TICKET_DICT}
    for method, args in [
        ("call_tool", ("deploy_production",)),
        ("get_prompt", ("greet",)),
        ("read_resource", ("file:///plan.txt",)),
        ("request", ("ping",)),
        ("resume", (pending, answers)),
        ("resume", (pending.data, answers)),
    ]:
        error = error_of(rt.call(h, method, *args), TransportError)
        assert type(error.cause) is TransportClosedError, method
        assert str(error.cause) == "the client was closed"
    assert len(server.requests) == 1


# --- against the real server engine ----------------------------------------------------------


def deploy_app() -> App:
    """``deploy_production`` on the real :class:`App`, sealing state with a test key."""
    ring = KeyRing({"k1": bytes(range(32))}, active="k1")
    codec = StateCodec(ring, audience="deploy-test", nonce=random.Random(7).randbytes)
    app = App("deploy", "1.0.0", codec=codec)

    @app.tool()
    def deploy_production(ctx: Context, version: str) -> str:
        answers = ctx.ask_all({
            "confirm_deploy": form(f"Deploy {version} to production?", confirm=bool),
            "change_ticket": form("Change ticket number", ticket=str),
        })
        confirmed = content(answers["confirm_deploy"]) if accepted(answers["confirm_deploy"]) \
            else None
        ticket = content(answers["change_ticket"]) or {}
        if not confirmed or confirmed.get("confirm") is not True:
            return f"{version} not deployed"
        return f"deployed {version} under {ticket.get('ticket')}"

    return app


def test_deploy_production_against_the_real_app(rt: Runtime) -> None:
    app = deploy_app()
    seen: list[dict[str, Any]] = []

    def serve(message: dict[str, Any]) -> dict[str, Any]:
        seen.append(message)
        reply = drive_sync(app, message, now=rt.now())
        assert reply.message is not None
        return reply.message

    h = rt.client(serve, latency=0.5, elicitation=deploy_handlers(confirm_after=3, ticket_after=2))
    out = rt.call(h, "call_tool", "deploy_production", {"version": "1.4.2"})
    result = out.unwrap()
    assert result["resultType"] == "complete" and not result.get("isError")
    assert result["content"] == [{"type": "text", "text": "deployed 1.4.2 under CHG-1234"}]
    assert len(seen) == 2 and seen[0]["id"] != seen[1]["id"]
    assert set(seen[1]["params"]["inputResponses"]) == {"confirm_deploy", "change_ticket"}
    assert h.times("confirm_deploy", "start") == h.times("change_ticket", "start") == [0.5]
    assert out.at == 4.0  # 0.5 + max(3, 2) + 0.5


def test_the_real_apps_listed_output_schema_is_checked(rt: Runtime) -> None:
    app = deploy_app()

    @app.tool(output_schema=FORECAST_SCHEMA)
    def forecast(ctx: Context) -> dict[str, Any]:
        return {"temp": 21.5}

    h = rt.client(lambda message: drive_sync(app, message, now=rt.now()).message or {})
    rt.call(h, "request", "tools/list").unwrap()
    assert h.client.output_schemas.schema_for("forecast") == FORECAST_SCHEMA
    assert rt.call(h, "call_tool", "forecast").unwrap()["structuredContent"] == {"temp": 21.5}
