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

from mrtr_core.http import (
    NEED_DATA,
    HttpClientConfig,
    HttpClientConnection,
    HttpTransportBase,
    NotificationAccepted,
    ResponseReceived,
    ServerDisconnectedError,
)

__all__ = ["HttpTransport"]

JsonObject = dict[str, Any]
_READ_SIZE = 65536


class _Connection:
    """One socket plus its sans-IO HTTP state."""

    def __init__(self, sock: socket.socket, http: HttpClientConnection) -> None:
        self.sock = sock
        self.http = http
        self.used = False
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


class HttpTransport(HttpTransportBase[_Connection, ssl.SSLContext]):
    """The sync :class:`~mrtr_sync.Transport` over Streamable HTTP.

    Each request uses one keep-alive connection from a small pool (HTTP/1.1 carries one
    request at a time per connection), so several threads may call :meth:`request` at once.
    A connection the server closed between requests is replaced, and the request sent again
    when no byte of an answer had arrived. A broken connection fails only the request on it.

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
        super().__init__(url, config, ssl_context, ssl.create_default_context)
        self.connect_timeout = connect_timeout
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()

    # -- the Transport protocol -------------------------------------------------------------

    def request(self, message: Mapping[str, Any], *, timeout: float | None = None) -> JsonObject:
        """Send one request and return its JSON-RPC response (a result or an error).

        Raises:
            TimeoutError: No complete response within ``timeout`` seconds (the connection is
                closed, which is how HTTP cancels a request).
            ConnectionError: The connection broke (``ServerDisconnectedError`` included).
            mrtr_core.http.HttpStatusError: An HTTP error status without a JSON-RPC body.
            mrtr_core.errors.RemoteProtocolError: The server broke the transport rules.
        """
        event = self._exchange(message, timeout)
        if not isinstance(event, ResponseReceived):
            raise ConnectionError("server accepted a request as a notification")
        return event.message

    def notify(self, message: Mapping[str, Any], *, timeout: float | None = None) -> None:
        """Send one notification (the server answers 202)."""
        self._exchange(message, timeout)

    def close(self) -> None:
        """Close every idle connection; requests in flight finish on their own."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
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
        if not self._slots.acquire(timeout=_remaining(deadline)):
            raise TimeoutError(f"no connection free within {timeout} s")
        try:
            for attempt in range(2):
                conn = self._checkout(deadline, fresh=attempt > 0)
                reused = conn.used
                try:
                    event = self._roundtrip(conn, message, deadline)
                except ServerDisconnectedError as exc:
                    conn.close()
                    if reused and not exc.response_started and attempt == 0:
                        continue  # the server closed an idle keep-alive connection
                    raise
                except (BrokenPipeError, ConnectionResetError):
                    conn.close()
                    if reused and not conn.http.response_started and attempt == 0:
                        continue
                    raise
                except BaseException:
                    conn.close()
                    raise
                self._checkin(conn)
                return event
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            self._slots.release()

    def _checkout(self, deadline: float | None, *, fresh: bool = False) -> _Connection:
        """An idle connection, or a new one (always a new one when ``fresh``: a retry, whose
        idle peers may be as stale as the one that failed; a TLS one cannot be checked)."""
        with self._lock:
            if self._closed:
                raise ConnectionError("transport is closed")
            while self._idle and not fresh:
                conn = self._idle.pop()
                if conn.http.ready and not conn.stale():
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
        return _Connection(
            sock, HttpClientConnection(self.endpoint, self.config, param_headers=self.param_headers)
        )

    def _checkin(self, conn: _Connection) -> None:
        with self._lock:
            if conn.http.ready and not self._closed:
                conn.used = True
                self._idle.append(conn)
                return
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
