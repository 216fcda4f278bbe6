"""The sans-IO app surface: every method, error code and HTTP status (no sockets)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conformance_helpers import Driver, error, make_codec, meta, request, result
from mrtr_sync.stdio_server import run_step as sync_run_step

from mrtr_core.app import App, Reply, RunHandler, drive_sync, http_status_for
from mrtr_core.app.drive import run_inline
from mrtr_core.app.drive_async import run_step as async_run_step
from mrtr_core.errors import JsonRpcError, LocalProtocolError
from mrtr_core.server import Context, form, roots, sample
from mrtr_core.state import MemoryReplayGuard

SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def build_app(**kwargs: Any) -> App:
    app = App("test-app", "1.2.3", codec=make_codec(), **kwargs)

    @app.tool()
    def echo(ctx: Context, text: str, times: int = 1) -> str:
        """Echo text."""
        return text * times

    @app.tool()
    def structured(ctx: Context) -> Any:
        """Returns structured data."""
        return {"answer": 42}

    @app.tool()
    def raw_result(ctx: Context) -> Any:
        """Returns a whole CallToolResult."""
        return {"content": [{"type": "text", "text": "raw"}], "resultType": "input_required"}

    @app.tool()
    def nothing(ctx: Context) -> None:
        """Returns None."""

    @app.tool()
    def boom(ctx: Context) -> str:
        """Raises."""
        raise RuntimeError("it broke")

    @app.tool()
    def rpc_error(ctx: Context) -> str:
        """Raises a JSON-RPC error."""
        raise JsonRpcError(-32602, "bad thing", {"why": "test"})

    @app.tool()
    def ask_name(ctx: Context) -> str:
        """Asks for a name."""
        answer = ctx.ask("user_name", form("Name?", name=str))
        return f"Hello, {answer.content['name']}!"  # type: ignore[index]

    @app.tool()
    def two_rounds(ctx: Context) -> str:
        """Asks twice, in two rounds."""
        first = ctx.ask("step1", form("Step 1?", name=str))
        second = ctx.ask("step2", form("Step 2?", color=str))
        return f"{first.content['name']} likes {second.content['color']}"  # type: ignore[index]

    @app.tool()
    def needs_sampling(ctx: Context) -> str:
        """Asks for sampling."""
        ctx.ask("s", sample("hi", 5))
        return "sampled"

    @app.tool()
    async def async_tool(ctx: Context, x: int) -> int:
        """An async handler that never suspends."""
        return x + 1

    @app.tool(single_use=True)
    def once_only(ctx: Context) -> str:
        """Single-use state."""
        ctx.ask("ok", form("OK?", ok=bool))
        return "done"

    @app.tool()
    def progress(ctx: Context) -> str:
        """Reports progress."""
        for value in (10, 20, 30):
            app.report_progress(ctx, value, 30, message=f"at {value}")
        return "progressed"

    @app.prompt(arguments=[{"name": "topic", "required": True}, "style"])
    def essay(ctx: Context, topic: str, style: str = "plain") -> str:
        """An essay prompt."""
        return f"Write a {style} essay about {topic}"

    @app.prompt()
    def ask_context(ctx: Context) -> Any:
        """A prompt that asks."""
        answer = ctx.ask("user_context", form("Context?", context=str))
        return [{"role": "assistant", "content": {"type": "text",
                                                  "text": answer.content["context"]}}]  # type: ignore[index]

    @app.prompt()
    def broken_prompt(ctx: Context) -> str:
        """Fails."""
        raise RuntimeError("secret detail")

    @app.resource("test://text", mime_type="text/plain", description="Some text")
    def text_resource(ctx: Context, uri: str) -> str:
        return f"text of {uri}"

    @app.resource("test://bytes", mime_type="application/octet-stream", ttl_ms=5000,
                  cache_scope="public")
    def bytes_resource(ctx: Context, uri: str) -> bytes:
        return b"\x00\x01"

    @app.resource("test://asks")
    def asking_resource(ctx: Context, uri: str) -> str:
        roots_answer = ctx.ask("client_roots", roots())
        return ",".join(r.uri for r in roots_answer.roots)  # type: ignore[union-attr]

    @app.resource("test://empty")
    def empty_resource(ctx: Context, uri: str) -> Any:
        return []

    @app.resource("test://items/{item}/detail", name="item", mime_type="application/json")
    def item_template(ctx: Context, uri: str, item: str) -> str:
        return f'{{"item": "{item}"}}'

    @app.completion()
    def complete(ref: dict[str, Any], argument: dict[str, Any], context: Any) -> list[str]:
        return [f"{argument['value']}{i}" for i in range(150)]

    return app


@pytest.fixture
def app() -> App:
    return build_app()


@pytest.fixture
def driver(app: App) -> Driver:
    return Driver(app)


# --- statuses -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [(-32700, 400), (-32600, 400), (-32602, 400), (-32020, 400), (-32021, 400),
     (-32022, 400), (-32601, 404), (-32603, 200), (-32000, 200)],
)
def test_http_status_for_each_error_code(code: int, status: int) -> None:
    assert http_status_for(code) == status


# --- envelope ---------------------------------------------------------------------------------


def test_notification_is_accepted_with_202_and_no_message(driver: Driver) -> None:
    reply = driver.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": 1}})
    assert reply == Reply(message=None, status=202)


def test_batch_is_refused_with_invalid_request(driver: Driver) -> None:
    reply = driver.send([request("tools/list")])
    assert error(reply)["code"] == -32600
    assert reply.status == 400
    assert "id" not in reply.message  # type: ignore[operator]


def test_wrong_jsonrpc_version_is_invalid_request_with_the_id(driver: Driver) -> None:
    reply = driver.send({"jsonrpc": "1.0", "id": 7, "method": "tools/list"})
    assert error(reply)["code"] == -32600
    assert reply.message["id"] == 7  # type: ignore[index]


def test_client_sending_a_response_is_invalid_request(driver: Driver) -> None:
    reply = driver.send({"jsonrpc": "2.0", "id": 3, "result": {}})
    assert error(reply)["code"] == -32600
    assert reply.status == 400


def test_error_replies_carry_the_request_id(driver: Driver) -> None:
    reply = driver.send(request("nope/nope", rid="abc"))
    assert reply.message["id"] == "abc"  # type: ignore[index]


# --- per-request _meta and versions ----------------------------------------------------------


def test_missing_meta_is_invalid_params_400(driver: Driver) -> None:
    reply = driver.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}})
    assert error(reply)["code"] == -32602
    assert reply.status == 400


def test_request_without_params_is_missing_meta(driver: Driver) -> None:
    reply = driver.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert error(reply)["code"] == -32602
    assert reply.status == 400


@pytest.mark.parametrize("dropped", ["io.modelcontextprotocol/protocolVersion",
                                     "io.modelcontextprotocol/clientCapabilities"])
def test_meta_missing_a_required_key_is_invalid_params_400(driver: Driver, dropped: str) -> None:
    m = meta()
    del m[dropped]
    reply = driver.send(request("server/discover", {"_meta": m}))
    assert error(reply)["code"] == -32602
    assert dropped in error(reply)["message"]
    assert reply.status == 400


def test_client_info_is_optional(driver: Driver) -> None:
    m = meta()
    del m["io.modelcontextprotocol/clientInfo"]
    assert result(driver.send(request("server/discover", {"_meta": m})))["resultType"] == "complete"


def test_unsupported_version_is_32022_with_supported_and_requested(driver: Driver) -> None:
    m = meta()
    m["io.modelcontextprotocol/protocolVersion"] = "2025-11-25"
    reply = driver.send(request("server/discover", {"_meta": m}))
    assert error(reply) == {"code": -32022, "message": "Unsupported protocol version",
                            "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"}}
    assert reply.status == 400


def test_meta_is_checked_before_the_method_exists(driver: Driver) -> None:
    reply = driver.send({"jsonrpc": "2.0", "id": 1, "method": "no/such", "params": {}})
    assert error(reply)["code"] == -32602


def test_version_is_checked_before_the_method_exists(driver: Driver) -> None:
    m = meta()
    m["io.modelcontextprotocol/protocolVersion"] = "1999-01-01"
    assert error(driver.send(request("no/such", {"_meta": m})))["code"] == -32022


# --- removed and unknown methods --------------------------------------------------------------


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "resources/subscribe",
                                    "resources/unsubscribe", "subscriptions/listen",
                                    "unknown/method"])
def test_removed_and_unknown_methods_are_32601_404(driver: Driver, method: str) -> None:
    reply = driver.call(method)
    assert error(reply)["code"] == -32601
    assert reply.status == 404


def test_initialize_is_32601_naming_supported_versions_even_without_meta(driver: Driver) -> None:
    reply = driver.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"protocolVersion": "2025-11-25", "capabilities": {}}})
    assert error(reply)["code"] == -32601
    assert error(reply)["data"] == {"supported": ["2026-07-28"]}
    assert reply.status == 404


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "resources/subscribe"])
def test_removed_methods_are_32601_even_without_meta(driver: Driver, method: str) -> None:
    # A legacy client sends them without modern _meta: they are named as removed, not
    # answered -32602 for the _meta they could never have carried.
    reply = driver.send({"jsonrpc": "2.0", "id": 1, "method": method})
    assert error(reply) == {"code": -32601,
                            "message": f"method {method!r} was removed in 2026-07-28"}
    assert reply.status == 404
    unknown = driver.send({"jsonrpc": "2.0", "id": 2, "method": "unknown/method"})
    assert error(unknown)["code"] == -32602  # any other method: _meta is checked first


def test_methods_of_unadvertised_capabilities_are_32601() -> None:
    bare = Driver(App("bare", "1", codec=make_codec()))
    caps = result(bare.call("server/discover"))["capabilities"]
    assert caps == {}
    for method in ("tools/list", "tools/call", "prompts/list", "prompts/get",
                   "resources/list", "resources/read", "resources/templates/list",
                   "completion/complete"):
        reply = bare.call(method)
        assert error(reply)["code"] == -32601, method
        assert reply.status == 404


# --- server/discover ---------------------------------------------------------------------------


def test_discover_result_fields(driver: Driver) -> None:
    res = result(driver.call("server/discover"))
    assert res["supportedVersions"] == ["2026-07-28"]
    assert res["capabilities"] == {"completions": {}, "prompts": {}, "resources": {}, "tools": {}}
    assert res["ttlMs"] == 0
    assert res["cacheScope"] == "private"
    assert res["resultType"] == "complete"
    assert res["_meta"][SERVER_INFO] == {"name": "test-app", "version": "1.2.3"}
    assert "instructions" not in res


def test_discover_instructions_and_cache_hints() -> None:
    d = Driver(build_app(instructions="Be nice.", ttl_ms=60_000, cache_scope="public"))
    res = result(d.call("server/discover"))
    assert res["instructions"] == "Be nice."
    assert (res["ttlMs"], res["cacheScope"]) == (60_000, "public")


def test_server_info_can_be_left_out() -> None:
    d = Driver(build_app(server_info=False))
    assert "_meta" not in result(d.call("server/discover"))
    assert "_meta" not in result(d.call("tools/call", {"name": "echo",
                                                       "arguments": {"text": "a"}}))


# --- lists -------------------------------------------------------------------------------------


def test_tools_list_is_deterministic_with_object_schemas(driver: Driver) -> None:
    first = result(driver.call("tools/list"))
    second = result(driver.call("tools/list"))
    assert first["tools"] == second["tools"]
    names = [t["name"] for t in first["tools"]]
    assert names[:3] == ["echo", "structured", "raw_result"]
    assert all(t["inputSchema"]["type"] == "object" for t in first["tools"])
    assert (first["ttlMs"], first["cacheScope"], first["resultType"]) == (0, "private", "complete")
    echo = first["tools"][0]
    assert echo["description"] == "Echo text."
    assert echo["inputSchema"] == {
        "type": "object",
        "properties": {"text": {"type": "string"}, "times": {"type": "integer"}},
        "required": ["text"],
        "additionalProperties": False,
    }


def test_prompts_list_declares_arguments(driver: Driver) -> None:
    prompts = result(driver.call("prompts/list"))["prompts"]
    essay = next(p for p in prompts if p["name"] == "essay")
    assert essay == {"name": "essay", "description": "An essay prompt.", "arguments": [
        {"name": "topic", "required": True}, {"name": "style", "required": True}]}


def test_resources_and_templates_lists(driver: Driver) -> None:
    resources = result(driver.call("resources/list"))
    assert resources["resources"][0] == {"uri": "test://text", "name": "text_resource",
                                         "description": "Some text", "mimeType": "text/plain"}
    assert "cacheScope" in resources and "ttlMs" in resources
    templates = result(driver.call("resources/templates/list"))
    assert templates["resourceTemplates"] == [{"uriTemplate": "test://items/{item}/detail",
                                               "name": "item", "mimeType": "application/json"}]


def test_a_list_cursor_is_invalid_params(driver: Driver) -> None:
    reply = driver.call("tools/list", {"cursor": "abc"})
    assert error(reply)["code"] == -32602


def test_lists_and_discover_never_answer_input_required(driver: Driver) -> None:
    for method in ("server/discover", "tools/list", "prompts/list", "resources/list",
                   "resources/templates/list"):
        assert result(driver.call(method))["resultType"] == "complete"


# --- tools/call ----------------------------------------------------------------------------------


def call_tool(driver: Driver, name: str, arguments: dict[str, Any] | None = None,
              **params: Any) -> Reply:
    return driver.call("tools/call", {"name": name, "arguments": arguments or {}, **params})


def test_tool_string_becomes_text_content(driver: Driver) -> None:
    res = result(call_tool(driver, "echo", {"text": "ab", "times": 2}))
    assert res["content"] == [{"type": "text", "text": "abab"}]
    assert res["resultType"] == "complete"
    assert res["_meta"][SERVER_INFO]["name"] == "test-app"


def test_tool_json_value_becomes_text_and_structured_content(driver: Driver) -> None:
    res = result(call_tool(driver, "structured"))
    assert res["content"] == [{"type": "text", "text": '{"answer": 42}'}]
    assert res["structuredContent"] == {"answer": 42}


def test_tool_result_mapping_is_kept_but_result_type_is_complete(driver: Driver) -> None:
    res = result(call_tool(driver, "raw_result"))
    assert res["content"] == [{"type": "text", "text": "raw"}]
    assert res["resultType"] == "complete"


def test_tool_returning_none_has_empty_content(driver: Driver) -> None:
    assert result(call_tool(driver, "nothing"))["content"] == []


def test_tool_exception_is_an_is_error_result_not_a_jsonrpc_error(driver: Driver) -> None:
    res = result(call_tool(driver, "boom"))
    assert res["isError"] is True
    assert res["content"] == [{"type": "text", "text": "it broke"}]


def test_tool_raising_jsonrpc_error_is_a_jsonrpc_error(driver: Driver) -> None:
    reply = call_tool(driver, "rpc_error")
    assert error(reply) == {"code": -32602, "message": "bad thing", "data": {"why": "test"}}
    assert reply.status == 400


def test_unknown_tool_is_invalid_params_400(driver: Driver) -> None:
    reply = call_tool(driver, "no_such_tool")
    assert error(reply)["code"] == -32602
    assert "no_such_tool" in error(reply)["message"]
    assert reply.status == 400


@pytest.mark.parametrize("arguments", [{}, {"text": 3}, {"text": "a", "extra": 1}])
def test_arguments_not_matching_the_schema_are_invalid_params(
    driver: Driver, arguments: dict[str, Any]
) -> None:
    reply = call_tool(driver, "echo", arguments)
    assert error(reply)["code"] == -32602
    assert "echo" in error(reply)["message"]


def test_malformed_tool_params_are_invalid_params(driver: Driver) -> None:
    reply = driver.call("tools/call", {"name": 5})
    assert error(reply)["code"] == -32602


def test_async_handler_without_suspension_runs_in_drive_sync(driver: Driver) -> None:
    assert result(call_tool(driver, "async_tool", {"x": 1}))["structuredContent"] == 2


# --- MRTR ---------------------------------------------------------------------------------


def test_tool_round_trip_input_required_then_complete(driver: Driver) -> None:
    first = result(call_tool(driver, "ask_name"))
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["user_name"]["method"] == "elicitation/create"
    assert isinstance(first["requestState"], str)
    assert first["_meta"][SERVER_INFO]["version"] == "1.2.3"
    second = result(call_tool(
        driver, "ask_name", requestState=first["requestState"],
        inputResponses={"user_name": {"action": "accept", "content": {"name": "Ada"}}}))
    assert second["resultType"] == "complete"
    assert second["content"] == [{"type": "text", "text": "Hello, Ada!"}]


def test_three_rounds_change_the_state_every_round(driver: Driver) -> None:
    r1 = result(call_tool(driver, "two_rounds"))
    r2 = result(call_tool(driver, "two_rounds", requestState=r1["requestState"],
                          inputResponses={"step1": {"action": "accept",
                                                    "content": {"name": "Al"}}}))
    assert list(r2["inputRequests"]) == ["step2"]
    assert r2["requestState"] != r1["requestState"]
    r3 = result(call_tool(driver, "two_rounds", requestState=r2["requestState"],
                          inputResponses={"step2": {"action": "accept",
                                                    "content": {"color": "red"}}}))
    assert r3["content"][0]["text"] == "Al likes red"


def test_tampered_state_is_invalid_params_400(driver: Driver) -> None:
    first = result(call_tool(driver, "ask_name"))
    reply = call_tool(driver, "ask_name", requestState=first["requestState"] + "-TAMPERED",
                      inputResponses={"user_name": {"action": "accept",
                                                    "content": {"name": "x"}}})
    assert error(reply) == {"code": -32602, "message": "Invalid or expired requestState",
                            "data": {"reason": "invalid_request_state"}}
    assert reply.status == 400


def test_state_for_another_tool_is_refused(driver: Driver) -> None:
    first = result(call_tool(driver, "ask_name"))
    reply = call_tool(driver, "two_rounds", requestState=first["requestState"])
    assert error(reply)["code"] == -32602


def test_unknown_tool_is_reported_before_the_state_is_checked(driver: Driver) -> None:
    reply = call_tool(driver, "no_such_tool", requestState="garbage")
    assert "no_such_tool" in error(reply)["message"]


@pytest.mark.parametrize("state", [12345, True, ["v1.k1.AAAA"], {"step": 1}])
def test_a_state_that_is_not_a_string_is_refused_like_a_tampered_one(
    driver: Driver, state: Any
) -> None:
    # The server only ever issues strings: anything else fails verification (S9, S10) and
    # gets the one reply every refused requestState gets (digest §2.5).
    reply = call_tool(driver, "ask_name", requestState=state,
                      inputResponses={"user_name": {"action": "accept",
                                                    "content": {"name": "x"}}})
    assert error(reply) == {"code": -32602, "message": "Invalid or expired requestState",
                            "data": {"reason": "invalid_request_state"}}
    assert reply.status == 400


def test_the_tool_and_its_arguments_are_checked_before_a_state_that_is_not_a_string(
    driver: Driver,
) -> None:
    # Validation order (digest §3.5): the method's params (6) before requestState (7).
    unknown = call_tool(driver, "no_such_tool", requestState=12345)
    assert "no_such_tool" in error(unknown)["message"]
    bad_arguments = call_tool(driver, "echo", {"text": 3}, requestState=12345)
    assert "invalid arguments" in error(bad_arguments)["message"]


def test_malformed_input_response_is_invalid_params(driver: Driver) -> None:
    first = result(call_tool(driver, "ask_name"))
    reply = call_tool(driver, "ask_name", requestState=first["requestState"],
                      inputResponses={"user_name": 12345})
    assert error(reply)["code"] == -32602
    assert reply.status == 400


def test_missing_capability_is_32021_with_required_capabilities(driver: Driver) -> None:
    reply = driver.call("tools/call", {"name": "needs_sampling", "arguments": {}},
                        capabilities={})
    assert error(reply)["code"] == -32021
    assert error(reply)["data"]["requiredCapabilities"] == {"sampling": {}}
    assert reply.status == 400


def test_single_use_state_is_refused_the_second_time(driver: Driver) -> None:
    first = result(call_tool(driver, "once_only"))
    answer = {"ok": {"action": "accept", "content": {"ok": True}}}
    ok = result(call_tool(driver, "once_only", requestState=first["requestState"],
                          inputResponses=answer))
    assert ok["content"][0]["text"] == "done"
    again = call_tool(driver, "once_only", requestState=first["requestState"],
                      inputResponses=answer)
    assert error(again)["code"] == -32602
    assert again.status == 400


def _answered_retry(app: App, tool: str) -> dict[str, Any]:
    """The retry of a first call of ``tool`` (which asks ``ok``), answered, with its state."""
    first = drive_sync(app, request("tools/call", {"name": tool, "arguments": {}}),
                       now=1_000.0)
    state = first.message["result"]["requestState"]  # type: ignore[index]
    return request("tools/call", {"name": tool, "arguments": {}, "requestState": state,
                                  "inputResponses": {"ok": {"action": "accept",
                                                            "content": {"ok": True}}}}, rid=2)


def test_single_use_handler_without_a_guard_is_a_driver_error(app: App) -> None:
    retry = _answered_retry(app, "once_only")
    with pytest.raises(LocalProtocolError):
        drive_sync(app, retry, now=1_001.0)


class _AsyncGuard:
    """An async replay guard (right for the async servers, wrong for a sync one)."""

    def __init__(self) -> None:
        self._memory = MemoryReplayGuard()

    async def claim(self, token_id: str, expires_at: float, now: float) -> bool:
        return self._memory.claim(token_id, expires_at, now)


class _OkGuard:
    """A guard that answers a raw Redis reply instead of True or False."""

    def claim(self, token_id: str, expires_at: float, now: float) -> Any:
        return "OK"


def test_a_guard_answer_that_is_no_verdict_fails_every_app_driver_closed() -> None:
    """A sync driver given an async guard gets an un-awaited coroutine from its claim, and
    a guard may answer "OK": both are truthy, and read as won claims they let every replay
    of a single-use state run the handler again. Each driver raises a TypeError instead
    (the servers answer -32603) and the handler does not run."""
    app = App("test-app", "1.2.3", codec=make_codec())
    runs = []

    @app.tool(single_use=True)
    def redeem(ctx: Context) -> str:
        """Single-use state, counted."""
        runs.append(1)
        ctx.ask("ok", form("OK?", ok=bool))
        return "done"

    retry = _answered_retry(app, "redeem")

    def step() -> RunHandler:
        received = app.receive(retry, now=1_001.0)
        assert isinstance(received, RunHandler)
        return received

    drivers: list[Callable[[Any], object]] = [
        lambda guard: drive_sync(app, retry, now=1_001.0, guard=guard),
        lambda guard: sync_run_step(app, step(), clock=lambda: 1_001.0, guard=guard),
    ]
    for drive in drivers:
        for guard in (_AsyncGuard(), _OkGuard()):
            with pytest.raises(TypeError, match=r"coroutine|str"):
                drive(guard)
    with pytest.raises(TypeError, match="str"):
        run_inline(async_run_step(app, step(), clock=lambda: 1_001.0, guard=_OkGuard()))
    assert runs == [1]


def test_prompt_round_trip(driver: Driver) -> None:
    first = result(driver.call("prompts/get", {"name": "ask_context"}))
    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["user_context"]
    second = result(driver.call("prompts/get", {
        "name": "ask_context", "requestState": first["requestState"],
        "inputResponses": {"user_context": {"action": "accept", "content": {"context": "c"}}}}))
    assert second["messages"] == [{"role": "assistant", "content": {"type": "text", "text": "c"}}]
    assert second["resultType"] == "complete"


def test_resource_round_trip_with_cache_hints_only_on_complete(driver: Driver) -> None:
    first = result(driver.call("resources/read", {"uri": "test://asks"}))
    assert first["resultType"] == "input_required"
    assert "ttlMs" not in first and "cacheScope" not in first
    second = result(driver.call("resources/read", {
        "uri": "test://asks", "requestState": first["requestState"],
        "inputResponses": {"client_roots": {"roots": [{"uri": "file:///a"}]}}}))
    assert second["contents"] == [{"uri": "test://asks", "text": "file:///a"}]
    assert (second["ttlMs"], second["cacheScope"]) == (0, "private")


# --- prompts/get -------------------------------------------------------------------------------


def test_prompt_string_arguments_fill_the_message(driver: Driver) -> None:
    res = result(driver.call("prompts/get", {"name": "essay",
                                             "arguments": {"topic": "owls", "style": "short"}}))
    assert res["messages"] == [{"role": "user", "content": {
        "type": "text", "text": "Write a short essay about owls"}}]


def test_prompt_missing_required_argument_is_invalid_params(driver: Driver) -> None:
    reply = driver.call("prompts/get", {"name": "essay", "arguments": {"style": "x"}})
    assert error(reply)["code"] == -32602
    assert "topic" in error(reply)["message"]


def test_prompt_non_string_argument_is_invalid_params(driver: Driver) -> None:
    reply = driver.call("prompts/get", {"name": "essay", "arguments": {"topic": 1}})
    assert error(reply)["code"] == -32602


def test_unknown_prompt_is_invalid_params(driver: Driver) -> None:
    assert error(driver.call("prompts/get", {"name": "nope"}))["code"] == -32602


def test_prompt_exception_is_internal_error_without_its_text(driver: Driver) -> None:
    reply = driver.call("prompts/get", {"name": "broken_prompt"})
    assert error(reply)["code"] == -32603
    assert "secret" not in error(reply)["message"]
    assert reply.status == 200


# --- resources/read ----------------------------------------------------------------------------


def test_read_text_resource(driver: Driver) -> None:
    res = result(driver.call("resources/read", {"uri": "test://text"}))
    assert res["contents"] == [{"uri": "test://text", "mimeType": "text/plain",
                                "text": "text of test://text"}]
    assert res["resultType"] == "complete"


def test_read_bytes_resource_as_blob_with_its_cache_hints(driver: Driver) -> None:
    res = result(driver.call("resources/read", {"uri": "test://bytes"}))
    assert res["contents"][0]["blob"] == "AAE="
    assert (res["ttlMs"], res["cacheScope"]) == (5000, "public")


def test_read_template_passes_variables(driver: Driver) -> None:
    res = result(driver.call("resources/read", {"uri": "test://items/42/detail"}))
    assert res["contents"][0]["text"] == '{"item": "42"}'


def test_resource_not_found_is_invalid_params_with_uri(driver: Driver) -> None:
    reply = driver.call("resources/read", {"uri": "test://missing"})
    assert error(reply) == {"code": -32602, "message": "Resource not found",
                            "data": {"uri": "test://missing"}}
    assert reply.status == 400


def test_empty_contents_are_an_internal_error(driver: Driver) -> None:
    assert error(driver.call("resources/read", {"uri": "test://empty"}))["code"] == -32603


@pytest.mark.parametrize(("hints", "message"), [
    ({"ttlMs": -5}, "ttlMs must be an integer of at least 0, not -5"),
    ({"ttlMs": 1.5}, "ttlMs must be an integer of at least 0, not 1.5"),
    ({"ttlMs": True}, "ttlMs must be an integer of at least 0, not True"),
    ({"cacheScope": "everyone"}, "cacheScope must be 'public' or 'private', not 'everyone'"),
])
def test_a_resource_result_with_bad_cache_hints_is_an_internal_error(
    hints: dict[str, Any], message: str
) -> None:
    # caching.mdx (digest §3.2): ttlMs is an integer >= 0, cacheScope public or private.
    app = App("x", "1", codec=make_codec())

    @app.resource("test://hinted")
    def hinted(ctx: Context, uri: str) -> Any:
        return {"contents": [{"uri": "test://hinted", "text": "t"}], **hints}

    reply = Driver(app).call("resources/read", {"uri": "test://hinted"})
    assert error(reply)["code"] == -32603
    assert message in error(reply)["message"]


@pytest.mark.parametrize("item", [
    {"uri": "test://built", "text": 5},
    {"uri": "test://built", "text": None},
    {"uri": "test://built", "blob": ["AAE="]},
    {"uri": "test://built", "blob": b"raw"},
    {"uri": "test://built", "text": "t", "mimeType": 5},
    {"uri": "test://built", "text": "t", "blob": 5},
])
def test_a_resource_contents_item_of_the_wrong_types_is_an_internal_error(
    item: dict[str, Any],
) -> None:
    # ReadResourceResult.contents (digest §1.3): text and blob are strings, and so is
    # mimeType when given; a client checking the schema refuses anything else.
    app = App("x", "1", codec=make_codec())

    @app.resource("test://built")
    def built(ctx: Context, uri: str) -> Any:
        return [item]

    reply = Driver(app).call("resources/read", {"uri": "test://built"})
    assert error(reply)["code"] == -32603
    assert "handler returned an invalid result: contents" in error(reply)["message"]


@pytest.mark.parametrize(("ttl_ms", "cache_scope"), [(-1, "private"), (True, "private"),
                                                     (1.0, "private"), (0, "shared")])
def test_declared_cache_hints_are_checked_when_declared(ttl_ms: Any, cache_scope: Any) -> None:
    with pytest.raises(ValueError, match=r"^(ttlMs|cacheScope) must be"):
        App("x", "1", codec=make_codec(), ttl_ms=ttl_ms, cache_scope=cache_scope)
    app = App("x", "1", codec=make_codec())
    with pytest.raises(ValueError, match=r"^(ttlMs|cacheScope) must be"):
        app.resource("test://r", ttl_ms=ttl_ms, cache_scope=cache_scope)(lambda ctx, uri: "")


# --- completion ----------------------------------------------------------------------------------


def test_completion_caps_values_at_100(driver: Driver) -> None:
    res = result(driver.call("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "essay"},
        "argument": {"name": "topic", "value": "o"}}))
    assert len(res["completion"]["values"]) == 100
    assert res["completion"]["hasMore"] is True
    assert res["completion"]["total"] == 150


def test_completion_with_bad_ref_is_invalid_params(driver: Driver) -> None:
    reply = driver.call("completion/complete", {"ref": {"type": "ref/other"},
                                                "argument": {"name": "a", "value": "b"}})
    assert error(reply)["code"] == -32602


@pytest.mark.parametrize(("ref", "problem"), [
    # PromptReference.name is a string; ResourceTemplateReference.uri has format
    # "uri-template" (schema.json): RFC 6570 braces around non-empty expressions.
    ({"type": "ref/prompt"}, "ref.name must be a string"),
    ({"type": "ref/prompt", "name": 5}, "ref.name must be a string"),
    ({"type": "ref/resource"}, "ref.uri must be a URI template"),
    ({"type": "ref/resource", "uri": ["test://items/{item}"]}, "ref.uri must be a URI template"),
    ({"type": "ref/resource", "uri": "test://items/{item"}, "ref.uri must be a URI template"),
    ({"type": "ref/resource", "uri": "test://items/{}/detail"}, "ref.uri must be a URI template"),
    ({"type": "ref/resource", "uri": "test://items/}"}, "ref.uri must be a URI template"),
    ({"type": "ref/resource", "uri": "test://items/{item}/a b"},
     "ref.uri must be a URI template"),
])
def test_completion_with_a_ref_member_out_of_its_type_or_format_is_invalid_params(
    driver: Driver, ref: dict[str, Any], problem: str
) -> None:
    reply = driver.call("completion/complete", {"ref": ref,
                                                "argument": {"name": "a", "value": "b"}})
    assert error(reply)["code"] == -32602
    assert problem in error(reply)["message"]


@pytest.mark.parametrize("uri", ["test://items/{item}/detail", "test://items/1/detail",
                                 "{+base}/items{?q,lang}"])
def test_completion_of_a_resource_template_reaches_the_completer(
    driver: Driver, uri: str
) -> None:
    res = result(driver.call("completion/complete", {
        "ref": {"type": "ref/resource", "uri": uri}, "argument": {"name": "item", "value": "a"}}))
    assert res["completion"]["values"][:2] == ["a0", "a1"]


# --- progress ------------------------------------------------------------------------------------


def test_progress_notifications_are_delivered_before_the_reply(driver: Driver) -> None:
    m = meta(progressToken="tok-1")
    reply = driver.send(request("tools/call", {"name": "progress", "arguments": {}, "_meta": m}))
    assert result(reply)["content"][0]["text"] == "progressed"
    assert [n["params"] for n in reply.notifications] == [
        {"progressToken": "tok-1", "progress": v, "total": 30, "message": f"at {v}"}
        for v in (10, 20, 30)
    ]
    assert all(n["method"] == "notifications/progress" for n in reply.notifications)


def test_no_progress_notifications_without_a_token(driver: Driver) -> None:
    reply = call_tool(driver, "progress")
    assert reply.notifications == ()


def test_progress_must_increase(app: App) -> None:
    step = app.receive(request("tools/call", {"name": "echo", "arguments": {"text": "a"}}),
                       now=1.0)
    assert isinstance(step, RunHandler)
    app.report_progress(step.run.context, 5)
    with pytest.raises(ValueError, match="increase"):
        app.report_progress(step.run.context, 5)


@pytest.mark.parametrize(
    ("total", "message", "named"),
    [
        (float("nan"), None, "total"),
        (float("inf"), None, "total"),
        (True, None, "total"),
        ("30", None, "total"),
        (None, 5, "message"),
        (None, b"half way", "message"),
    ],
)
def test_progress_refuses_a_total_or_message_it_could_not_send(
    app: App, total: object, message: object, named: str
) -> None:
    # progress.mdx: total is a number and message a string. A notification holding NaN or
    # bytes cannot be written at all (RFC 8259 §6), so a transport writing it fails after
    # the handler is done; the handler is told where it reports instead.
    m = meta(progressToken="tok-1")
    step = app.receive(request("tools/call", {"name": "echo", "arguments": {"text": "a"},
                                              "_meta": m}), now=1.0)
    assert isinstance(step, RunHandler)
    with pytest.raises(ValueError, match=named):
        app.report_progress(step.run.context, 1, total, message)  # type: ignore[arg-type]
    assert step.notifications == ()
    app.report_progress(step.run.context, 1, 30, "at 1")  # the refused call counted for nothing
    assert [n["params"] for n in step.notifications] == [
        {"progressToken": "tok-1", "progress": 1, "total": 30, "message": "at 1"}
    ]


def test_progress_outside_a_running_handler_is_refused(app: App) -> None:
    step = app.receive(request("tools/call", {"name": "echo", "arguments": {"text": "a"}}),
                       now=1.0)
    assert isinstance(step, RunHandler)
    app.complete(step, 1.0, returned="a")
    with pytest.raises(LocalProtocolError):
        app.report_progress(step.run.context, 1)


@pytest.mark.parametrize("ctx", [None, "ctx", 3, ["a list"], {"a": "dict"}])
def test_progress_for_something_that_is_no_context_is_refused_the_same_way(
    app: App, ctx: object
) -> None:
    with pytest.raises(LocalProtocolError, match="not the context of a running handler"):
        app.report_progress(ctx, 1)


# --- the step protocol ---------------------------------------------------------------------------


def test_receive_returns_a_run_handler_for_the_three_mrtr_methods(app: App) -> None:
    step = app.receive(request("tools/call", {"name": "echo", "arguments": {"text": "z"}},
                               rid=9), now=1.0)
    assert isinstance(step, RunHandler)
    assert (step.method, step.target, step.request_id) == ("tools/call", "echo", 9)
    assert step.invoke() == "z"
    reply = app.complete(step, 1.0, returned="z")
    assert reply.message["result"]["content"] == [{"type": "text", "text": "z"}]  # type: ignore[index]


def test_complete_twice_is_a_local_error(app: App) -> None:
    step = app.receive(request("tools/call", {"name": "echo", "arguments": {"text": "z"}}),
                       now=1.0)
    assert isinstance(step, RunHandler)
    app.complete(step, 1.0, returned="z")
    with pytest.raises(LocalProtocolError):
        app.complete(step, 1.0, returned="z")


def test_complete_needs_exactly_one_outcome(app: App) -> None:
    step = app.receive(request("tools/call", {"name": "echo", "arguments": {"text": "z"}}),
                       now=1.0)
    assert isinstance(step, RunHandler)
    with pytest.raises(LocalProtocolError):
        app.complete(step, 1.0)
    with pytest.raises(LocalProtocolError):
        app.complete(step, 1.0, returned="z", raised=RuntimeError())


def test_replayed_reply_when_the_guard_refuses(app: App) -> None:
    guard = MemoryReplayGuard()
    first = drive_sync(app, request("tools/call", {"name": "once_only", "arguments": {}}),
                       now=1_000.0, guard=guard)
    state = first.message["result"]["requestState"]  # type: ignore[index]
    retry = request("tools/call", {"name": "once_only", "arguments": {}, "requestState": state,
                                   "inputResponses": {"ok": {"action": "accept",
                                                             "content": {"ok": True}}}})
    step = app.receive(retry, now=1_001.0)
    assert isinstance(step, RunHandler)
    assert step.run.claim is not None
    assert guard.claim(*step.run.claim, 1_001.0)
    assert not guard.claim(*step.run.claim, 1_001.0)
    reply = app.replayed(step)
    assert error(reply)["code"] == -32602


# --- registration ---------------------------------------------------------------------------------


def test_duplicate_tool_names_are_refused() -> None:
    app = App("x", "1", codec=make_codec())

    @app.tool()
    def t(ctx: Context) -> str:
        return ""

    with pytest.raises(ValueError, match="already registered"):
        app.tool(name="t")(lambda ctx: "")


def test_tool_names_must_follow_the_naming_rule() -> None:
    app = App("x", "1", codec=make_codec())
    with pytest.raises(ValueError, match="tool name"):
        app.tool(name="bad name!")(lambda ctx: "")


def test_an_empty_name_is_refused_not_replaced_by_the_function_name() -> None:
    # As for a tool, whose name is 1-128 characters: an empty name is a mistake, and
    # registering the function's name instead would list a prompt or resource nobody named.
    app = App("x", "1", codec=make_codec())

    def handler(ctx: Context, uri: str = "") -> str:
        return ""

    with pytest.raises(ValueError, match="tool name '' must be 1-128 characters"):
        app.tool(name="")(handler)
    with pytest.raises(ValueError, match=r"^a prompt needs a name$"):
        app.prompt(name="")(handler)
    with pytest.raises(ValueError, match=r"^resource 'test://r': name must not be empty$"):
        app.resource("test://r", name="")(handler)
    with pytest.raises(ValueError, match=r"^resource 'test://\{id\}': name must not be empty$"):
        app.resource("test://{id}", name="")(lambda ctx, uri, id: "")
    assert app.capabilities() == {}


def test_input_schema_must_be_an_object_schema() -> None:
    app = App("x", "1", codec=make_codec())
    with pytest.raises(ValueError, match="type 'object'"):
        app.tool(name="s", input_schema={"type": "string"})(lambda ctx: "")


@pytest.mark.parametrize(
    ("properties", "problem"),
    [
        ({"n": {"type": "number", "x-mcp-header": "N"}}, "type string, integer or boolean"),
        ({"a": {"type": "string", "x-mcp-header": "Bad Name"}}, "not an HTTP token"),
        ({"a": {"type": "string", "x-mcp-header": "R"},
          "b": {"type": "string", "x-mcp-header": "r"}}, "used twice"),
        ({"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}},
         "reachable via 'properties'"),
    ],
)
def test_invalid_x_mcp_header_annotations_are_refused(
    properties: dict[str, Any], problem: str
) -> None:
    # server/tools.mdx § x-mcp-header: every HTTP client MUST drop such a tool from
    # tools/list, so serving it would publish a tool no HTTP client can call.
    app = App("x", "1", codec=make_codec())
    schema = {"type": "object", "properties": properties}
    with pytest.raises(ValueError, match=rf"^tool 'h': .*{problem}"):
        app.tool(name="h", input_schema=schema)(lambda ctx, **kw: "")
    assert app.tools == ()


def test_handler_needs_a_context_parameter() -> None:
    app = App("x", "1", codec=make_codec())
    with pytest.raises(TypeError, match="context"):
        app.tool(name="noctx")(lambda: "")


def test_tool_header_params_lists_x_mcp_header_arguments() -> None:
    app = App("x", "1", codec=make_codec())

    @app.tool(input_schema={"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}, "q": {"type": "string"}}})
    def h(ctx: Context, region: str = "", q: str = "") -> str:
        return region

    assert app.tool_header_params("h") == {"region": "Region"}
    assert app.tool_header_params("unknown") == {}
