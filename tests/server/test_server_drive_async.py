"""What the trio and asyncio servers share (mrtr_core.app.drive_async): one engine round, one
app step with the runtime's cancellation passing through, and the internal-error reply.

The coroutines here never suspend, so they are run with ``run_inline``: no event loop.
"""

from __future__ import annotations

from typing import Any

import mrtr_asyncio
import mrtr_asyncio.stdio_server
import mrtr_trio
import mrtr_trio.stdio_server
import pytest
from server_helpers import make_codec

from mrtr_core.app import App, RunHandler, run_inline
from mrtr_core.app.drive_async import (
    EXITS,
    answer,
    internal_error_reply,
    run_handler,
    run_step,
    step_runner,
)
from mrtr_core.server import Context
from mrtr_core.server.builders import form

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}


class Stop(BaseException):
    """Stands for a runtime's cancellation exception."""


def _app() -> App:
    app = App("t", "1", codec=make_codec())

    @app.tool()
    def hello(ctx: Context, name: str) -> str:
        return f"hi {name}"

    @app.tool()
    async def confirm(ctx: Context) -> str:
        got = ctx.ask("ok", form("Proceed?", ok=bool))
        return got.action

    @app.tool()
    def stop(ctx: Context) -> str:
        raise Stop

    @app.tool()
    async def stop_in_group(ctx: Context) -> str:
        raise BaseExceptionGroup("handler tasks", [Stop()])

    return app


def _call(name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "_meta": META}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def _step(app: App, message: dict[str, Any]) -> RunHandler:
    step = app.receive(message, now=0.0)
    assert isinstance(step, RunHandler)
    return step


def test_trio_and_asyncio_share_one_run_handler() -> None:
    assert mrtr_trio.run_handler is run_handler
    assert mrtr_asyncio.run_handler is run_handler


def test_the_adapters_run_step_lets_their_cancellation_through() -> None:
    for module, cancelled in ((mrtr_trio.stdio_server, "Cancelled"),
                              (mrtr_asyncio.stdio_server, "CancelledError")):
        app = _app()
        assert module.internal_error_reply is internal_error_reply
        reply = run_inline(module.run_step(app, _step(app, _call("hello", {"name": "x"})),
                                           clock=lambda: 0.0))
        assert reply.message["result"]["content"][0]["text"] == "hi x"
        assert cancelled in {kind.__name__ for kind in module._PASS_THROUGH}


def test_run_step_completes_the_engines_question_without_an_answer() -> None:
    # The engine's control flow is a BaseException too; it is not passed through.
    app = _app()
    reply = run_inline(run_step(app, _step(app, _call("confirm")), clock=lambda: 0.0,
                                pass_through=(*EXITS, Stop)))
    assert reply.message["result"]["resultType"] == "input_required"
    assert set(reply.message["result"]["inputRequests"]) == {"ok"}


@pytest.mark.parametrize("tool", ["stop", "stop_in_group"])
def test_run_step_raises_what_passes_through_alone_or_in_a_group(tool: str) -> None:
    app = _app()
    runner = step_runner((*EXITS, Stop))
    with pytest.raises((Stop, BaseExceptionGroup)) as raised:
        run_inline(runner(app, _step(app, _call(tool)), clock=lambda: 0.0))
    group = raised.value
    assert isinstance(group, Stop) or group.subgroup(Stop) is not None


def test_a_base_exception_the_engine_does_not_know_is_re_raised_by_it() -> None:
    # Without ``Stop`` in ``pass_through`` the step goes to ``App.complete``, whose engine
    # re-raises a BaseException that is not its own: nothing is swallowed either way.
    app = _app()
    with pytest.raises(Stop):
        run_inline(run_step(app, _step(app, _call("stop")), clock=lambda: 0.0))


def test_answer_replies_to_a_message_and_to_a_notification() -> None:
    app = _app()
    reply = run_inline(answer(app, _call("hello", {"name": "y"}), 1, clock=lambda: 0.0,
                              principal=None, guard=None))
    assert reply.message["result"]["content"][0]["text"] == "hi y"
    note = run_inline(answer(app, {"jsonrpc": "2.0", "method": "notifications/x"}, None,
                             clock=lambda: 0.0, principal=None, guard=None))
    assert note.message is None


def test_an_app_failure_is_an_internal_error_without_its_text() -> None:
    app = _app()

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret detail")

    app.receive = fail  # type: ignore[method-assign]
    reply = run_inline(answer(app, _call("hello", {"name": "y"}), 7, clock=lambda: 0.0,
                              principal=None, guard=None))
    assert reply.status == 500
    assert reply.message == {
        "jsonrpc": "2.0", "id": 7,
        "error": {"code": -32603, "message": "internal error (RuntimeError)"},
    }
