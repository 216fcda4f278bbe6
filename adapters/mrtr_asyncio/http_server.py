"""Serve an :class:`~mrtr_core.app.App` over Streamable HTTP under asyncio.

Each connection is an :class:`asyncio.Protocol`: bytes are fed to
:class:`~mrtr_core.http.HttpServerConnection` (framing and every transport check) as the
event loop delivers them, and a plain-function handler is answered right there, with no
task of its own. A coroutine handler runs in a task while the connection is watched: a
client that closes it cancels the request (closing the response stream is the cancellation
signal on HTTP, streamable-http.mdx § Cancellation).
The end of a client's input is that signal too: on the wire a client that only shut down its
sending side (a TCP half-close) cannot be told from one that closed, so its request is
cancelled as well (digest §2.7: the server MUST treat a disconnect as the cancellation).

Example::

    async with serve_http(app, "127.0.0.1", 0) as server:
        print(server.url)
        await server.serve_forever()
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mrtr_core._checks import http_server_options
from mrtr_core.app import App, Reply, RunHandler
from mrtr_core.app.drive_async import EXITS, internal_error_reply, run_step
from mrtr_core.app.reply import send_http_reply
from mrtr_core.http import (
    LINGER_MAX_BYTES,
    LINGER_S,
    NEED_DATA,
    ConnectionEnded,
    HttpServerConfig,
    HttpServerConnection,
    MessageReceived,
)

__all__ = ["HttpServer", "PrincipalOf", "serve_http"]

PrincipalOf = Callable[[Mapping[str, list[bytes]]], "str | None"]
"""Derives the authenticated principal from a request's headers (lower-cased names)."""

_PASS_THROUGH: tuple[type[BaseException], ...] = (*EXITS, asyncio.CancelledError)


class HttpServer:
    """A Streamable HTTP server for one app; use as ``async with serve_http(...) as server``.

    See :func:`serve_http` for the arguments.
    """

    def __init__(
        self,
        app: App,
        host: str,
        port: int,
        *,
        guard: Any,
        config: HttpServerConfig | None,
        clock: Callable[[], float],
        principal: PrincipalOf | None,
        read_timeout: float,
        idle_timeout: float,
        max_connections: int,
    ) -> None:
        http_server_options(
            port=port, read_timeout=read_timeout, idle_timeout=idle_timeout,
            max_connections=max_connections,
        )
        self.app = app
        self.guard = guard
        self.config = config or HttpServerConfig()
        self.clock = clock
        self.principal = principal
        self.read_timeout = read_timeout
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self._host, self._port = host, port
        self.host, self.port = host, port
        self._server: asyncio.Server | None = None
        self._conns: dict[_Connection, None] = {}  # oldest first

    @property
    def url(self) -> str:
        """The MCP endpoint URL, e.g. ``http://127.0.0.1:8000/mcp``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.config.path}"

    async def start(self) -> HttpServer:
        """Bind and start accepting; :attr:`port` is then the bound port."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), self._host, self._port
        )
        self.host, self.port = self._server.sockets[0].getsockname()[:2]
        return self

    async def serve_forever(self) -> None:
        """Wait until the server is closed (or the calling task cancelled)."""
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def aclose(self) -> None:
        """Stop accepting, drop every connection, and wait for their handlers."""
        if self._server is not None:
            self._server.close()
        conns = list(self._conns)
        tasks = [conn.task for conn in conns if conn.task is not None]
        for conn in conns:
            conn.abort()
            conn.cancel_handler()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> HttpServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _make_room(self) -> bool:
        """Close the oldest connection that only waits for its client, to take a new one;
        whether there was one (a server full of silent or slow clients stays reachable)."""
        for conn in self._conns:
            if conn.waiting_for_client:
                del self._conns[conn]
                conn.abort()
                return True
        return False

    def _tool_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's ``inputSchema``, so ``Mcp-Param-*`` headers are checked against it."""
        tool = self.app.find_tool(name)
        return tool.input_schema if tool is not None else None


