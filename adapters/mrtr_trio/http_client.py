"""Streamable HTTP client transport for trio: a small pool of keep-alive connections.

Example::

    async with HttpTransport("http://127.0.0.1:8000/mcp") as transport:
        with trio.fail_after(30):
            response = await transport.request(message)
"""

from __future__ import annotations

import functools
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import trio

from mrtr_core._checks import positive_int
from mrtr_core.http import (
    NEED_DATA,
    AsyncHttpTransportBase,
    HttpClientConfig,
    HttpClientConnection,
    NotificationAccepted,
    ResponseReceived,
    sent_again_safely,
)

__all__ = ["HttpTransport"]

_READ_SIZE = 65536
T = TypeVar("T")
_BROKEN = (trio.BrokenResourceError, ConnectionResetError, BrokenPipeError)
"""A reused connection that broke so may have been closed by the server while idle."""


class _Connection:
    """One connection: a trio stream (TLS), or a plain TCP socket driven directly."""

    def __init__(self, stream: trio.abc.Stream, http: HttpClientConnection) -> None:
        self.stream = stream
        self.sock: socket.socket | None = None
        if isinstance(stream, trio.SocketStream) and stream.socket.type == socket.SOCK_STREAM:
            # Plain TCP: take the socket out of its wrapper; reads and writes are tried at
            # once and wait on trio's readiness only when they would block.
            self.sock = socket.socket(fileno=stream.socket.detach())
            self.sock.setblocking(False)
        self.http = http
        self.used = False
        self.waited = False

    async def send(self, data: bytes) -> None:
        sock = self.sock
        if sock is None:
            await self.stream.send_all(data)
            self.waited = True
            return
        view = memoryview(data)
        while view:
            try:
                view = view[sock.send(view) :]
            except BlockingIOError:
                self.waited = True
                await trio.lowlevel.wait_writable(sock)

    async def receive(self, *, wait_first: bool = False) -> bytes | bytearray:
        """The next bytes (``b""`` at EOF). ``wait_first``: the peer cannot have answered
        yet (the request was just sent), so the read is not tried before waiting."""
        sock = self.sock
        if sock is None:
            self.waited = True
            return await self.stream.receive_some(_READ_SIZE)
        if not wait_first:
            try:
                data = sock.recv(_READ_SIZE)
            except BlockingIOError:
                pass
            else:
                # Bytes were there already: yield all the same, or a server that always has
                # more (1xx heads, keep-alive comments) holds the loop and the caller's
                # timeout never fires. A cancelled read loses them with its connection.
                self.waited = True
                await trio.lowlevel.checkpoint()
                return data
        self.waited = True
        while True:
            await trio.lowlevel.wait_readable(sock)
            try:
                return sock.recv(_READ_SIZE)
            except BlockingIOError:
                continue

    def stale(self) -> bool:
        """Whether the server already closed (or wrote to) this idle connection: anything
        to read on an idle connection (its end, an error, unasked-for bytes such as a 408)
        means it cannot carry a new request. One peek that does not wait."""
        sock = self.sock
        if sock is None:
            return False  # TLS: a retry covers a stale one
        try:
            sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return False
        except OSError:
            return True
        return True

    def abort(self) -> None:
        """Close a plain TCP connection at once: a task waiting to read or write on it wakes
        with ``trio.ClosedResourceError``, and later reads and writes fail."""
        if self.sock is not None:
            trio.lowlevel.notify_closing(self.sock)
            self.sock.close()

    async def aclose(self) -> None:
        self.abort()
        await trio.aclose_forcefully(self.stream)


