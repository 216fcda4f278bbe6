"""Streamable HTTP header rules: value encoding, media types, Origin, and header-body checks.

Sources: ``basic/transports/streamable-http.mdx`` (digest §3.3) § Request Metadata, § Value
Encoding, § Server Validation, § Security & Endpoint.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from mrtr_core.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    LocalProtocolError,
    RemoteProtocolError,
)
from mrtr_core.jsonrpc import Notification, Request, RequestId
from mrtr_core.wire.models import PROTOCOL_VERSION

__all__ = [
    "HEADER_ACCEPT",
    "HEADER_CONTENT_TYPE",
    "HEADER_MCP_METHOD",
    "HEADER_MCP_NAME",
    "HEADER_ORIGIN",
    "HEADER_PROTOCOL_VERSION",
    "JSON_MEDIA_TYPE",
    "NAMED_METHODS",
    "SSE_MEDIA_TYPE",
    "HeaderMismatchError",
    "accepts_json_and_sse",
    "collect_headers",
    "decode_header_value",
    "encode_header_value",
    "http_status_for_error",
    "is_json_content_type",
    "is_localhost_origin",
    "media_type",
    "name_of",
    "request_headers",
    "validate_request_headers",
]

HEADER_PROTOCOL_VERSION: Final = "MCP-Protocol-Version"
HEADER_MCP_METHOD: Final = "Mcp-Method"
HEADER_MCP_NAME: Final = "Mcp-Name"
HEADER_ACCEPT: Final = "Accept"
HEADER_CONTENT_TYPE: Final = "Content-Type"
HEADER_ORIGIN: Final = "Origin"

JSON_MEDIA_TYPE: Final = "application/json"
SSE_MEDIA_TYPE: Final = "text/event-stream"

# The methods whose Mcp-Name mirrors params.name or params.uri (§3.3 item 5).
NAMED_METHODS: Final[Mapping[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
}

_META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
_SENTINEL_PREFIX: Final = "=?base64?"
_SENTINEL_SUFFIX: Final = "?="
_LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})


class HeaderMismatchError(RemoteProtocolError):
    """A required MCP header is missing or malformed, or disagrees with the body (-32020, 400).

    Attributes:
        header: The header's name, e.g. ``"Mcp-Name"``.
        request_id: The id of the request whose headers were wrong, if it has one.
    """

    jsonrpc_code = HEADER_MISMATCH

    def __init__(self, message: str, *, header: str, request_id: RequestId | None = None) -> None:
        super().__init__(f"Header mismatch: {message}")
        self.header = header
        self.request_id = request_id


# -- value encoding (§ Value Encoding) ---------------------------------------------------------


# Visible ASCII and inner spaces: RFC 9110 field values without tab, no leading or trailing
# whitespace, not empty.
_PLAIN: Final = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")
# What a received value may hold: visible ASCII, space and tab (RFC 9110 § 5.5).
_FIELD_VALUE: Final = re.compile(rb"[\x20-\x7e\t]*")
# What a sent value may hold to arrive as it is: the same without whitespace at either end
# (RFC 9110 § 5.5: it is not part of the value).
_SENDABLE: Final = re.compile(r"(?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?")


def _is_plain(value: str) -> bool:
    """Whether ``value`` can travel as a plain header value (and is not sentinel-shaped)."""
    if _PLAIN.fullmatch(value) is None:
        return False
    return not (value.startswith(_SENTINEL_PREFIX) and value.endswith(_SENTINEL_SUFFIX))


def encode_header_value(value: str) -> str:
    """Encode a value for ``Mcp-Name`` (or ``Mcp-Param-*``).

    A value that is not plain safe ASCII, or that looks like the sentinel itself, is sent as
    ``=?base64?<Base64 of UTF-8>?=`` (§3.3 item 5; § Value Encoding). Lone surrogates cannot
    be UTF-8 and are replaced by U+FFFD.
    """
    if _is_plain(value):
        return value
    raw = value.encode("utf-8", "replace")
    return f"{_SENTINEL_PREFIX}{base64.b64encode(raw).decode('ascii')}{_SENTINEL_SUFFIX}"


def decode_header_value(raw: bytes | str, *, header: str = HEADER_MCP_NAME) -> str:
    """Decode a received header value, undoing the Base64 sentinel.

    Raises:
        HeaderMismatchError: The value has characters outside visible ASCII, space and tab,
            or a sentinel whose payload is not canonical Base64 of UTF-8.
    """
    # surrogatepass: a lone surrogate in text is refused below like any non-ASCII character.
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    if _FIELD_VALUE.fullmatch(data) is None:
        raise HeaderMismatchError(f"{header} header has invalid characters", header=header)
    text = data.decode("ascii")
    if not (text.startswith(_SENTINEL_PREFIX) and text.endswith(_SENTINEL_SUFFIX)):
        return text
    if len(text) < len(_SENTINEL_PREFIX) + len(_SENTINEL_SUFFIX):
        # "=?base64?=": the markers overlap. Sentinel-shaped, so a client MUST have encoded
        # it (§ Value Encoding), yet it has no payload between them: malformed, not "".
        raise HeaderMismatchError(f"{header} header has a malformed Base64 value", header=header)
    payload = text[len(_SENTINEL_PREFIX) : len(text) - len(_SENTINEL_SUFFIX)]
    try:
        decoded = base64.b64decode(payload, validate=True)
        value = decoded.decode("utf-8")
    except (binascii.Error, ValueError):
        raise HeaderMismatchError(
            f"{header} header has a malformed Base64 value", header=header
        ) from None
    # A lax decoder ignores the unused low bits of the last character (RFC 4648 §3.5 lets a
    # decoder refuse them): refused here, so each value has one Base64 text.
    if base64.b64encode(decoded).decode("ascii") != payload:
        raise HeaderMismatchError(
            f"{header} header has a non-canonical Base64 value", header=header
        )
    return value


# -- media types, Accept, Origin --------------------------------------------------------------


def media_type(value: str) -> tuple[str, dict[str, str]]:
    """Split a media type into its lower-cased ``type/subtype`` and its parameters."""
    kind, *rest = value.split(";")
    params: dict[str, str] = {}
    for item in rest:
        key, sep, val = item.partition("=")
        if sep:
            params[key.strip().lower()] = val.strip().strip('"')
    return kind.strip().lower(), params


_VERDICTS_MAX: Final = 256
_ACCEPT_VERDICTS: dict[str, bool] = {}
_CONTENT_TYPE_VERDICTS: dict[str, bool] = {}


def _remember(verdicts: dict[str, bool], value: str, verdict: bool) -> bool:
    # Clients send the same few values on every request: the parse is done once each.
    if len(verdicts) >= _VERDICTS_MAX:
        verdicts.clear()
    verdicts[value] = verdict
    return verdict


def accepts_json_and_sse(accept: str | None) -> bool:
    """Whether an ``Accept`` value lists both ``application/json`` and ``text/event-stream``.

    Wildcards (``*/*``, ``application/*``, ``text/*``) count, per RFC 9110 §12.5.1; a range
    with ``q=0`` is a refusal, and the most specific range naming a type decides, so
    ``*/*, text/event-stream;q=0`` refuses event streams. A missing header does not count
    (§3.3 item 2).
    """
    if accept is None:
        return False
    known = _ACCEPT_VERDICTS.get(accept)
    if known is not None:
        return known
    return _remember(_ACCEPT_VERDICTS, accept, _accepts_json_and_sse(accept))


def _refuses(q: str) -> bool:
    """Whether a ``q`` value is 0 (``"0"``, ``"0."``, ``"0.000"``: RFC 9110 §12.4.2)."""
    whole, _, fraction = q.strip().partition(".")
    return whole == "0" and not fraction.strip("0")


def _accepts_json_and_sse(accept: str) -> bool:
    # Range -> acceptable (q > 0 on any of its entries).
    ranges: dict[str, bool] = {}
    for item in accept.split(","):
        kind, params = media_type(item)
        if kind:
            ranges[kind] = ranges.get(kind, False) or not _refuses(params.get("q", "1"))

    def acceptable(kind: str) -> bool:
        # The most specific range that matches decides (RFC 9110 §12.5.1): a type refused
        # with q=0 stays refused however a wildcard rates it.
        major = kind.split("/")[0]
        for candidate in (kind, f"{major}/*", "*/*"):
            if candidate in ranges:
                return ranges[candidate]
        return False

    return acceptable(JSON_MEDIA_TYPE) and acceptable(SSE_MEDIA_TYPE)


def is_json_content_type(value: str | None) -> bool:
    """Whether a ``Content-Type`` is ``application/json`` (UTF-8 when a charset is given)."""
    if value is None:
        return False
    known = _CONTENT_TYPE_VERDICTS.get(value)
    if known is not None:
        return known
    kind, params = media_type(value)
    charset = params.get("charset", "utf-8").lower()
    return _remember(
        _CONTENT_TYPE_VERDICTS, value, kind == JSON_MEDIA_TYPE and charset in {"utf-8", "utf8"}
    )


def is_localhost_origin(origin: str) -> bool:
    """Whether an ``Origin`` is an http(s) origin on localhost, 127.0.0.1 or [::1], any port."""
    try:
        parts = urlsplit(origin)
        host = parts.hostname
        _ = parts.port  # raises ValueError on a malformed port
    except ValueError:
        return False
    return parts.scheme in {"http", "https"} and host in _LOCAL_HOSTS


# -- status mapping ---------------------------------------------------------------------------

_BAD_REQUEST_CODES: Final = frozenset(
    {
        PARSE_ERROR,
        INVALID_REQUEST,
        INVALID_PARAMS,
        HEADER_MISMATCH,
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        UNSUPPORTED_PROTOCOL_VERSION,
    }
)


def http_status_for_error(code: int) -> int:
    """The HTTP status for a JSON-RPC error code.

    -32601 is 404 (MUST); -32020/-32021/-32022 are 400 (MUST); -32700, -32600 and -32602
    are 400 and everything else 200, following the Python SDK convention (digest §3.3).
    """
    if code == METHOD_NOT_FOUND:
        return 404
    if code in _BAD_REQUEST_CODES:
        return 400
    return 200


# -- header <-> body --------------------------------------------------------------------------


def name_of(method: str, params: Mapping[str, Any] | None) -> str | None:
    """The body value ``Mcp-Name`` mirrors for ``method``, or ``None`` when there is none."""
    field = NAMED_METHODS.get(method)
    if field is None or params is None:
        return None
    value = params.get(field)
    return value if isinstance(value, str) else None


def _body_protocol_version(params: Mapping[str, Any] | None) -> str | None:
    meta = params.get("_meta") if params is not None else None
    value = meta.get(_META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


def request_headers(message: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The MCP headers a client puts on the POST carrying ``message`` (§3.3 items 3-5).

    ``MCP-Protocol-Version`` comes from the body's ``_meta`` protocol version when the body
    has one; a notification without one names the revision this client speaks, since every
    POST carries the header (§ Protocol Version Header) and a notification's body need not
    name a version (basic/index.mdx § Per-request protocol fields are for requests). A
    request without one gets no version header: the header mirrors the body, and the
    server answers such a request as malformed. ``Mcp-Method`` comes from ``method`` (on
    notifications too), ``Mcp-Name`` from ``params.name``/``params.uri`` for the three named
    methods, Base64-encoded when needed. Only ``Mcp-Name`` (and ``Mcp-Param-*``) values have
    a Base64 form (§ Value Encoding): servers compare the other two as they are.

    Raises:
        LocalProtocolError: The method or protocol version cannot travel as a header value
            (it holds other than visible ASCII, space and tab, or whitespace at an end).
    """
    method = message.get("method")
    params = message.get("params")
    params = params if isinstance(params, dict) else None
    headers: list[tuple[str, str]] = []
    version = _body_protocol_version(params)
    if version is None and "id" not in message:
        version = PROTOCOL_VERSION
    if version is not None:
        headers.append((HEADER_PROTOCOL_VERSION, _sendable(version, HEADER_PROTOCOL_VERSION)))
    if isinstance(method, str):
        headers.append((HEADER_MCP_METHOD, _sendable(method, HEADER_MCP_METHOD)))
        name = name_of(method, params)
        if name is not None:
            headers.append((HEADER_MCP_NAME, encode_header_value(name)))
    return headers


def _sendable(value: str, header: str) -> str:
    if _SENDABLE.fullmatch(value) is None:
        raise LocalProtocolError(
            f"{header} header cannot carry {value!r}: only visible ASCII, inner spaces and tabs"
        )
    return value


def _single(
    headers: Mapping[str, list[bytes]], name: str, request_id: RequestId | None
) -> bytes | None:
    values = headers.get(name.lower(), [])
    if len(values) > 1:
        raise HeaderMismatchError(
            f"{name} header appears {len(values)} times", header=name, request_id=request_id
        )
    return values[0] if values else None


def _plain(raw: bytes, name: str, request_id: RequestId | None) -> str:
    if _FIELD_VALUE.fullmatch(raw) is None:
        raise HeaderMismatchError(
            f"{name} header has invalid characters", header=name, request_id=request_id
        )
    return raw.decode("ascii")


def _missing(name: str, request_id: RequestId | None) -> HeaderMismatchError:
    return HeaderMismatchError(f"{name} header is missing", header=name, request_id=request_id)


def _mismatch(
    name: str, sent: str, body: str, request_id: RequestId | None
) -> HeaderMismatchError:
    return HeaderMismatchError(
        f"{name} header value {sent!r} does not match body value {body!r}",
        header=name,
        request_id=request_id,
    )


def validate_request_headers(
    message: Request | Notification, headers: Mapping[str, list[bytes]]
) -> None:
    """Check the MCP request headers against the body (§3.3, § Server Validation).

    ``MCP-Protocol-Version`` must be present on every POST, a notification's too. For a
    request ``Mcp-Method`` must be present as well, and ``Mcp-Name`` for ``tools/call``,
    ``prompts/get`` and ``resources/read``. Each header that is present must equal its body
    value (``Mcp-Name`` after Base64 decoding). A body without a readable ``_meta`` protocol
    version or ``name``/``uri`` is left to params validation (-32602, digest §3.5 step 3).
    Whether the version is one the server speaks is not checked here.

    Args:
        message: The classified body.
        headers: Received headers, lower-cased names to every value received.

    Raises:
        HeaderMismatchError: The first problem found.
    """
    rid = message.id if isinstance(message, Request) else None
    required = isinstance(message, Request)

    raw_version = _single(headers, HEADER_PROTOCOL_VERSION, rid)
    if raw_version is None:
        # "Every POST request to the MCP endpoint MUST include an MCP-Protocol-Version
        # header" (§ Protocol Version Header), and a server that does not serve clients older
        # than 2025-06-18 MUST refuse one without it. The 2026-07-28 transport page leaves
        # other header rules for notification POSTs undefined (§ Sending Messages, note), and
        # both official SDK clients send this header on them: it is required of a
        # notification too, Mcp-Method only of a request (§ Standard Request Headers).
        raise _missing(HEADER_PROTOCOL_VERSION, rid)
    header_version = _plain(raw_version, HEADER_PROTOCOL_VERSION, rid)
    body_version = _body_protocol_version(message.params)
    if body_version is not None and header_version != body_version:
        raise _mismatch(HEADER_PROTOCOL_VERSION, header_version, body_version, rid)

    # A notification's Mcp-Method, when sent, must match its body all the same (§ Server
    # Validation): a router reading the header must not see another method than the server.
    raw_method = _single(headers, HEADER_MCP_METHOD, rid)
    if raw_method is None:
        if required:
            raise _missing(HEADER_MCP_METHOD, rid)
    else:
        header_method = _plain(raw_method, HEADER_MCP_METHOD, rid)
        if header_method != message.method:
            raise _mismatch(HEADER_MCP_METHOD, header_method, message.method, rid)

    if message.method not in NAMED_METHODS:
        return
    raw_name = _single(headers, HEADER_MCP_NAME, rid)
    if raw_name is None:
        if required:
            raise _missing(HEADER_MCP_NAME, rid)
        return
    try:
        header_name = decode_header_value(raw_name, header=HEADER_MCP_NAME)
    except HeaderMismatchError as exc:
        exc.request_id = rid
        raise
    body_name = name_of(message.method, message.params)
    if body_name is not None and header_name != body_name:
        raise _mismatch(HEADER_MCP_NAME, header_name, body_name, rid)


_NAMES: dict[bytes, str] = {}
_NAMES_MAX: Final = 512


def collect_headers(pairs: Iterable[tuple[bytes, bytes]]) -> dict[str, list[bytes]]:
    """Group raw header pairs by lower-cased name, keeping every value in order."""
    out: dict[str, list[bytes]] = {}
    names = _NAMES
    for name, value in pairs:
        key = names.get(name) if type(name) is bytes else None
        if key is None:
            key = bytes(name).decode("ascii", "replace").lower()
            if type(name) is bytes and len(names) < _NAMES_MAX:
                names[name] = key  # header names repeat from request to request
        if type(value) is not bytes:
            value = bytes(value)
        found = out.get(key)
        if found is None:
            out[key] = [value]
        else:
            found.append(value)
    return out
