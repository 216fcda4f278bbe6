"""HttpClientConnection: request headers, JSON and SSE answers, statuses, keep-alive."""

from __future__ import annotations

import base64
import json

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_helpers import call_tool, request, serve

from mrtr_core.errors import LocalProtocolError, MrtrError, RemoteProtocolError
from mrtr_core.http import (
    NEED_DATA,
    Endpoint,
    HttpClientConfig,
    HttpClientConnection,
    HttpServerConnection,
    HttpStatusError,
    NotificationAccepted,
    NotificationReceived,
    ResponseReceived,
    ServerDisconnectedError,
    encode_sse_event,
    parse_url,
)

ENDPOINT = parse_url("http://127.0.0.1:8123/mcp")


def sent_request(message, **kw):
    """The request a client sends, as a server-side h11 sees it."""
    client = HttpClientConnection(ENDPOINT, **kw)
    data = client.send_request(message)
    server = h11.Connection(h11.SERVER)
    server.receive_data(data)
    req = server.next_event()
    body = server.next_event()
    headers = {k.decode(): v.decode() for k, v in req.headers}
    return req, headers, json.loads(body.data)


def response_bytes(status: int, content_type: str | None, body: bytes, extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status} X\r\n"
    if content_type is not None:
        head += f"Content-Type: {content_type}\r\n"
    head += f"Content-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


