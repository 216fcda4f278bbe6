"""Streamable HTTP client transport for asyncio: a small pool of keep-alive connections.

Example::

    async with HttpTransport("http://127.0.0.1:8000/mcp") as transport:
        async with asyncio.timeout(30):
            response = await transport.request(message)
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import Any

from mrtr_core.http import (
    NEED_DATA,
    HttpClientConfig,
    HttpClientConnection,
    NotificationAccepted,
    ParamHeaderRegistry,
    ResponseReceived,
    ServerDisconnectedError,
    parse_url,
)

__all__ = ["HttpTransport"]

JsonObject = dict[str, Any]
_READ_SIZE = 65536


class _Connection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        http: HttpClientConnection,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.http = http
        self.used = False

    def usable(self) -> bool:
        return (
            self.http.ready and not self.reader.at_eof() and not self.writer.transport.is_closing()
        )

    def abort(self) -> None:
        self.writer.transport.abort()


class HttpTransport:
    """The asyncio :class:`~mrtr_asyncio.Transport` over Streamable HTTP.

    HTTP/1.1 carries one request at a time per connection, so concurrent requests use up to
    ``max_connections`` connections, reused while the server keeps them alive. A connection
    the server closed between requests is replaced, and the request sent again when no byte
    of an answer had arrived. A broken connection fails only the request on it. Timeouts come
    from the caller (``asyncio.timeout``); a cancelled request's connection is closed (the
    HTTP way of cancelling).

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
        self.endpoint = parse_url(url)
        self.config = config or HttpClientConfig()
        self.param_headers = ParamHeaderRegistry()
        """``x-mcp-header`` arguments learned from ``tools/list`` (mirrored on ``tools/call``)."""
        self._ssl = ssl_context
        if self.endpoint.scheme == "https" and self._ssl is None:
            self._ssl = ssl.create_default_context()
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: list[_Connection] = []
        self._closed = False

    async def request(self, message: Mapping[str, Any]) -> JsonObject:
        """Send one request and return its JSON-RPC response (a result or an error).

        Raises:
            ConnectionError: The connection broke.
            mrtr_core.http.HttpStatusError: An HTTP error status without a JSON-RPC body.
            mrtr_core.errors.RemoteProtocolError: The server broke the transport rules.
        """
        event = await self._exchange(message)
        if not isinstance(event, ResponseReceived):
            raise ConnectionError("server accepted a request as a notification")
        return event.message

    async def notify(self, message: Mapping[str, Any]) -> None:
        """Send one notification (the server answers 202)."""
        await self._exchange(message)

    async def aclose(self) -> None:
        """Close every idle connection."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.abort()

    async def __aenter__(self) -> HttpTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- internals ---------------------------------------------------------------------------

    async def _exchange(
        self, message: Mapping[str, Any]
    ) -> ResponseReceived | NotificationAccepted:
        async with self._slots:
            for attempt in range(2):
                conn = await self._checkout()
                retry_ok = conn.used and attempt == 0
                try:
                    event = await self._roundtrip(conn, message)
                except ServerDisconnectedError as exc:
                    conn.abort()
                    if retry_ok and not exc.response_started:
                        continue  # the server closed an idle keep-alive connection
                    raise
                except (ConnectionResetError, BrokenPipeError):
                    conn.abort()
                    if retry_ok:
                        continue
                    raise
                except BaseException:
                    conn.abort()
                    raise
                if conn.http.ready and not self._closed:
                    conn.used = True
                    self._idle.append(conn)
                else:
                    conn.abort()
                return event
            raise AssertionError("unreachable")  # pragma: no cover

    async def _checkout(self) -> _Connection:
        if self._closed:
            raise ConnectionError("transport is closed")
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                return conn
            conn.abort()
        reader, writer = await asyncio.open_connection(
            self.endpoint.host,
            self.endpoint.port,
            ssl=self._ssl,
            server_hostname=self.endpoint.host if self._ssl is not None else None,
        )
        return _Connection(
            reader,
            writer,
            HttpClientConnection(self.endpoint, self.config, param_headers=self.param_headers),
        )

    async def _roundtrip(
        self, conn: _Connection, message: Mapping[str, Any]
    ) -> ResponseReceived | NotificationAccepted:
        writer = conn.writer
        writer.write(conn.http.send_request(message))
        if writer.transport.get_write_buffer_size():
            await writer.drain()  # only when the socket did not take it all at once
        while True:
            event = conn.http.next_event()
            if event is NEED_DATA:
                conn.http.receive_data(await conn.reader.read(_READ_SIZE))
            elif isinstance(event, ResponseReceived | NotificationAccepted):
                return event
            # NotificationReceived: request-related notifications are not a transport's concern
