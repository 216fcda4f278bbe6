"""The server side of Streamable HTTP on one HTTP/1.1 connection, on top of h11.

Bytes in (:meth:`HttpServerConnection.receive_data`), events out
(:meth:`HttpServerConnection.next_event`), bytes to write from
:meth:`HttpServerConnection.data_to_send`. The connection answers everything that is not a
valid MCP POST by itself (404, 405, 403, 406, 413, 415, 400 with -32700, -32600, -32020 or
-32022) and stays usable for the next request when HTTP allows; only a request that passed
every check reaches the application as :class:`MessageReceived`, and the application's answer
goes back through :meth:`HttpServerConnection.send_reply`.

Check order (digest §3.5 steps 1-2; the HTTP-level checks come first because they need no
body): path (404), method (405), ``Origin`` (403), ``Content-Length`` (413), ``Accept`` (406),
``Content-Type`` and ``Content-Encoding`` (415); then the body: JSON (-32700), JSON-RPC shape
(-32600), headers against body (-32020), including ``Mcp-Param-*`` when a tool schema lookup
is given; for a notification, which the application only acknowledges, also whether its
``MCP-Protocol-Version`` is one this server speaks (-32022).
"""

from __future__ import annotations

import contextlib
import http
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias
from urllib.parse import urlsplit

import attrs
import h11

from mrtr_core import jsonrpc
from mrtr_core._checks import positive_int_field
from mrtr_core.errors import (
    INVALID_REQUEST,
    UNSUPPORTED_PROTOCOL_VERSION,
    LocalProtocolError,
    MrtrError,
    RemoteProtocolError,
)
from mrtr_core.http._headers import (
    HEADER_ACCEPT,
    HEADER_CONTENT_TYPE,
    HEADER_ORIGIN,
    HEADER_PROTOCOL_VERSION,
    SSE_MEDIA_TYPE,
    HeaderMismatchError,
    accepts_json_and_sse,
    collect_headers,
    http_status_for_error,
    is_json_content_type,
    is_localhost_origin,
    validate_request_headers,
)
from mrtr_core.http._params import cached_param_header_paths, check_param_headers
from mrtr_core.http._sse import encode_sse_event
from mrtr_core.jsonrpc import NEED_DATA, NeedDataType, Notification, Request, RequestId
from mrtr_core.wire.models import SUPPORTED_VERSIONS

__all__ = [
    "LINGER_MAX_BYTES",
    "LINGER_S",
    "ConnectionEnded",
    "HttpRequestError",
    "HttpServerConfig",
    "HttpServerConnection",
    "MessageReceived",
    "RequestRejected",
    "ServerEvent",
]

LINGER_S: Final = 2.0
"""Seconds a server keeps reading (and discarding) what a client still sends after a
response that ends the connection (see :attr:`HttpServerConnection.peer_may_still_send`)."""

LINGER_MAX_BYTES: Final = 16 * 1024 * 1024
"""Bytes a server reads and discards at most in that time; a client sending more is cut off
(its connection reset), so lingering is bounded work even for a hostile peer."""


