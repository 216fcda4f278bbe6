"""``drive_sync``: the whole receive -> claim -> invoke -> complete cycle for sync drivers.

Async drivers (trio, asyncio) take the same steps with :mod:`mrtr_core.app.drive_async`,
awaiting the handler. A sync driver may still serve ``async def`` handlers that never
suspend on an event loop (they only call ``ctx.ask*`` and plain code): the coroutine is
stepped to completion inline.
"""

from __future__ import annotations

import inspect
from collections.abc import Coroutine
from typing import Any

from mrtr_core.app.app import App
from mrtr_core.app.reply import Reply, RunHandler
from mrtr_core.errors import LocalProtocolError
from mrtr_core.state import ReplayGuard, claim_verdict

__all__ = ["drive_sync", "run_inline"]


def run_inline(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never suspends to completion, without an event loop.

    Raises:
        LocalProtocolError: The coroutine awaited something that suspends (it needs a real
            event loop: serve it with the trio or asyncio adapter).
    """
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    coroutine.close()
    raise LocalProtocolError(
        "an async handler suspended on an event loop; serve it with an async adapter"
    )


def drive_sync(
    app: App,
    message: object,
    *,
    now: float,
    principal: str | None = None,
    guard: ReplayGuard | None = None,
) -> Reply:
    """Answer one decoded message completely: receive it, claim a single-use state on the
    replay guard, run the handler, and complete.

    Args:
        app: The app.
        message: One decoded JSON-RPC message.
        now: The current time (one value for the whole step).
        principal: The authenticated user, if any.
        guard: The replay guard for single-use handlers (required when one is served).

    Raises:
        LocalProtocolError: A single-use handler's state must be claimed but no guard was
            given.
        TypeError: The guard's claim answered other than ``True`` or ``False`` (an async
            guard's coroutine, say): the handler does not run.
    """
    step = app.receive(message, now=now, principal=principal)
    if isinstance(step, Reply):
        return step
    return run_step_sync(app, step, now=now, guard=guard)


def run_step_sync(
    app: App, step: RunHandler, *, now: float, guard: ReplayGuard | None = None
) -> Reply:
    """The second half of :func:`drive_sync`, for a driver that already has the step."""
    claim = step.run.claim
    if claim is not None:
        if guard is None:
            raise LocalProtocolError("a single-use handler needs a replay guard")
        token_id, expires_at = claim
        if not claim_verdict(guard.claim(token_id, expires_at, now)):
            return app.replayed(step)
    try:
        value = step.invoke()
        if inspect.iscoroutine(value):
            value = run_inline(value)
    except Exception as exc:
        return app.complete(step, now, raised=exc)
    except BaseException as exc:
        # The engine's control flow (a question without an answer yet) is a BaseException
        # so handler code cannot swallow it; it is the engine's to interpret.
        if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
            raise
        return app.complete(step, now, raised=exc)
    return app.complete(step, now, returned=value)