def sse_bytes(status: int, body: bytes) -> bytes:
    chunk = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    head = (
        f"HTTP/1.1 {status} OK\r\nContent-Type: text/event-stream\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    return head.encode() + chunk


def events_for(client: HttpClientConnection, data: bytes):
    client.receive_data(data)
    out = []
    while True:
        event = client.next_event()
        if event is NEED_DATA:
            return out
        out.append(event)
        if isinstance(event, ResponseReceived | NotificationAccepted):
            return out


# -- building requests --------------------------------------------------------------------------


def test_request_carries_every_required_header():
    req, headers, body = sent_request(call_tool("deploy", 3, version="1.2"))
    assert req.method == b"POST" and req.target == b"/mcp"
    assert headers["host"] == "127.0.0.1:8123"
    assert headers["accept"] == "application/json, text/event-stream"
    assert headers["content-type"] == "application/json"
    assert headers["mcp-protocol-version"] == "2026-07-28"
    assert headers["mcp-method"] == "tools/call"
    assert headers["mcp-name"] == "deploy"
    assert body == call_tool("deploy", 3, version="1.2")


def test_resources_read_mirrors_the_uri():
    _, headers, _ = sent_request(request("resources/read", 1, uri="file:///a b.txt"))
    assert headers["mcp-name"] == "file:///a b.txt"


def test_methods_without_a_name_send_no_mcp_name():
    _, headers, _ = sent_request(request("tools/list", 1))
    assert "mcp-name" not in headers


@pytest.mark.parametrize(
    "name", ["café", " padded ", "line1\nline2", "=?base64?literal?=", "tab\t"]
)
def test_unsafe_names_travel_base64_encoded(name):
    _, headers, _ = sent_request(call_tool(name, 1))
    value = headers["mcp-name"]
    assert value.startswith("=?base64?") and value.endswith("?=")
    assert base64.b64decode(value[9:-2]).decode() == name


# Only Mcp-Name and Mcp-Param-* values have a Base64 form (streamable-http.mdx § Value
# Encoding): a server compares MCP-Protocol-Version and Mcp-Method as they are (digest §3.3
# items 3-4), so a value no header can carry is refused before anything is sent.
@pytest.mark.parametrize(
    ("message", "header"),
    [(request("tëst/x", 3), "Mcp-Method"), (request(" tools/list", 3), "Mcp-Method"),
     ({**request("tools/list", 3), "params": {"_meta": {
         "io.modelcontextprotocol/protocolVersion": "2026\u201007-28"}}},
      "MCP-Protocol-Version")],
)
def test_a_method_or_version_no_header_can_carry_is_refused_before_sending(message, header):
    client = HttpClientConnection(ENDPOINT)
    with pytest.raises(LocalProtocolError, match=header):
        client.send_request(message)
    assert client.ready


def test_an_odd_but_plain_method_reaches_the_server_as_it_is():
    client, server = HttpClientConnection(ENDPOINT), HttpServerConnection()
    exchange = serve(server, client.send_request(request("=?base64?x?=", 3)))
    assert [e.message["method"] for e in exchange.received] == ["=?base64?x?="]


def test_extra_headers_from_config():
    _, headers, _ = sent_request(
        call_tool(), config=HttpClientConfig(headers=(("Authorization", "Bearer t"),))
    )
    assert headers["authorization"] == "Bearer t"


def _head_of(data: bytes) -> tuple[bytes, dict[str, str]]:
    server = h11.Connection(h11.SERVER)
    server.receive_data(data)
    req = server.next_event()
    return req.target, {k.decode(): v.decode() for k, v in req.headers}


def test_request_heads_made_once_still_belong_to_their_own_request():
    # Heads are remembered by length and MCP headers, per connection: two requests of the
    # same length differ in exactly what differs between them.
    def bearer(token: str) -> HttpClientConfig:
        return HttpClientConfig(headers=(("Authorization", f"Bearer {token}"),))

    alice = HttpClientConnection(ENDPOINT, config=bearer("a"))
    bob = HttpClientConnection(ENDPOINT, config=bearer("b"))
    other = HttpClientConnection(parse_url("http://127.0.0.1:9/other"))
    _, a = _head_of(alice.send_request(call_tool("aa", 1)))
    _, b = _head_of(bob.send_request(call_tool("aa", 1)))
    target, o = _head_of(other.send_request(call_tool("aa", 1)))
    assert (a["authorization"], b["authorization"]) == ("Bearer a", "Bearer b")
    assert "authorization" not in o and o["host"] == "127.0.0.1:9" and target == b"/other"
    _, renamed = _head_of(HttpClientConnection(ENDPOINT).send_request(call_tool("bb", 1)))
    assert renamed["mcp-name"] == "bb" and renamed["content-length"] == a["content-length"]


def test_per_request_headers_stay_on_their_request():
    client = HttpClientConnection(ENDPOINT)
    _, first = _head_of(client.send_request(call_tool(), headers=[("X-Trace", "1")]))
    fresh = HttpClientConnection(ENDPOINT)
    _, second = _head_of(fresh.send_request(call_tool()))
    assert first["x-trace"] == "1" and "x-trace" not in second


def test_a_bad_configured_header_is_refused_with_the_config():
    with pytest.raises(ValueError, match="headers holds an invalid header"):
        HttpClientConfig(headers=(("Bad Name", "x"),))


def test_remembered_request_heads_are_bounded_and_reused():
    from mrtr_core.http import _client

    client = HttpClientConnection(ENDPOINT)
    answer = response_bytes(200, "application/json", b'{"jsonrpc":"2.0","id":1,"result":{}}')

    def exchange(message):
        data = client.send_request(message)
        client.receive_data(answer)
        assert isinstance(client.next_event(), ResponseReceived)
        return data

    first = exchange(call_tool())
    assert exchange(call_tool()) == first and len(client._heads) == 1  # made once
    for size in range(_client._REQUEST_HEADS_MAX + 10):
        exchange(call_tool(text="x" * size))
        assert 0 < len(client._heads) <= _client._REQUEST_HEADS_MAX


def test_sending_a_response_or_batch_is_refused():
    client = HttpClientConnection(ENDPOINT)
    with pytest.raises(LocalProtocolError):
        client.send_request({"jsonrpc": "2.0", "id": 1, "result": {}})


def test_second_request_while_busy_is_refused():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool())
    assert not client.ready
    with pytest.raises(LocalProtocolError):
        client.send_request(call_tool())


