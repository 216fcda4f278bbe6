"""What the adapters' HTTP client transports share, less their I/O.

Each adapter's ``HttpTransport`` keeps a small pool of keep-alive connections to one MCP
endpoint, each driven by an :class:`~mrtr_core.http.HttpClientConnection`. The endpoint, the
configuration, the ``x-mcp-header`` registry the connections share, the TLS decision and the
pool's bookkeeping live here once; the adapters add only how they connect, wait and close.
The TLS context itself is the adapter's: it passes the factory of the default one.

Closing a transport fails, with :class:`~mrtr_core.errors.TransportClosedError`, every
request in flight or waiting for a connection, and every request made afterwards.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, Self, TypeVar

from mrtr_core.errors import TransportClosedError
from mrtr_core.http._client import (
    HttpClientConfig,
    HttpClientConnection,
    NotificationAccepted,
    ResponseReceived,
    ServerDisconnectedError,
    parse_url,
)
from mrtr_core.http._params import ParamHeaderRegistry

__all__ = ["AsyncHttpTransportBase", "HttpTransportBase"]

JsonObject = dict[str, Any]


class _AsyncConnection(Protocol):
    async def aclose(self) -> None: ...


C = TypeVar("C")
"""The adapter's pooled connection."""
AC = TypeVar("AC", bound=_AsyncConnection)
"""The async adapters' pooled connection (it closes with ``await conn.aclose()``)."""
T = TypeVar("T")
"""The adapter's TLS context (``ssl.SSLContext``)."""


def sent_again_safely(
    exc: BaseException, http: HttpClientConnection, broken: tuple[type[BaseException], ...]
) -> bool:
    """Whether ``exc``, raised on a reused keep-alive connection, broke it before any byte
    of the answer came: the server closed it while idle and may never have seen the
    request, which can be sent again on a new connection. ``broken`` are the runtime's
    broken-connection errors (besides :class:`ServerDisconnectedError`). Once an answer
    began, the server had the request: sending it again could run it twice."""
    if isinstance(exc, ServerDisconnectedError):
        return not exc.response_started
    return isinstance(exc, broken) and not http.response_started


class HttpTransportBase(Generic[C, T]):
    """The endpoint, configuration and connection pool of an HTTP client transport.

    Args:
        url: The MCP endpoint, e.g. ``"http://127.0.0.1:8000/mcp"``.
        config: Response limits and extra headers; the defaults when ``None``.
        ssl_context: The TLS context the caller gave, if any (used whatever the scheme).
        default_ssl_context: Makes the TLS context of an ``https://`` URL given none
            (``ssl.create_default_context``); not called otherwise.

    Raises:
        mrtr_core.errors.LocalProtocolError: ``url`` is not an absolute http(s) URL.
    """

    def __init__(
        self,
        url: str,
        config: HttpClientConfig | None,
        ssl_context: T | None,
        default_ssl_context: Callable[[], T],
    ) -> None:
        self.endpoint = parse_url(url)
        self.config = config or HttpClientConfig()
        self.param_headers = ParamHeaderRegistry()
        """``x-mcp-header`` arguments learned from ``tools/list`` (mirrored on ``tools/call``)."""
        if ssl_context is None and self.endpoint.scheme == "https":
            ssl_context = default_ssl_context()
        self._ssl = ssl_context
        self._idle: list[C] = []
        """Kept-alive connections, the most recently used last."""
        self._closed = False

    def _closed_error(self) -> TransportClosedError:
        """What a request fails with once the transport is closed."""
        return TransportClosedError(f"the HTTP transport to {self.endpoint.authority} was closed")


class AsyncHttpTransportBase(HttpTransportBase[AC, T], abc.ABC):
    """The request methods of the trio and asyncio HTTP transports around :meth:`_exchange`.

    A subclass provides :meth:`_exchange` (one request or notification on a pooled
    connection); its connections close with ``await conn.aclose()``.
    """

    async def request(self, message: Mapping[str, Any]) -> JsonObject:
        """Send one request and return its JSON-RPC response (a result or an error).

        Raises:
            ConnectionError: The connection broke (with trio also ``trio.BrokenResourceError``).
            mrtr_core.errors.TransportClosedError: The transport was closed before the
                response came (a ``ConnectionError``).
            mrtr_core.http.HttpStatusError: An HTTP error status without a JSON-RPC body.
            mrtr_core.errors.RemoteProtocolError: The server broke the transport rules.
        """
        event = await self._exchange(message)
        if not isinstance(event, ResponseReceived):
            raise ConnectionError("server accepted a request as a notification")
        return event.message

    async def notify(self, message: Mapping[str, Any]) -> None:
        """Send one notification (the server answers 202).

        Raises:
            mrtr_core.http.HttpStatusError: The server refused it (any status but 2xx),
                with or without a JSON-RPC error in the body.
        """
        await self._exchange(message)

    async def aclose(self) -> None:
        """Close every idle connection; a subclass first fails the requests it has running
        (see :meth:`_exchange`)."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @abc.abstractmethod
    async def _exchange(
        self, message: Mapping[str, Any]
    ) -> ResponseReceived | NotificationAccepted:
        """Send ``message`` on a pooled connection; its final event.

        Raises:
            mrtr_core.errors.TransportClosedError: The transport is closed, or was closed
                while the request was waiting for a connection or for its answer.
        """
