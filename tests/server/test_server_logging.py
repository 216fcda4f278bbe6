"""What the app logs (mrtr_core.app.logs): why a request failed, for the operator.

- a tool, prompt, resource or completion handler that raised: one ERROR record on
  ``mrtr.server`` carrying that very exception, naming the method, the handler and the
  request id (never the arguments); the client's reply is what it always was;
- the server's own failures (an engine limit, a driver mistake, an invalid result): ERROR;
- a refused ``requestState``: INFO on ``mrtr.server.state`` with its reason code, no
  traceback, never the token;
- the client's own mistakes and successful rounds: nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from server_helpers import meta

from mrtr_core.app import App, Reply, drive_sync
from mrtr_core.app.logs import SERVER_LOGGER, STATE_LOGGER
from mrtr_core.errors import LocalProtocolError
from mrtr_core.server import Context, ServerLimits, form
from mrtr_core.state import KeyRing, MemoryReplayGuard, StateCodec

NOW = 1_800_000_000.0


class NotAContext:
    """Passed where a handler's context belongs."""


def _app(limits: ServerLimits | None = None) -> tuple[App, list[BaseException]]:
    """An app whose failing handlers keep what they raised in the returned list."""
    codec = StateCodec(KeyRing({"k": bytes(32)}, active="k"), audience="logs",
                       nonce=lambda n: bytes(n))
    app = App("logs", "1.0", codec=codec, limits=limits)
    raised: list[BaseException] = []

    def fail(exc: BaseException) -> Any:
        raised.append(exc)
        raise exc

    @app.tool()
    def explode(ctx: Context, secret: str) -> str:
        return fail(ValueError("the tool broke"))

    @app.tool()
    def fine(ctx: Context) -> str:
        return "ok"

    @app.tool()
    def misuse(ctx: Context) -> str:
        try:
            app.report_progress(NotAContext(), 1.0)  # a server mistake, not the client's
        except LocalProtocolError as exc:
            return fail(exc)
        return "unreachable"

    @app.tool()
    def two_questions(ctx: Context) -> str:
        ctx.ask_all({"a": form("A?", a=str), "b": form("B?", b=str)})
        return "done"

    @app.tool()
    def ask(ctx: Context) -> str:
        got = ctx.ask("name", form("Name?", name=str))
        return got.action

    @app.tool(single_use=True)
    def once(ctx: Context) -> str:
        got = ctx.ask("go", form("Go?", go=bool))
        return got.action

    @app.tool()
    def bad_result(ctx: Context) -> Any:
        return object()

    @app.prompt()
    def story(ctx: Context, hero: str) -> str:
        return fail(KeyError(hero))

    @app.resource("memo://broken")
    def broken(ctx: Context, uri: str) -> str:
        return fail(RuntimeError("the resource broke"))

    @app.completion()
    def complete(ref: Any, argument: Any, context: Any) -> list[str]:
        return fail(LookupError("the completer broke"))

    return app, raised


def _request(method: str, params: dict[str, Any], request_id: int = 7) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method,
            "params": {**params, "_meta": meta()}}


def _send(app: App, message: dict[str, Any], guard: Any = None) -> Reply:
    return drive_sync(app, message, now=NOW, guard=guard)


def _records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("mrtr")]


def _the_error_logged(caplog: pytest.LogCaptureFixture, exc: BaseException) -> logging.LogRecord:
    """The one mrtr record: an ERROR on ``mrtr.server`` carrying ``exc`` with its traceback."""
    [record] = _records(caplog)
    assert (record.name, record.levelno) == (SERVER_LOGGER, logging.ERROR)
    assert record.exc_info is not None and record.exc_info[1] is exc
    return record


