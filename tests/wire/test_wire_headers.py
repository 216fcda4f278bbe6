"""Header value encoding, Accept/Origin rules, status mapping, header-body validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wire_helpers import call_tool, request

from mrtr_core import jsonrpc
from mrtr_core.http import (
    HeaderMismatchError,
    accepts_json_and_sse,
    decode_header_value,
    encode_header_value,
    http_status_for_error,
    is_localhost_origin,
    request_headers,
    validate_request_headers,
)

# The examples table of streamable-http.mdx § Value Encoding.
SPEC_EXAMPLES = [
    ("us-west1", "us-west1"),
    ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
    (" padded ", "=?base64?IHBhZGRlZCA=?="),
    ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
    ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
]


@pytest.mark.parametrize(("value", "encoded"), SPEC_EXAMPLES)
def test_encode_header_value_matches_the_spec_examples(value, encoded):
    assert encode_header_value(value) == encoded
    assert decode_header_value(encoded.encode()) == value


@given(st.text())
def test_header_values_round_trip(value):
    encoded = encode_header_value(value.encode("utf-8", "replace").decode("utf-8"))
    assert all(0x20 <= ord(c) <= 0x7E for c in encoded)
    assert decode_header_value(encoded.encode()) == value.encode("utf-8", "replace").decode()


@pytest.mark.parametrize(
    "raw",
    [b"caf\xc3\xa9", b"a\x00b", b"=?base64?***?=", b"=?base64?gA==?=", b"=?base64?QQ?=",
     b"=?base64?QR==?=", b"=?base64?QUJ=?=",  # these two: unused bits set (not canonical)
     b"=?base64?=",  # prefix and suffix overlap: sentinel-shaped, but no payload between them
     "caf\u00e9", "a\ud800b"],  # as text too: a lone surrogate has no UTF-8 to check
)
def test_decode_header_value_refuses_bad_values(raw):
    with pytest.raises(HeaderMismatchError) as info:
        decode_header_value(raw)
    assert info.value.jsonrpc_code == -32020


def test_sentinel_markers_are_case_sensitive():
    assert decode_header_value(b"=?BASE64?QQ==?=") == "=?BASE64?QQ==?="


@pytest.mark.parametrize(
    ("accept", "ok"),
    [
        ("application/json, text/event-stream", True),
        ("text/event-stream,application/json;q=0.9", True),
        ("*/*", True),
        ("application/*, text/*", True),
        ("application/json", False),
        ("text/event-stream", False),
        ("application/json, text/event-stream;q=0", False),
        # The most specific matching range decides (RFC 9110 §12.5.1).
        ("*/*, text/event-stream;q=0", False),
        ("application/*, application/json;q=0, text/event-stream", False),
        ("text/*;q=0, text/event-stream, application/json", True),
        # "0." and "0.000" are zero weights too (RFC 9110 §12.4.2 qvalue).
        ("application/json, text/event-stream;q=0.", False),
        ("application/json, text/event-stream;q=0.000", False),
        ("application/json, text/event-stream;q=0.001", True),
        ("", False),
        (None, False),
    ],
)
def test_accepts_json_and_sse(accept, ok):
    assert accepts_json_and_sse(accept) is ok


@pytest.mark.parametrize(
    ("origin", "ok"),
    [
        ("http://localhost", True),
        ("http://localhost:5173", True),
        ("https://127.0.0.1:1", True),
        ("http://[::1]:80", True),
        ("http://127.0.0.2", False),
        ("http://localhost:99999", False),
        ("ws://localhost", False),
        ("null", False),
        ("http://example.com", False),
    ],
)
def test_is_localhost_origin(origin, ok):
    assert is_localhost_origin(origin) is ok


@pytest.mark.parametrize(
    ("code", "status"),
    [(-32601, 404), (-32020, 400), (-32021, 400), (-32022, 400), (-32602, 400), (-32603, 200)],
)
def test_http_status_for_error(code, status):
    assert http_status_for_error(code) == status


def test_request_headers_for_a_tool_call():
    assert request_headers(call_tool("deploy")) == [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "deploy"),
    ]


def test_request_headers_of_a_notification_without_meta_name_the_client_s_version():
    # Every POST carries MCP-Protocol-Version (§ Protocol Version Header); a notification
    # need not name a version in its body, so the header names the revision the client speaks.
    assert request_headers({"jsonrpc": "2.0", "method": "notifications/cancelled"}) == [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "notifications/cancelled"),
    ]


def test_request_headers_of_a_notification_mirror_the_version_its_body_names():
    note = {"jsonrpc": "2.0", "method": "notifications/x", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}}
    assert request_headers(note) == [
        ("MCP-Protocol-Version", "2099-01-01"),
        ("Mcp-Method", "notifications/x"),
    ]


def test_request_headers_of_a_request_without_meta_omit_the_version():
    # A request's header mirrors its body's _meta version: without one the server answers
    # the request as malformed, and no header claims a version the body does not.
    assert request_headers({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}) == [
        ("Mcp-Method", "tools/list")
    ]


def headers_of(pairs):
    out = {}
    for name, value in pairs:
        out.setdefault(name.lower(), []).append(value.encode())
    return out


def test_validate_request_headers_accepts_what_request_headers_builds():
    for message in [
        call_tool("x y"),
        request("resources/read", uri="file:///é"),
        request("tools/list"),
    ]:
        parsed = jsonrpc.parse_request(message)
        validate_request_headers(parsed, headers_of(request_headers(message)))


def test_mismatch_error_names_the_header_and_carries_the_id():
    parsed = jsonrpc.parse_request(call_tool("a", 12))
    with pytest.raises(HeaderMismatchError) as info:
        validate_request_headers(
            parsed,
            headers_of(
                [
                    ("MCP-Protocol-Version", "2026-07-28"),
                    ("Mcp-Method", "tools/call"),
                    ("Mcp-Name", "=?base64?!!?="),
                ]
            ),
        )
    assert info.value.header == "Mcp-Name"
    assert info.value.request_id == 12


def test_a_notification_needs_the_protocol_version_header_only():
    # Every POST carries MCP-Protocol-Version (§ Protocol Version Header); Mcp-Method is
    # required on requests only (§ Standard Request Headers), so a notification may omit it.
    parsed = jsonrpc.parse_request({"jsonrpc": "2.0", "method": "notifications/x"})
    validate_request_headers(parsed, headers_of([("MCP-Protocol-Version", "2026-07-28")]))
    with pytest.raises(HeaderMismatchError) as info:
        validate_request_headers(parsed, headers_of([("Mcp-Method", "notifications/x")]))
    assert info.value.header == "MCP-Protocol-Version"
    assert info.value.request_id is None
