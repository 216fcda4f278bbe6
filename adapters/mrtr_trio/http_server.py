"""Serve an :class:`~mrtr_core.app.App` over Streamable HTTP under trio.

One task per connection, which also runs plain-function handlers; framing and every transport
check happen in :class:`~mrtr_core.http.HttpServerConnection`. A plain TCP connection is
driven through trio's low-level readiness waits rather than a ``SocketStream``. While a
coroutine handler runs the connection is watched: a client that closes it cancels the request
(closing the response stream is the cancellation signal on HTTP, streamable-http.mdx
§ Cancellation).
The end of a client's input is that signal too: on the wire a client that only shut down its
sending side (a TCP half-close) cannot be told from one that closed, so its request is
cancelled as well (digest §2.7: the server MUST treat a disconnect as the cancellation).

Example::

    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_http, app, "127.0.0.1", 0)
        ...
        nursery.cancel_scope.cancel()
"""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

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

__all__ = ["PrincipalOf", "serve_http"]

PrincipalOf = Callable[[Mapping[str, list[bytes]]], "str | None"]
"""Derives the authenticated principal from a request's headers (lower-cased names)."""

_READ_SIZE = 65536
# Annotated: trio.Cancelled has its own metaclass, so the inferred type would be
# tuple[object, ...] rather than a tuple of exception classes.
_PASS_THROUGH: tuple[type[BaseException], ...] = (*EXITS, trio.Cancelled)


class _Stalled(Exception):
    """The client stopped reading our response."""


