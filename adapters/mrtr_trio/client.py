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

import collections
import inspect
import itertools
import math
import random as _random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Unpack

import trio

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
    CallOptions,
    ClientBase,
    InputRequired,
    prompt_params,
    resource_params,
    tool_params,
)
from mrtr_core.client.events import (
    CancelRequested,
    ClientEvent,
    HandlerFailed,
    HandlerReturned,
    ResponseReceived,
    TimerFired,
)
from mrtr_core.client.flow import ClientFlow
from mrtr_core.client.limits import ClientLimits
from mrtr_core.errors import MrtrError, TransportError
from mrtr_core.wire.models import PROTOCOL_VERSION, ClientCapabilities, Implementation, JsonObject
from mrtr_trio.transport import Transport

__all__ = ["BROKEN", "Client", "Handler"]

Handler = Callable[[Any, str], object | Awaitable[object]]
"""``handler(request, key)`` -> the typed answer or a dict; a coroutine function or a plain one."""

BROKEN = (OSError, EOFError, trio.BrokenResourceError, trio.ClosedResourceError)
"""What a trio transport raises when its connection is gone."""

DEFAULT_CLIENT_INFO = Implementation(name="mrtr-trio", version="0.1.0")


class Client(ClientBase[Handler]):
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
    ) -> None:
        super().__init__(
            client_info=client_info, elicitation=elicitation, elicitation_form=elicitation_form,
            elicitation_url=elicitation_url, sampling=sampling, roots=roots,
            capabilities=capabilities, limits=limits, random=(random or _random.Random()).random,
            on_event=on_event, auto=auto, protocol_version=protocol_version,
        )
        self.transport = transport

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, **options: Unpack[CallOptions]
    ) -> JsonObject:
        """``tools/call``; returns the final ``CallToolResult`` dict (options: :meth:`request`)."""
        return await self.request(*tool_params(name, arguments), **options)

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None, **options: Unpack[CallOptions]
    ) -> JsonObject:
        """``prompts/get``; returns the final ``GetPromptResult`` dict."""
        return await self.request(*prompt_params(name, arguments), **options)

    async def read_resource(self, uri: str, **options: Unpack[CallOptions]) -> JsonObject:
        """``resources/read``; returns the final ``ReadResourceResult`` dict."""
        return await self.request(*resource_params(uri), **options)

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, **options: Unpack[CallOptions]
    ) -> JsonObject:
        """Run one request through as many rounds as the server needs; return its result.

        Any method works; only ``tools/call``, ``prompts/get`` and ``resources/read`` may go
        past one leg. Options: :class:`~mrtr_core.client.driver.CallOptions`.

        Raises:
            MrtrError: the typed failure (round limit, a timeout, a handler failure, a
                JSON-RPC error, a broken transport, ...).
            InputRequired: manual mode, when a round needs input.
        """
        flow = self.new_flow(method, params, **options)
        return await self._drive(flow, flow.start(trio.current_time()))

    async def resume(
        self, pending: InputRequired | Mapping[str, Any], answers: Mapping[str, object]
    ) -> JsonObject:
        """Answer a manual-mode round (an :class:`InputRequired` or its saved ``data``).

        The wait for the answers counts against the flow's budget when ``pending`` was
        raised in this ``trio.run`` (the same clock); saved data carries the budget it had
        left.
        """
        now = trio.current_time()
        flow = self.restore_flow(pending, now, trio.lowlevel.current_clock())
        return await self._drive(flow, flow.answer(answers, now))

    async def aclose(self) -> None:
        """Close the transport."""
        await self.transport.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- the driver -------------------------------------------------------------------------

    async def _drive(self, flow: ClientFlow, cmds: list[ClientCommand]) -> JsonObject:
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
        async with trio.open_nursery() as nursery:
            run.attach(nursery)
            try:
                result = await self._loop(flow, None, run)
            except Exception as exc:  # raised below, outside the nursery: no ExceptionGroup
                error = exc
            nursery.cancel_scope.cancel()
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
                        await run.cancel(cmd.keys)
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
                    raise _broken(flow, exc, trio.current_time()) from exc
                return ResponseReceived(message=response)
            if run.running:
                return await run.next_outcome()
            if deadline is None:
                raise MrtrError(f"flow in state {flow.state.name} has nothing to wait for")
            await trio.sleep_forever()  # pacing of a state-only round
        return TimerFired()


