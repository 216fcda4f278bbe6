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
        error: Exception | None = None
        result: JsonObject = {}
        async with trio.open_nursery() as nursery:
            try:
                result = await self._loop(flow, cmds, _Handlers(self, nursery))
            except Exception as exc:  # raised below, outside the nursery: no ExceptionGroup
                error = exc
            nursery.cancel_scope.cancel()
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
                    raise self.input_required(
                        cmd, flow, trio.current_time(), trio.lowlevel.current_clock()
                    )
                elif isinstance(cmd, Complete):
                    return cmd.result
                elif isinstance(cmd, Fail):
                    raise cmd.error
            cmds = flow.handle(await self._next_event(flow, send, run), trio.current_time())

    async def _next_event(
        self, flow: ClientFlow, send: SendRequest | None, run: _Handlers
    ) -> ClientEvent:
        """Wait for the next fact: a response, a handler outcome, or the timer."""
        deadline = flow.deadline
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


def _broken(flow: ClientFlow, exc: BaseException, now: float) -> TransportError:
    """End the flow after a transport failure; only this call fails."""
    last = None
    for cmd in flow.handle(CancelRequested(reason=exc), now):
        if isinstance(cmd, Fail):
            last = getattr(cmd.error, "last_result", None)
    return TransportError(exc, last_result=last)


class _Handlers:
    """The handler tasks of one call, each in its own cancel scope."""

    def __init__(self, client: Client, nursery: trio.Nursery) -> None:
        self._client = client
        self._nursery = nursery
        self._send, self._receive = trio.open_memory_channel[tuple[int, ClientEvent]](math.inf)
        self._tokens = itertools.count()
        self.running: dict[str, tuple[int, trio.CancelScope, trio.Event]] = {}

    def start(self, cmd: InvokeHandler) -> None:
        token, scope, done = next(self._tokens), trio.CancelScope(), trio.Event()
        self.running[cmd.key] = (token, scope, done)
        fn = self._client.handlers.for_kind(cmd.request.method)
        self._nursery.start_soon(self._run, fn, cmd, token, scope, done)

    async def _run(
        self, fn: Handler | None, cmd: InvokeHandler, token: int, scope: trio.CancelScope,
        done: trio.Event,
    ) -> None:
        try:
            with scope:
                event: ClientEvent
                try:
                    if fn is None:
                        raise LookupError(f"no handler for {cmd.request.method}")
                    value = fn(cmd.request, cmd.key)
                    if inspect.isawaitable(value):
                        value = await value
                    event = HandlerReturned(key=cmd.key, answer=value)  # type: ignore[arg-type]
                except Exception as exc:  # a handler's failure is a fact for the flow
                    event = HandlerFailed(key=cmd.key, error=exc)
                self._send.send_nowait((token, event))
        finally:
            done.set()

    async def next_outcome(self) -> ClientEvent:
        """The next outcome of a handler still running (stale ones are dropped)."""
        while True:
            token, event = await self._receive.receive()
            entry = self.running.get(event.key)  # type: ignore[union-attr]
            if entry is not None and entry[0] == token:
                del self.running[event.key]  # type: ignore[union-attr]
                return event

    async def cancel(self, keys: tuple[str, ...]) -> None:
        """Cancel these handlers and wait until each has finished."""
        entries = [self.running.pop(key) for key in keys if key in self.running]
        for _, scope, _ in entries:
            scope.cancel()
        for _, _, done in entries:
            await done.wait()
