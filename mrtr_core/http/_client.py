"""The client side of Streamable HTTP on one HTTP/1.1 connection, on top of h11.

:meth:`HttpClientConnection.send_request` turns one JSON-RPC message into the bytes of a POST
with every header the spec requires (digest §3.3 items 1-5). The answer may be JSON or an
event stream (clients MUST handle both); :meth:`HttpClientConnection.next_event` returns the
JSON-RPC response for the request, notifications that came before it on the stream, or 202
for a notification. Everything the server sends is bounded and validated; problems raise
:class:`~mrtr_core.errors.RemoteProtocolError` subclasses and leave the connection unusable.
"""

from __future__ import annotations

import http
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias
from urllib.parse import urlsplit

import attrs
import h11

from mrtr_core import jsonrpc
from mrtr_core._checks import positive_int_field
from mrtr_core.errors import LocalProtocolError, RemoteProtocolError
from mrtr_core.http._headers import (
    JSON_MEDIA_TYPE,
    SSE_MEDIA_TYPE,
    media_type,
    request_headers,
)
from mrtr_core.http._params import ParamHeaderRegistry
from mrtr_core.http._sse import EventStreamError, SseParser
from mrtr_core.jsonrpc import NEED_DATA, NeedDataType, RequestId

__all__ = [
    "ClientEvent",
    "Endpoint",
    "HttpClientConfig",
    "HttpClientConnection",
    "HttpStatusError",
    "NotificationAccepted",
    "NotificationReceived",
    "ResponseReceived",
    "ServerDisconnectedError",
    "parse_url",
]

_ACCEPT: Final = f"{JSON_MEDIA_TYPE}, {SSE_MEDIA_TYPE}"
_EXCERPT: Final = 512
_TARGET_CHARS: Final = re.compile(r"[!-~]+")  # visible ASCII: no space, control or non-ASCII
_END_OF_MESSAGE: Final = h11.EndOfMessage()
_CONTENT_TYPE: Final = b"content-type"
_CONTENT_ENCODING: Final = b"content-encoding"
# "HTTP/1.1 NNN " + "\r\n" ending the status line + "\r\n" ending the head.
_STATUS_LINE_BYTES: Final = 17
_KINDS_MAX: Final = 64
# Most request heads one connection remembers (see HttpClientConnection._request_event).
_REQUEST_HEADS_MAX: Final = 256
_KINDS: dict[str, str] = {}


def _kind_of(content_type: str | None) -> str:
    """``"sse"``, ``"json"`` or ``"other"`` for a response's ``Content-Type``.

    An event stream is read whatever the status: a server that sent request-related
    notifications before a JSON-RPC error answers with a stream, and the error keeps the
    status its code travels with (e.g. 400 for -32021, digest §1.8). "Clients MUST handle
    both" JSON and SSE (digest §3.3 "Server responses"), so its response is read from it.
    """
    if content_type is None:
        return "other"
    kind = _KINDS.get(content_type)
    if kind is None:
        media, _ = media_type(content_type)
        kind = "sse" if media == SSE_MEDIA_TYPE else "json" if media == JSON_MEDIA_TYPE else "other"
        if len(_KINDS) >= _KINDS_MAX:
            _KINDS.clear()  # servers send the same one or two values on every response
        _KINDS[content_type] = kind
    return kind


@attrs.frozen(kw_only=True)
class Endpoint:
    """Where an MCP endpoint lives."""

    scheme: str
    """``"http"`` or ``"https"``."""
    host: str
    """Host name or address to connect to (IPv6 without brackets)."""
    port: int
    target: str
    """Path and query sent in the request line, e.g. ``"/mcp"``."""

    @property
    def authority(self) -> str:
        """The ``Host`` header value."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def parse_url(url: str) -> Endpoint:
    """Parse ``http://127.0.0.1:8000/mcp`` (or ``https://...``) into an :class:`Endpoint`.

    Raises:
        LocalProtocolError: Not an absolute http(s) URL with a host.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise LocalProtocolError(f"bad MCP endpoint URL {url!r}: {exc}") from None
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise LocalProtocolError(f"bad MCP endpoint URL {url!r}: need http(s)://host[:port]/path")
    if parts.username is not None or parts.password is not None:
        # They would be dropped without a word: credentials go in a header of the config.
        raise LocalProtocolError(
            f"bad MCP endpoint URL: credentials in the URL are not sent; give an "
            f"Authorization header in the config instead (host {parts.hostname!r})")
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if not _TARGET_CHARS.fullmatch(target):
        # A request target is printable ASCII without spaces (RFC 9112 §3.2): percent-
        # encode anything else (every request would otherwise fail, untyped).
        raise LocalProtocolError(
            f"bad MCP endpoint URL {url!r}: the path must be printable ASCII without "
            "spaces (percent-encode anything else)")
    return Endpoint(scheme=parts.scheme, host=parts.hostname, port=port, target=target)


