"""The asyncio MRTR client: handlers in a ``TaskGroup``, one ``timeout_at(flow.deadline)``.

The client drives a :class:`~mrtr_core.client.flow.ClientFlow` and does only what the flow
orders: send a request, run handlers, cancel handlers, wait until ``flow.deadline``. Every
protocol decision is the flow's. ``now`` is ``loop.time()``, so a virtual-time loop
(:class:`~mrtr_asyncio.testing.VirtualEventLoop`) governs every deadline of the flow.

Each call opens one ``TaskGroup`` for its handlers; cancelled handlers are awaited before
the call goes on. Failures leave the group as the flow's typed error, never as an
``ExceptionGroup``.
"""

from __future__ import annotations

import asyncio
import random as _random
from collections.abc import Awaitable, Callable
from typing import Any

from mrtr_asyncio.transport import Transport
from mrtr_core._checks import client_options
from mrtr_core.client.commands import (
    AwaitAnswers,
    CancelHandlers,
    ClientCommand,
    Complete,
    Fail,
    InvokeHandler,
    SendRequest,
)
from mrtr_core.client.driver import (
    NOTICES,
    AsyncClientBase,
    HandlerOutcome,
    HandlerRuns,
    bare_exception,
    client_closed,
    transport_failed,
)
from mrtr_core.client.events import (
    ClientEvent,
    HandlerFailed,
    HandlerReturned,
    ResponseReceived,
    TimerFired,
)
from mrtr_core.client.flow import ClientFlow
from mrtr_core.client.limits import ClientLimits
from mrtr_core.errors import MrtrError
from mrtr_core.wire.models import PROTOCOL_VERSION, ClientCapabilities, Implementation, JsonObject

__all__ = ["BROKEN", "Client", "Handler"]

Handler = Callable[[Any, str], object | Awaitable[object]]
"""``handler(request, key)`` -> the typed answer or a dict; a coroutine function or a plain one."""

BROKEN = (OSError, EOFError, asyncio.IncompleteReadError)
"""What an asyncio transport raises when its connection is gone."""

DEFAULT_CLIENT_INFO = Implementation(name="mrtr-asyncio", version="0.1.0")


def _now() -> float:
    return asyncio.get_running_loop().time()


class Client(AsyncClientBase[Handler]):
    """An asyncio MRTR client over one :class:`~mrtr_asyncio.transport.Transport`.

    Handlers are ``handler(request, key)``, async or plain, returning the typed answer
    (``ElicitResult``, ``CreateMessageResult``, ``ListRootsResult``) or its dict form. The
    other arguments are those of :class:`~mrtr_core.client.driver.ClientBase`, plus:

    Args:
        transport: Carries each request leg.
        random: The jitter source (default: a fresh ``random.Random``).
    """

    def __init__(
        self,
        transport: Transport,
        *,
        client_info: Implementation = DEFAULT_CLIENT_INFO,
        elicitation: Handler | None = None,
        elicitation_form: bool = True,
        elicitation_url: bool = False,
        sampling: Handler | None = None,
        roots: Handler | None = None,
        capabilities: ClientCapabilities | None = None,
        limits: ClientLimits | None = None,
        random: _random.Random | None = None,
        on_event: Callable[[ClientCommand], object] | None = None,
        auto: bool = True,
        protocol_version: str = PROTOCOL_VERSION,
        validate_output: bool = True,
    ) -> None:
        client_options(transport, ("request", "aclose"), random)
        super().__init__(
            client_info=client_info, elicitation=elicitation, elicitation_form=elicitation_form,
            elicitation_url=elicitation_url, sampling=sampling, roots=roots,
            capabilities=capabilities, limits=limits, random=(random or _random.Random()).random,
            on_event=on_event, auto=auto, protocol_version=protocol_version,
            validate_output=validate_output,
        )
        self.transport = transport
        self._calls: set[asyncio.Task[Any]] = set()
        """The task of each call running (one call at a time per task)."""
        self._cut: set[asyncio.Task[Any]] = set()
        """Those of them :meth:`aclose` cancelled."""

    async def aclose(self) -> None:
        """Close the transport and end every call in flight, wherever it waits (on the
        transport, its handlers, a pacing delay): its handlers are cancelled and it raises
        :class:`~mrtr_core.errors.TransportError` whose ``cause`` is a
        :class:`~mrtr_core.errors.TransportClosedError`. Every call and ``resume`` made
        after it is refused with that error before anything is sent, whatever the
        transport does once closed."""
        current = asyncio.current_task()
        for task in self._calls - self._cut:
            if task is not current:
                task.cancel()  # _drive turns this into the error
                self._cut.add(task)
        await super().aclose()

    # The clock of every deadline, and what identifies it (the event loop).
    _now = staticmethod(_now)
    _clock = staticmethod(asyncio.get_running_loop)

    # --- the driver -------------------------------------------------------------------------

    async def _drive(self, flow: ClientFlow, cmds: list[ClientCommand]) -> JsonObject:
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - a coroutine on an event loop runs in a task
            return await self._drive_flow(flow, cmds)
        # The cancellation aclose() requests is told from the caller's own as
        # asyncio.timeout tells its own: by the task's cancel count.
        cancelling = task.cancelling()
        self._calls.add(task)
        try:
            return await self._drive_flow(flow, cmds)
        except asyncio.CancelledError:
            if task in self._cut and task.uncancel() <= cancelling:
                raise transport_failed(flow, client_closed(), _now()) from None
            raise
        finally:
            self._calls.discard(task)
            self._cut.discard(task)

    async def _drive_flow(self, flow: ClientFlow, cmds: list[ClientCommand]) -> JsonObject:
        error: Exception | None = None
        result: JsonObject = {}
        try:
            async with asyncio.TaskGroup() as group:
                run = _Handlers(self, group)
                try:
                    result = await self._loop(flow, cmds, run)
                except Exception as exc:  # raised below, outside the group: no ExceptionGroup
                    error = exc
                run.cancel_all()
        except BaseExceptionGroup as found:  # a handler's BaseException (not Exception)
            raise bare_exception(found, cancellation=asyncio.CancelledError) from None
        if error is not None:
            raise error
        return result

    async def _loop(
        self, flow: ClientFlow, cmds: list[ClientCommand], run: _Handlers
    ) -> JsonObject:
        while True:
            send: SendRequest | None = None
            for cmd in cmds:
                if isinstance(cmd, NOTICES):
                    self.notify(cmd)
                elif isinstance(cmd, SendRequest):
                    send = cmd
                elif isinstance(cmd, InvokeHandler):
                    run.start(cmd)
                elif isinstance(cmd, CancelHandlers):
                    for late in await run.cancel(cmd.keys):  # a failure that raced the first
                        flow.handle(late, _now())
                elif isinstance(cmd, AwaitAnswers):
                    raise self.input_required(cmd, flow, _now(), asyncio.get_running_loop())
                elif isinstance(cmd, Complete):
                    return cmd.result
                elif isinstance(cmd, Fail):
                    raise cmd.error
            cmds = flow.handle(await self._next_event(flow, send, run), _now())

    async def _next_event(
        self, flow: ClientFlow, send: SendRequest | None, run: _Handlers
    ) -> ClientEvent:
        """Wait for the next fact: a response, a handler outcome, or the timer."""
        deadline = flow.deadline
        if send is None and run.finished:
            # A plain-function handler already answered; its outcome counts only before the
            # deadline, as when it is read from a task (and as in the trio driver).
            if deadline is not None and _now() >= deadline:
                return TimerFired()
            event = run.pop_finished()
            if event is not None:
                return event
        timer = asyncio.timeout_at(deadline)
        try:
            async with timer:
                if send is not None:
                    try:
                        response = await self.transport.request(send.message)
                    except BROKEN as exc:
                        raise transport_failed(flow, exc, _now()) from exc
                    return ResponseReceived(message=response)
                if run.running:
                    return await run.next_outcome()
                if deadline is None:
                    raise MrtrError(f"flow in state {flow.state.name} has nothing to wait for")
                await asyncio.get_running_loop().create_future()  # pacing of a state-only round
        except TimeoutError:
            if not timer.expired():
                raise
        return TimerFired()


