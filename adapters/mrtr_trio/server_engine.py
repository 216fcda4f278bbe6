"""Drive one server-engine round under trio."""

from __future__ import annotations

import inspect
from typing import Any

from mrtr_core.server import Completed, HandlerSpec, NeedsInput, ServerEngine
from mrtr_core.wire import MrtrParams

__all__ = ["run_handler"]


async def run_handler(
    engine: ServerEngine,
    params: MrtrParams,
    spec: HandlerSpec,
    *,
    now: float,
    principal: str | None = None,
    guard: Any = None,
) -> Completed | NeedsInput:
    """Run one round of a handler (trio coroutine function or plain function).

    ``guard`` is a sync ``ReplayGuard`` or an async one (``TrioRedisReplayGuard``).
    Raises ``JsonRpcError`` for protocol errors and re-raises the handler's own.
    """
    run = engine.begin(params, spec, now=now, principal=principal)
    if run.claim is not None:
        if guard is None:
            raise ValueError(f"handler {spec.name or spec.handler!r} is single-use: pass a guard")
        claimed = guard.claim(*run.claim, now)
        if inspect.isawaitable(claimed):
            claimed = await claimed
        if not claimed:
            raise run.replayed()
    try:
        value = spec.invoke(run.context)
        if inspect.isawaitable(value):
            value = await value
    except BaseException as exc:
        return run.finish(now, raised=exc)
    return run.finish(now, returned=value)
