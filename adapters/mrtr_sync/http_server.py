"""Serve an :class:`~mrtr_core.app.App` over Streamable HTTP with blocking sockets.

One thread accepts connections, one thread serves each connection (its requests one after
another, as HTTP/1.1 does); both leave SIGINT and SIGTERM to the main thread (see
:mod:`mrtr_sync.threads`), so a process serving in the background stops on the first
signal even while its main thread sleeps. Framing and every transport check happen in
:class:`~mrtr_core.http.HttpServerConnection`; this module only moves bytes, keeps the
timers, and runs handlers. A handler thread cannot be stopped: a client that closes (or
half-closes) its connection while a request is answered gets that reply written, but no
handler is started for what it pipelined behind it (closing is the cancellation, digest §2.7).

Example::

    server = serve_http(app, "127.0.0.1", 0)      # serving in the background
    print(server.url)
    ...
    server.shutdown()
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from mrtr_core._checks import http_server_options
from mrtr_core.app import App, Reply, RunHandler
from mrtr_core.app.reply import internal_error_reply, send_http_reply
from mrtr_core.http import (
    LINGER_MAX_BYTES,
    LINGER_S,
    NEED_DATA,
    ConnectionEnded,
    HttpServerConfig,
    HttpServerConnection,
    MessageReceived,
)
from mrtr_sync.clock import SIGNAL_CHECK_S
from mrtr_sync.stdio_server import run_step
from mrtr_sync.threads import signal_safe_thread

__all__ = ["HttpServer", "PrincipalOf", "serve_http"]

PrincipalOf = Callable[[Mapping[str, list[bytes]]], "str | None"]
"""Derives the authenticated principal from a request's headers (lower-cased names)."""

_READ_SIZE = 65536
# accept() errors that last until a descriptor (or memory) is freed: the listener stays
# readable meanwhile, so the loop waits for a connection to end instead of trying again.
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

_FLUSH_WAIT_S = 0.5
"""How long a full server waits for a connection whose reply is handed over whole to finish
writing it, before refusing a new connection: its client may have read the reply before its
thread got back to mark the connection as waiting (a client that does not read its reply
keeps the write going, and the newcomer is refused)."""