def _extra_headers(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, tuple) or not all(
        isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
        for pair in value
    ):
        raise TypeError(
            f"{attribute.name} must be a tuple of (name, value) string pairs, got {value!r}"
        )
    try:  # the field syntax of RFC 9110 §5, checked as h11 checks it when the request is sent
        h11.Request(method="POST", target="/", headers=[("Host", "h"), *value])
    except h11.LocalProtocolError as exc:
        raise ValueError(f"{attribute.name} holds an invalid header: {exc}") from None


@attrs.frozen(kw_only=True)
class HttpClientConfig:
    """Limits and extra headers of a client connection.

    Raises:
        ValueError: A limit is not an integer >= 1, or a header is not a valid field.
        TypeError: ``headers`` is not a tuple of ``(name, value)`` string pairs.
    """

    max_response_bytes: int = attrs.field(
        default=jsonrpc.DEFAULT_MAX_MESSAGE_BYTES, validator=positive_int_field
    )
    """Largest JSON response body (and largest single event on a stream)."""
    max_stream_bytes: int = attrs.field(default=64 * 1024 * 1024, validator=positive_int_field)
    """Largest event-stream body in total (notifications plus the response)."""
    max_header_bytes: int = attrs.field(default=64 * 1024, validator=positive_int_field)
    """Largest response head."""
    max_depth: int = attrs.field(default=jsonrpc.DEFAULT_MAX_DEPTH, validator=positive_int_field)
    """Deepest JSON nesting accepted."""
    headers: tuple[tuple[str, str], ...] = attrs.field(default=(), validator=_extra_headers)
    """Extra headers on every request, e.g. ``(("Authorization", "Bearer ..."),)``."""


class HttpStatusError(RemoteProtocolError):
    """The server answered with a status other than 2xx (an error, or a redirect, which is
    not followed) and no JSON-RPC response, or refused a notification (whatever the body).

    Attributes:
        status: The HTTP status code.
        body: The start of the response body (at most 512 bytes).
        content_type: The response's ``Content-Type``, if any.
    """

    def __init__(self, status: int, body: bytes, content_type: str | None) -> None:
        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = "HTTP error"
        super().__init__(f"HTTP {status} {phrase}: {body[:200]!r}")
        self.status = status
        self.body = body[:_EXCERPT]
        self.content_type = content_type


class ServerDisconnectedError(RemoteProtocolError, ConnectionError):
    """The connection ended before the response was complete.

    Attributes:
        response_started: Whether any byte of the response had arrived. When not, the server
            closed an idle keep-alive connection and the request may be sent again on a new one.
    """

    def __init__(self, message: str, *, response_started: bool) -> None:
        super().__init__(message)
        self.response_started = response_started


@attrs.frozen(kw_only=True)
class ResponseReceived:
    """The JSON-RPC response to the request (a result or an error)."""

    message: dict[str, Any]
    """The response as decoded."""
    status: int
    """The HTTP status it came with (200, or 4xx for errors on the Python SDK convention)."""


@attrs.frozen(kw_only=True)
class NotificationReceived:
    """A request-related notification that came before the response on an event stream."""

    message: dict[str, Any]


@attrs.frozen(kw_only=True)
class NotificationAccepted:
    """The server accepted a notification (202, no body)."""

    status: int


ClientEvent: TypeAlias = (
    ResponseReceived | NotificationReceived | NotificationAccepted | NeedDataType
)


