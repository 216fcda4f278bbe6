"""Fuzzing every decoder the peer can reach (JSON-RPC, HTTP both ends, SSE, stdio both ends,
``Mcp-*`` headers, the wire structuring of params, results, input requests and responses,
form schemas): each returns a valid value or raises its documented error (or answers with a
clean error response), never another exception, within its size limits; where an encoder
exists, what is written reads back the same."""

from __future__ import annotations

import base64
import contextlib
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from wire_helpers import RawClient, call_tool, mcp_headers

from mrtr_core import jsonrpc
from mrtr_core.errors import CodecError, LocalProtocolError, MrtrError, RemoteProtocolError
from mrtr_core.http import (
    NEED_DATA,
    ConnectionEnded,
    EventStreamError,
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
    NotificationReceived,
    StdioClientConnection,
    StdioServerConnection,
)
from mrtr_core.stdio import ResponseReceived as StdioResponseReceived
from mrtr_core.wire import (
    structure_input_request,
    structure_input_required,
    structure_input_response,
    structure_params,
    unstructure,
    unstructure_input_request,
    unstructure_input_required,
    unstructure_params,
)
from mrtr_core.wire.forms import FormAnswerError, FormSchemaError, FormSpec

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


def depth(value) -> int:
    """How deeply ``value`` nests objects and arrays (a scalar is 0)."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


nested = st.builds(
    lambda opens, inner, closes: opens + inner + closes,
    st.integers(5, 11).flatmap(lambda n: st.sampled_from([b"[" * n, b'{"a":' * n])),
    st.sampled_from([b"", b"1", b"[]", b"{}"]),
    st.integers(0, 12).map(lambda n: b"]" * n) | st.integers(0, 12).map(lambda n: b"}" * n),
)


@FUZZ
@given(st.binary(max_size=200) | mutated(json.dumps(call_tool()).encode()) | nested)
def test_jsonrpc_decode_raises_only_parse_errors(data):
    try:
        value = jsonrpc.decode(data, max_depth=8)
    except ParseError:
        return
    assert depth(value) <= 8
    with contextlib.suppress(InvalidRequestError):
        jsonrpc.parse_message(value)


@FUZZ
@given(json_values.filter(lambda v: isinstance(v, dict)))
def test_jsonrpc_encode_then_decode_is_the_identity(message):
    try:
        data = jsonrpc.encode(message)
    except LocalProtocolError:  # only for what JSON cannot hold (infinities)
        with pytest.raises(ValueError):
            json.dumps(message, allow_nan=False)
        return
    assert jsonrpc.decode(data, max_depth=64) == message


rpc_shaped = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2])},
    optional={
        "id": st.integers() | st.text(max_size=3) | json_values,
        "method": st.sampled_from(["tools/call", "", "x"]) | json_values,
        "params": json_values,
        "result": json_values,
        "error": st.fixed_dictionaries(
            {}, optional={"code": st.integers() | json_values,
                          "message": st.text(max_size=5) | json_values,
                          "data": json_values}) | json_values,
    },
)


@FUZZ
@given(json_values | rpc_shaped)
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
    st.sampled_from([b"", b"data: a\n\n", b"event: x\r\ndata: b\r\n\r\n"]),
    st.integers(0, 300),
    st.lists(st.integers(0, 320), max_size=6),
)
def test_sse_parser_refuses_an_unfinished_line_past_the_limit(events, size, cuts):
    parser = SseParser(max_event_bytes=100)
    line = b"data: " + b"x" * size  # no line end yet: the parser must hold it, bounded
    try:
        for piece in chunks(events + line, cuts):
            parser.feed(piece)
    except EventStreamError:
        assert len(line) > 100
        return
    assert len(line) <= 100


# Lines around the 120-byte limit the stdio targets set, between well-formed ones.
long_lines = st.builds(
    lambda n, end: b'{"jsonrpc":"2.0","id":1,"result":{"a":"' + b"x" * n + b'"}}' + end,
    st.integers(60, 120), st.sampled_from([b"\n", b"\r\n", b""]),
).map(lambda line: b'{"jsonrpc":"2.0","method":"n"}\n' + line
      + b'{"jsonrpc":"2.0","id":2,"result":{}}\n')


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=300),
        mutated(b"".join(json.dumps(call_tool("e", i)).encode() + b"\n" for i in range(3))),
        long_lines,
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
    st.one_of(st.binary(max_size=300), mutated(b'{"jsonrpc":"2.0","id":1,"result":{}}\n' * 3),
              long_lines),
    st.lists(st.integers(0, 300), max_size=6),
)
def test_stdio_client_raises_only_mrtr_errors(data, cuts):
    client = StdioClientConnection(max_line_bytes=120)
    for piece in [*chunks(data, cuts), b""]:
        client.receive_data(piece)
        while True:
            try:
                event = client.next_event()
            except RemoteProtocolError:
                continue
            if event is NEED_DATA or isinstance(event, InputEnded):
                break
            assert isinstance(event, StdioResponseReceived | NotificationReceived)
            assert isinstance(event.message, dict)


def sentinel(payload: bytes) -> bytes:
    return b"=?base64?" + payload + b"?="


B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def low_bits_set(encoded: bytes, flip: int) -> bytes:
    """``encoded`` (padded Base64) with unused low bits of its last character set: the same
    bytes to a lax decoder, but not the one Base64 text of them."""
    body = encoded.rstrip(b"=")
    pad = len(encoded) - len(body)
    unused = {1: 0x03, 2: 0x0F}.get(pad, 0)
    if not unused:
        return encoded
    last = B64[B64.index(body[-1]) ^ (flip % unused + 1)]
    return body[:-1] + bytes([last]) + b"=" * pad


@FUZZ
@given(
    st.binary(max_size=60)
    | mutated(b"=?base64?SGVsbG8sIOS4lueVjA==?=")
    | st.binary(max_size=12).map(lambda b: sentinel(base64.b64encode(b)))
    | st.builds(lambda b, flip: sentinel(low_bits_set(base64.b64encode(b), flip)),
                st.text(min_size=1, max_size=8).map(lambda t: t.encode("utf-8", "replace")),
                st.integers(0, 15))
    | st.builds(lambda b, i, c: sentinel(b[:i] + c + b[i + 1 :]),
                st.binary(min_size=1, max_size=12).map(base64.b64encode), st.integers(0, 15),
                st.sampled_from(list(b"ABCDQRSTgwxy+/=")).map(lambda c: bytes([c])))
)
def test_header_value_decoding_raises_only_header_mismatch(raw):
    try:
        value = decode_header_value(raw)
    except HeaderMismatchError:
        return
    text = raw.decode("ascii")
    if text.startswith("=?base64?") and text.endswith("?="):
        # § Value Encoding: one text per value, so the sentinel must be canonical Base64.
        assert sentinel(base64.b64encode(value.encode("utf-8"))) == raw
    else:
        assert value == text


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


# Well-formed annotated tools, nested too, so argument paths are really looked up.
ANNOTATED = [
    {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"}}},
    {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"b": {"type": "integer", "x-mcp-header": "B"}}},
        "c": {"type": "boolean", "x-mcp-header": "C"}}},
]
arguments = st.dictionaries(st.sampled_from(["a", "b", "c"]),
                            json_values | st.dictionaries(st.sampled_from(["a", "b"]),
                                                          json_values, max_size=2),
                            max_size=3)


@FUZZ
@given(
    st.sampled_from(ANNOTATED) | schema_values,
    arguments | json_values,
    st.lists(st.tuples(st.sampled_from(["a", "b", "c", "A"]), st.binary(max_size=12)),
             max_size=3),
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


# --- the wire structuring of what a peer sends (results, params, input requests and
# responses) and the form schemas a server asks with ---------------------------------------

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {}}}
WIRE_KINDS = ["elicitation/create", "sampling/createMessage", "roots/list"]
input_requests = st.one_of(
    st.fixed_dictionaries({"method": st.just("elicitation/create"), "params": st.fixed_dictionaries(
        {"message": st.text(max_size=5),
         "requestedSchema": st.just({"type": "object", "properties": {}})},
        optional={"mode": st.just("form"), "x": json_values})}),
    st.fixed_dictionaries({"method": st.just("elicitation/create"), "params": st.fixed_dictionaries(
        {"mode": st.just("url"), "message": st.text(max_size=5),
         "url": st.just("https://example.com")})}),
    st.fixed_dictionaries({"method": st.just("sampling/createMessage"),
                           "params": st.fixed_dictionaries(
        {"messages": st.lists(st.just({"role": "user"}), max_size=2),
         "maxTokens": st.integers(1, 100)},
        optional={"systemPrompt": st.text(max_size=5), "x": json_values})}),
    st.fixed_dictionaries({"method": st.just("roots/list")},
                          optional={"params": st.just({"_meta": {"k": 1}})}),
)
input_responses = st.one_of(
    st.fixed_dictionaries({"action": st.sampled_from(["accept", "decline", "cancel"])},
                          optional={"content": st.dictionaries(
                              st.text(max_size=3), st.text(max_size=3) | st.integers()
                              | st.booleans() | st.lists(st.text(max_size=3)), max_size=2)}),
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                           "content": st.just({"type": "text", "text": "t"}),
                           "model": st.text(max_size=4)},
                          optional={"stopReason": st.text(max_size=4), "_meta": st.just({})}),
    st.fixed_dictionaries({"roots": st.lists(st.fixed_dictionaries(
        {"uri": st.just("file:///x")}, optional={"name": st.text(max_size=4)}), max_size=2)}),
)
wire_params = st.fixed_dictionaries(
    {"_meta": st.just(META), "name": st.text(max_size=5), "uri": st.just("file:///r")},
    optional={"arguments": st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
              "inputResponses": st.dictionaries(st.text(max_size=3), json_values, max_size=2),
              "requestState": st.text(max_size=8), "x": json_values},
)
input_required = st.fixed_dictionaries(
    {}, optional={"inputRequests": st.dictionaries(st.text(max_size=3), input_requests,
                                                   max_size=3),
                  "requestState": st.text(max_size=8), "_meta": st.just({"m": 1})})


@st.composite
def damaged(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> Any:
    """A well-formed wire value, sometimes with one member (at any depth) dropped or
    replaced by anything at all."""
    value = copy.deepcopy(draw(values))
    node = value
    while isinstance(node, dict) and node and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(node)))
        if isinstance(node[key], dict) and draw(st.booleans()):
            node = node[key]
            continue
        if draw(st.booleans()):
            del node[key]
        else:
            node[key] = draw(json_values)
        break
    return value


def structured(read: Callable[[], Any]) -> Any:
    """What ``read`` gives, or ``None`` when it refuses with CodecError (its only error)."""
    try:
        return read()
    except CodecError:
        return None


@FUZZ
@given(damaged(input_requests) | json_values)
def test_input_requests_read_or_refuse_and_written_read_the_same(obj):
    request = structured(lambda: structure_input_request(obj))
    if request is not None:
        assert structure_input_request(unstructure_input_request(request)) == request


@FUZZ
@given(damaged(input_required) | json_values)
def test_input_required_results_read_or_refuse_and_written_read_the_same(obj):
    result = structured(lambda: structure_input_required(obj))
    if result is not None:
        assert structure_input_required(unstructure_input_required(result)) == result


@FUZZ
@given(st.sampled_from([*WIRE_KINDS, "x/y"]), damaged(input_responses) | json_values)
def test_input_responses_read_or_refuse_and_written_read_the_same(kind, obj):
    response = structured(lambda: structure_input_response(kind, obj))
    if response is not None:
        assert structure_input_response(kind, unstructure(response)) == response


@FUZZ
@given(st.sampled_from(["tools/call", "prompts/get", "resources/read", "x"]),
       damaged(wire_params) | json_values)
def test_params_read_or_refuse_and_written_read_the_same(method, obj):
    params = structured(lambda: structure_params(method, obj))
    if params is not None:
        assert structure_params(method, unstructure_params(params)) == params


texts = st.text(max_size=4) | json_values
counts = st.sampled_from([-1, 0, 3]) | json_values
form_fields = st.one_of(
    st.fixed_dictionaries({"type": st.just("string"), "minLength": counts}, optional={
        "title": texts, "format": st.sampled_from(["email", "uri", "date", "date-time", "x"]),
        "maxLength": counts, "default": json_values}),
    st.fixed_dictionaries({"type": st.sampled_from(["number", "integer"])}, optional={
        "minimum": st.integers(-5, 5) | json_values, "maximum": st.integers(-5, 5) | json_values,
        "default": json_values}),
    st.fixed_dictionaries({"type": st.just("boolean")}, optional={"default": json_values}),
    st.fixed_dictionaries({"type": st.just("string"), "enum": st.lists(st.text(max_size=3),
                                                                        max_size=3) | json_values},
                          optional={"enumNames": st.lists(st.text(max_size=3), max_size=3)}),
    st.fixed_dictionaries({"type": st.just("string"), "oneOf": st.lists(
        st.fixed_dictionaries({"const": st.text(max_size=3) | json_values},
                              optional={"title": texts}), max_size=3)}),
    st.fixed_dictionaries({"type": st.just("array"), "items": st.fixed_dictionaries(
        {}, optional={"enum": st.lists(st.text(max_size=3), max_size=3),
                      "anyOf": st.lists(st.fixed_dictionaries({"const": st.text(max_size=3)},
                                                              optional={"title": texts}),
                                        max_size=3),
                      "type": st.sampled_from(["string", "number"])})},
                          optional={"minItems": counts, "maxItems": counts}),
    json_values,
)
form_schemas = st.builds(
    lambda properties, required: {"type": "object", "properties": properties,
                                  **({} if required is None else {"required": required})},
    st.dictionaries(st.sampled_from(["a", "b", "c"]), form_fields, max_size=3),
    st.sampled_from([None, ["a"]]) | st.lists(st.sampled_from(["a", "b", "z"]), max_size=2)
    | json_values,
)


@FUZZ
@given(form_schemas | schema_values,
       st.dictionaries(st.sampled_from(["a", "b", "c", "z"]), json_values, max_size=3))
def test_form_schemas_read_or_refuse_and_check_answers_with_their_errors(schema, content):
    try:
        spec = FormSpec.from_schema(schema)
    except FormSchemaError:
        return
    # What answers are checked against is itself a valid JSON Schema, field by field too.
    Draft202012Validator.check_schema(spec.schema)
    for field in spec.fields:
        Draft202012Validator.check_schema(field.schema)
        if field.has_default:
            assert field.problems(field.default) == []
    try:
        checked = spec.check(content)
    except FormAnswerError as exc:
        assert exc.problems
        return
    assert checked == content
