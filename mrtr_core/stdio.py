"""The stdio transport: newline-delimited JSON-RPC, both roles (digest §3.4).

UTF-8 JSON, one message per line, no embedded newlines; the client writes requests and
notifications to the server's stdin, the server writes responses and request-related
notifications to stdout. Requests may be interleaved, so responses are matched by id.

:class:`LineFramer` splits bytes into bounded lines. :class:`StdioServerConnection` turns lines
into messages for the application and answers unreadable lines itself (-32700/-32600);
:class:`StdioClientConnection` turns lines into responses and treats anything else the server
writes to stdout as a protocol error ("nothing on stdout that is not a valid MCP message").
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Mapping
from typing import Any, Final, Generic, Protocol, TypeAlias, TypeVar

import attrs

from mrtr_core import jsonrpc
from mrtr_core._checks import finite_seconds, positive_int
from mrtr_core.errors import (
    LocalProtocolError,
    MrtrError,
    RemoteProtocolError,
    TransportClosedError,
)
from mrtr_core.jsonrpc import NEED_DATA, NeedDataType, Notification, Request, RequestId

__all__ = [
    "CANCELLED",
    "DEFAULT_MAX_LINE_BYTES",
    "ClientEvent",
    "InputEnded",
    "LineFramer",
    "LineTooLong",
    "MessageReceived",
    "MessageRejected",
    "NotificationReceived",
    "ResponseReceived",
    "ServerEvent",
    "ServerExitedError",
    "StdinStalledError",
    "StdioClientConnection",
    "StdioServerConnection",
    "StdioTransportBase",
    "cancelled_notification",
    "encode_line",
]

DEFAULT_MAX_LINE_BYTES: Final = jsonrpc.DEFAULT_MAX_MESSAGE_BYTES
CANCELLED: Final = "notifications/cancelled"


def encode_line(message: Mapping[str, Any]) -> bytes:
    """One message as a line: compact JSON plus ``\\n`` (``json.dumps`` escapes newlines).

    Raises:
        LocalProtocolError: The message is not JSON-serialisable.
    """
    return jsonrpc.encode(message) + b"\n"


def cancelled_notification(request_id: RequestId, reason: str | None = None) -> dict[str, Any]:
    """The ``notifications/cancelled`` a stdio client sends to cancel a request (digest §3.4)."""
    params: dict[str, Any] = {"requestId": request_id}
    if reason is not None:
        params["reason"] = reason
    return jsonrpc.notification(CANCELLED, params)


class ServerExitedError(RemoteProtocolError, ConnectionError):
    """The stdio server process ended, or closed its stdout, with requests in flight.

    In-flight requests are lost and may be retried on a new process (digest §3.4 "Crash").

    Attributes:
        returncode: The process's exit status when known.
    """

    def __init__(self, message: str, *, returncode: int | None = None) -> None:
        suffix = f" (exit status {returncode})" if returncode is not None else ""
        super().__init__(message + suffix)
        self.returncode = returncode


class StdinStalledError(RemoteProtocolError, TimeoutError):
    """A line to the stdio server's stdin could not be written whole in time (the server
    stopped reading it): part of the line may be on the pipe, and anything written after it
    would be read as the rest of that line (digest §3.4: one message per line), so the
    transport is unusable from then on and every request in flight fails with this.
    """


@attrs.frozen
class LineTooLong:
    """A line longer than the framer's limit was skipped (up to its newline)."""

    limit: int


class LineFramer:
    """Split a byte stream into lines of at most ``max_line_bytes`` (terminator excluded).

    ``\\n`` ends a line and a ``\\r`` just before it is dropped. A line over the limit is
    reported once as :class:`LineTooLong` and its bytes are discarded as they arrive, so the
    buffer never holds more than the limit. Blank lines are skipped.
    """

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._buf = bytearray()
        self._discarding = False
        self._eof = False

    def feed(self, data: bytes | bytearray) -> list[bytes | LineTooLong]:
        """Take bytes; ``b""`` means end of input (a final unterminated line still counts)."""
        out: list[bytes | LineTooLong] = []
        if not data:
            if not self._eof:
                self._eof = True
                if self._buf and not self._discarding:
                    self._emit(bytes(self._buf), out)
                self._buf.clear()
            return out
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            if self._discarding:
                self._discarding = False
            else:
                self._buf += data[start:end]
                self._emit(bytes(self._buf), out)
            self._buf.clear()
            start = end + 1
        if not self._discarding:
            self._buf += data[start:]
            if len(self._buf) > self.max_line_bytes + 1:  # +1: room for a trailing \r
                out.append(LineTooLong(self.max_line_bytes))
                self._buf.clear()
                self._discarding = True
        return out

    def _emit(self, line: bytes, out: list[bytes | LineTooLong]) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > self.max_line_bytes:
            out.append(LineTooLong(self.max_line_bytes))
        elif line.strip(b" \t\r"):
            out.append(line)


