"""The JSON-RPC 2.0 envelope: decode one message from bytes, classify it, build replies.

Every transport (Streamable HTTP, stdio) goes through here, so the rules live in one place:

* one message per body or line; batches (JSON arrays) are refused (digest §3.3 item 1:
  "the body is exactly one JSON-RPC request or notification");
* the bytes must be UTF-8 JSON (digest §3.4) with no ``NaN``/``Infinity``, no larger than
  ``max_bytes`` and nested no deeper than ``max_depth``;
* ``jsonrpc`` is ``"2.0"``; a request ``id`` is a string or an integer (``RequestId``);
* an error response leaves ``id`` out only when the id could not be read (digest §1.8).

Decoding problems raise :class:`ParseError` (-32700); shape problems raise
:class:`InvalidRequestError` (-32600). Both carry the request id when it could be read, and
both know the error response a server should send (:meth:`MessageError.to_response`).
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias

import attrs

from mrtr_core import jsontext
from mrtr_core.errors import (
    INVALID_REQUEST,
    PARSE_ERROR,
    JsonRpcError,
    LocalProtocolError,
    RemoteProtocolError,
)

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "NEED_DATA",
    "InvalidRequestError",
    "Message",
    "MessageError",
    "NeedData",
    "NeedDataType",
    "Notification",
    "ParseError",
    "Request",
    "RequestId",
    "Response",
    "decode",
    "encode",
    "error_response",
    "error_response_for",
    "notification",
    "parse_message",
    "parse_request",
    "parse_response",
    "request",
    "result_response",
]

RequestId: TypeAlias = str | int

DEFAULT_MAX_MESSAGE_BYTES: Final = 4 * 1024 * 1024
DEFAULT_MAX_DEPTH: Final = 64

_VERSION: Final = "2.0"


class NeedData(enum.Enum):
    """The signal a transport connection's ``next_event()`` returns when it needs more bytes."""

    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA
"""Feed more bytes with ``receive_data()`` before asking for the next event."""
NeedDataType: TypeAlias = Literal[NeedData.NEED_DATA]


class MessageError(RemoteProtocolError):
    """Bytes or a value that is not an acceptable JSON-RPC message.

    Attributes:
        jsonrpc_code: ``-32700`` (not JSON) or ``-32600`` (not a valid message).
        request_id: The message's ``id`` when it could be read, else ``None``.
    """

    def __init__(
        self, message: str, *, jsonrpc_code: int | None = None, request_id: RequestId | None = None
    ) -> None:
        super().__init__(message, jsonrpc_code=jsonrpc_code)
        self.request_id = request_id

    def to_response(self) -> dict[str, Any]:
        """The JSON-RPC error response a server sends back for this problem."""
        return error_response(self.request_id, self.jsonrpc_code, str(self))


class ParseError(MessageError):
    """The bytes are not one UTF-8 JSON value within the size and depth limits (-32700)."""

    jsonrpc_code = PARSE_ERROR


class InvalidRequestError(MessageError):
    """The JSON value is not a valid JSON-RPC message of the expected kind (-32600)."""

    jsonrpc_code = INVALID_REQUEST


@attrs.frozen(kw_only=True)
class Request:
    """A JSON-RPC request: it has an ``id`` and expects exactly one response."""

    id: RequestId
    method: str
    params: dict[str, Any] | None
    raw: dict[str, Any] = attrs.field(repr=False)
    """The message as received (the same dict, not a copy)."""


@attrs.frozen(kw_only=True)
class Notification:
    """A JSON-RPC notification: no ``id``, no response."""

    method: str
    params: dict[str, Any] | None
    raw: dict[str, Any] = attrs.field(repr=False)
    """The message as received."""


@attrs.frozen(kw_only=True)
class Response:
    """A JSON-RPC response: a ``result`` or an ``error`` for one request ``id``."""

    id: RequestId | None
    """``None`` only for an error response whose request id could not be read."""
    result: Any = None
    error: dict[str, Any] | None = None
    """The ``error`` member (``code``, ``message``, optional ``data``), validated."""
    raw: dict[str, Any] = attrs.field(repr=False)
    """The message as received."""

    @property
    def is_error(self) -> bool:
        """Whether this is an error response."""
        return self.error is not None

    def to_error(self) -> JsonRpcError:
        """The error response as a :class:`~mrtr_core.errors.JsonRpcError`.

        Raises:
            LocalProtocolError: This is not an error response.
        """
        if self.error is None:
            raise LocalProtocolError("not an error response")
        return JsonRpcError(self.error["code"], self.error["message"], self.error.get("data"))


Message: TypeAlias = Request | Notification | Response