_NEEDS_NURSERY: JsonObject = {}
"""What a loop without a nursery returns when a coroutine handler needs one (by identity)."""


def _broken(flow: ClientFlow, exc: BaseException, now: float) -> TransportError:
    """End the flow after a transport failure; only this call fails."""
    last = None
    for cmd in flow.handle(CancelRequested(reason=exc), now):
        if isinstance(cmd, Fail):
            last = getattr(cmd.error, "last_result", None)
    return TransportError(exc, last_result=last)


class _Handlers:
    """The handlers of one call: a plain function runs at once (in a task of its own it
    would hold the event loop just the same); an awaitable answer is awaited in a task of
    its own, in its own cancel scope, once the call has a nursery."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._nursery: trio.Nursery | None = None
        self._channel: tuple[trio.MemorySendChannel[tuple[int, ClientEvent]],
                             trio.MemoryReceiveChannel[tuple[int, ClientEvent]]] | None = None
        self._tokens = itertools.count()
        self.running: dict[str, tuple[int, trio.CancelScope | None, trio.Event | None]] = {}
        self.finished: collections.deque[tuple[int, ClientEvent]] = collections.deque()
        self.unstarted: list[tuple[Awaitable[object], InvokeHandler, int]] = []
        self.resume_send: SendRequest | None = None

    def start(self, cmd: InvokeHandler) -> None:
        token = next(self._tokens)
        fn = self._client.handlers.for_kind(cmd.request.method)
        event: ClientEvent
        try:
            if fn is None:
                raise LookupError(f"no handler for {cmd.request.method}")
            value = fn(cmd.request, cmd.key)
        except Exception as exc:  # a handler's failure is a fact for the flow
            event = HandlerFailed(key=cmd.key, error=exc)
        else:
            if inspect.isawaitable(value):
                self.running[cmd.key] = (token, None, None)
                self.unstarted.append((value, cmd, token))
                if self._nursery is not None:
                    self._spawn()
                return
            event = HandlerReturned(key=cmd.key, answer=value)  # type: ignore[arg-type]
        self.running[cmd.key] = (token, None, None)
        self.finished.append((token, event))

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
            self._channel = trio.open_memory_channel[tuple[int, ClientEvent]](math.inf)
        pending, self.unstarted = self.unstarted, []
        for value, cmd, token in pending:
            if self.running.get(cmd.key, (None,))[0] != token:
                close = getattr(value, "close", None)
                if close is not None:
                    close()  # cancelled before it could start
                continue
            scope, done = trio.CancelScope(), trio.Event()
            self.running[cmd.key] = (token, scope, done)
            self._nursery.start_soon(self._run, value, cmd, token, scope, done)

    async def _run(
        self, value: Awaitable[object], cmd: InvokeHandler, token: int,
        scope: trio.CancelScope, done: trio.Event,
    ) -> None:
        assert self._channel is not None
        try:
            with scope:
                event: ClientEvent
                try:
                    event = HandlerReturned(key=cmd.key, answer=await value)  # type: ignore[arg-type]
                except Exception as exc:  # a handler's failure is a fact for the flow
                    event = HandlerFailed(key=cmd.key, error=exc)
                self._channel[0].send_nowait((token, event))
        finally:
            done.set()

    def _current(self, token: int, event: ClientEvent) -> bool:
        entry = self.running.get(event.key)  # type: ignore[union-attr]
        if entry is not None and entry[0] == token:
            del self.running[event.key]  # type: ignore[union-attr]
            return True
        return False

    def pop_finished(self) -> ClientEvent | None:
        """The next outcome of a plain-function handler still expected (stale ones dropped)."""
        while self.finished:
            token, event = self.finished.popleft()
            if self._current(token, event):
                return event
        return None

    async def next_outcome(self) -> ClientEvent:
        """The next outcome of a handler task still running (stale ones are dropped)."""
        assert self._channel is not None
        while True:
            token, event = await self._channel[1].receive()
            if self._current(token, event):
                return event

    async def cancel(self, keys: tuple[str, ...]) -> None:
        """Cancel these handlers and wait until each has finished."""
        entries = [self.running.pop(key) for key in keys if key in self.running]
        for _, scope, _ in entries:
            if scope is not None:
                scope.cancel()
        for _, _, done in entries:
            if done is not None:
                await done.wait()