class _Connection(asyncio.Protocol):
    """One client connection: HTTP/1.1 requests one after another.

    Timers: while a request is incomplete it must arrive within ``read_timeout`` of its
    first bytes (else 408); an idle keep-alive connection is closed after ``idle_timeout``;
    a reply the client does not read within ``read_timeout`` drops the connection. One
    timer handle serves all three: it is moved only when it fires early.
    """

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.conn = HttpServerConnection(server.config, tool_schema=server._tool_schema)
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None  # a coroutine handler's task
        self.task_cancelled = False  # cancel_handler() has cancelled ``task``
        self.budget = 0  # bytes still accepted while a handler runs
        self.started: float | None = None  # when the current request's first bytes came
        self.deadline: float | None = None  # when the current wait ends
        self.timer: asyncio.TimerHandle | None = None
        self.paused = False  # the client is not reading our replies fast enough
        self.closed = False
        self.lingering = False  # half-closed after our last response, discarding the rest
        self.discarded = 0  # bytes discarded while lingering

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        server = self.server
        if len(server._conns) >= server.max_connections and not server._make_room():
            self.closed = True
            transport.abort()
            return
        server._conns[self] = None
        self._process()

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            self.discarded += len(data)
            if self.discarded > LINGER_MAX_BYTES:
                self._end_lingering()
            return
        if self.closed:
            return
        self.conn.receive_data(data)
        if self.task is not None:
            # Bytes of a pipelined request wait in ``conn`` (bounded: at most one request's
            # worth) while the handler runs.
            self.budget -= len(data)
            if self.budget <= 0 and self.transport is not None:
                self.transport.pause_reading()
            return
        if not self.paused:
            self._process()

    def eof_received(self) -> bool:
        if self.lingering:
            self._end_lingering()
            return False
        if self.closed:
            return False
        self.conn.receive_data(b"")
        if self.task is not None:
            # The client gave up on the request: cancel the handler, send nothing.
            self.cancel_handler()
            self.abort()
            return False
        if not self.paused:
            self._process()
        return True  # keep the write side open for what is still to be sent

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server._conns.pop(self, None)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.cancel_handler()

    def pause_writing(self) -> None:
        if self.lingering:
            return  # its own timer bounds the rest; reading on is the point
        self.paused = True
        if self.transport is not None:
            self.transport.pause_reading()
        self._wait_until(self.loop.time() + self.server.read_timeout)

    def resume_writing(self) -> None:
        self.paused = False
        self.deadline = None  # the client reads again: no write timer
        if self.closed:
            return
        if self.transport is not None and self.task is None:
            self.transport.resume_reading()
        if self.task is None:
            self._process()

    @property
    def waiting_for_client(self) -> bool:
        """No handler runs and nothing of ours is unsent: only the client can move on."""
        transport = self.transport
        return (
            self.task is None
            and not self.paused
            and self.conn.waiting_for_peer
            and (transport is None or not transport.get_write_buffer_size())
        )

    # -- the request loop ---------------------------------------------------------------------

    def cancel_handler(self) -> None:
        """Cancel the running handler's task, once: the end of the client's input, the loss
        of the connection and the server closing each end the request, and a handler that
        catches the one ``CancelledError`` to clean up must not be cut again mid-cleanup
        (as trio's cancel scope, cancelled once however many times it is told)."""
        if self.task is not None and not self.task_cancelled:
            self.task_cancelled = True
            self.task.cancel()

    def abort(self) -> None:
        self.closed = True
        self.lingering = False
        if self.transport is not None:
            self.transport.abort()

    def _process(self) -> None:
        """Handle every complete request buffered, until more bytes are needed."""
        conn = self.conn
        while not self.closed:
            event = conn.next_event()
            out = conn.data_to_send()
            if out:
                self._write(out)
            if event is NEED_DATA:
                now = self.loop.time()
                if conn.idle:
                    self.started = None
                    self._wait_until(now + self.server.idle_timeout)
                else:
                    if self.started is None:
                        self.started = now
                    self._wait_until(self.started + self.server.read_timeout)
                return
            if isinstance(event, MessageReceived):
                self.started = None
                if not self.paused:
                    # (a write timer set by pause_writing() just above must survive)
                    self.deadline = None  # no read timer while the request is answered
                reply = self._answer(event)
                if reply is None:
                    return  # a task answers it
                send_http_reply(conn, reply, event.request_id)
                if self.paused:
                    self._write(conn.data_to_send())
                    return  # resume_writing() goes on
            elif isinstance(event, ConnectionEnded):
                self._close()
                return

    def _write(self, data: bytes) -> None:
        if data and self.transport is not None and not self.closed:
            self.transport.write(data)

    def _close(self) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        transport = self.transport
        if transport is None:
            return
        if self.conn.peer_may_still_send and transport.can_write_eof():
            # RFC 9112 §9.6: close in stages, or the client's unread bytes make the kernel
            # reset the connection and our response may be lost. Half-close, discard what
            # still arrives until the client closes too, for a bounded time and size.
            self.lingering = True
            transport.write_eof()
            transport.resume_reading()  # (a no-op unless reading was paused)
            self.deadline = self.loop.time() + LINGER_S
            self.timer = self.loop.call_at(self.deadline, self._end_lingering)
            return
        transport.close()

    def _end_lingering(self) -> None:
        """The client closed, sent ``LINGER_MAX_BYTES``, or ``LINGER_S`` passed: close."""
        self.lingering = False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.transport is not None:
            self.transport.close()

    def _wait_until(self, deadline: float) -> None:
        self.deadline = deadline
        if self.timer is not None and self.timer.when() <= deadline:
            return  # it fires early and moves itself
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.loop.call_at(deadline, self._timer_fired)

    def _timer_fired(self) -> None:
        self.timer = None
        if self.closed or self.deadline is None:
            return
        if self.loop.time() < self.deadline:
            self.timer = self.loop.call_at(self.deadline, self._timer_fired)
            return
        if self.paused:
            self.abort()  # the client stopped reading our reply
            return
        self.conn.timed_out()
        self._write(self.conn.data_to_send())
        self._close()

    # -- answering ----------------------------------------------------------------------------

    def _answer(self, event: MessageReceived) -> Reply | None:
        """The reply now, or ``None`` when a task was started to produce it."""
        server = self.server
        try:
            principal = server.principal(event.headers) if server.principal is not None else None
            step = server.app.receive(
                event.message, now=server.clock(), principal=principal, parsed=event.parsed
            )
        except Exception as exc:
            return internal_error_reply(event.request_id, exc)
        if not isinstance(step, RunHandler):
            return step
        if step.may_suspend or step.run.claim is not None:
            pending = run_step(
                server.app, step, clock=server.clock, guard=server.guard, pass_through=_PASS_THROUGH
            )
            self._start(event, pending)
            return None
        # A plain function: run it here, as the event loop would in a task of its own.
        try:
            try:
                value = step.invoke()
            except Exception as exc:
                return server.app.complete(step, server.clock(), raised=exc)
            except BaseException as exc:
                return _complete_raised(server, step, exc)
            if inspect.isawaitable(value):
                self._start(event, _finish(server, step, value))
                return None
            return server.app.complete(step, server.clock(), returned=value)
        except Exception as exc:
            return internal_error_reply(event.request_id, exc)

    def _start(self, event: MessageReceived, reply: Awaitable[Reply]) -> None:
        self.budget = self.server.config.max_body_bytes + self.server.config.max_header_bytes
        self.task_cancelled = False
        self.task = self.loop.create_task(self._run(event, reply))

    async def _run(self, event: MessageReceived, pending: Awaitable[Reply]) -> None:
        try:
            reply = await pending
        except asyncio.CancelledError:
            return  # the client went away, or the server is closing
        except Exception as exc:
            reply = internal_error_reply(event.request_id, exc)
        self.task = None
        if self.closed:
            return
        send_http_reply(self.conn, reply, event.request_id)
        if self.transport is not None and not self.paused:
            self.transport.resume_reading()
        if self.paused:
            self._write(self.conn.data_to_send())
        else:
            self._process()