# -- bytes <-> JSON values -------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(literal: str) -> float:
    # A literal beyond the double range ("1e400") would decode to Infinity, which no reply
    # can carry back (encode refuses non-finite numbers): refused like NaN and Infinity.
    # RFC 8259 §6 lets an implementation limit the range of the numbers it accepts.
    value = float(literal)
    if math.isinf(value):
        raise ValueError(f"number {literal[:40]} is out of range")
    return value


def _depth_exceeds(value: Any, max_depth: int) -> bool:
    """Whether ``value`` nests containers deeper than ``max_depth`` (iterative, no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # RFC 8259 §4: names "SHOULD be unique"; with duplicates, parsers differ (first or last
    # wins, or an error), so a router and a server could read two different ``id``s or
    # ``requestState``s from one message. Refused instead of picking one.
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise ValueError(f"duplicate member name {name[:40]!r}")
            seen.add(name)
    return obj


_DECODE: Final = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_unique_members
).decode
_BOM_ERROR: Final = json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", "", 0)
_ENCODE: Final = jsontext.reusable(
    json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
)
_ENCODE_ASCII: Final = jsontext.reusable(
    json.JSONEncoder(separators=(",", ":"), allow_nan=False)
)


def decode(
    data: bytes | bytearray,
    *,
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """Decode one JSON value from UTF-8 bytes.

    Args:
        data: The bytes of one message (an HTTP body or one stdio line, without its newline).
        max_bytes: Larger inputs are refused before decoding.
        max_depth: Objects and arrays nested deeper than this are refused.

    Returns:
        The JSON value (dict, list, str, int, float, bool or None).

    Raises:
        ParseError: Too large, not UTF-8, not JSON, ``NaN``/``Infinity`` (or a number too
            large to be finite, e.g. ``1e400``), an object with a duplicate member name,
            or too deep.
    """
    if len(data) > max_bytes:
        raise ParseError(f"message of {len(data)} bytes exceeds the limit of {max_bytes} bytes")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(f"message is not valid UTF-8: {exc.reason}") from None
    if text.startswith("\ufeff"):  # as json.loads does for str input
        raise ParseError(f"message is not valid JSON: {_BOM_ERROR}") from None
    try:
        value = _DECODE(text)
    except RecursionError:
        raise ParseError(f"message nests deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, over-long integer literals
        raise ParseError(f"message is not valid JSON: {exc}") from None
    # Nesting cannot exceed the number of opening brackets: count them in C first and walk
    # the decoded value only when that bound is over the limit.
    if data.count(b"{") + data.count(b"[") > max_depth and _depth_exceeds(value, max_depth):
        raise ParseError(f"message nests deeper than {max_depth} levels")
    return value


def encode(message: Mapping[str, Any]) -> bytes:
    """Encode a message as compact UTF-8 JSON: one line, no trailing newline.

    ``json.dumps`` escapes control characters inside strings, so the result never contains a
    raw newline (digest §3.4: "no embedded newlines").

    Raises:
        LocalProtocolError: The message is not JSON-serialisable (e.g. it holds ``NaN``).
    """
    try:
        text = _ENCODE(message)
    except (TypeError, ValueError) as exc:
        raise LocalProtocolError(f"message is not JSON-serialisable: {exc}") from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: fall back to \\u escapes
        return _ENCODE_ASCII(message).encode("ascii")


# -- classifying ---------------------------------------------------------------------------


def _readable_id(obj: Mapping[str, Any]) -> RequestId | None:
    rid = obj.get("id")
    if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
        return rid
    return None


def _check_object(obj: Any) -> dict[str, Any]:
    if isinstance(obj, list):
        raise InvalidRequestError("batches (JSON arrays) are not supported: send one message")
    if not isinstance(obj, dict):
        raise InvalidRequestError(f"a JSON-RPC message must be an object, not {type(obj).__name__}")
    rid = _readable_id(obj)
    if obj.get("jsonrpc") != _VERSION:
        raise InvalidRequestError('"jsonrpc" must be "2.0"', request_id=rid)
    return obj


def _params(obj: dict[str, Any], rid: RequestId | None) -> dict[str, Any] | None:
    if "params" not in obj:
        return None
    params = obj["params"]
    if not isinstance(params, dict):
        # MCP params are always an object (schema.ts: `params?: { [key: string]: unknown }`).
        raise InvalidRequestError('"params" must be an object', request_id=rid)
    return params


def _request_or_notification(obj: dict[str, Any]) -> Request | Notification:
    rid = _readable_id(obj)
    method = obj["method"]
    if not isinstance(method, str) or not method:
        raise InvalidRequestError('"method" must be a non-empty string', request_id=rid)
    params = _params(obj, rid)
    if "id" not in obj:
        return Notification(method=method, params=params, raw=obj)
    if rid is None:
        raise InvalidRequestError('"id" must be a string or an integer')
    return Request(id=rid, method=method, params=params, raw=obj)


def _response(obj: dict[str, Any]) -> Response:
    rid = _readable_id(obj)
    has_result, has_error = "result" in obj, "error" in obj
    if has_result == has_error:
        raise InvalidRequestError(
            'a response must have exactly one of "result" and "error"', request_id=rid
        )
    if has_result:
        if rid is None:
            raise InvalidRequestError('a result response needs a string or integer "id"')
        return Response(id=rid, result=obj["result"], raw=obj)
    if obj.get("id") is not None and rid is None:
        raise InvalidRequestError('"id" must be a string or an integer')
    error = obj["error"]
    if not isinstance(error, dict):
        raise InvalidRequestError('"error" must be an object', request_id=rid)
    code = error.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        raise InvalidRequestError('"error.code" must be an integer', request_id=rid)
    if not isinstance(error.get("message"), str):
        raise InvalidRequestError('"error.message" must be a string', request_id=rid)
    return Response(id=rid, error=error, raw=obj)


_ABSENT: Final = object()


def _common(obj: Any) -> Message | None:
    """The well-formed common shapes, classified with the fewest lookups: a request with a
    string or integer ``id`` and object (or no) ``params``, or a result response with such
    an ``id``. ``None`` for anything else, which the full checks then classify (or refuse)."""
    if type(obj) is not dict or obj.get("jsonrpc") != _VERSION:
        return None
    rid = obj.get("id")
    if type(rid) is not str and type(rid) is not int:
        return None
    method = obj.get("method", _ABSENT)
    if method is _ABSENT:
        if "error" in obj or "result" not in obj:
            return None
        return Response(id=rid, result=obj["result"], raw=obj)
    if type(method) is not str or not method:
        return None
    params = obj.get("params", _ABSENT)
    if params is _ABSENT:
        return Request(id=rid, method=method, params=None, raw=obj)
    if type(params) is not dict:
        return None
    return Request(id=rid, method=method, params=params, raw=obj)


def parse_message(obj: Any) -> Message:
    """Classify a decoded JSON value as a request, notification or response.

    Raises:
        InvalidRequestError: Not an object (a batch is refused by name), wrong ``jsonrpc``,
            a bad ``id``/``method``/``params``, or a malformed response.
    """
    common = _common(obj)
    if common is not None:
        return common
    msg = _check_object(obj)
    if "method" in msg:
        return _request_or_notification(msg)
    if "result" in msg or "error" in msg:
        return _response(msg)
    raise InvalidRequestError(
        'a JSON-RPC message needs "method" (request) or "result"/"error" (response)',
        request_id=_readable_id(msg),
    )


def parse_request(obj: Any) -> Request | Notification:
    """Classify a message a server received: only requests and notifications are allowed.

    Raises:
        InvalidRequestError: As :func:`parse_message`, or the peer sent a response (clients
            must never send responses, digest §3.3 item 1).
    """
    msg = parse_message(obj)
    if isinstance(msg, Response):
        raise InvalidRequestError("clients must not send JSON-RPC responses", request_id=msg.id)
    return msg


def parse_response(obj: Any) -> Response | Notification:
    """Classify a message a client received: responses and notifications are allowed.

    Raises:
        InvalidRequestError: As :func:`parse_message`, or the server sent a request (servers
            must not send requests in 2026-07-28, digest §3.1 and §3.4).
    """
    msg = parse_message(obj)
    if isinstance(msg, Request):
        raise InvalidRequestError(
            f"servers must not send requests (got {msg.method!r})", request_id=msg.id
        )
    return msg


# -- building ------------------------------------------------------------------------------


def request(
    request_id: RequestId, method: str, params: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Build a request message."""
    msg: dict[str, Any] = {"jsonrpc": _VERSION, "id": request_id, "method": method}
    if params is not None:
        msg["params"] = dict(params)
    return msg


def notification(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Build a notification message."""
    msg: dict[str, Any] = {"jsonrpc": _VERSION, "method": method}
    if params is not None:
        msg["params"] = dict(params)
    return msg


def result_response(request_id: RequestId, result: Any) -> dict[str, Any]:
    """Build a success response."""
    return {"jsonrpc": _VERSION, "id": request_id, "result": result}


def error_response(
    request_id: RequestId | None, code: int, message: str, data: Any = None
) -> dict[str, Any]:
    """Build an error response; ``id`` is left out when ``request_id`` is ``None`` (§1.8)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    msg: dict[str, Any] = {"jsonrpc": _VERSION}
    if request_id is not None:
        msg["id"] = request_id
    msg["error"] = error
    return msg


def error_response_for(request_id: RequestId | None, error: JsonRpcError) -> dict[str, Any]:
    """Build the error response carrying ``error``."""
    return error_response(request_id, error.code, error.message, error.data)