@pytest.mark.parametrize(
    ("url", "host", "port", "target"),
    [
        ("http://127.0.0.1:8000/mcp", "127.0.0.1", 8000, "/mcp"),
        ("http://localhost/mcp?x=1", "localhost", 80, "/mcp?x=1"),
        ("https://example.com", "example.com", 443, "/"),
        ("http://[::1]:9/m", "::1", 9, "/m"),
    ],
)
def test_parse_url(url, host, port, target):
    endpoint = parse_url(url)
    assert (endpoint.host, endpoint.port, endpoint.target) == (host, port, target)


def test_authority_brackets_ipv6_and_omits_default_ports():
    assert parse_url("http://[::1]:9/m").authority == "[::1]:9"
    assert parse_url("https://example.com/").authority == "example.com"


@pytest.mark.parametrize("url", ["ftp://x/y", "127.0.0.1:80/mcp", "http:///mcp", "http://h:bad/"])
def test_bad_urls_are_refused(url):
    with pytest.raises(LocalProtocolError):
        parse_url(url)


@pytest.mark.parametrize(("url", "fragment"), [
    ("http://user:secret@h/mcp", "credentials in the URL are not sent"),
    ("http://user@h/mcp", "credentials in the URL are not sent"),
    ("http://h/m cp", "printable ASCII without spaces"),
    ("http://h/café", "printable ASCII without spaces"),
    ("http://h/mcp?q=a b", "printable ASCII without spaces"),
])
def test_urls_a_request_could_not_carry_are_refused_up_front(url, fragment):
    # Credentials would be dropped without a word, and such a path made every request fail
    # with an untyped error.
    with pytest.raises(LocalProtocolError, match=fragment) as info:
        parse_url(url)
    assert "secret" not in str(info.value)
    assert parse_url("http://h/caf%C3%A9").target == "/caf%C3%A9"


# -- reading answers ------------------------------------------------------------------------------


def test_json_response_is_returned_with_its_status():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 4))
    body = json.dumps({"jsonrpc": "2.0", "id": 4, "result": {"ok": True}}).encode()
    [event] = events_for(client, response_bytes(200, "application/json", body))
    assert event == ResponseReceived(
        message={"jsonrpc": "2.0", "id": 4, "result": {"ok": True}}, status=200
    )
    assert client.ready


def test_json_rpc_error_with_4xx_is_returned_as_the_response():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 4))
    error = {"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "bad"}}
    [event] = events_for(
        client, response_bytes(400, "application/json", json.dumps(error).encode())
    )
    assert isinstance(event, ResponseReceived)
    assert (event.status, event.message) == (400, error)


def test_error_without_id_is_the_answer_to_this_request():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 4))
    error = {"jsonrpc": "2.0", "error": {"code": -32600, "message": "forbidden origin"}}
    [event] = events_for(
        client, response_bytes(403, "application/json", json.dumps(error).encode())
    )
    assert event.status == 403


@pytest.mark.parametrize(
    ("status", "content_type", "body"),
    [
        (404, "text/plain", b"Not Found"),
        (502, "text/html", b"<h1>bad gateway</h1>"),
        (400, "application/json", b'{"detail": "legacy"}'),
        (500, None, b""),
        # A redirect is not followed (digest §3.3: one POST to the one endpoint); its JSON
        # body that is no JSON-RPC message is reported by its status too.
        (307, "application/json", b'{"location": "/elsewhere"}'),
        (302, "text/html", b"<a href='/x'>moved</a>"),
    ],
)
def test_http_error_without_json_rpc_body_is_a_typed_error(status, content_type, body):
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool())
    with pytest.raises(HttpStatusError) as info:
        events_for(client, response_bytes(status, content_type, body))
    assert info.value.status == status
    assert info.value.body == body[:512]
    assert not client.ready


