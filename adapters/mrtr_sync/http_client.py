"""Streamable HTTP client transport for blocking code: keep-alive sockets, one request each.

Example::

    transport = HttpTransport("http://127.0.0.1:8000/mcp")
    response = transport.request(message, timeout=30.0)
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any

from mrtr_core._checks import positive_int, positive_seconds
from mrtr_core.http import (
    NEED_DATA,
    HttpClientConfig,
    HttpClientConnection,
    HttpTransportBase,
    NotificationAccepted,
    ResponseReceived,
    sent_again_safely,
)

__all__ = ["HttpTransport"]

JsonObject = dict[str, Any]
_READ_SIZE = 65536
_BROKEN = (BrokenPipeError, ConnectionResetError)
"""A reused connection that broke so may have been closed by the server while idle."""


class _Connection:
    """One socket plus its sans-IO HTTP state."""

    def __init__(self, sock: socket.socket, http: HttpClientConnection) -> None:
        self.sock = sock
        self.http = http
        self.used = False
        self.cut = False
        """Whether :meth:`HttpTransport.close` shut this connection down under its request."""
        self._readable: select.poll | None = None

    def stale(self) -> bool:
        """Whether the server already closed (or wrote to) this idle connection: anything
        to read on an idle connection (its end, an error, unasked-for bytes) means it
        cannot carry a new request. One ``poll`` that does not wait."""
        if isinstance(self.sock, ssl.SSLSocket):
            return False  # TLS may have its own bytes to read: a retry covers a stale one
        if self._readable is None:
            self._readable = select.poll()
            self._readable.register(self.sock, select.POLLIN)
        try:
            return bool(self._readable.poll(0))
        except OSError:
            return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def cut_off(self) -> None:
        """Shut the socket down under the thread using it: its blocked ``recv`` or
        ``sendall`` returns or fails at once (closing the file descriptor would not wake it).
        The plain socket's ``shutdown``: a TLS socket's own would drop its TLS state while
        that thread still uses it."""
        self.cut = True
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)


class HttpTransport(HttpTransportBase[_Connection, ssl.SSLContext]):
    """The sync :class:`~mrtr_sync.Transport` over Streamable HTTP.

    Each request uses one keep-alive connection from a small pool (HTTP/1.1 carries one
    request at a time per connection), so several threads may call :meth:`request` at once.
    A connection the server closed between requests is replaced, and the request sent again
    when no byte of an answer had arrived. A broken connection fails only the request on it.
    :meth:`close` fails every request in flight or waiting for a connection, and every later
    one, with :class:`~mrtr_core.errors.TransportClosedError`.

    Args:
        url: The MCP endpoint, e.g. ``"http://127.0.0.1:8000/mcp"``.
        config: Response limits and extra headers (``Authorization``...).
        max_connections: Most connections open at once (and so requests in flight).
        connect_timeout: Seconds to wait for a TCP (and TLS) connection.
        ssl_context: For ``https://`` URLs; the default context when not given.
    """

    def __init__(
        self,
        url: str,
        *,
        config: HttpClientConfig | None = None,
        max_connections: int = 4,
        connect_timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        positive_int("max_connections", max_connections)
        positive_seconds("connect_timeout", connect_timeout)
        super().__init__(url, config, ssl_context, ssl.create_default_context)
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._free_slots = max_connections
        """Connections that may still be opened (requests that may start now)."""
        self._slot_freed = threading.Condition(self._lock)
        """Notified when a request gives its slot back, and when the transport closes."""
        self._busy: set[_Connection] = set()
        """The connections carrying a request (what :meth:`close` cuts off)."""

    # -- the Transport protocol -------------------------------------------------------------

    def request(self, message: Mapping[str, Any], *, timeout: float | None = None) -> JsonObject:
        """Send one request and return its JSON-RPC response (a result or an error).

        Raises:
            TimeoutError: No complete response within ``timeout`` seconds (the connection is
                closed, which is how HTTP cancels a request).
            ConnectionError: The connection broke (``ServerDisconnectedError`` included).
            mrtr_core.errors.TransportClosedError: The transport was closed before the
                response came (a ``ConnectionError``).
            mrtr_core.http.HttpStatusError: An HTTP error status without a JSON-RPC body.
            mrtr_core.errors.RemoteProtocolError: The server broke the transport rules.
        """
        event = self._exchange(message, timeout)
        if not isinstance(event, ResponseReceived):
            raise ConnectionError("server accepted a request as a notification")
        return event.message

    def notify(self, message: Mapping[str, Any], *, timeout: float | None = None) -> None:
        """Send one notification (the server answers 202).

        Raises:
            mrtr_core.http.HttpStatusError: The server refused it (any status but 2xx),
                with or without a JSON-RPC error in the body.
        """
        self._exchange(message, timeout)

    def close(self) -> None:
        """Close the transport: every request in flight or waiting for a connection fails at
        once with :class:`~mrtr_core.errors.TransportClosedError`, as does every later one,
        and the idle connections are closed."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            # Under the lock: a request takes its connection out of ``_busy`` (under the
            # lock) before closing it, so no socket here is closed, or its number reused.
            for conn in self._busy:
                conn.cut_off()
            self._slot_freed.notify_all()
        for conn in idle:
            conn.close()

    def __enter__(self) -> HttpTransport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------

    def _exchange(
        self, message: Mapping[str, Any], timeout: float | None
    ) -> ResponseReceived | NotificationAccepted:
        deadline = None if timeout is None else time.monotonic() + timeout
        self._take_slot(deadline, timeout)
        try:
            for attempt in range(2):
                conn = self._checkout(deadline, fresh=attempt > 0)
                reused = conn.used
                try:
                    event = self._roundtrip(conn, message, deadline)
                except BaseException as exc:
                    self._discard(conn)
                    if conn.cut and isinstance(exc, Exception):
                        raise self._closed_error() from exc  # close() cut it off
                    if reused and attempt == 0 and sent_again_safely(exc, conn.http, _BROKEN):
                        continue  # the server closed an idle keep-alive connection
                    raise
                self._checkin(conn)
                return event
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            with self._slot_freed:
                self._free_slots += 1
                self._slot_freed.notify()

    def _take_slot(self, deadline: float | None, timeout: float | None) -> None:
        """Wait for a request slot (a connection that may be used); refused once closed."""
        with self._slot_freed:
            while not self._closed and self._free_slots == 0:
                left = _remaining(deadline)
                if left is not None and left <= 0:
                    raise TimeoutError(f"no connection free within {timeout} s")
                self._slot_freed.wait(left)
            if self._closed:
                raise self._closed_error()
            self._free_slots -= 1

    def _checkout(self, deadline: float | None, *, fresh: bool = False) -> _Connection:
        """An idle connection, or a new one (always a new one when ``fresh``: a retry, whose
        idle peers may be as stale as the one that failed; a TLS one cannot be checked)."""
        with self._lock:
            if self._closed:
                raise self._closed_error()
            while self._idle and not fresh:
                conn = self._idle.pop()
                if conn.http.ready and not conn.stale():
                    self._busy.add(conn)
                    return conn
                conn.close()
        limit = _remaining(deadline)
        timeout = self.connect_timeout if limit is None else min(limit, self.connect_timeout)
        try:
            sock = socket.create_connection(
                (self.endpoint.host, self.endpoint.port), timeout=timeout
            )
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self._ssl is not None:  # the handshake is part of connecting
                    sock = self._ssl.wrap_socket(sock, server_hostname=self.endpoint.host)
            except BaseException:
                sock.close()
                raise
        except TimeoutError:
            if limit is not None and limit <= self.connect_timeout:
                raise  # the caller's deadline passed: its own TimeoutError
            # The connect limit, not the response's: a broken transport, reported now
            # (a TimeoutError here made the client wait out the whole leg timeout).
            raise ConnectionError(
                f"no connection to {self.endpoint.host}:{self.endpoint.port} within "
                f"{self.connect_timeout} s"
            ) from None
        conn = _Connection(
            sock, HttpClientConnection(self.endpoint, self.config, param_headers=self.param_headers)
        )
        with self._lock:
            if self._mark_busy(conn):
                return conn
        conn.close()  # the transport was closed while connecting
        raise self._closed_error()

    def _mark_busy(self, conn: _Connection) -> bool:
        """Record ``conn`` as carrying a request (what :meth:`close` cuts off), unless the
        transport is closed (then ``False``). Called with the lock held."""
        if self._closed:
            return False
        self._busy.add(conn)
        return True

    def _checkin(self, conn: _Connection) -> None:
        with self._lock:
            self._busy.discard(conn)
            if conn.http.ready and not self._closed:
                conn.used = True
                self._idle.append(conn)
                return
        conn.close()

    def _discard(self, conn: _Connection) -> None:
        """Close a connection whose request failed."""
        with self._lock:
            self._busy.discard(conn)
        conn.close()

    def _roundtrip(
        self, conn: _Connection, message: Mapping[str, Any], deadline: float | None
    ) -> ResponseReceived | NotificationAccepted:
        data = conn.http.send_request(message)
        conn.sock.settimeout(_positive(deadline))
        conn.sock.sendall(data)
        while True:
            event = conn.http.next_event()
            if event is NEED_DATA:
                conn.sock.settimeout(_positive(deadline))
                conn.http.receive_data(conn.sock.recv(_READ_SIZE))
            elif isinstance(event, ResponseReceived | NotificationAccepted):
                return event
            # NotificationReceived: request-related notifications are not a transport's concern


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _positive(deadline: float | None) -> float | None:
    """The socket timeout left before ``deadline``; raises ``TimeoutError`` when it passed."""
    left = _remaining(deadline)
    if left is not None and left <= 0:
        raise TimeoutError("no response in time")
    return left
