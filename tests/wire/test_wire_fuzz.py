"""Fuzzing every decoder the peer can reach: only MrtrError subclasses (or clean error
responses) ever come out, never another exception."""

from __future__ import annotations

import contextlib
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire_helpers import RawClient, call_tool, mcp_headers

from mrtr_core import jsonrpc
from mrtr_core.errors import MrtrError, RemoteProtocolError
from mrtr_core.http import (
    NEED_DATA,
    ConnectionEnded,
    HeaderMismatchError,
    HttpClientConnection,
    HttpServerConfig,
    HttpServerConnection,
    MessageReceived,
    ParamHeaderRegistry,
    RequestRejected,
    ResponseReceived,
    SseParser,
    decode_header_value,
    encode_sse_event,
    parse_url,
    validate_param_headers,
)
from mrtr_core.jsonrpc import InvalidRequestError, ParseError
from mrtr_core.stdio import (
    InputEnded,
    MessageRejected,
    StdioClientConnection,
    StdioServerConnection,
)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["jsonrpc", "id", "method", "params", "result", "error", "code", "message", "x"]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=12,
)


@st.composite
def mutated(draw, seed: bytes) -> bytes:
    """``seed`` with a few random byte edits."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and data:
            del data[pos : pos + draw(st.integers(1, 8))]
        elif op == "truncate":
            del data[pos:]
    return bytes(data)


def chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True) if a < b]


VALID_REQUEST = RawClient().post(call_tool("echo", 1, text="hi")) + RawClient().post(
    {"jsonrpc": "2.0", "method": "notifications/x"}, mcp_headers("notifications/x", None)
)
VALID_RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    + b"%x\r\n" % 60
    + encode_sse_event(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"a": "bcdefg"}})).ljust(60)
    + b"\r\n0\r\n\r\n"
)
VALID_JSON_RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 36\r\n\r\n"
    b'{"jsonrpc":"2.0","id":1,"result":{}}'
)


@FUZZ
@given(st.binary(max_size=200) | mutated(json.dumps(call_tool()).encode()))
def test_jsonrpc_decode_raises_only_parse_errors(data):
    try:
        value = jsonrpc.decode(data, max_depth=8)
    except ParseError:
        return
    with contextlib.suppress(InvalidRequestError):
        jsonrpc.parse_message(value)


@FUZZ
@given(json_values)
def test_jsonrpc_classification_raises_only_invalid_request(value):
    for parse in (jsonrpc.parse_message, jsonrpc.parse_request, jsonrpc.parse_response):
        try:
            parse(value)
        except InvalidRequestError as exc:
            assert exc.to_response()["error"]["code"] == -32600


def drive_server(server: HttpServerConnection, pieces: list[bytes]) -> None:
    for piece in [*pieces, b""]:
        server.receive_data(piece)
        while True:
            event = server.next_event()
            if event is NEED_DATA or isinstance(event, ConnectionEnded):
                break
            if isinstance(event, MessageReceived):
                reply = {"jsonrpc": "2.0", "id": event.request_id, "result": {}}
                server.send_reply(reply if event.request_id is not None else None)
            else:
                assert isinstance(event, RequestRejected)
                assert 400 <= event.error.status < 600  # type: ignore[attr-defined]
        server.data_to_send()
        if server.ended:
            return


@FUZZ
@given(
    st.one_of(st.binary(max_size=300), mutated(VALID_REQUEST)),
    st.lists(st.integers(0, 600), max_size=6),
)
def test_http_server_never_raises_on_peer_bytes(data, cuts):
    server = HttpServerConnection(HttpServerConfig(max_body_bytes=1000, max_header_bytes=1000))
    drive_server(server, chunks(data, cuts))


@FUZZ
@given(
    st.one_of(st.binary(max_size=300), mutated(VALID_RESPONSE), mutated(VALID_JSON_RESPONSE)),
    st.lists(st.integers(0, 600), max_size=6),
)
def test_http_client_raises_only_mrtr_errors(data, cuts):
    client = HttpClientConnection(parse_url("http://127.0.0.1:1/mcp"))
    client.send_request(call_tool("echo", 1))
    try:
        for piece in [*chunks(data, cuts), b""]:
            client.receive_data(piece)
            while (event := client.next_event()) is not NEED_DATA:
                if isinstance(event, ResponseReceived):
                    assert event.message["id"] == 1
                    return
    except RemoteProtocolError:
        pass


@FUZZ
@given(
    st.one_of(st.binary(max_size=300), mutated(VALID_RESPONSE[80:])),
    st.lists(st.integers(0, 300), max_size=6),
)
def test_sse_parser_raises_only_mrtr_errors(data, cuts):
    parser = SseParser(max_event_bytes=100)
    try:
        for piece in chunks(data, cuts):
            parser.feed(piece)
    except MrtrError:
        pass


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=300),
        mutated(b"".join(json.dumps(call_tool("e", i)).encode() + b"\n" for i in range(3))),
    ),
    st.lists(st.integers(0, 300), max_size=6),
)
def test_stdio_server_answers_every_bad_line_and_never_raises(data, cuts):
    server = StdioServerConnection(max_line_bytes=120, max_depth=6)
    for piece in [*chunks(data, cuts), b""]:
        server.receive_data(piece)
        while True:
            event = server.next_event()
            if event is NEED_DATA or isinstance(event, InputEnded):
                break
            if isinstance(event, MessageRejected):
                assert event.response["error"]["code"] in (-32700, -32600)
                server.send(event.response)


@FUZZ
@given(
    st.one_of(st.binary(max_size=300), mutated(b'{"jsonrpc":"2.0","id":1,"result":{}}\n' * 3)),
    st.lists(st.integers(0, 300), max_size=6),
)
def test_stdio_client_raises_only_mrtr_errors(data, cuts):
    client = StdioClientConnection(max_line_bytes=120)
    for piece in [*chunks(data, cuts), b""]:
        client.receive_data(piece)
        while True:
            try:
                event = client.next_event()
            except MrtrError:
                continue
            if event is NEED_DATA or isinstance(event, InputEnded):
                break


@FUZZ
@given(st.binary(max_size=60) | mutated(b"=?base64?SGVsbG8sIOS4lueVjA==?="))
def test_header_value_decoding_raises_only_header_mismatch(raw):
    with contextlib.suppress(HeaderMismatchError):
        decode_header_value(raw)


schema_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["type", "properties", "x-mcp-header", "items", "oneOf", "a", "b"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=15,
)


@FUZZ
@given(
    schema_values,
    json_values,
    st.lists(st.tuples(st.sampled_from(["a", "b", "A"]), st.binary(max_size=12)), max_size=3),
)
def test_param_header_checks_raise_only_their_documented_errors(schema, arguments, raw):
    registry = ParamHeaderRegistry()
    tools = [{"name": "t", "inputSchema": schema}]
    registry.observe(
        {"method": "tools/list"}, {"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}
    )
    registry.headers_for({"method": "tools/call", "params": {"name": "t", "arguments": arguments}})
    headers = {}
    for name, value in raw:
        headers.setdefault(f"mcp-param-{name}".lower(), []).append(value)
    if isinstance(schema, dict):
        with contextlib.suppress(HeaderMismatchError):
            validate_param_headers(schema, arguments, headers)