def test_success_with_unexpected_content_type_is_a_protocol_error():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool())
    with pytest.raises(RemoteProtocolError, match="Content-Type"):
        events_for(client, response_bytes(200, "text/html", b"<html/>"))


def test_response_for_another_id_is_a_protocol_error():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 4))
    body = json.dumps({"jsonrpc": "2.0", "id": 5, "result": {}}).encode()
    with pytest.raises(RemoteProtocolError, match="does not match"):
        events_for(client, response_bytes(200, "application/json", body))


def test_invalid_json_success_body_is_a_protocol_error():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool())
    with pytest.raises(RemoteProtocolError):
        events_for(client, response_bytes(200, "application/json", b"{nope"))


def test_oversize_json_body_is_refused():
    client = HttpClientConnection(ENDPOINT, HttpClientConfig(max_response_bytes=50))
    client.send_request(call_tool("echo", 1))
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"x": "y" * 100}}).encode()
    with pytest.raises(RemoteProtocolError, match="limit"):
        events_for(client, response_bytes(200, "application/json", body))


def test_notification_carries_the_version_and_method_headers():
    # MCP-Protocol-Version on every POST (§ Protocol Version Header), and Mcp-Method, which
    # servers that check it on notifications compare with the body.
    _, headers, _ = sent_request({"jsonrpc": "2.0", "method": "notifications/cancelled"})
    assert headers["mcp-protocol-version"] == "2026-07-28"
    assert headers["mcp-method"] == "notifications/cancelled"


def test_notification_gets_accepted():
    client = HttpClientConnection(ENDPOINT)
    client.send_request({"jsonrpc": "2.0", "method": "notifications/cancelled"})
    [event] = events_for(client, b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
    assert event == NotificationAccepted(status=202)
    assert client.ready


# A notification the server cannot accept gets an error status, whose body MAY be a JSON-RPC
# error without an id (digest §3.3 "Server responses"): a refusal either way.
@pytest.mark.parametrize(
    ("content_type", "body"),
    [("application/json", b'{"jsonrpc": "2.0", "error": {"code": -32020, "message": "no"}}'),
     ("text/plain", b"no"), (None, b"")],
)
def test_a_refused_notification_is_an_http_status_error_whatever_its_body(content_type, body):
    client = HttpClientConnection(ENDPOINT)
    client.send_request({"jsonrpc": "2.0", "method": "notifications/cancelled"})
    with pytest.raises(HttpStatusError) as info:
        events_for(client, response_bytes(400, content_type, body))
    assert (info.value.status, info.value.body) == (400, body)


def test_our_server_s_refusal_of_a_notification_reaches_our_client_as_an_error():
    config = HttpClientConfig(headers=(("Origin", "http://evil.example"),))
    client, server = HttpClientConnection(ENDPOINT, config), HttpServerConnection()
    data = client.send_request({"jsonrpc": "2.0", "method": "notifications/cancelled"})
    with pytest.raises(HttpStatusError) as info:
        events_for(client, serve(server, data).out)
    assert info.value.status == 403
    assert json.loads(info.value.body)["error"]["code"] == -32600


def test_server_closing_before_any_byte_is_a_disconnect_without_response():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool())
    client.receive_data(b"")
    with pytest.raises(ServerDisconnectedError) as info:
        client.next_event()
    assert info.value.response_started is False
    assert isinstance(info.value, ConnectionError)


def test_server_closing_mid_response_is_a_disconnect_after_start():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool())
    client.receive_data(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{")
    client.receive_data(b"")
    with pytest.raises(ServerDisconnectedError) as info:
        while client.next_event() is not NEED_DATA:
            pass
    assert info.value.response_started is True


def test_malformed_http_is_a_protocol_error():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool())
    with pytest.raises(RemoteProtocolError):
        events_for(client, b"SPDY/9 what\r\n\r\n")


def test_next_event_without_a_request_is_refused():
    with pytest.raises(LocalProtocolError):
        HttpClientConnection(ENDPOINT).next_event()


def test_connection_close_response_makes_the_connection_not_reusable():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode()
    events_for(client, response_bytes(200, "application/json", body, "Connection: close\r\n"))
    assert not client.ready


# -- event streams ---------------------------------------------------------------------------

PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
FINAL = {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "resultType": "complete"}}