class HttpTransport(AsyncHttpTransportBase[_Connection, ssl.SSLContext]):
    """The trio :class:`~mrtr_trio.Transport` over Streamable HTTP.

    HTTP/1.1 carries one request at a time per connection, so concurrent requests use up to
    ``max_connections`` connections, reused while the server keeps them alive. A connection
    the server closed between requests is replaced, and the request sent again when no byte
    of an answer had arrived. A broken connection fails only the request on it. Timeouts come
    from the caller's cancel scope; a cancelled request's connection is closed (the HTTP way
    of cancelling). :meth:`aclose` fails every request in flight or waiting for a connection,
    and every later one, with :class:`~mrtr_core.errors.TransportClosedError`.

    Args:
        url: The MCP endpoint, e.g. ``"http://127.0.0.1:8000/mcp"``.
        config: Response limits and extra headers.
        max_connections: Most connections open at once.
        ssl_context: For ``https://`` URLs; the default context when not given.
    """

    def __init__(
        self,
        url: str,
        *,
        config: HttpClientConfig | None = None,
        max_connections: int = 4,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        positive_int("max_connections", max_connections)
        super().__init__(url, config, ssl_context, ssl.create_default_context)
        self._slots = trio.Semaphore(max_connections)
        self._running: set[trio.CancelScope] = set()
        """The cancel scope of each request waiting where closing must cancel it (for a
        slot, a new connection, or the answer on a TLS stream)."""
        self._busy: set[_Connection] = set()
        """The plain TCP connections carrying a request; closing aborts them, which wakes
        their requests (no cancel scope per request on the common path)."""

    async def aclose(self) -> None:
        """Close the transport: every request in flight or waiting for a connection fails
        with :class:`~mrtr_core.errors.TransportClosedError` (its connection is closed), as
        does every later one, and the idle connections are closed."""
        self._closed = True
        for scope in self._running:
            scope.cancel()
        for conn in self._busy:
            conn.abort()
        await super().aclose()

    # -- internals ---------------------------------------------------------------------------

    async def _exchange(
        self, message: Mapping[str, Any]
    ) -> ResponseReceived | NotificationAccepted:
        if self._closed:
            raise self._closed_error()
        try:
            return await self._exchange_on_a_slot(message)
        except Exception:
            if self._closed:
                # Closing woke the request (its connection aborted) or cancelled its wait.
                raise self._closed_error() from None
            raise

    async def _closable(self, wait: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await wait(*args)`` in a cancel scope that :meth:`aclose` cancels."""
        scope = trio.CancelScope()
        self._running.add(scope)
        try:
            with scope:
                return await wait(*args)
        finally:
            self._running.discard(scope)
        # Only aclose() cancels this scope; a cancellation of the caller's own goes on past
        # it (trio delivers it to the outermost cancelled scope).
        raise self._closed_error()

    async def _exchange_on_a_slot(
        self, message: Mapping[str, Any]
    ) -> ResponseReceived | NotificationAccepted:
        try:
            self._slots.acquire_nowait()
        except trio.WouldBlock:
            await self._closable(self._slots.acquire)
        try:
            for attempt in range(2):
                conn = await self._checkout(fresh=attempt > 0)
                retry_ok = conn.used and attempt == 0
                try:
                    if conn.sock is None:
                        event = await self._closable(self._roundtrip, conn, message)
                    else:
                        self._busy.add(conn)
                        try:
                            event = await self._roundtrip(conn, message)
                        finally:
                            self._busy.discard(conn)
                except BaseException as exc:
                    await conn.aclose()
                    if retry_ok and sent_again_safely(exc, conn.http, _BROKEN):
                        continue  # the server closed an idle keep-alive connection
                    raise
                if conn.http.ready and not self._closed:
                    conn.used = True
                    self._idle.append(conn)
                else:
                    await conn.aclose()
                if not conn.waited:
                    await trio.lowlevel.checkpoint()  # a request is always a checkpoint
                if self._closed:
                    raise self._closed_error()  # closed while in flight: the request fails
                return event
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            self._slots.release()

    async def _checkout(self, *, fresh: bool = False) -> _Connection:
        if self._closed:
            raise self._closed_error()
        while self._idle and not fresh:
            conn = self._idle.pop()
            if conn.http.ready and not conn.stale():
                conn.waited = False
                return conn
            await conn.aclose()
            if self._closed:
                raise self._closed_error()
        stream: trio.abc.Stream
        if self._ssl is not None:
            stream = await self._closable(
                functools.partial(trio.open_ssl_over_tcp_stream, ssl_context=self._ssl),
                self.endpoint.host, self.endpoint.port,
            )
        else:
            stream = await self._closable(
                trio.open_tcp_stream, self.endpoint.host, self.endpoint.port
            )
        return _Connection(
            stream,
            HttpClientConnection(self.endpoint, self.config, param_headers=self.param_headers),
        )

    async def _roundtrip(
        self, conn: _Connection, message: Mapping[str, Any]
    ) -> ResponseReceived | NotificationAccepted:
        await conn.send(conn.http.send_request(message))
        first = True
        while True:
            event = conn.http.next_event()
            if event is NEED_DATA:
                conn.http.receive_data(await conn.receive(wait_first=first))
                first = False
            elif isinstance(event, ResponseReceived | NotificationAccepted):
                return event
            # NotificationReceived: request-related notifications are not a transport's concern
