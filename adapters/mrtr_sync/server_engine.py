"""Drive one server-engine round in plain synchronous code."""

from __future__ import annotations

import inspect

from mrtr_core.server import Completed, HandlerSpec, NeedsInput, ServerEngine
from mrtr_core.state import ReplayGuard, claim_verdict
from mrtr_core.wire import MrtrParams

__all__ = ["run_handler"]


def run_handler(
    engine: ServerEngine,
    params: MrtrParams,
    spec: HandlerSpec,
    *,
    now: float,
    principal: str | None = None,
    guard: ReplayGuard | None = None,
) -> Completed | NeedsInput:
    """Run one round of a synchronous handler.

    Verifies the state and answers, claims a single-use token with ``guard``, runs the
    handler, and returns the outcome. Raises ``JsonRpcError`` for protocol errors (bad
    state, replay, bad answers, ``-32021``) and re-raises the handler's own exceptions; a
    ``guard`` whose claim answers other than ``True`` or ``False`` (an async guard's
    coroutine) raises ``TypeError`` and the handler does not run.
    """
    run = engine.begin(params, spec, now=now, principal=principal)
    if run.claim is not None:
        if guard is None:
            raise ValueError(f"handler {spec.name or spec.handler!r} is single-use: pass a guard")
        if not claim_verdict(guard.claim(*run.claim, now)):
            raise run.replayed()
    try:
        value = spec.invoke(run.context)
        if inspect.isawaitable(value):
            close = getattr(value, "close", None)
            if close is not None:
                close()
            raise TypeError("an async handler needs an async driver")
    except BaseException as exc:
        return run.finish(now, raised=exc)
    return run.finish(now, returned=value)