# -- events ----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MessageReceived:
    """The server read one valid request or notification."""

    message: dict[str, Any]
    """The message as decoded: hand it to the application."""
    parsed: Request | Notification = attrs.field(repr=False)

    @property
    def request_id(self) -> RequestId | None:
        """The JSON-RPC id, ``None`` for a notification."""
        return self.parsed.id if isinstance(self.parsed, Request) else None


@attrs.frozen(kw_only=True)
class MessageRejected:
    """The server read a line that is not a valid message: write ``response`` back."""

    response: dict[str, Any]
    """The JSON-RPC error response (-32700 or -32600; ``id`` only when it could be read)."""
    error: jsonrpc.MessageError


@attrs.frozen(kw_only=True)
class ResponseReceived:
    """The client read a response."""

    message: dict[str, Any]
    parsed: jsonrpc.Response = attrs.field(repr=False)

    @property
    def request_id(self) -> RequestId | None:
        """The id of the request this answers (``None``: an error for an unreadable request)."""
        return self.parsed.id


@attrs.frozen(kw_only=True)
class NotificationReceived:
    """The client read a notification (progress, log, subscription)."""

    message: dict[str, Any]
    parsed: Notification = attrs.field(repr=False)


@attrs.frozen
class InputEnded:
    """The peer closed its side: no more messages will come."""


ServerEvent: TypeAlias = MessageReceived | MessageRejected | InputEnded | NeedDataType
ClientEvent: TypeAlias = ResponseReceived | NotificationReceived | InputEnded | NeedDataType


class _Lines:
    """A framer plus a queue of its output, for pull-style ``next_event()``."""

    def __init__(self, max_line_bytes: int) -> None:
        self.framer = LineFramer(max_line_bytes=max_line_bytes)
        self.queue: deque[bytes | LineTooLong] = deque()
        self.eof = False
        self.unterminated: bytes | LineTooLong | None = None
        """The last line when end of input came before its newline (the same object)."""

    def receive(self, data: bytes | bytearray) -> None:
        if self.eof:
            return
        items = self.framer.feed(data)
        if not data:
            self.eof = True
            if items:  # at end of input the framer gives only the unterminated last line
                self.unterminated = items[-1]
        self.queue.extend(items)

    def pop(self) -> bytes | LineTooLong | None:
        return self.queue.popleft() if self.queue else None


class StdioServerConnection:
    """The server side of a stdio connection (sans-IO).

    Args:
        max_line_bytes: Longest line (one message) accepted; longer ones get -32600.
        max_depth: Deepest JSON nesting accepted; deeper messages get -32700.
    """

    def __init__(
        self,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_depth: int = jsonrpc.DEFAULT_MAX_DEPTH,
    ) -> None:
        self._lines = _Lines(max_line_bytes)
        self._max_depth = max_depth

    def receive_data(self, data: bytes | bytearray) -> None:
        """Feed bytes read from stdin; ``b""`` means end of input."""
        self._lines.receive(data)

    def next_event(self) -> ServerEvent:
        """The next message, rejected line, end of input, or :data:`NEED_DATA`."""
        item = self._lines.pop()
        if item is None:
            return InputEnded() if self._lines.eof else NEED_DATA
        try:
            if isinstance(item, LineTooLong):
                raise jsonrpc.InvalidRequestError(f"message exceeds {item.limit} bytes")
            value = jsonrpc.decode(item, max_bytes=len(item), max_depth=self._max_depth)
            parsed = jsonrpc.parse_request(value)
        except jsonrpc.MessageError as exc:
            return MessageRejected(response=exc.to_response(), error=exc)
        return MessageReceived(message=parsed.raw, parsed=parsed)

    @staticmethod
    def send(message: Mapping[str, Any]) -> bytes:
        """The line to write for a response or notification."""
        return encode_line(message)