def stream_body(*messages, prefix=b": keep-alive\n\n") -> bytes:
    return prefix + b"".join(encode_sse_event(json.dumps(m)) for m in messages)


def test_event_stream_gives_notifications_then_the_response():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    client.receive_data(sse_bytes(200, stream_body(PROGRESS, FINAL)))
    assert client.next_event() == NotificationReceived(message=PROGRESS)
    assert client.next_event() == ResponseReceived(message=FINAL, status=200)
    assert client.ready  # the stream's end was already buffered: keep-alive


def test_event_stream_with_many_notifications_in_one_read_gives_each_once_in_order():
    notes = [{**PROGRESS, "params": {**PROGRESS["params"], "progress": i}} for i in range(5_000)]
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    events = events_for(client, sse_bytes(200, stream_body(*notes, FINAL)))
    assert events == [NotificationReceived(message=note) for note in notes] + [
        ResponseReceived(message=FINAL, status=200)
    ]


def test_event_stream_response_for_another_id_is_skipped():
    other = {**FINAL, "id": 99}
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    events = events_for(client, sse_bytes(200, stream_body(other, FINAL)))
    assert events == [ResponseReceived(message=FINAL, status=200)]


def test_event_stream_ending_without_the_response_is_a_protocol_error():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    with pytest.raises(RemoteProtocolError, match="without the response"):
        events_for(client, sse_bytes(200, stream_body(PROGRESS)))


def test_event_stream_left_open_after_the_response_is_not_reused():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    body = stream_body(FINAL)
    events = events_for(client, head + f"{len(body):x}\r\n".encode() + body + b"\r\n")
    assert events == [ResponseReceived(message=FINAL, status=200)]
    assert not client.ready


def test_event_stream_over_the_total_limit_is_refused():
    config = HttpClientConfig(max_stream_bytes=200)
    client = HttpClientConnection(ENDPOINT, config)
    client.send_request(call_tool("echo", 1))
    with pytest.raises(RemoteProtocolError):
        events_for(client, sse_bytes(200, stream_body(*[PROGRESS] * 10, FINAL)))


def test_event_stream_with_a_request_from_the_server_is_a_protocol_error():
    server_request = {"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": {}}
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    with pytest.raises(RemoteProtocolError, match="must not send requests"):
        events_for(client, sse_bytes(200, stream_body(server_request, FINAL)))


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_event_stream_parses_the_same_however_the_bytes_are_split(data):
    wire = sse_bytes(200, stream_body(PROGRESS, PROGRESS, FINAL).replace(b"\n", b"\r\n"))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=12)))
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    got = []
    for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True):
        if a == b:
            continue  # b"" would mean EOF
        client.receive_data(wire[a:b])
        while not (got and isinstance(got[-1], ResponseReceived)):
            event = client.next_event()
            if event is NEED_DATA:
                break
            got.append(event)
    assert got == [
        NotificationReceived(message=PROGRESS),
        NotificationReceived(message=PROGRESS),
        ResponseReceived(message=FINAL, status=200),
    ]


# -- paired with the server connection ------------------------------------------------------------


def test_keep_alive_reuses_one_connection_for_many_requests():
    client, server = HttpClientConnection(ENDPOINT), HttpServerConnection()
    for i in range(4):
        exchange = serve(server, client.send_request(call_tool("echo", i)))
        [event] = events_for(client, exchange.out)
        assert event.message["id"] == i
        assert client.ready