class _StreamIO:
    """Bytes in and out of a trio stream (TLS, or any stream that is not a plain socket)."""

    def __init__(self, stream: trio.abc.Stream, send_timeout: float) -> None:
        self._stream = stream
        self._send_timeout = send_timeout

    async def read(self, arm: Callable[[], None], *, wait_first: bool = False) -> bytes | bytearray:
        """The next bytes (``b""`` at EOF); ``arm()`` is called before waiting for them
        (``wait_first`` changes nothing: every read of a stream waits)."""
        arm()
        return await self._stream.receive_some(_READ_SIZE)

    async def receive_any(self) -> bytes | bytearray:
        """The next bytes, ``b""`` at EOF or when the connection broke."""
        try:
            return await self._stream.receive_some(_READ_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return b""

    async def send(self, data: bytes) -> None:
        with trio.move_on_after(self._send_timeout) as scope:
            await self._stream.send_all(data)
        if scope.cancelled_caught:
            raise _Stalled

    async def checkpoint(self) -> None:
        """Nothing: every stream operation already is a checkpoint."""

    def send_eof(self) -> None:
        """Nothing: a TLS stream cannot half-close (the discarding alone avoids the reset)."""


class _SocketIO:
    """Bytes in and out of a plain TCP socket, driven with trio's low-level waits.

    A read or write is tried at once and only waits (``wait_readable``/``wait_writable``)
    when the socket would block: one scheduler pass per wait, where a ``SocketStream``
    spends several per call. :meth:`checkpoint` keeps the connection's task a good citizen
    when it never had to wait.
    """

    def __init__(self, sock: socket.socket, send_timeout: float) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._send_timeout = send_timeout
        self.waited = False

    async def read(self, arm: Callable[[], None], *, wait_first: bool = False) -> bytes | bytearray:
        """The next bytes (``b""`` at EOF); ``arm()`` is called before the first wait, only
        when the socket has nothing to read yet. ``wait_first``: our reply was just written
        and a client most often waits for it, so the read is not tried first (a wait on
        bytes already there ends at once)."""
        sock = self._sock
        armed = False
        while True:
            if not wait_first:
                try:
                    return sock.recv(_READ_SIZE)
                except BlockingIOError:
                    pass
                except OSError:
                    return b""  # reset by the peer: the same as its going away
            wait_first = False
            self.waited = True
            if not armed:
                arm()
                armed = True
            await trio.lowlevel.wait_readable(sock)

    async def receive_any(self) -> bytes | bytearray:
        """The next bytes, ``b""`` at EOF or when the connection broke."""
        sock = self._sock
        while True:
            try:
                await trio.lowlevel.wait_readable(sock)
                return sock.recv(_READ_SIZE)
            except BlockingIOError:
                continue
            except (OSError, trio.ClosedResourceError):
                return b""

    async def send(self, data: bytes) -> None:
        sock = self._sock
        view = memoryview(data)
        deadline: float | None = None
        while view:
            try:
                view = view[sock.send(view) :]
                continue
            except BlockingIOError:
                pass
            if deadline is None:
                deadline = trio.current_time() + self._send_timeout
            self.waited = True
            with trio.move_on_at(deadline) as scope:
                await trio.lowlevel.wait_writable(sock)
            if scope.cancelled_caught:
                raise _Stalled

    def send_eof(self) -> None:
        """Half-close: the client reads the end of our response."""
        self._sock.shutdown(socket.SHUT_WR)

    async def checkpoint(self) -> None:
        """Yield once per request when the socket never made the task wait."""
        if not self.waited:
            await trio.lowlevel.checkpoint()
        self.waited = False

    def close(self) -> None:
        trio.lowlevel.notify_closing(self._sock)
        self._sock.close()


_IO = _StreamIO | _SocketIO


async def _receive_by(io: _IO, deadline: float) -> bytes | bytearray | None:
    """The next bytes (``b""`` at EOF), or ``None`` when ``deadline`` passes first."""
    with trio.CancelScope() as scope:

        def arm() -> None:
            scope.deadline = deadline

        return await io.read(arm)
    return None


async def _linger(io: _IO, conn: HttpServerConnection) -> None:
    """Close in stages when the client may still be sending (RFC 9112 §9.6): half-close,
    then discard what arrives until it closes too, for at most ``LINGER_S`` seconds and
    ``LINGER_MAX_BYTES`` bytes, so our last response is not lost to a reset. It runs in the
    connection's scope and slot: a server making room may end it."""
    if not conn.peer_may_still_send:
        return
    io.send_eof()
    deadline = trio.current_time() + LINGER_S
    discarded = 0
    while discarded <= LINGER_MAX_BYTES:
        data = await _receive_by(io, deadline)
        if not data:
            return  # the client closed, or time is up
        discarded += len(data)


class _Slot:
    """One connection being served: its HTTP state, the scope that ends it, and whether a
    request is being answered on it (from its arrival until the reply is written)."""

    __slots__ = ("answering", "conn", "scope", "started")

    def __init__(self, conn: HttpServerConnection) -> None:
        self.conn = conn
        self.scope = trio.CancelScope()
        self.answering = False
        self.started: float | None = None
        """When the request being read began to be waited for (its read timeout's start)."""


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
        self._slots: dict[_Slot, None] = {}  # oldest first

    async def handle(self, stream: trio.abc.Stream) -> None:
        try:
            self.limiter.acquire_nowait()
        except trio.WouldBlock:
            if not self._make_room():
                await trio.aclose_forcefully(stream)
                return
            await self.limiter.acquire()  # the connection closed for us gives its slot back
        slot = _Slot(HttpServerConnection(self.config, tool_schema=self._tool_schema))
        self._slots[slot] = None
        io: _IO
        if isinstance(stream, trio.SocketStream) and stream.socket.type == socket.SOCK_STREAM:
            # Plain TCP: take the socket out of its wrapper and drive it directly.
            fd = stream.socket.detach()
            io = _SocketIO(socket.socket(fileno=fd), self.read_timeout)
        else:
            io = _StreamIO(stream, self.read_timeout)
        try:
            with slot.scope:
                await self._serve(io, slot)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, _Stalled):
            pass  # the peer went away; only this connection is affected
        finally:
            self._slots.pop(slot, None)
            self.limiter.release()
            if isinstance(io, _SocketIO):
                io.close()
            await trio.aclose_forcefully(stream)

    def _make_room(self) -> bool:
        """Close the oldest connection that only waits for its client, to take a new one;
        whether there was one (a server full of silent or slow clients stays reachable)."""
        for slot in self._slots:
            if not slot.answering and slot.conn.waiting_for_peer:
                del self._slots[slot]
                slot.scope.cancel()
                return True
        return False

    def _read_deadline(self, slot: _Slot) -> float:
        # Idle between requests: the idle timeout; inside one: the read timeout, counted
        # from the request's first bytes.
        if slot.conn.idle:
            slot.started = None
            return trio.current_time() + self.idle_timeout
        if slot.started is None:
            slot.started = trio.current_time()
        return slot.started + self.read_timeout

    async def _serve(self, io: _IO, slot: _Slot) -> None:
        conn = slot.conn
        # One cancel scope serves many reads: its deadline is set while a read waits and
        # lifted after it (entering a scope per read costs several times more). A deadline
        # that passes just as bytes arrive leaves the scope cancelled: the bytes are kept and
        # the connection goes on in a new scope.
        while True:
            reads = trio.CancelScope()
            with reads:
                if not await self._serve_reads(io, slot, reads):
                    return
            if reads.cancelled_caught:
                conn.timed_out()
                out = conn.data_to_send()
                if out:
                    await io.send(out)
                await _linger(io, conn)
                return

    async def _serve_reads(self, io: _IO, slot: _Slot, reads: trio.CancelScope) -> bool:
        """Serve requests until the connection ends (``False``) or ``reads`` can time no
        more reads (``True``); a read that times out raises ``Cancelled`` into ``reads``."""
        conn = slot.conn
        armed = replied = False

        def arm() -> None:
            nonlocal armed
            reads.deadline = self._read_deadline(slot)
            armed = True

        while True:
            event = conn.next_event()
            out = conn.data_to_send()
            if out:
                await io.send(out)
            if event is NEED_DATA:
                # Right after a reply, with nothing of a next request buffered, the client
                # is most likely reading it: wait before trying to read.
                data = await io.read(arm, wait_first=replied and conn.idle)
                replied = False
                if armed:
                    reads.deadline = math.inf
                    armed = False
                conn.receive_data(data)
                if reads.cancel_called:
                    return True
            elif isinstance(event, MessageReceived):
                slot.started = None
                slot.answering = True  # until the reply is written
                await io.checkpoint()
                reply = await self._answer(event, io, conn)
                if reply is None:
                    return False  # the client closed the connection: the request is cancelled
                send_http_reply(conn, reply, event.request_id)
                await io.send(conn.data_to_send())
                slot.answering = False
                replied = True
            elif isinstance(event, ConnectionEnded):
                await _linger(io, conn)
                return False

    def _tool_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's ``inputSchema``, so ``Mcp-Param-*`` headers are checked against it."""
        tool = self.app.find_tool(name)
        return tool.input_schema if tool is not None else None

    async def _answer(
        self, event: MessageReceived, io: _IO, conn: HttpServerConnection
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
                return await run_step(
                    self.app, step, clock=self.clock, guard=self.guard, pass_through=_PASS_THROUGH
                )
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
                data = await io.receive_any()
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
                    reply = await run_step(
                        self.app, step, clock=self.clock, guard=self.guard,
                        pass_through=_PASS_THROUGH,
                    )
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
        max_connections: Connections served at once. When all are taken, a new one closes
            the oldest that only waits for its client (between requests, or a request still
            arriving); when every one is being answered, the new one is closed.
        task_status: Receives the bound port.
    """
    http_server_options(
        port=port, read_timeout=read_timeout, idle_timeout=idle_timeout,
        max_connections=max_connections,
    )
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