@pytest.fixture
def caplog(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every record of the mrtr loggers, whatever their level."""
    caplog.set_level(logging.DEBUG, logger="mrtr")
    return caplog


# --- handlers that raised ---------------------------------------------------------------------


def test_a_tool_that_raised_is_logged_with_its_exception_and_answered_as_before(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app, raised = _app()
    reply = _send(app, _request("tools/call", {"name": "explode",
                                               "arguments": {"secret": "hunter2"}}))
    assert reply.message == {"jsonrpc": "2.0", "id": 7, "result": {
        "content": [{"type": "text", "text": "the tool broke"}], "isError": True,
        "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "logs", "version": "1.0"}},
    }}
    record = _the_error_logged(caplog, raised[0])
    message = record.getMessage()
    assert "tools/call" in message and "'explode'" in message and "7" in message
    assert "hunter2" not in message  # never the arguments


def test_a_prompt_that_raised_is_logged_and_still_answered_without_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app, raised = _app()
    reply = _send(app, _request("prompts/get", {"name": "story", "arguments": {"hero": "Ada"}}))
    assert reply.message == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32603, "message": "prompts/get handler failed (KeyError)"}}
    record = _the_error_logged(caplog, raised[0])
    assert "prompts/get 'story'" in record.getMessage()
    assert "Ada" not in record.getMessage()


def test_a_resource_that_raised_is_logged_and_still_answered_without_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app, raised = _app()
    reply = _send(app, _request("resources/read", {"uri": "memo://broken"}, request_id=9))
    assert reply.message == {"jsonrpc": "2.0", "id": 9, "error": {
        "code": -32603, "message": "resources/read handler failed (RuntimeError)"}}
    record = _the_error_logged(caplog, raised[0])
    assert "resources/read 'memo://broken'" in record.getMessage()
    assert "9" in record.getMessage()


def test_a_completion_handler_that_raised_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    app, raised = _app()
    reply = _send(app, _request("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "story"},
        "argument": {"name": "hero", "value": "A"}}))
    assert reply.message == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32603, "message": "completion handler failed (LookupError)"}}
    record = _the_error_logged(caplog, raised[0])
    assert "completion/complete 'story'" in record.getMessage()


# --- the server's own failures ------------------------------------------------------------------


def test_a_server_mistake_is_logged_as_an_error(caplog: pytest.LogCaptureFixture) -> None:
    app, raised = _app()
    reply = _send(app, _request("tools/call", {"name": "misuse"}))
    assert reply.message is not None and reply.message["error"]["code"] == -32603
    assert reply.message["error"]["message"] == str(raised[0])
    record = _the_error_logged(caplog, raised[0])
    assert "tools/call 'misuse'" in record.getMessage()


def test_an_engine_limit_is_logged_as_an_error(caplog: pytest.LogCaptureFixture) -> None:
    app, _ = _app(ServerLimits(max_input_requests=1))
    reply = _send(app, _request("tools/call", {"name": "two_questions"}))
    assert reply.message is not None and reply.message["error"]["code"] == -32603
    [record] = _records(caplog)
    assert (record.name, record.levelno) == (SERVER_LOGGER, logging.ERROR)
    assert record.exc_info is not None
    assert "Too many input requests" in str(record.exc_info[1])


def test_an_invalid_result_is_logged_as_an_error(caplog: pytest.LogCaptureFixture) -> None:
    app, _ = _app()
    reply = _send(app, _request("tools/call", {"name": "bad_result"}))
    assert reply.message is not None and reply.message["error"]["code"] == -32603
    [record] = _records(caplog)
    assert (record.name, record.levelno) == (SERVER_LOGGER, logging.ERROR)
    assert record.exc_info is not None
    assert "invalid result" in str(record.exc_info[1])


# --- the client's mistakes, refused states, success ---------------------------------------------


@pytest.mark.parametrize("params", [
    {"name": "nope"},  # unknown tool
    {"name": "explode", "arguments": {"secret": 3}},  # bad arguments
    {"name": "ask", "inputResponses": {"name": {"action": "accept", "content": {"name": 1}}}},
])
def test_the_clients_own_mistakes_are_not_logged(
    caplog: pytest.LogCaptureFixture, params: dict[str, Any]
) -> None:
    app, raised = _app()
    reply = _send(app, _request("tools/call", params))
    assert reply.message is not None and reply.message["error"]["code"] == -32602
    assert raised == [] and _records(caplog) == []


def test_a_successful_round_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    app, _ = _app()
    first = _send(app, _request("tools/call", {"name": "ask"}))
    assert first.message is not None and first.message["result"]["resultType"] == "input_required"
    assert _send(app, _request("tools/call", {"name": "fine"})).message is not None
    assert _records(caplog) == []


def test_a_tampered_request_state_is_logged_with_its_reason_and_not_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app, _ = _app()
    first = _send(app, _request("tools/call", {"name": "ask"}))
    assert first.message is not None
    token = first.message["result"]["requestState"]
    tampered = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    reply = _send(app, _request("tools/call", {"name": "ask", "requestState": tampered,
                                               "inputResponses": {}}, request_id=8))
    assert reply.message is not None and reply.message["error"]["code"] == -32602
    [record] = _records(caplog)
    assert (record.name, record.levelno) == (STATE_LOGGER, logging.INFO)
    assert record.exc_info is None
    message = record.getMessage()
    assert "(bad_mac)" in message and "tools/call 'ask'" in message and "8" in message
    assert tampered not in message and token not in message


def test_a_request_state_that_is_not_a_string_is_logged_as_malformed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app, raised = _app()
    reply = _send(app, _request("tools/call", {"name": "ask", "requestState": {"n": 1}}))
    assert reply.message is not None and reply.message["error"]["code"] == -32602
    [record] = _records(caplog)
    assert (record.name, record.levelno) == (STATE_LOGGER, logging.INFO)
    assert "(malformed)" in record.getMessage() and raised == []


def test_a_replayed_request_state_is_logged_with_its_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app, _ = _app()
    guard = MemoryReplayGuard()
    first = _send(app, _request("tools/call", {"name": "once"}), guard)
    assert first.message is not None
    state = first.message["result"]["requestState"]
    again = _request("tools/call", {"name": "once", "requestState": state,
                                    "inputResponses": {"go": {"action": "decline"}}})
    assert _send(app, again, guard).message["result"]["content"][0]["text"] == "decline"  # type: ignore[index]
    assert _records(caplog) == []
    reply = _send(app, again, guard)
    assert reply.message is not None and reply.message["error"]["code"] == -32602
    [record] = _records(caplog)
    assert (record.name, record.levelno) == (STATE_LOGGER, logging.INFO)
    assert "(replayed)" in record.getMessage() and state not in record.getMessage()