@pytest.mark.parametrize(
    "note",
    [{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
     {"jsonrpc": "2.0", "method": "notifications/x", "params": {"_meta": {
         "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}],
)
def test_our_server_accepts_our_client_s_notification(note):
    client, server = HttpClientConnection(ENDPOINT), HttpServerConnection()
    [event] = events_for(client, serve(server, client.send_request(note)).out)
    assert event == NotificationAccepted(status=202)


def test_server_rejection_reaches_the_client_as_a_response():
    client, server = HttpClientConnection(ENDPOINT), HttpServerConnection()
    data = client.send_request(call_tool("echo", 1)).replace(b"Mcp-Name: echo", b"Mcp-Name: ohce")
    [event] = events_for(client, serve(server, data).out)
    assert event.status == 400 and event.message["error"]["code"] == -32020


def test_every_client_error_is_an_mrtr_error():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool())
    with pytest.raises(MrtrError):
        events_for(client, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")


def test_endpoint_is_a_plain_value():
    assert Endpoint(scheme="http", host="h", port=1, target="/") == parse_url("http://h:1/")


# -- bounds and strays ----------------------------------------------------------------------------


def test_an_error_page_is_given_up_once_its_excerpt_is_read():
    # A trickled or endless error page must not hold the request until its end: the
    # excerpt is all the error keeps, so the rest is never waited for.
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool())
    head = b"HTTP/1.1 500 Oops\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
    page = b"<p>" + b"x" * 600
    with pytest.raises(HttpStatusError) as info:
        events_for(client, head + f"{len(page):x}\r\n".encode() + page + b"\r\n")  # no end
    assert info.value.status == 500
    assert info.value.body == page[:512]
    assert not client.ready


def test_a_success_body_of_another_type_is_bounded():
    client = HttpClientConnection(ENDPOINT, HttpClientConfig(max_response_bytes=1000))
    client.send_request(call_tool())
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
    page = b"x" * 1001
    with pytest.raises(RemoteProtocolError, match="exceeds 1000 bytes"):
        events_for(client, head + f"{len(page):x}\r\n".encode() + page + b"\r\n")
    assert not client.ready


def test_an_error_without_id_on_an_event_stream_is_the_answer_to_this_request():
    # As in a JSON body: an error the server could not tie to an id answers this request.
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "down"}}
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    events = events_for(client, sse_bytes(200, stream_body(PROGRESS, error)))
    assert events == [NotificationReceived(message=PROGRESS),
                      ResponseReceived(message=error, status=200)]


def test_bytes_after_a_response_make_the_connection_not_reusable():
    # A server writing after its response (a 408 before it closes an idle connection) in
    # the same read: those bytes would otherwise be taken as the next request's answer.
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode()
    events = events_for(client, response_bytes(200, "application/json", body)
                        + b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
    assert [type(e) for e in events] == [ResponseReceived]
    assert not client.ready
    clean = HttpClientConnection(ENDPOINT)
    clean.send_request(call_tool("echo", 1))
    events_for(clean, response_bytes(200, "application/json", body))
    assert clean.ready


# -- error statuses on event streams ---------------------------------------------------------------
# "Clients MUST handle both" JSON and SSE answers (digest §3.3 "Server responses"), and an error
# keeps the status its code travels with (-32021 is 400, MUST; digest §1.8) even when
# request-related notifications came before it on a stream.

MISSING_CAPABILITY = {
    "jsonrpc": "2.0",
    "id": 1,
    "error": {
        "code": -32021,
        "message": "elicitation is needed",
        "data": {"requiredCapabilities": {"elicitation": {}}},
    },
}


def test_an_error_after_notifications_on_an_error_status_stream_is_the_response():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    client.receive_data(sse_bytes(400, stream_body(PROGRESS, MISSING_CAPABILITY)))
    assert client.next_event() == NotificationReceived(message=PROGRESS)
    assert client.next_event() == ResponseReceived(message=MISSING_CAPABILITY, status=400)
    assert client.ready


def test_our_server_s_error_after_progress_reaches_our_client_as_the_error():
    client, server = HttpClientConnection(ENDPOINT), HttpServerConnection()
    server.receive_data(client.send_request(call_tool("echo", 1)))
    assert server.next_event() is not NEED_DATA
    server.send_reply(MISSING_CAPABILITY, notifications=[PROGRESS])
    events = events_for(client, server.data_to_send())
    assert events == [NotificationReceived(message=PROGRESS),
                      ResponseReceived(message=MISSING_CAPABILITY, status=400)]


def test_an_error_status_stream_ending_without_the_response_is_an_http_status_error():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    with pytest.raises(HttpStatusError) as info:
        events_for(client, sse_bytes(503, stream_body(PROGRESS)))
    assert info.value.status == 503
    assert info.value.content_type == "text/event-stream"


# -- informational responses and content codings ------------------------------------------------


def test_informational_responses_before_the_answer_are_skipped():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode()
    informational = (b"HTTP/1.1 100 Continue\r\n\r\n"
                     b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n")
    events = events_for(client, informational + response_bytes(200, "application/json", body))
    assert events == [ResponseReceived(message=json.loads(body), status=200)]
    assert client.ready


def test_endless_informational_responses_are_bounded_like_a_head():
    # Each 1xx head is small, so h11's own limit never trips: without a bound of their own
    # a server sending 102 Processing for ever would hold the request as long as it liked.
    client = HttpClientConnection(ENDPOINT, HttpClientConfig(max_header_bytes=1000))
    client.send_request(call_tool("echo", 1))
    processing = b"HTTP/1.1 102 Processing\r\n\r\n"  # 27 bytes
    assert events_for(client, processing * 37) == []  # 999 bytes
    with pytest.raises(RemoteProtocolError,
                       match=r"informational \(1xx\) responses exceed 1000 bytes"):
        events_for(client, processing)
    assert not client.ready


def test_informational_responses_count_their_fields():
    client = HttpClientConnection(ENDPOINT, HttpClientConfig(max_header_bytes=1000))
    client.send_request(call_tool("echo", 1))
    hints = b"HTTP/1.1 103 Early Hints\r\nLink: " + b"x" * 965 + b"\r\n\r\n"  # 1001 bytes
    with pytest.raises(RemoteProtocolError, match=r"informational \(1xx\)"):
        events_for(client, hints)


@pytest.mark.parametrize("kind", ["application/json", "text/event-stream"])
@pytest.mark.parametrize("codings", [["gzip"], ["GZIP"], ["br"], ["identity, gzip"],
                                     ["identity", "gzip"], ["gzip", "identity"]])
def test_a_success_with_a_content_coding_not_asked_for_is_named(kind, codings):
    # Requests send no Accept-Encoding; a compressed answer is refused as such, not as
    # invalid UTF-8 or a stream that never answered.
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    fields = "".join(f"Content-Encoding: {coding}\r\n" for coding in codings)
    named = next(coding for coding in codings if coding != "identity")
    with pytest.raises(RemoteProtocolError, match=f"Content-Encoding {named!r}"):
        events_for(client, response_bytes(200, kind, b"\x1f\x8b\x08\x00", fields))
    assert not client.ready


@pytest.mark.parametrize("coding", ["identity", "Identity"])
def test_the_identity_content_coding_is_no_coding(coding):
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode()
    events = events_for(client, response_bytes(200, "Application/JSON; charset=UTF-8", body,
                                                f"Content-Encoding: {coding}\r\n"))
    assert events == [ResponseReceived(message=json.loads(body), status=200)]
    assert client.ready


def test_an_error_status_with_a_content_coding_keeps_its_status():
    client = HttpClientConnection(ENDPOINT)
    client.send_request(call_tool("echo", 1))
    with pytest.raises(HttpStatusError) as info:
        events_for(client, response_bytes(503, "text/html", b"\x1f\x8b\x08\x00",
                                          "Content-Encoding: gzip\r\n"))
    assert info.value.status == 503
