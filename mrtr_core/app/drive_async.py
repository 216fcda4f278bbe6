"""What the trio and asyncio servers share: one handler round, awaiting what user code returns.

The counterpart of :mod:`mrtr_core.app.drive` for async drivers. Nothing here calls an event
loop: a coroutine handler (or an async replay guard) is awaited, and that is all. The one
difference between the runtimes is the exception that cancels a task (``trio.Cancelled``,
``asyncio.CancelledError``); a driver passes it in ``pass_through`` so that it leaves the
handler untouched, as do interpreter exits.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from mrtr_core.app.app import App
from mrtr_core.app.reply import Reply, RequestId, RunHandler, internal_error_reply
from mrtr_core.server import Completed, HandlerSpec, NeedsInput, ServerEngine
from mrtr_core.state import claim_verdict
from mrtr_core.wire import MrtrParams

__all__ = [
    "EXITS",
    "StepRunner",
    "answer",
    "internal_error_reply",
    "run_handler",
    "run_step",
    "step_runner",
]

EXITS: tuple[type[BaseException], ...] = (KeyboardInterrupt, SystemExit, GeneratorExit)
"""The exceptions that always leave a handler untouched; a driver adds its cancellation."""


async def run_handler(
    engine: ServerEngine,
    params: MrtrParams,
    spec: HandlerSpec,
    *,
    now: float,
    principal: str | None = None,
    guard: Any = None,
) -> Completed | NeedsInput:
    """Run one round of a handler (coroutine function or plain function).

    ``guard`` is a sync ``ReplayGuard`` or an async one (``TrioRedisReplayGuard``,
    ``AsyncRedisReplayGuard``). Raises ``JsonRpcError`` for protocol errors and re-raises
    the handler's own.
    """
    run = engine.begin(params, spec, now=now, principal=principal)
    if run.claim is not None:
        if guard is None:
            raise ValueError(f"handler {spec.name or spec.handler!r} is single-use: pass a guard")
        claimed = guard.claim(*run.claim, now)
        if inspect.isawaitable(claimed):
            claimed = await claimed
        if not claim_verdict(claimed):
            raise run.replayed()
    try:
        value = spec.invoke(run.context)
        if inspect.isawaitable(value):
            value = await value
    except BaseException as exc:
        return run.finish(now, raised=exc)
    return run.finish(now, returned=value)


async def run_step(
    app: App,
    step: RunHandler,
    *,
    clock: Callable[[], float],
    guard: Any = None,
    pass_through: tuple[type[BaseException], ...] = EXITS,
) -> Reply:
    """Run one handler step to its reply: claim a single-use state, invoke, complete.

    ``guard`` is a sync :class:`~mrtr_core.state.ReplayGuard` or an async one. The
    exceptions in ``pass_through`` (and exception groups holding one) propagate untouched:
    the driver's cancellation and interpreter exits.
    """
    claim = step.run.claim
    if claim is not None:
        if guard is None:
            return app.complete(
                step, clock(), raised=RuntimeError("a single-use handler needs a replay guard")
            )
        claimed = guard.claim(claim[0], claim[1], clock())
        if inspect.isawaitable(claimed):
            claimed = await claimed
        if not claim_verdict(claimed):
            return app.replayed(step)
    try:
        value = step.invoke()
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        return app.complete(step, clock(), raised=exc)
    except BaseException as exc:
        # The engine's "question without an answer yet" is a BaseException on purpose.
        if isinstance(exc, pass_through) or (
            isinstance(exc, BaseExceptionGroup) and exc.subgroup(pass_through) is not None
        ):
            raise
        return app.complete(step, clock(), raised=exc)
    return app.complete(step, clock(), returned=value)


class StepRunner(Protocol):
    """:func:`run_step` with one runtime's ``pass_through`` (see :func:`step_runner`)."""

    def __call__(
        self, app: App, step: RunHandler, *, clock: Callable[[], float], guard: Any = None
    ) -> Awaitable[Reply]: ...


def step_runner(pass_through: tuple[type[BaseException], ...]) -> StepRunner:
    """:func:`run_step` for one runtime, whose cancellation is in ``pass_through``.

    What the trio and asyncio adapters export as their ``run_step``.
    """

    async def run_step_passing_through(
        app: App, step: RunHandler, *, clock: Callable[[], float], guard: Any = None
    ) -> Reply:
        """Run one handler step to its reply: claim a single-use state, invoke, complete.

        ``guard`` is a sync :class:`~mrtr_core.state.ReplayGuard` or an async one.
        Cancellation passes through untouched (:func:`mrtr_core.app.drive_async.run_step`).
        """
        return await run_step(app, step, clock=clock, guard=guard, pass_through=pass_through)

    return run_step_passing_through


async def answer(
    app: App,
    message: object,
    request_id: RequestId | None,
    *,
    clock: Callable[[], float],
    principal: str | None,
    guard: Any,
    pass_through: tuple[type[BaseException], ...] = EXITS,
) -> Reply:
    """The reply to one decoded message: receive it, run its handler step (:func:`run_step`)
    if it has one; a failure of the app itself is :func:`internal_error_reply`."""
    try:
        step = app.receive(message, now=clock(), principal=principal)
        if isinstance(step, RunHandler):
            return await run_step(app, step, clock=clock, guard=guard, pass_through=pass_through)
        return step
    except Exception as exc:
        return internal_error_reply(request_id, exc)