class HttpServer:
    """A Streamable HTTP server for one app, bound on construction.

    Args:
        app: The app to serve.
        host: Address to listen on (keep ``127.0.0.1`` for local servers, digest §3.3).
        port: Port to listen on; ``0`` picks a free one (see :attr:`port`).
        guard: Replay guard for single-use handlers.
        config: Endpoint path, body limits, allowed origins.
        clock: Wall-clock seconds for ``requestState`` sealing (default ``time.time``).
        principal: Derives the principal from request headers (default: none).
        read_timeout: Seconds a client gets to send a whole request (and to read the reply).
        idle_timeout: Seconds an idle keep-alive connection is kept open.
        max_connections: Connections served at once. When all are taken, a new one closes
            the oldest that only waits for its client (between requests, or a request still
            arriving); when every one is being answered, the new one is closed.
    """

    def __init__(
        self,
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
        self._listener = socket.create_server((host, port))
        self.host, self.port = self._listener.getsockname()[:2]
        self._wake_r, self._wake_w = socket.socketpair()
        self._lock = threading.Lock()
        self._answered = threading.Condition(self._lock)  # a reply was written
        self._conns: dict[socket.socket, _Served] = {}  # oldest first
        self._leaving: list[threading.Thread] = []  # connections closed to make room
        self._stopping = False
        self._accept_thread: threading.Thread | None = None
        self._done = threading.Event()
        self._freed = threading.Event()  # a connection ended (or the server is stopping)

    @property
    def url(self) -> str:
        """The MCP endpoint URL, e.g. ``http://127.0.0.1:8000/mcp``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.config.path}"

    def start(self) -> HttpServer:
        """Accept connections in a background thread; returns ``self``.

        That thread, and each connection's, blocks SIGINT and SIGTERM (they reach the main
        thread; see :mod:`mrtr_sync.threads`).
        """
        self._accept_thread = signal_safe_thread(self.serve_forever, name=f"mrtr-http-{self.port}")
        self._accept_thread.start()
        return self

    def serve_forever(self) -> None:
        """Accept connections in the calling thread until :meth:`shutdown`.

        The wait for a connection wakes every
        :data:`~mrtr_sync.clock.SIGNAL_CHECK_S` seconds: in the main thread, a SIGTERM or
        Ctrl-C that lands just before it blocks is acted on then, not at the next connection.
        """
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self._stopping:
                for key, _ in selector.select(SIGNAL_CHECK_S):
                    if key.fileobj is self._wake_r or self._stopping:
                        return
                    self._freed.clear()
                    if not self._accept():
                        # Out of descriptors: try again once a connection ends and frees
                        # one, or after a pause (something else may free one).
                        self._freed.wait(SIGNAL_CHECK_S)
        finally:
            selector.close()
            self._done.set()

    def shutdown(self, timeout: float | None = 5.0) -> None:
        """Stop accepting, close every connection, and wait for their threads."""
        with self._lock:
            self._stopping = True
            self._answered.notify_all()
            conns = {sock: served.thread for sock, served in self._conns.items()}
            leaving = list(self._leaving)
        self._freed.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._accept_thread is not None:
            self._accept_thread.join(timeout)
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in [*conns.values(), *leaving]:
            thread.join(timeout)
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    # -- connections -------------------------------------------------------------------------

    def _accept(self) -> bool:
        """Take one waiting connection; ``False`` when the process is out of descriptors
        or memory (``EMFILE`` and the like), so that accepting fails until one is freed."""
        try:
            sock, _ = self._listener.accept()
        except OSError as exc:
            return exc.errno not in _OUT_OF_RESOURCES
        with self._lock:
            if not self._take_slot():
                sock.close()
                return True
            served = _Served(HttpServerConnection(self.config, tool_schema=self._tool_schema))
            served.thread = signal_safe_thread(
                self._serve_connection, sock, served, name="mrtr-http-conn"
            )
            self._conns[sock] = served
        served.thread.start()
        return True

    def _make_room(self) -> bool:
        """(Lock held.) Close the oldest connection that only waits for its client, to take
        a new one; whether there was one (a server full of silent or slow clients stays
        reachable)."""
        self._leaving = [thread for thread in self._leaving if thread.is_alive()]
        for sock, served in self._conns.items():
            if not served.answering and served.conn.waiting_for_peer:
                del self._conns[sock]
                self._leaving.append(served.thread)
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)  # its thread reads the end and closes it
                return True
        return False

    def _take_slot(self) -> bool:
        """(Lock held.) Whether a new connection may be served now: a slot is free, or one
        is made for it (see :meth:`_make_room`, and :data:`_FLUSH_WAIT_S`)."""
        if self._stopping:
            return False
        if len(self._conns) < self.max_connections or self._make_room():
            return True
        if not self._writing_reply():
            return False  # every connection is being answered: refused
        made = self._answered.wait_for(lambda: self._stopping or self._make_room(),
                                       _FLUSH_WAIT_S)
        return made and not self._stopping

    def _writing_reply(self) -> bool:
        """(Lock held.) Whether some connection is writing a reply it handed over whole: it
        waits for its client as soon as that write returns."""
        return any(served.answering and served.conn.waiting_for_peer
                   for served in self._conns.values())

    @staticmethod
    def _receive(sock: socket.socket, timeout: float) -> bytes | None:
        """What the peer sends within ``timeout`` seconds, or ``None`` when it sent nothing."""
        if timeout <= 0:
            # settimeout(0.0) would make the socket non-blocking: recv() would raise
            # BlockingIOError, taken for a broken peer, and the 408 would never be sent.
            return None
        sock.settimeout(timeout)
        try:
            return sock.recv(_READ_SIZE)
        except TimeoutError:
            return None

    def _serve_connection(self, sock: socket.socket, served: _Served) -> None:
        conn = served.conn
        started: float | None = None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                event = conn.next_event()
                self._send(sock, conn.data_to_send())
                if event is NEED_DATA:
                    if conn.idle:
                        started, timeout = None, self.idle_timeout
                    else:
                        started = time.monotonic() if started is None else started
                        timeout = started + self.read_timeout - time.monotonic()
                    data = self._receive(sock, timeout)
                    if data is None:
                        conn.timed_out()
                        self._send(sock, conn.data_to_send())
                        self._linger(sock, conn)
                        return
                    conn.receive_data(data)
                elif isinstance(event, MessageReceived):
                    started = None
                    served.answering = True  # until the reply is written
                    reply = self._answer(event)
                    send_http_reply(conn, reply, event.request_id)
                    self._send(sock, conn.data_to_send())
                    with self._answered:
                        served.answering = False
                        self._answered.notify_all()
                    if self._client_left(sock, conn):
                        # It closed while the request was answered: closing is the
                        # cancellation (digest §2.7), of what it pipelined behind it too.
                        return
                elif isinstance(event, ConnectionEnded):
                    self._linger(sock, conn)
                    return
        except OSError:
            return  # the peer went away; only this connection is affected
        finally:
            with self._lock:
                self._conns.pop(sock, None)
            sock.close()
            self._freed.set()

    def _client_left(self, sock: socket.socket, conn: HttpServerConnection) -> bool:
        """Whether the client ended its side (or reset the connection) while a request was
        answered, so that no handler is started for what it pipelined meanwhile (a handler
        thread cannot be stopped: the trio and asyncio servers cancel theirs). Reads what
        the client sent meanwhile without waiting, into ``conn``, up to its end or one
        request's worth of bytes (what those servers read while a handler runs)."""
        budget = self.config.max_body_bytes + self.config.max_header_bytes
        sock.settimeout(0.0)  # non-blocking; _receive() and _send() set their own timeout
        while budget > 0:
            try:
                data = sock.recv(_READ_SIZE)
            except BlockingIOError:
                return False
            except OSError:
                return True  # reset by the client: the same as its going away
            if not data:
                return True
            conn.receive_data(data)
            budget -= len(data)
        return False

    def _linger(self, sock: socket.socket, conn: HttpServerConnection) -> None:
        """Close in stages when the client may still be sending (RFC 9112 §9.6): half-close,
        then discard what arrives until it closes too, for at most ``LINGER_S`` seconds and
        ``LINGER_MAX_BYTES`` bytes, so our last response is not lost to a reset."""
        if not conn.peer_may_still_send:
            return
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + LINGER_S
        discarded = 0
        while discarded <= LINGER_MAX_BYTES:
            data = self._receive(sock, deadline - time.monotonic())
            if not data:
                return  # the client closed (or a shutdown made room), or time is up
            discarded += len(data)

    def _tool_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's ``inputSchema``, so ``Mcp-Param-*`` headers are checked against it."""
        tool = self.app.find_tool(name)
        return tool.input_schema if tool is not None else None

    def _send(self, sock: socket.socket, data: bytes) -> None:
        if data:
            sock.settimeout(self.read_timeout)
            sock.sendall(data)

    def _answer(self, event: MessageReceived) -> Reply:
        try:
            principal = self.principal(event.headers) if self.principal is not None else None
            now = self.clock()
            step = self.app.receive(
                event.message, now=now, principal=principal, parsed=event.parsed
            )
            if isinstance(step, RunHandler):
                return run_step(self.app, step, clock=self.clock, guard=self.guard)
            return step
        except Exception as exc:  # a bug in the app must not take the connection down
            return internal_error_reply(event.request_id, exc)


class _Served:
    """One connection being served: its HTTP state, its thread, and whether a request is
    being answered on it (from its arrival until the reply is written)."""

    __slots__ = ("answering", "conn", "thread")

    def __init__(self, conn: HttpServerConnection) -> None:
        self.conn = conn
        self.thread: threading.Thread
        self.answering = False


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
    """Bind and start serving ``app`` in the background; stop with ``server.shutdown()``.

    The serving threads leave SIGINT and SIGTERM to the main thread, which may simply wait
    (``time.sleep``, ``Event.wait``) with its signal handlers in place.

    See :class:`HttpServer` for the arguments.
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
    ).start()