class _Handlers(HandlerRuns[asyncio.Task[None]]):
    """The handlers of one call; an awaitable answer is awaited in a task of ``group``."""

    def __init__(self, client: Client, group: asyncio.TaskGroup) -> None:
        super().__init__(client)
        self._group = group
        self._outcomes: asyncio.Queue[tuple[int, HandlerOutcome]] | None = None

    def _launch(self, value: Awaitable[object], cmd: InvokeHandler, token: int) -> None:
        if self._outcomes is None:
            self._outcomes = asyncio.Queue()
        task = self._group.create_task(
            self._run(value, cmd, token, self._outcomes), name=f"mrtr-handler-{cmd.key}"
        )
        self.running[cmd.key] = (token, task)

    async def _run(
        self,
        value: Awaitable[object],
        cmd: InvokeHandler,
        token: int,
        outcomes: asyncio.Queue[tuple[int, HandlerOutcome]],
    ) -> None:
        event: HandlerOutcome
        try:
            event = HandlerReturned(key=cmd.key, answer=await value)  # type: ignore[arg-type]
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # cancelled by this driver, its group or the caller
            # The handler's own cancellation (a dialog future cancelled by the UI): a failure.
            event = HandlerFailed(key=cmd.key, error=exc)
        except Exception as exc:  # a handler's failure is a fact for the flow
            event = HandlerFailed(key=cmd.key, error=exc)
        outcomes.put_nowait((token, event))

    async def next_outcome(self) -> ClientEvent:
        """The next outcome of a handler task still running (stale ones are dropped)."""
        assert self._outcomes is not None
        while True:
            token, event = await self._outcomes.get()
            if self._current(token, event):
                return event

    async def cancel(self, keys: tuple[str, ...]) -> list[HandlerOutcome]:
        """Cancel these handlers, wait until each has finished, and return what they had
        reported meanwhile (see :meth:`cancelled_outcomes`)."""
        expected = {key: self.running.pop(key) for key in keys if key in self.running}
        tasks = [task for _, task in expected.values() if task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        queue, reported = self._outcomes, []
        while queue is not None and not queue.empty():
            reported.append(queue.get_nowait())
        late, kept = self.cancelled_outcomes(expected, reported)
        if queue is not None:
            for item in kept:
                queue.put_nowait(item)
        return late

    def cancel_all(self) -> None:
        """Cancel whatever still runs (the group waits for it)."""
        for _, task in self.running.values():
            if task is not None:
                task.cancel()
        self.running.clear()