def _endpoint_path(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    # A request target's path always starts with "/" and its query is not part of it
    # (RFC 9112 §3.2): any other path would answer every request with 404.
    if not isinstance(value, str) or not value.startswith("/") or "?" in value or "#" in value:
        raise ValueError(
            f"{attribute.name} must be a path starting with '/' and without '?' or '#', "
            f"got {value!r}"
        )


def _origins(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    # A str would be searched by substring ("http://a" in "http://a.example"), allowing origins
    # never listed; an origin is compared whole, as the Origin header carries it (RFC 6454 §7).
    if not isinstance(value, frozenset | set):
        raise TypeError(f"{attribute.name} must be a set of origins, not {type(value).__name__}")
    for origin in value:
        if not isinstance(origin, str):
            raise TypeError(f"{attribute.name} holds {origin!r}, which is not a string")
        if origin != "null":
            parts = urlsplit(origin)
            if not (parts.scheme and parts.netloc) or parts.path or parts.query or parts.fragment:
                raise ValueError(
                    f"{attribute.name} holds {origin!r}; an origin is scheme://host[:port], "
                    "with no path (not even a trailing '/')"
                )


@attrs.frozen(kw_only=True)
class HttpServerConfig:
    """Limits and policy of the MCP endpoint.

    Raises:
        ValueError: ``path`` does not start with ``/``, a limit is not an integer >= 1, or an
            allowed origin is not ``scheme://host[:port]``.
        TypeError: ``allowed_origins`` is not a set of strings.
    """

    path: str = attrs.field(default="/mcp", validator=_endpoint_path)
    """The MCP endpoint's path; other paths get 404."""
    max_body_bytes: int = attrs.field(
        default=jsonrpc.DEFAULT_MAX_MESSAGE_BYTES, validator=positive_int_field
    )
    """Larger request bodies get 413 and the connection is closed."""
    max_header_bytes: int = attrs.field(default=16 * 1024, validator=positive_int_field)
    """Larger request heads get 431 and the connection is closed."""
    max_depth: int = attrs.field(default=jsonrpc.DEFAULT_MAX_DEPTH, validator=positive_int_field)
    """Deeper JSON bodies get -32700."""
    allowed_origins: frozenset[str] = attrs.field(default=frozenset(), validator=_origins)
    """Origins allowed besides the localhost ones (exact ``scheme://host[:port]`` strings)."""
    allow_localhost_origins: bool = True
    """Allow ``http(s)://localhost``, ``127.0.0.1`` and ``[::1]`` origins on any port."""

    def origin_allowed(self, origin: str) -> bool:
        """Whether a request carrying this ``Origin`` may proceed (digest §3.3 "Endpoint")."""
        if origin in self.allowed_origins:
            return True
        return self.allow_localhost_origins and is_localhost_origin(origin)


class HttpRequestError(RemoteProtocolError):
    """An HTTP request the endpoint refused before it reached the application.

    Attributes:
        status: The HTTP status sent back.
        request_id: The JSON-RPC id, when the body was read far enough to know it.
        data: The JSON-RPC error's ``data``, if it has one.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        jsonrpc_code: int = INVALID_REQUEST,
        request_id: RequestId | None = None,
        data: Any = None,
    ) -> None:
        super().__init__(message, jsonrpc_code=jsonrpc_code)
        self.status = status
        self.request_id = request_id
        self.data = data


@attrs.frozen(kw_only=True)
class MessageReceived:
    """A POST carrying one valid JSON-RPC request or notification, headers checked.

    Answer it with :meth:`HttpServerConnection.send_reply` before asking for the next event.
    """

    message: dict[str, Any]
    """The body as decoded: hand this to the application."""
    parsed: Request | Notification = attrs.field(repr=False)
    """The body classified."""
    headers: Mapping[str, list[bytes]] = attrs.field(repr=False)
    """Every request header, lower-cased name to values (e.g. for ``authorization``)."""
    target: str
    """The request target, e.g. ``"/mcp"``."""

    @property
    def request_id(self) -> RequestId | None:
        """The JSON-RPC id, ``None`` for a notification."""
        return self.parsed.id if isinstance(self.parsed, Request) else None


@attrs.frozen(kw_only=True)
class RequestRejected:
    """The connection answered a request by itself; the reply is in :meth:`data_to_send`."""

    status: int
    error: MrtrError


@attrs.frozen
class ConnectionEnded:
    """Nothing more will happen on this connection: write what is left, then close it."""


ServerEvent: TypeAlias = MessageReceived | RequestRejected | ConnectionEnded | NeedDataType

_ALLOW_POST: Final = [(b"Allow", b"POST")]
_JSON_HEADERS: Final = [(b"Content-Type", b"application/json")]
_SSE_HEADERS: Final = [
    (b"Content-Type", SSE_MEDIA_TYPE.encode("ascii")),
    (b"Cache-Control", b"no-cache"),
    (b"X-Accel-Buffering", b"no"),
]
_END_OF_MESSAGE: Final = h11.EndOfMessage()
# Response heads of JSON answers by (status, body length): events are immutable, and h11
# validates the headers of each new one.
_JSON_RESPONSES: dict[tuple[int, int], h11.Response] = {}
_JSON_RESPONSES_MAX: Final = 4096
_REASONS: Final = {int(status): status.phrase.encode("ascii") for status in http.HTTPStatus}
_ORIGIN: Final = HEADER_ORIGIN.lower()
_ACCEPT: Final = HEADER_ACCEPT.lower()
_CONTENT_TYPE: Final = HEADER_CONTENT_TYPE.lower()
_CONTENT_LENGTH: Final = "content-length"
_CONTENT_ENCODING: Final = "content-encoding"
_TRANSFER_ENCODING: Final = "transfer-encoding"


def _reason(status: int) -> bytes:
    return _REASONS.get(status, b"")


def _target_path(target: bytes) -> str:
    # RFC 9112 §3.2.2: a server MUST accept the absolute-form ("http://host/mcp").
    lowered = target[:8].lower()
    if lowered.startswith((b"http://", b"https://")):
        rest = target.split(b"//", 1)[1]
        slash = rest.find(b"/")
        target = rest[slash:] if slash >= 0 else b"/"
    return target.split(b"?", 1)[0].decode("ascii", "replace")


def _unspoken_version(headers: Mapping[str, list[bytes]]) -> HttpRequestError | None:
    """The refusal of a notification whose ``MCP-Protocol-Version`` names a revision this
    server does not speak (400, -32022, no id), or ``None``.

    A request's version is checked with its ``_meta`` (which its header equals) after the
    headers; a notification's body need not name one, so its header is checked here: a
    server MUST answer a version it does not implement with 400 and an
    UnsupportedProtocolVersionError listing its versions (§ Protocol Version Header), and a
    refused notification's error has no id (§ Sending Messages item 5). Call it after
    :func:`validate_request_headers`, which ensures one plain value.
    """
    version = headers[HEADER_PROTOCOL_VERSION.lower()][0].decode("ascii")
    if version in SUPPORTED_VERSIONS:
        return None
    return HttpRequestError(
        "Unsupported protocol version",
        status=400,
        jsonrpc_code=UNSUPPORTED_PROTOCOL_VERSION,
        data={"supported": list(SUPPORTED_VERSIONS), "requested": version},
    )


def _head_size(request: h11.Request, raw: Sequence[tuple[bytes, bytes]]) -> int:
    """Bytes of the request line and its header lines ``raw`` (h11 enforces its limit only
    on a head that arrives in pieces; a whole head delivered by one read is never measured)."""
    size = len(request.method) + len(request.target) + 12 + 4 * len(raw)
    for name, value in raw:
        size += len(name) + len(value)
    return size


class HttpServerConnection:
    """One server-side HTTP/1.1 connection of an MCP endpoint (sans-IO).

    Typical driver loop::

        while True:
            event = conn.next_event()
            sock.sendall(conn.data_to_send())
            if event is NEED_DATA:
                conn.receive_data(sock.recv(65536))        # b"" means the peer closed
            elif isinstance(event, MessageReceived):
                reply = app.receive(event.message, ...)    # or drive a handler
                conn.send_reply(reply.message, reply.status)
            elif isinstance(event, ConnectionEnded):
                sock.sendall(conn.data_to_send()); sock.close(); break

    Args:
        config: Endpoint path, limits and Origin policy.
        tool_schema: Looks up a tool's ``inputSchema`` by name, so that the ``Mcp-Param-*``
            headers of a ``tools/call`` are checked against its ``x-mcp-header`` arguments
            (e.g. ``lambda name: (t := app.find_tool(name)) and t.input_schema``).
    """

    def __init__(
        self,
        config: HttpServerConfig | None = None,
        *,
        tool_schema: Callable[[str], Mapping[str, Any] | None] | None = None,
    ) -> None:
        self.config = config or HttpServerConfig()
        self._tool_schema = tool_schema
        self._path_bytes = self.config.path.encode("utf-8")
        self._h11 = h11.Connection(
            h11.SERVER, max_incomplete_event_size=self.config.max_header_bytes
        )
        self._out = bytearray()
        self._request: h11.Request | None = None
        self._headers: dict[str, list[bytes]] = {}
        self._rejection: HttpRequestError | None = None
        self._body: list[bytes] = []
        self._body_size = 0
        self._awaiting_reply = False
        self._ended = False

    # -- inputs --------------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray) -> None:
        """Feed bytes read from the socket; ``b""`` means the peer closed its side."""
        if self._ended:
            return
        self._h11.receive_data(bytes(data))

    def next_event(self) -> ServerEvent:
        """Process buffered bytes until something happens.

        Returns:
            :data:`~mrtr_core.jsonrpc.NEED_DATA`, a :class:`MessageReceived` to answer, a
            :class:`RequestRejected` notice (already answered), or :class:`ConnectionEnded`.

        Raises:
            LocalProtocolError: Called while a :class:`MessageReceived` is still unanswered.
        """
        if self._ended:
            return ConnectionEnded()
        if self._awaiting_reply:
            raise LocalProtocolError("answer the current request with send_reply() first")
        while True:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                status = exc.error_status_hint if 400 <= exc.error_status_hint < 600 else 400
                return self._abort(HttpRequestError(f"bad HTTP request: {exc}", status=status))
            if event is h11.NEED_DATA:
                return NEED_DATA
            if isinstance(event, h11.Request):
                rejected = self._on_request(event)
                if rejected is not None:
                    return rejected
            elif isinstance(event, h11.Data):
                rejected = self._on_data(event.data)
                if rejected is not None:
                    return rejected
            elif isinstance(event, h11.EndOfMessage):
                return self._on_end()
            else:  # ConnectionClosed, or PAUSED (cannot happen: we cycle after each reply)
                self._ended = True
                return ConnectionEnded()

    def send_reply(
        self,
        message: Mapping[str, Any] | None,
        status: int | None = None,
        *,
        notifications: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Answer the current :class:`MessageReceived`.

        Args:
            message: The JSON-RPC response, or ``None`` for an accepted notification.
            status: The HTTP status. By default 202 without a message; else derived from the
                error code (:func:`http_status_for_error`) or 200.
            notifications: Request-related notifications to send before the response; when
                given, the reply is a ``text/event-stream`` (digest §3.3) instead of JSON.

        Raises:
            LocalProtocolError: No request is waiting for an answer, or the message is not
                JSON-serialisable.
        """
        if not self._awaiting_reply:
            raise LocalProtocolError("no request is waiting for a reply")
        if message is None:
            self._respond(202 if status is None else status, [], b"")
        else:
            if status is None:
                error = message.get("error")
                code = error.get("code") if isinstance(error, dict) else None
                status = http_status_for_error(code) if isinstance(code, int) else 200
            if notifications:
                body = b"".join(
                    encode_sse_event(jsonrpc.encode(item).decode("utf-8"))
                    for item in [*notifications, message]
                )
                self._respond(status, _SSE_HEADERS, body, length=False)
            else:
                body = jsonrpc.encode(message)
                self._respond_json(status, body)
        self._awaiting_reply = False
        self._next_cycle()

    def timed_out(self) -> None:
        """The driver's read timer fired: answer 408 if a request is half-read, then end.

        An idle keep-alive connection is simply ended. Afterwards :meth:`next_event` returns
        :class:`ConnectionEnded`.
        """
        if self._ended or self._awaiting_reply:
            self._ended = True
            return
        if self._h11.their_state is not h11.IDLE or self._h11.trailing_data[0]:
            self._abort(HttpRequestError("request not received in time", status=408))
        self._ended = True

    # -- outputs -------------------------------------------------------------------------

    def data_to_send(self) -> bytes:
        """Drain the bytes to write to the socket (possibly empty)."""
        out = bytes(self._out)
        self._out.clear()
        return out

    @property
    def idle(self) -> bool:
        """Between requests: nothing of a next request received yet (for idle timeouts)."""
        return (
            not self._awaiting_reply
            and self._h11.their_state is h11.IDLE
            and not self._h11.trailing_data[0]
        )

    @property
    def waiting_for_peer(self) -> bool:
        """Only the client can move this connection on: no request is being answered and
        nothing is left to send (between requests, or a request still arriving). A server
        out of connection slots may close such a connection to take a new one."""
        return not (self._awaiting_reply or self._out) and (
            not self._ended or self.peer_may_still_send
        )

    @property
    def peer_may_still_send(self) -> bool:
        """The connection ended on our side (a 413, a refused ``100-continue``, a malformed
        or late request) while the client may still be sending what we did not read.

        Closing a socket with unread bytes makes the kernel reset the connection, which may
        destroy our response before the client reads it. RFC 9112 §9.6: close in stages
        instead: half-close the write side after the response, read and discard what still
        arrives (at most :data:`LINGER_S` seconds and :data:`LINGER_MAX_BYTES` bytes), then
        close. A connection doing so only waits for its client (:attr:`waiting_for_peer`).
        """
        h11_conn = self._h11
        if not self._ended or h11_conn.trailing_data[1]:  # the client already closed its side
            return False
        state = h11_conn.their_state
        return state is h11.SEND_BODY or state is h11.ERROR or (
            state is h11.IDLE and bool(h11_conn.trailing_data[0])
        )

    @property
    def ended(self) -> bool:
        """Whether the connection is finished (after :class:`ConnectionEnded`)."""
        return self._ended

    # -- internals -----------------------------------------------------------------------

    def _on_request(self, request: h11.Request) -> RequestRejected | None:
        self._request = request
        # h11 has validated the names and values; raw_items() avoids its per-item indexing.
        raw = request.headers.raw_items()
        self._headers = headers = collect_headers(raw)
        self._rejection = None
        self._body = []
        self._body_size = 0
        if _head_size(request, raw) > self.config.max_header_bytes:
            return self._abort(HttpRequestError(
                f"request head exceeds {self.config.max_header_bytes} bytes", status=431))
        if _CONTENT_LENGTH in headers and _TRANSFER_ENCODING in headers:
            # RFC 9112 §6.1: such a request may be smuggling; the server MUST close the
            # connection after responding (h11 keeps it open).
            return self._abort(HttpRequestError(
                "both Content-Length and Transfer-Encoding are present", status=400))
        rejection = self._precheck(request, headers)
        if rejection is not None and rejection.status == 413:
            return self._abort(rejection)
        self._rejection = rejection
        if self._h11.they_are_waiting_for_100_continue:
            if rejection is not None:
                # The client holds its body back until we say so: answer now and close.
                return self._abort(rejection)
            self._out += self._h11.send(h11.InformationalResponse(status_code=100, headers=[]))
        return None

    def _precheck(
        self, request: h11.Request, headers: Mapping[str, list[bytes]]
    ) -> HttpRequestError | None:
        # A list-valued field may be split over several field lines (RFC 9110 §5.3): Accept
        # and Content-Encoding are read joined; the others by their first value.
        get = headers.get
        if request.target != self._path_bytes:
            path = _target_path(request.target)
            if path != self.config.path:
                return HttpRequestError(f"no MCP endpoint at {path!r}", status=404)
        if request.method != b"POST":
            # GET and DELETE were removed in 2026-07-28: 405 (digest §3.2, §3.3).
            method = request.method.decode("ascii", "replace")
            return HttpRequestError(f"HTTP method {method} is not allowed; use POST", status=405)
        origins = get(_ORIGIN)
        types = get(_CONTENT_TYPE)
        for singleton, values in ((_ORIGIN, origins), (_CONTENT_TYPE, types)):
            if values is not None and len(values) > 1:
                return HttpRequestError(f"{singleton} header appears more than once", status=400)
        if origins:
            origin = origins[0].decode("latin-1")
            if not self.config.origin_allowed(origin):
                # MUST answer 403 to a present, invalid Origin (digest §3.3 "Endpoint").
                return HttpRequestError(f"origin {origin!r} is not allowed", status=403)
        lengths = get(_CONTENT_LENGTH)
        length = lengths[0].decode("latin-1") if lengths else None
        if length is not None and length.isdigit() and int(length) > self.config.max_body_bytes:
            return HttpRequestError(
                f"body of {length} bytes exceeds the limit of {self.config.max_body_bytes}",
                status=413,
            )
        accept = get(_ACCEPT)
        if not accepts_json_and_sse(b", ".join(accept).decode("latin-1") if accept else None):
            # Accept MUST list both types (digest §3.3 item 2); the spec fixes no status.
            return HttpRequestError(
                "Accept must list application/json and text/event-stream", status=406
            )
        if not is_json_content_type(types[0].decode("latin-1") if types else None):
            return HttpRequestError("Content-Type must be application/json", status=415)
        codings = get(_CONTENT_ENCODING)
        coding = b", ".join(codings).decode("latin-1") if codings else None
        if coding is not None and any(
            item.strip().lower() not in ("", "identity") for item in coding.split(",")
        ):
            # No content coding is decoded here: a coded body must not be read as the JSON
            # it may look like (RFC 9110 §8.4 and §15.5.16 answer it with 415).
            return HttpRequestError(
                f"Content-Encoding {coding!r} is not supported; send the body uncompressed",
                status=415,
            )
        return None

    def _on_data(self, data: bytes | bytearray | memoryview) -> RequestRejected | None:
        self._body_size += len(data)
        if self._body_size > self.config.max_body_bytes:
            return self._abort(
                HttpRequestError(
                    f"body exceeds the limit of {self.config.max_body_bytes} bytes", status=413
                )
            )
        if self._rejection is None:
            self._body.append(bytes(data))
        return None

    def _on_end(self) -> ServerEvent:
        if self._rejection is not None:
            return self._reject(self._rejection)
        request = self._request
        assert request is not None
        headers = self._headers
        try:
            value = jsonrpc.decode(
                b"".join(self._body),
                max_bytes=self.config.max_body_bytes,
                max_depth=self.config.max_depth,
            )
            parsed = jsonrpc.parse_request(value)
            validate_request_headers(parsed, headers)
            self._check_param_headers(parsed, headers)
        except jsonrpc.MessageError as exc:
            return self._reject(
                HttpRequestError(
                    str(exc), status=400, jsonrpc_code=exc.jsonrpc_code, request_id=exc.request_id
                )
            )
        except HeaderMismatchError as exc:
            return self._reject(
                HttpRequestError(
                    str(exc), status=400, jsonrpc_code=exc.jsonrpc_code, request_id=exc.request_id
                )
            )
        if isinstance(parsed, Notification):
            refused = _unspoken_version(headers)
            if refused is not None:
                return self._reject(refused)
        self._body = []
        self._awaiting_reply = True
        return MessageReceived(
            message=parsed.raw,
            parsed=parsed,
            headers=headers,
            target=request.target.decode("ascii", "replace"),
        )

    def _check_param_headers(
        self, parsed: Request | Notification, headers: Mapping[str, list[bytes]]
    ) -> None:
        if self._tool_schema is None or not isinstance(parsed, Request):
            return
        if parsed.method != "tools/call" or parsed.params is None:
            return
        name = parsed.params.get("name")
        schema = self._tool_schema(name) if isinstance(name, str) else None
        if schema:
            # Registered schemas are fixed: their x-mcp-header annotations are read once.
            paths = cached_param_header_paths(schema)
            if paths:
                check_param_headers(
                    paths, parsed.params.get("arguments"), headers, request_id=parsed.id
                )

    def _error_body(self, error: HttpRequestError) -> bytes:
        return jsonrpc.encode(
            jsonrpc.error_response(error.request_id, error.jsonrpc_code, str(error), error.data)
        )

    def _reject(self, error: HttpRequestError) -> RequestRejected:
        extra = _ALLOW_POST if error.status == 405 else []
        if error.status == 404:
            self._respond(
                404, [(b"Content-Type", b"text/plain; charset=utf-8"), *extra], b"Not Found"
            )
        else:
            self._respond(error.status, [*_JSON_HEADERS, *extra], self._error_body(error))
        self._next_cycle()
        return RequestRejected(status=error.status, error=error)

    def _abort(self, error: HttpRequestError) -> RequestRejected:
        """Answer with ``error`` if HTTP still allows a response, then end the connection."""
        self._ended = True
        if self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with contextlib.suppress(h11.LocalProtocolError):
                self._respond(
                    error.status,
                    [*_JSON_HEADERS, (b"Connection", b"close")],
                    self._error_body(error),
                )
        return RequestRejected(status=error.status, error=error)

    def _respond_json(self, status: int, body: bytes) -> None:
        """Send a whole JSON response (the common answer): its head event is made once per
        status and length, since h11 normalises the headers of every new event."""
        key = (status, len(body))
        response = _JSON_RESPONSES.get(key)
        if response is None:
            response = h11.Response(
                status_code=status,
                headers=[*_JSON_HEADERS, (b"Content-Length", b"%d" % len(body))],
                reason=_reason(status),
            )
            if len(_JSON_RESPONSES) >= _JSON_RESPONSES_MAX:
                _JSON_RESPONSES.clear()
            _JSON_RESPONSES[key] = response
        self._send_response(response, body)

    def _respond(
        self, status: int, headers: list[tuple[bytes, bytes]], body: bytes, *, length: bool = True
    ) -> None:
        """Send a whole response; without ``length`` h11 frames it chunked (an event stream)."""
        head = [*headers, (b"Content-Length", b"%d" % len(body))] if length else headers
        self._send_response(
            h11.Response(status_code=status, headers=head, reason=_reason(status)), body
        )

    def _send_response(self, response: h11.Response, body: bytes) -> None:
        out = self._out
        h11_conn = self._h11
        out += h11_conn.send(response)
        head_request = self._request is not None and self._request.method == b"HEAD"
        if body and not head_request:
            out += h11_conn.send(h11.Data(data=body))
        out += h11_conn.send(_END_OF_MESSAGE)

    def _next_cycle(self) -> None:
        self._request = None
        self._rejection = None
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
        elif self._h11.our_state is h11.MUST_CLOSE or self._h11.their_state is h11.MUST_CLOSE:
            self._ended = True
