"""Serve an :class:`~mrtr_core.app.App` over Streamable HTTP under trio.

One task per connection; framing and every transport check happen in
:class:`~mrtr_core.http.HttpServerConnection`. While a handler runs the connection is
watched: a client that closes it cancels the request (closing the response stream is the
cancellation signal on HTTP, streamable-http.mdx § Cancellation).

Example::

    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_http, app, "127.0.0.1", 0)
        ...
        nursery.cancel_scope.cancel()
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

from mrtr_core.app import App, Reply, RunHandler
from mrtr_core.http import (
    NEED_DATA,
    ConnectionEnded,
    HttpServerConfig,
    HttpServerConnection,
    MessageReceived,
)
from mrtr_trio.stdio_server import internal_error_reply, run_step

__all__ = ["PrincipalOf", "serve_http"]

PrincipalOf = Callable[[Mapping[str, list[bytes]]], "str | None"]
"""Derives the authenticated principal from a request's headers (lower-cased names)."""

_READ_SIZE = 65536


class _Stalled(Exception):
    """The client stopped reading our response."""


class _Server:
    def __init__(
        self,
        app: App,
        *,
        guard: Any,
        config: HttpServerConfig,
        clock: Callable[[], float],
        principal: PrincipalOf | None,
        read_timeout: float,
        idle_timeout: float,
        max_connections: int,
    ) -> None:
        self.app = app
        self.guard = guard
        self.config = config
        self.clock = clock
        self.principal = principal
        self.read_timeout = read_timeout
        self.idle_timeout = idle_timeout
        self.limiter = trio.CapacityLimiter(max_connections)

    async def handle(self, stream: trio.SocketStream) -> None:
        try:
            self.limiter.acquire_nowait()
        except trio.WouldBlock:
            await trio.aclose_forcefully(stream)
            return
        try:
            await self._serve(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, _Stalled):
            pass  # the peer went away; only this connection is affected
        finally:
            self.limiter.release()
            await trio.aclose_forcefully(stream)

    async def _serve(self, stream: trio.SocketStream) -> None:
        conn = HttpServerConnection(self.config, tool_schema=self._tool_schema)
        started: float | None = None
        while True:
            event = conn.next_event()
            await self._send(stream, conn.data_to_send())
            if event is NEED_DATA:
                if conn.idle:
                    started, deadline = None, trio.current_time() + self.idle_timeout
                else:
                    started = trio.current_time() if started is None else started
                    deadline = started + self.read_timeout
                data: bytes | None = None
                with trio.move_on_at(deadline):
                    data = await stream.receive_some(_READ_SIZE)
                if data is None:
                    conn.timed_out()
                    await self._send(stream, conn.data_to_send())
                    return
                conn.receive_data(data)
            elif isinstance(event, MessageReceived):
                started = None
                reply = await self._answer(event, stream, conn)
                if reply is None:
                    return  # the client closed the connection: the request is cancelled
                conn.send_reply(reply.message, reply.status, notifications=reply.notifications)
            elif isinstance(event, ConnectionEnded):
                return

    def _tool_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's ``inputSchema``, so ``Mcp-Param-*`` headers are checked against it."""
        tool = self.app.find_tool(name)
        return tool.input_schema if tool is not None else None

    async def _send(self, stream: trio.SocketStream, data: bytes) -> None:
        if not data:
            return
        with trio.move_on_after(self.read_timeout) as scope:
            await stream.send_all(data)
        if scope.cancelled_caught:
            raise _Stalled

    async def _answer(
        self, event: MessageReceived, stream: trio.SocketStream, conn: HttpServerConnection
    ) -> Reply | None:
        try:
            principal = self.principal(event.headers) if self.principal is not None else None
            step = self.app.receive(
                event.message, now=self.clock(), principal=principal, parsed=event.parsed
            )
        except Exception as exc:
            return internal_error_reply(event.request_id, exc)
        if not isinstance(step, RunHandler):
            return step
        if not step.may_suspend and step.run.claim is None:
            # A plain function runs without a checkpoint: nothing can observe the client
            # going away meanwhile, so no watcher task is needed.
            try:
                return await run_step(self.app, step, clock=self.clock, guard=self.guard)
            except Exception as exc:
                return internal_error_reply(event.request_id, exc)
        reply: Reply | None = None
        gone = False

        async def watch(handler_scope: trio.CancelScope) -> None:
            # Read while the handler runs: EOF means the client gave up on the request.
            # Pipelined bytes are kept in ``conn`` (bounded: at most one request's worth).
            nonlocal gone
            budget = self.config.max_body_bytes + self.config.max_header_bytes
            while budget > 0:
                try:
                    data = await stream.receive_some(_READ_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                conn.receive_data(data)
                if not data:
                    gone = True
                    handler_scope.cancel()
                    return
                budget -= len(data)

        async with trio.open_nursery() as nursery:
            with trio.CancelScope() as handler_scope:
                nursery.start_soon(watch, handler_scope)
                try:
                    reply = await run_step(self.app, step, clock=self.clock, guard=self.guard)
                except Exception as exc:
                    reply = internal_error_reply(event.request_id, exc)
            nursery.cancel_scope.cancel()
        return None if gone else reply


async def serve_http(
    app: App,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    guard: Any = None,
    config: HttpServerConfig | None = None,
    clock: Callable[[], float] = time.time,
    principal: PrincipalOf | None = None,
    read_timeout: float = 30.0,
    idle_timeout: float = 60.0,
    max_connections: int = 256,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` until cancelled; ``await nursery.start(serve_http, app, host, 0)`` gives
    the bound port.

    Args:
        app: The app to serve.
        host: Address to listen on (keep ``127.0.0.1`` for local servers, digest §3.3).
        port: Port to listen on; ``0`` picks a free one.
        guard: Replay guard for single-use handlers (sync or async).
        config: Endpoint path, body limits, allowed origins.
        clock: Wall-clock seconds for ``requestState`` sealing (default ``time.time``).
        principal: Derives the principal from request headers (default: none).
        read_timeout: Seconds a client gets to send a whole request (and to read the reply).
        idle_timeout: Seconds an idle keep-alive connection is kept open.
        max_connections: Connections served at once; more are closed on accept.
        task_status: Receives the bound port.
    """
    server = _Server(
        app,
        guard=guard,
        config=config or HttpServerConfig(),
        clock=clock,
        principal=principal,
        read_timeout=read_timeout,
        idle_timeout=idle_timeout,
        max_connections=max_connections,
    )
    listeners = await trio.open_tcp_listeners(port, host=host)
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(server.handle, listeners)
