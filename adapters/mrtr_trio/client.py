"""The trio MRTR client: handlers in a nursery, one cancel scope at ``flow.deadline``.

The client drives a :class:`~mrtr_core.client.flow.ClientFlow` and does only what the flow
orders: send a request, run handlers, cancel handlers, wait until ``flow.deadline``. Every
protocol decision is the flow's. ``now`` is ``trio.current_time()``, so a ``MockClock``
governs every deadline of the flow.

Each call opens one nursery for its handlers; cancelled handlers are waited for before the
call goes on (structured concurrency). Failures leave the nursery as the flow's typed error,
never as an ``ExceptionGroup``.
"""

from __future__ import annotations

import math
import random as _random
from collections.abc import Awaitable, Callable
from typing import Any

import trio

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
from mrtr_trio.transport import Transport

__all__ = ["BROKEN", "Client", "Handler"]

Handler = Callable[[Any, str], object | Awaitable[object]]
"""``handler(request, key)`` -> the typed answer or a dict; a coroutine function or a plain one."""

BROKEN = (OSError, EOFError, trio.BrokenResourceError, trio.ClosedResourceError)
"""What a trio transport raises when its connection is gone."""

DEFAULT_CLIENT_INFO = Implementation(name="mrtr-trio", version="0.1.0")


