"""Streamable HTTP client transport for asyncio: a small pool of keep-alive connections.

Each connection is an :class:`asyncio.Protocol`: the bytes the event loop delivers are fed
to :class:`~mrtr_core.http.HttpClientConnection` (framing, limits and every check) right
away, and the request's future is resolved as soon as its response is complete.

Example::

    async with HttpTransport("http://127.0.0.1:8000/mcp") as transport:
        async with asyncio.timeout(30):
            response = await transport.request(message)
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import Any, TypeAlias

from mrtr_core._checks import positive_int
from mrtr_core.http import (
    NEED_DATA,
    AsyncHttpTransportBase,
    HttpClientConfig,
    HttpClientConnection,
    NotificationAccepted,
    ResponseReceived,
    ServerDisconnectedError,
    sent_again_safely,
)

__all__ = ["HttpTransport"]

_Answer: TypeAlias = ResponseReceived | NotificationAccepted
_BROKEN = (ConnectionResetError, BrokenPipeError)
"""A reused connection that broke so may have been closed by the server while idle."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request outstanding (:attr:`waiter`).

    Bytes are fed to :attr:`http` only while a request is outstanding, and the events are
    processed as they arrive (so every limit of ``HttpClientConfig`` applies as bytes come
    in, and nothing else is buffered). Bytes that arrive with no request outstanding make
    the connection unusable: they can belong to no answer.
    """

    def __init__(self, http: HttpClientConnection) -> None:
        self.http = http
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[_Answer] | None = None
        self.used = False
        self.ended = False  # the server sent EOF, or the connection was lost
        self.error: Exception | None = None  # why the connection was lost, if it broke
        self.stray = False  # bytes came with no request outstanding

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():
            self.stray = True
            return
        self.http.receive_data(data)
        self._advance(waiter)

    def eof_received(self) -> bool:
        self._end(None)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)

    # -- the request --------------------------------------------------------------------------

    def usable(self) -> bool:
        transport = self.transport
        return (
            self.http.ready
            and not self.ended
            and not self.stray
            and transport is not None
            and not transport.is_closing()
        )

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    async def aclose(self) -> None:
        """Close an idle connection (:meth:`abort`: nothing is left to flush)."""
        self.abort()

    def start(self, data: bytes, waiter: asyncio.Future[_Answer]) -> None:
        """Send a request's bytes; ``waiter`` gets its final event (or the failure)."""
        assert self.transport is not None
        self.waiter = waiter
        self.transport.write(data)
        if self.ended:
            self._finish_at_end(waiter)  # lost before the request was sent

    def _advance(self, waiter: asyncio.Future[_Answer]) -> None:
        """Process what ``http`` has buffered; resolve ``waiter`` when the answer is in."""
        http = self.http
        try:
            while True:
                event = http.next_event()
                if event is NEED_DATA:
                    return
                if isinstance(event, ResponseReceived | NotificationAccepted):
                    self.waiter = None
                    waiter.set_result(event)
                    return
                # NotificationReceived: request-related notifications are not a transport's
                # concern
        except Exception as exc:
            self.waiter = None
            waiter.set_exception(exc)

    def _end(self, exc: Exception | None) -> None:
        if exc is not None and self.error is None:
            self.error = exc
        if self.ended:
            return
        self.ended = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            self._finish_at_end(waiter)

    def _finish_at_end(self, waiter: asyncio.Future[_Answer]) -> None:
        """The connection ended with ``waiter`` outstanding: its answer or its failure."""
        if self.error is not None:
            self.waiter = None
            waiter.set_exception(self.error)
            return
        self.http.receive_data(b"")
        self._advance(waiter)
        if not waiter.done():  # pragma: no cover - h11 never needs data after the end
            self.waiter = None
            waiter.set_exception(
                ServerDisconnectedError("server closed the connection", response_started=True)
            )


class HttpTransport(AsyncHttpTransportBase[_Connection, ssl.SSLContext]):
    """The asyncio :class:`~mrtr_asyncio.Transport` over Streamable HTTP.

    HTTP/1.1 carries one request at a time per connection, so concurrent requests use up to
    ``max_connections`` connections, reused while the server keeps them alive. A connection
    the server closed between requests is replaced, and the request sent again when no byte
    of an answer had arrived. A broken connection fails only the request on it. Timeouts come
    from the caller (``asyncio.timeout``); a cancelled request's connection is closed (the
    HTTP way of cancelling). :meth:`aclose` fails every request in flight or waiting for a
    connection, and every later one, with :class:`~mrtr_core.errors.TransportClosedError`.

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
        self._slots = asyncio.Semaphore(max_connections)
        self._running: set[asyncio.Task[Any]] = set()
        """The tasks running a request (waiting for a connection or its answer)."""
        self._cut: set[asyncio.Task[Any]] = set()
        """Those of them :meth:`aclose` cancelled."""

    async def aclose(self) -> None:
        """Close the transport: every request in flight or waiting for a connection fails
        with :class:`~mrtr_core.errors.TransportClosedError` (its connection is closed), as
        does every later one, and the idle connections are closed."""
        self._closed = True
        for task in self._running - self._cut:
            task.cancel()  # it waits inside _exchange, which turns this into the error
            self._cut.add(task)
        await super().aclose()

    # -- internals ---------------------------------------------------------------------------

    async def _exchange(self, message: Mapping[str, Any]) -> _Answer:
        if self._closed:
            raise self._closed_error()
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - a coroutine on an event loop runs in a task
            return await self._exchange_on_a_slot(message)
        # A task runs one request at a time; the cancellation aclose() requests is told from
        # the caller's own as asyncio.timeout tells its own: by the task's cancel count.
        cancelling = task.cancelling()
        self._running.add(task)
        try:
            return await self._exchange_on_a_slot(message)
        except asyncio.CancelledError:
            if task in self._cut and task.uncancel() <= cancelling:
                raise self._closed_error() from None
            raise
        finally:
            self._running.discard(task)
            self._cut.discard(task)

    async def _exchange_on_a_slot(self, message: Mapping[str, Any]) -> _Answer:
        async with self._slots:
            loop = asyncio.get_running_loop()
            for attempt in range(2):
                conn = (None if attempt else self._idle_connection()) or await self._connect()
                retry_ok = conn.used and attempt == 0
                waiter: asyncio.Future[_Answer] = loop.create_future()
                try:
                    conn.start(conn.http.send_request(message), waiter)
                    event = await waiter
                except BaseException as exc:
                    conn.abort()
                    if retry_ok and sent_again_safely(exc, conn.http, _BROKEN):
                        continue  # the server closed an idle keep-alive connection
                    raise
                if not self._closed and conn.usable():
                    conn.used = True
                    self._idle.append(conn)
                else:
                    conn.abort()
                return event
            raise AssertionError("unreachable")  # pragma: no cover

    def _idle_connection(self) -> _Connection | None:
        """A kept-alive connection still usable, if any (the others are closed)."""
        if self._closed:
            raise self._closed_error()
        idle = self._idle
        while idle:
            conn = idle.pop()
            if conn.usable():
                return conn
            conn.abort()
        return None

    async def _connect(self) -> _Connection:
        http = HttpClientConnection(self.endpoint, self.config, param_headers=self.param_headers)
        _, conn = await asyncio.get_running_loop().create_connection(
            lambda: _Connection(http),
            self.endpoint.host,
            self.endpoint.port,
            ssl=self._ssl,
            server_hostname=self.endpoint.host if self._ssl is not None else None,
        )
        return conn
