"""The app the wire loopback tests serve: a plain tool, an MRTR tool, a tool that fails after
reporting progress, and a gate.

``gate_wait`` blocks until ``gate_open`` is called (on any connection): it shows that requests
interleave and that a stalled request does not hold up the others. The gate is a runtime
primitive passed in by the test (``threading.Event``, ``trio.Event``, ``asyncio.Event``);
``entered``, when given, is a ``threading.Event`` that ``gate_wait`` sets as it starts waiting
(so a test knows the request is being answered).
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable
from typing import Any

from mrtr_core.app import App
from mrtr_core.errors import INVALID_PARAMS, JsonRpcError
from mrtr_core.server import Context, accepted, content, form
from mrtr_core.state import KeyRing, StateCodec

KEY = b"wire-tests-key-0123456789abcdef!"


def make_app(gate: Any = None, *, seed: int = 7, entered: Any = None) -> App:
    """The test app; ``gate`` has ``set()`` and ``wait()`` (sync or async)."""
    codec = StateCodec(
        KeyRing({"k": KEY}, active="k"), audience="wire", nonce=random.Random(seed).randbytes
    )
    app = App("wire", "1.0", codec=codec)

    @app.tool(description="Echo the text back.")
    def echo(ctx: Context, text: str) -> str:
        return text

    @app.tool(description="Ask for a confirmation, then report it.")
    def confirm(ctx: Context, path: str) -> str:
        answer = ctx.ask("ok", form(f"Delete {path}?", confirm=bool))
        got = content(answer) if accepted(answer) else None
        return f"deleted {path}" if got and got.get("confirm") else f"kept {path}"

    @app.tool(description="Report progress, then refuse the arguments.")
    def refuse_after_progress(ctx: Context) -> str:
        # With a progressToken the reply is an event stream, and the -32602 keeps its 400.
        app.report_progress(ctx, 1)
        raise JsonRpcError(INVALID_PARAMS, "refused after progress")

    if gate is not None:
        waiter: Callable[[], Any] = gate.wait

        if inspect.iscoroutinefunction(waiter):

            @app.tool(description="Wait until gate_open is called.")
            async def gate_wait(ctx: Context) -> str:
                if entered is not None:
                    entered.set()
                await waiter()
                return "opened"

        else:

            @app.tool(description="Wait until gate_open is called.")
            def gate_wait(ctx: Context) -> str:
                if entered is not None:
                    entered.set()
                waiter()
                return "opened"

        @app.tool(description="Open the gate.")
        def gate_open(ctx: Context) -> str:
            gate.set()
            return "open"

    return app