class HttpClientConnection:
    """One client-side HTTP/1.1 connection to an MCP endpoint (sans-IO), one request at a time.

    Args:
        endpoint: Where the requests go (``Host`` header and request target).
        config: Limits and extra headers.
        param_headers: What ``tools/list`` said about ``x-mcp-header`` arguments (share one
            registry among a client's connections): ``tools/call`` requests get their
            ``Mcp-Param-*`` headers, and invalid tools are dropped from ``tools/list``.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        config: HttpClientConfig | None = None,
        *,
        param_headers: ParamHeaderRegistry | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.config = config or HttpClientConfig()
        self.param_headers = param_headers
        # Request heads made on this connection, by body length and MCP headers. Kept per
        # connection, so the configured headers (a bearer token) and Mcp-Param-* values in
        # them go away with it.
        self._heads: dict[tuple[object, ...], h11.Request] = {}
        self._message: Mapping[str, Any] = {}
        self._h11 = h11.Connection(
            h11.CLIENT, max_incomplete_event_size=self.config.max_header_bytes
        )
        self._expected: RequestId | None = None
        self._is_notification = False
        self._status = 0
        self._kind: str | None = None  # "json", "sse" or "other"
        self._content_type: str | None = None
        self._body = bytearray()
        self._received = 0
        self._sse: SseParser | None = None
        self._queue: deque[ClientEvent] = deque()
        self._started = False  # any byte of the current response has arrived
        self._informational = 0  # bytes of the current request's 1xx heads
        self._done = False  # the current exchange delivered its final event
        self._broken = False

    # -- state ---------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Whether a new request can be sent on this connection now: not broken, idle, and
        holding no byte the server sent after its last response (unasked-for bytes, such
        as a ``408`` before closing, would be read as the next request's answer)."""
        h11_conn = self._h11
        return (
            not self._broken
            and h11_conn.our_state is h11.IDLE
            and not h11_conn.trailing_data[0]
        )

    @property
    def response_started(self) -> bool:
        """Whether any byte of the current request's response has arrived (the server has
        then certainly received the request: it must not be sent again)."""
        return self._started

    # -- sending -------------------------------------------------------------------------

    def send_request(
        self, message: Mapping[str, Any], *, headers: Sequence[tuple[str, str]] = ()
    ) -> bytes:
        """Build the POST carrying ``message``.

        Args:
            message: One JSON-RPC request or notification (never a batch or a response).
            headers: Extra headers for this request only (e.g. ``Mcp-Param-*``).

        Returns:
            The bytes to write.

        Raises:
            LocalProtocolError: The connection is busy or broken, ``message`` is not a
                request/notification or not JSON-serialisable, or its method or protocol
                version cannot travel as a header value.
        """
        if not self.ready:
            raise LocalProtocolError("connection is not ready for a new request")
        try:
            parsed = jsonrpc.parse_request(message if type(message) is dict else dict(message))
        except jsonrpc.MessageError as exc:
            raise LocalProtocolError(f"not a sendable message: {exc}") from None
        body = jsonrpc.encode(message)
        request = self._request_event(message, len(body), headers)
        self._message = message
        self._expected = parsed.id if isinstance(parsed, jsonrpc.Request) else None
        self._is_notification = isinstance(parsed, jsonrpc.Notification)
        self._status, self._kind, self._content_type = 0, None, None
        if self._body:
            self._body = bytearray()
        self._received = 0
        self._sse = None
        self._queue.clear()
        self._started = False
        self._informational = 0
        self._done = False
        send = self._h11.send
        out = send(request)
        out += send(h11.Data(data=body))
        out += send(_END_OF_MESSAGE)
        return out

    def _request_event(
        self, message: Mapping[str, Any], length: int, extra: Sequence[tuple[str, str]]
    ) -> h11.Request:
        """The POST head: fixed headers, ``Content-Length``, the MCP headers (§3.3 items
        3-6), configured headers, then this request's own."""
        mcp = request_headers(message)
        if self.param_headers is not None:
            mcp += self.param_headers.headers_for(message)
        # Events are immutable and h11 validates the headers of each new one, so a head is
        # made once per body length and MCP headers (every retry of an MRTR request carries
        # the same method and name). Per-request extra headers are not remembered.
        key = (length, *mcp) if not extra else None
        heads = self._heads
        if key is not None:
            known = heads.get(key)
            if known is not None:
                return known
        # h11 validates every header (and raises on a bad one).
        request = h11.Request(
            method="POST",
            target=self.endpoint.target,
            headers=[
                ("Host", self.endpoint.authority),
                ("Accept", _ACCEPT),
                ("Content-Type", JSON_MEDIA_TYPE),
                ("Content-Length", str(length)),
                *mcp,
                *self.config.headers,
                *extra,
            ],
        )
        if key is not None:
            if len(heads) >= _REQUEST_HEADS_MAX:
                heads.clear()
            heads[key] = request
        return request

    # -- receiving -----------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray) -> None:
        """Feed bytes read from the socket; ``b""`` means the server closed the connection."""
        if data:
            self._started = True
        self._h11.receive_data(bytes(data))

    def next_event(self) -> ClientEvent:
        """Process buffered bytes until an event is complete.

        Returns:
            :class:`NotificationReceived` (zero or more, event streams only), then exactly one
            :class:`ResponseReceived` or :class:`NotificationAccepted`; or
            :data:`~mrtr_core.jsonrpc.NEED_DATA`.

        Raises:
            HttpStatusError: An HTTP error status without a JSON-RPC response body, or any
                status but 2xx answering a notification.
            ServerDisconnectedError: The connection ended before the response.
            RemoteProtocolError: Anything else the server got wrong (bad JSON, a response for
                another id, a limit exceeded, a malformed HTTP response).
            LocalProtocolError: No request is outstanding.
        """
        if self._broken:
            raise LocalProtocolError("connection is broken")
        try:
            return self._next()
        except RemoteProtocolError:
            self._broken = True
            raise

    def _next(self) -> ClientEvent:
        while not self._queue:
            if self._done:
                raise LocalProtocolError("no request is outstanding")
            if self._h11.our_state is h11.IDLE:
                raise LocalProtocolError("no request is outstanding")
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                if self._h11.trailing_data[1]:
                    raise ServerDisconnectedError(
                        "server closed the connection before the response was complete",
                        response_started=self._started,
                    ) from None
                raise RemoteProtocolError(f"malformed HTTP response: {exc}") from None
            if event is h11.NEED_DATA:
                return NEED_DATA
            self._on_event(event)
        if self._done and self._kind == "sse":
            self._drain_stream_tail()
        return self._queue.popleft()

    def _drain_stream_tail(self) -> None:
        """After the response, consume the end of the stream if it is already buffered.

        The final response SHOULD end the stream (digest §3.3); when its end has arrived, the
        connection becomes :attr:`ready` again, otherwise it must be closed.
        """
        try:
            while self._h11.their_state is h11.SEND_BODY:
                event = self._h11.next_event()
                if event is h11.NEED_DATA:
                    return
                if isinstance(event, h11.EndOfMessage):
                    self._on_end()
        except h11.RemoteProtocolError:
            self._broken = True

    def _on_event(self, event: Any) -> None:
        kind = type(event)
        if kind is h11.Data:
            data = event.data
            self._on_data(data if type(data) is bytes else bytes(data))
        elif kind is h11.Response:
            self._on_response(event)
        elif kind is h11.InformationalResponse:
            self._on_informational(event)
        elif kind is h11.EndOfMessage:
            self._on_end()
        elif isinstance(event, h11.ConnectionClosed):
            raise ServerDisconnectedError(
                "server closed the connection", response_started=self._started
            )

    def _on_informational(self, response: h11.InformationalResponse) -> None:
        """Skip a 1xx head (RFC 9110 §15.2: any number may come before the final one),
        counting it: together they get the final head's limit, where each alone passes
        h11's and a server could send them for ever."""
        self._informational += _STATUS_LINE_BYTES + len(response.reason) + sum(
            len(name) + len(value) + 4 for name, value in response.headers.raw_items()
        )
        if self._informational > self.config.max_header_bytes:
            raise RemoteProtocolError(
                f"informational (1xx) responses exceed {self.config.max_header_bytes} bytes"
            )

    def _on_response(self, response: h11.Response) -> None:
        self._status = status = response.status_code
        content_type = coding = None
        for name, value in response.headers.raw_items():
            size = len(name)
            if size == 12 and name.lower() == _CONTENT_TYPE:
                if content_type is None:
                    content_type = bytes(value).decode("latin-1")
            elif size == 16 and name.lower() == _CONTENT_ENCODING and coding is None:
                text = bytes(value).decode("latin-1")
                if text.lower() != "identity":
                    coding = text
        if coding is not None and 200 <= status < 300:
            # Requests send no Accept-Encoding and nothing here decodes a content coding
            # (RFC 9110 §8.4): a compressed body would fail as invalid UTF-8 or as a
            # stream without a response. An error status keeps its own error.
            raise RemoteProtocolError(
                f"HTTP {status} response has Content-Encoding {coding!r}, which was not "
                "asked for (only identity is read)"
            )
        self._content_type = content_type
        self._kind = kind = _kind_of(content_type)
        if kind == "sse":
            self._sse = SseParser(max_event_bytes=self.config.max_response_bytes)

    def _on_data(self, data: bytes) -> None:
        self._received += len(data)
        if self._kind == "sse":
            assert self._sse is not None
            if self._received > self.config.max_stream_bytes:
                raise EventStreamError(
                    f"event stream exceeds the limit of {self.config.max_stream_bytes} bytes"
                )
            for sse in self._sse.feed(data):
                if sse.event == "message" and not self._done:
                    self._on_stream_message(sse.data)
            return
        if self._kind == "json" and self._received > self.config.max_response_bytes:
            raise RemoteProtocolError(
                f"response body exceeds the limit of {self.config.max_response_bytes} bytes"
            )
        if self._kind == "other":
            room = _EXCERPT - len(self._body)
            self._body += data[: max(room, 0)]
            if len(self._body) >= _EXCERPT and not 200 <= self._status < 300:
                # Only the excerpt is kept: an error page is not read to its (maybe
                # endless) end; the connection is given up instead.
                raise HttpStatusError(self._status, bytes(self._body), self._content_type)
            if self._received > self.config.max_response_bytes:
                raise RemoteProtocolError(
                    f"HTTP {self._status} response body of type {self._content_type!r} "
                    f"exceeds {self.config.max_response_bytes} bytes"
                )
            return
        self._body += data

    def _on_stream_message(self, data: str) -> None:
        value = jsonrpc.decode(
            data.encode("utf-8"),
            max_bytes=self.config.max_response_bytes,
            max_depth=self.config.max_depth,
        )
        message = jsonrpc.parse_response(value)
        if isinstance(message, jsonrpc.Notification):
            self._queue.append(NotificationReceived(message=message.raw))
            return
        if message.id != self._expected and not (message.id is None and message.is_error):
            # A stream carries only its own request's response (digest §3.3): skip strays.
            # An error without an id answers this request, as in a JSON body.
            return
        self._queue.append(
            ResponseReceived(message=self._observed(message.raw), status=self._status)
        )
        self._done = True

    def _observed(self, response: dict[str, Any]) -> dict[str, Any]:
        if self.param_headers is None:
            return response
        return self.param_headers.observe(self._message, response)

    def _on_end(self) -> None:
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
        if self._done:
            return
        if self._kind == "sse":
            if self._status >= 400:
                # An error status whose stream never answered: the status is all there is.
                raise HttpStatusError(self._status, b"", self._content_type)
            raise RemoteProtocolError("event stream ended without the response")
        if self._is_notification:
            if 200 <= self._status < 300:
                self._queue.append(NotificationAccepted(status=self._status))
                self._done = True
                return
            # A notification the server cannot accept gets an error status, with at most a
            # JSON-RPC error without an id (digest §3.3): a refusal, whatever the body.
            raise HttpStatusError(self._status, bytes(self._body), self._content_type)
        if self._kind == "json":
            self._finish_json()
            return
        if not 200 <= self._status < 300:  # a redirect is not followed either
            raise HttpStatusError(self._status, bytes(self._body), self._content_type)
        raise RemoteProtocolError(
            f"HTTP {self._status} response has Content-Type {self._content_type!r}, expected "
            f"{JSON_MEDIA_TYPE} or {SSE_MEDIA_TYPE}"
        )

    def _finish_json(self) -> None:
        try:
            value = jsonrpc.decode(
                self._body,
                max_bytes=self.config.max_response_bytes,
                max_depth=self.config.max_depth,
            )
            message = jsonrpc.parse_response(value)
        except jsonrpc.MessageError:
            if not 200 <= self._status < 300:
                raise HttpStatusError(self._status, bytes(self._body), self._content_type) from None
            raise
        if isinstance(message, jsonrpc.Notification):
            raise RemoteProtocolError("expected a JSON-RPC response, got a notification")
        if message.id is not None and message.id != self._expected:
            raise RemoteProtocolError(
                f"response id {message.id!r} does not match request id {self._expected!r}"
            )
        if message.id is None and not message.is_error:
            raise RemoteProtocolError("result response without an id")
        self._body = bytearray()
        self._queue.append(
            ResponseReceived(message=self._observed(message.raw), status=self._status)
        )
        self._done = True
