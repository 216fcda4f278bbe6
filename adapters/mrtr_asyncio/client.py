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
import collections
import inspect
import itertools
import random as _random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Unpack

from mrtr_asyncio.transport import Transport
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

__all__ = ["BROKEN", "Client", "Handler"]

Handler = Callable[[Any, str], object | Awaitable[object]]
"""``handler(request, key)`` -> the typed answer or a dict; a coroutine function or a plain one."""

BROKEN = (OSError, EOFError, asyncio.IncompleteReadError)
"""What an asyncio transport raises when its connection is gone."""

DEFAULT_CLIENT_INFO = Implementation(name="mrtr-asyncio", version="0.1.0")


class Client(ClientBase[Handler]):
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
        return await self._drive(flow, flow.start(_now()))

    async def resume(
        self, pending: InputRequired | Mapping[str, Any], answers: Mapping[str, object]
    ) -> JsonObject:
        """Answer a manual-mode round (an :class:`InputRequired` or its saved ``data``).

        The wait for the answers counts against the flow's budget when ``pending`` was
        raised on this event loop (the same clock); saved data carries the budget it had
        left.
        """
        now = _now()
        flow = self.restore_flow(pending, now, asyncio.get_running_loop())
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
        error: Exception | None = None
        result: JsonObject = {}
        async with asyncio.TaskGroup() as group:
            run = _Handlers(self, group)
            try:
                result = await self._loop(flow, cmds, run)
            except Exception as exc:  # raised below, outside the group: no ExceptionGroup
                error = exc
            run.cancel_all()
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
                    await run.cancel(cmd.keys)
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
            # A plain-function handler already answered (a task's answer would be read
            # before a timer due meanwhile, just the same).
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
                        raise _broken(flow, exc, _now()) from exc
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


def _now() -> float:
    return asyncio.get_running_loop().time()


def _broken(flow: ClientFlow, exc: BaseException, now: float) -> TransportError:
    """End the flow after a transport failure; only this call fails."""
    last = None
    for cmd in flow.handle(CancelRequested(reason=exc), now):
        if isinstance(cmd, Fail):
            last = getattr(cmd.error, "last_result", None)
    return TransportError(exc, last_result=last)


class _Handlers:
    """The handlers of one call: a plain function runs at once (it would hold the event loop
    in a task of its own just the same); an awaitable answer is awaited in a task."""

    def __init__(self, client: Client, group: asyncio.TaskGroup) -> None:
        self._client = client
        self._group = group
        self._outcomes: asyncio.Queue[tuple[int, ClientEvent]] | None = None
        self._tokens = itertools.count()
        self.running: dict[str, tuple[int, asyncio.Task[None] | None]] = {}
        self.finished: collections.deque[tuple[int, ClientEvent]] = collections.deque()

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
                if self._outcomes is None:
                    self._outcomes = asyncio.Queue()
                task = self._group.create_task(
                    self._run(value, cmd, token, self._outcomes), name=f"mrtr-handler-{cmd.key}"
                )
                self.running[cmd.key] = (token, task)
                return
            event = HandlerReturned(key=cmd.key, answer=value)  # type: ignore[arg-type]
        self.running[cmd.key] = (token, None)
        self.finished.append((token, event))

    async def _run(
        self,
        value: Awaitable[object],
        cmd: InvokeHandler,
        token: int,
        outcomes: asyncio.Queue[tuple[int, ClientEvent]],
    ) -> None:
        event: ClientEvent
        try:
            event = HandlerReturned(key=cmd.key, answer=await value)  # type: ignore[arg-type]
        except Exception as exc:  # a handler's failure is a fact for the flow
            event = HandlerFailed(key=cmd.key, error=exc)
        outcomes.put_nowait((token, event))

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
        assert self._outcomes is not None
        while True:
            token, event = await self._outcomes.get()
            if self._current(token, event):
                return event

    async def cancel(self, keys: tuple[str, ...]) -> None:
        """Cancel these handlers and wait until each has finished."""
        entries = [self.running.pop(key)[1] for key in keys if key in self.running]
        tasks = [task for task in entries if task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    def cancel_all(self) -> None:
        """Cancel whatever still runs (the group waits for it)."""
        for _, task in self.running.values():
            if task is not None:
                task.cancel()
        self.running.clear()
