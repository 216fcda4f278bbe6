"""Streamable HTTP (protocol revision 2026-07-28) framing on h11: bytes in, bytes out.

The server side (:class:`HttpServerConnection`) checks every POST against the transport rules
(digest §3.3) and hands only valid JSON-RPC requests to the application; the client side
(:class:`HttpClientConnection`) builds POSTs with the required headers and reads JSON or
event-stream answers. Neither opens a socket.
"""

from mrtr_core.http._client import (
    ClientEvent,
    Endpoint,
    HttpClientConfig,
    HttpClientConnection,
    HttpStatusError,
    NotificationAccepted,
    NotificationReceived,
    ResponseReceived,
    ServerDisconnectedError,
    parse_url,
)
from mrtr_core.http._headers import (
    HEADER_MCP_METHOD,
    HEADER_MCP_NAME,
    HEADER_PROTOCOL_VERSION,
    HeaderMismatchError,
    accepts_json_and_sse,
    decode_header_value,
    encode_header_value,
    http_status_for_error,
    is_localhost_origin,
    request_headers,
    validate_request_headers,
)
from mrtr_core.http._params import (
    PARAM_HEADER_PREFIX,
    ParamHeaderRegistry,
    cached_param_header_paths,
    check_param_headers,
    param_header_paths,
    param_header_value,
    param_headers,
    validate_param_headers,
)
from mrtr_core.http._server import (
    LINGER_MAX_BYTES,
    LINGER_S,
    ConnectionEnded,
    HttpRequestError,
    HttpServerConfig,
    HttpServerConnection,
    MessageReceived,
    RequestRejected,
    ServerEvent,
)
from mrtr_core.http._sse import EventStreamError, SseEvent, SseParser, encode_sse_event
from mrtr_core.http._transport import (
    AsyncHttpTransportBase,
    HttpTransportBase,
    sent_again_safely,
)
from mrtr_core.jsonrpc import NEED_DATA

__all__ = [
    "HEADER_MCP_METHOD",
    "HEADER_MCP_NAME",
    "HEADER_PROTOCOL_VERSION",
    "LINGER_MAX_BYTES",
    "LINGER_S",
    "NEED_DATA",
    "PARAM_HEADER_PREFIX",
    "AsyncHttpTransportBase",
    "ClientEvent",
    "ConnectionEnded",
    "Endpoint",
    "EventStreamError",
    "HeaderMismatchError",
    "HttpClientConfig",
    "HttpClientConnection",
    "HttpRequestError",
    "HttpServerConfig",
    "HttpServerConnection",
    "HttpStatusError",
    "HttpTransportBase",
    "MessageReceived",
    "NotificationAccepted",
    "NotificationReceived",
    "ParamHeaderRegistry",
    "RequestRejected",
    "ResponseReceived",
    "ServerDisconnectedError",
    "ServerEvent",
    "SseEvent",
    "SseParser",
    "accepts_json_and_sse",
    "cached_param_header_paths",
    "check_param_headers",
    "decode_header_value",
    "encode_header_value",
    "encode_sse_event",
    "http_status_for_error",
    "is_localhost_origin",
    "param_header_paths",
    "param_header_value",
    "param_headers",
    "parse_url",
    "request_headers",
    "sent_again_safely",
    "validate_param_headers",
    "validate_request_headers",
]