async def _finish(server: HttpServer, step: RunHandler, value: Awaitable[Any]) -> Reply:
    """Complete a step whose plain-function handler gave an awaitable."""
    try:
        result = await value
    except Exception as exc:
        return server.app.complete(step, server.clock(), raised=exc)
    except BaseException as exc:
        return _complete_raised(server, step, exc)
    return server.app.complete(step, server.clock(), returned=result)


def _complete_raised(server: HttpServer, step: RunHandler, exc: BaseException) -> Reply:
    """The reply for a handler that raised a ``BaseException`` that is not an ``Exception``.

    The engine's "question without an answer yet" is a BaseException on purpose, so it is
    completed like any failure; cancellation and interpreter exits propagate.
    """
    if isinstance(exc, _PASS_THROUGH) or (
        isinstance(exc, BaseExceptionGroup) and exc.subgroup(_PASS_THROUGH) is not None
    ):
        raise exc
    return server.app.complete(step, server.clock(), raised=exc)


def serve_http(
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
) -> HttpServer:
    """A server for ``app``; ``async with serve_http(app, host, 0) as server`` binds it.

    Args:
        app: The app to serve.
        host: Address to listen on (keep ``127.0.0.1`` for local servers, digest §3.3).
        port: Port to listen on; ``0`` picks a free one (see ``server.port``).
        guard: Replay guard for single-use handlers (sync or async).
        config: Endpoint path, body limits, allowed origins.
        clock: Wall-clock seconds for ``requestState`` sealing (default ``time.time``).
        principal: Derives the principal from request headers (default: none).
        read_timeout: Seconds a client gets to send a whole request (and to read the reply).
        idle_timeout: Seconds an idle keep-alive connection is kept open.
        max_connections: Connections served at once. When all are taken, a new one closes
            the oldest that only waits for its client (between requests, or a request still
            arriving); when every one is being answered, the new one is closed.
    """
    return HttpServer(
        app,
        host,
        port,
        guard=guard,
        config=config,
        clock=clock,
        principal=principal,
        read_timeout=read_timeout,
        idle_timeout=idle_timeout,
        max_connections=max_connections,
    )