class StdioClientConnection:
    """The client side of a stdio connection (sans-IO).

    Args:
        max_line_bytes: Longest line accepted from the server.
        max_depth: Deepest JSON nesting accepted.
    """

    def __init__(
        self,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_depth: int = jsonrpc.DEFAULT_MAX_DEPTH,
    ) -> None:
        self._lines = _Lines(max_line_bytes)
        self._max_depth = max_depth

    def send(self, message: Mapping[str, Any]) -> bytes:
        """The line to write for a request or notification.

        Raises:
            LocalProtocolError: ``message`` is not a request or notification.
        """
        try:
            jsonrpc.parse_request(dict(message))
        except jsonrpc.MessageError as exc:
            raise LocalProtocolError(f"not a sendable message: {exc}") from None
        return encode_line(message)

    def send_request(self, message: Mapping[str, Any]) -> tuple[RequestId, bytes]:
        """The id of a request, which its response will carry, and the line to write for it.

        Responses are matched to requests by id (digest §3.4), so the id must be one that
        can be matched.

        Raises:
            LocalProtocolError: ``message`` has no string or integer ``id``, or is not a
                request.
        """
        request_id = message.get("id")
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            raise LocalProtocolError("a request needs a string or integer id")
        return request_id, self.send(message)

    def receive_data(self, data: bytes | bytearray) -> None:
        """Feed bytes read from the server's stdout; ``b""`` means it closed."""
        self._lines.receive(data)

    def next_event(self) -> ClientEvent:
        """The next response or notification, end of input, or :data:`NEED_DATA`.

        A last line that stdout ended inside of (no newline came) and that is not a whole
        message is the server dying mid-write, not a framing violation: it is dropped and
        :class:`InputEnded` follows, so requests in flight fail as lost with the process
        (digest §3.4 "Crash"), not as a protocol error.

        Raises:
            RemoteProtocolError: The server wrote a line that is not a valid response or
                notification (the offending line is consumed; later lines stay readable).
        """
        item = self._lines.pop()
        if item is None:
            return InputEnded() if self._lines.eof else NEED_DATA
        if isinstance(item, LineTooLong):
            raise RemoteProtocolError(f"server wrote a line longer than {item.limit} bytes")
        try:
            value = jsonrpc.decode(item, max_bytes=len(item), max_depth=self._max_depth)
            parsed = jsonrpc.parse_response(value)
        except jsonrpc.MessageError:
            if item is self._lines.unterminated:
                return InputEnded()
            raise
        if isinstance(parsed, Notification):
            return NotificationReceived(message=parsed.raw, parsed=parsed)
        return ResponseReceived(message=parsed.raw, parsed=parsed)


# -- what the adapters' client transports share ------------------------------------------------


class _Process(Protocol):
    @property
    def stdin(self) -> Any: ...

    @property
    def stdout(self) -> Any: ...


P = TypeVar("P", bound=_Process)
"""The runtime's server process."""
W = TypeVar("W")
"""What a request in flight waits on (the runtime's event or future)."""


class StdioTransportBase(abc.ABC, Generic[P, W]):
    """The process and bookkeeping of a stdio client transport, less its I/O (digest §3.4).

    Each adapter's ``StdioTransport`` adds how it writes, waits and reads; the connection,
    the requests in flight (by id) and the failure that ended the transport are kept here.

    Args:
        process: A running process with ``stdin`` and ``stdout`` pipes.
        max_line_bytes: Longest line accepted from the server.
        close_timeout: Seconds closing waits after closing stdin, and after SIGTERM; also
            the longest a ``notifications/cancelled`` waits for stdin to take it.

    Raises:
        ValueError: The process has no ``stdin`` or no ``stdout`` pipe, or an option is
            refused (see :meth:`check_options`).
    """

    def __init__(
        self,
        process: P,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        close_timeout: float = 2.0,
    ) -> None:
        self.check_options(max_line_bytes=max_line_bytes, close_timeout=close_timeout)
        if process.stdin is None or process.stdout is None:
            raise ValueError("the process needs stdin and stdout pipes")
        self.process = process
        self.close_timeout = close_timeout
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._conn = StdioClientConnection(max_line_bytes=max_line_bytes)
        self._pending: dict[RequestId, W] = {}
        """The requests in flight, by id: what each one's caller waits on."""
        self._failure: MrtrError | None = None
        """Why the transport is unusable (every later request raises a copy), if it is."""

    @staticmethod
    def check_options(*, max_line_bytes: object, close_timeout: object) -> None:
        """Refuse options no transport can work with, before a server is started for it.

        Raises:
            ValueError: ``max_line_bytes`` is not an integer >= 1 (every line would be too
                long), or ``close_timeout`` is not a finite number of seconds >= 0 (closing
                would fail halfway, or never end, leaving the server running).
        """
        positive_int("max_line_bytes", max_line_bytes)
        finite_seconds("close_timeout", close_timeout)

    @abc.abstractmethod
    def _fail(self, error: MrtrError) -> None:
        """Fail every request in flight with ``error``; the first failure is also kept for
        every later request."""

    def _fail_closed(self) -> None:
        """(The end of ``close``.) Fail what is still in flight, and every later request,
        with :class:`~mrtr_core.errors.TransportClosedError`: the transport was closed on
        purpose, whatever ended the process first."""
        closed = TransportClosedError("the transport was closed")
        self._fail(closed)
        self._failure = closed