class Client(AsyncClientBase[Handler]):
    """A trio MRTR client over one :class:`~mrtr_trio.transport.Transport`.

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
        self._calls: set[trio.CancelScope] = set()
        """The cancel scope of each call running (what :meth:`aclose` cancels)."""

    async def aclose(self) -> None:
        """Close the transport and end every call in flight, wherever it waits (on the
        transport, its handlers, a pacing delay): its handlers are cancelled and it raises
        :class:`~mrtr_core.errors.TransportError` whose ``cause`` is a
        :class:`~mrtr_core.errors.TransportClosedError`. Every call and ``resume`` made
        after it is refused with that error before anything is sent, whatever the
        transport does once closed."""
        for scope in self._calls:
            scope.cancel()
        await super().aclose()

    # The clock of every deadline, and what identifies it (this ``trio.run``'s clock).
    _now = staticmethod(trio.current_time)
    _clock = staticmethod(trio.lowlevel.current_clock)

    # --- the driver -------------------------------------------------------------------------

    async def _drive(self, flow: ClientFlow, cmds: list[ClientCommand]) -> JsonObject:
        scope = trio.CancelScope()
        self._calls.add(scope)
        try:
            with scope:
                return await self._drive_flow(flow, cmds)
        finally:
            self._calls.discard(scope)
        # Only aclose() cancels this scope; a cancellation of the caller's own goes on past
        # it (trio delivers it to the outermost cancelled scope).
        raise transport_failed(flow, client_closed(), trio.current_time())

    async def _drive_flow(self, flow: ClientFlow, cmds: list[ClientCommand]) -> JsonObject:
        # A call whose handlers are plain functions needs no nursery: they run at once. The
        # first coroutine handler moves the call into one (its tasks are cancelled and
        # waited for before the call returns).
        run = _Handlers(self)
        try:
            result = await self._loop(flow, cmds, run)
        except BaseException:
            run.discard_unstarted()
            raise
        if result is not _NEEDS_NURSERY:
            return result
        error: Exception | None = None
        try:
            async with trio.open_nursery() as nursery:
                run.attach(nursery)
                try:
                    result = await self._loop(flow, None, run)
                except Exception as exc:  # raised below, outside the nursery: no ExceptionGroup
                    error = exc
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # the caller's Cancelled, KeyboardInterrupt, ...
            raise bare_exception(group, cancellation=trio.Cancelled) from None
        if error is not None:
            raise error
        return result

    async def _loop(
        self, flow: ClientFlow, cmds: list[ClientCommand] | None, run: _Handlers
    ) -> JsonObject:
        """Drive the flow to its end; ``cmds=None`` goes on from where a loop without a
        nursery stopped (returning :data:`_NEEDS_NURSERY`)."""
        send: SendRequest | None = run.resume_send
        while True:
            if cmds is not None:
                send = None
                for cmd in cmds:
                    if isinstance(cmd, NOTICES):
                        self.notify(cmd)
                    elif isinstance(cmd, SendRequest):
                        send = cmd
                    elif isinstance(cmd, InvokeHandler):
                        run.start(cmd)
                    elif isinstance(cmd, CancelHandlers):
                        for late in await run.cancel(cmd.keys):  # a failure that raced
                            flow.handle(late, trio.current_time())
                    elif isinstance(cmd, AwaitAnswers):
                        raise self.input_required(
                            cmd, flow, trio.current_time(), trio.lowlevel.current_clock()
                        )
                    elif isinstance(cmd, Complete):
                        return cmd.result
                    elif isinstance(cmd, Fail):
                        raise cmd.error
                if run.unstarted:
                    run.resume_send = send
                    return _NEEDS_NURSERY
            cmds = flow.handle(await self._next_event(flow, send, run), trio.current_time())

    async def _next_event(
        self, flow: ClientFlow, send: SendRequest | None, run: _Handlers
    ) -> ClientEvent:
        """Wait for the next fact: a response, a handler outcome, or the timer."""
        deadline = flow.deadline
        if send is None and run.finished:
            # A plain-function handler already answered; its outcome counts only before the
            # deadline, as when it is read from a task.
            if deadline is not None and trio.current_time() >= deadline:
                await trio.lowlevel.checkpoint()
                return TimerFired()
            event = run.pop_finished()
            if event is not None:
                await trio.lowlevel.checkpoint_if_cancelled()
                return event
        with trio.move_on_at(math.inf if deadline is None else deadline):
            if send is not None:
                try:
                    response = await self.transport.request(send.message)
                except BROKEN as exc:
                    raise transport_failed(flow, exc, trio.current_time()) from exc
                return ResponseReceived(message=response)
            if run.running:
                return await run.next_outcome()
            if deadline is None:
                raise MrtrError(f"flow in state {flow.state.name} has nothing to wait for")
            await trio.sleep_forever()  # pacing of a state-only round
        return TimerFired()


_NEEDS_NURSERY: JsonObject = {}
"""What a loop without a nursery returns when a coroutine handler needs one (by identity)."""


class _Handlers(HandlerRuns[tuple[trio.CancelScope, trio.Event]]):
    """The handlers of one call; an awaitable answer is awaited in a task of its own, in its
    own cancel scope, once the call has a nursery."""

    def __init__(self, client: Client) -> None:
        super().__init__(client)
        self._nursery: trio.Nursery | None = None
        self._channel: tuple[trio.MemorySendChannel[tuple[int, HandlerOutcome]],
                             trio.MemoryReceiveChannel[tuple[int, HandlerOutcome]]] | None = None
        self.unstarted: list[tuple[Awaitable[object], InvokeHandler, int]] = []
        self.resume_send: SendRequest | None = None

    def _launch(self, value: Awaitable[object], cmd: InvokeHandler, token: int) -> None:
        self.running[cmd.key] = (token, None)
        self.unstarted.append((value, cmd, token))
        if self._nursery is not None:
            self._spawn()

    def attach(self, nursery: trio.Nursery) -> None:
        """Start the coroutine handlers waiting for a nursery, and later ones at once."""
        self._nursery = nursery
        self._spawn()

    def discard_unstarted(self) -> None:
        """Close coroutine handlers that never got a task (the call ended first)."""
        if self._nursery is not None:
            return
        for value, _, _ in self.unstarted:
            close = getattr(value, "close", None)
            if close is not None:
                close()

    def _spawn(self) -> None:
        assert self._nursery is not None
        if self._channel is None:
            self._channel = trio.open_memory_channel[tuple[int, HandlerOutcome]](math.inf)
        pending, self.unstarted = self.unstarted, []
        for value, cmd, token in pending:
            if self.running.get(cmd.key, (None,))[0] != token:
                close = getattr(value, "close", None)
                if close is not None:
                    close()  # cancelled before it could start
                continue
            scope, done = trio.CancelScope(), trio.Event()
            self.running[cmd.key] = (token, (scope, done))
            self._nursery.start_soon(self._run, value, cmd, token, scope, done)

    async def _run(
        self, value: Awaitable[object], cmd: InvokeHandler, token: int,
        scope: trio.CancelScope, done: trio.Event,
    ) -> None:
        assert self._channel is not None
        try:
            with scope:
                event: HandlerOutcome
                try:
                    event = HandlerReturned(key=cmd.key, answer=await value)  # type: ignore[arg-type]
                except Exception as exc:  # a handler's failure is a fact for the flow
                    event = HandlerFailed(key=cmd.key, error=exc)
                self._channel[0].send_nowait((token, event))
        finally:
            done.set()

    async def next_outcome(self) -> ClientEvent:
        """The next outcome of a handler task still running (stale ones are dropped)."""
        assert self._channel is not None
        while True:
            token, event = await self._channel[1].receive()
            if self._current(token, event):
                return event

    async def cancel(self, keys: tuple[str, ...]) -> list[HandlerOutcome]:
        """Cancel these handlers, wait until each has finished, and return what they had
        reported meanwhile (see :meth:`cancelled_outcomes`)."""
        expected = {key: self.running.pop(key) for key in keys if key in self.running}
        started = [entry for _, entry in expected.values() if entry is not None]
        for scope, _ in started:
            scope.cancel()
        for _, done in started:
            await done.wait()
        channel, reported = self._channel, []
        while channel is not None:
            try:
                reported.append(channel[1].receive_nowait())
            except trio.WouldBlock:
                break
        late, kept = self.cancelled_outcomes(expected, reported)
        if channel is not None:
            for item in kept:
                channel[0].send_nowait(item)
        return late
