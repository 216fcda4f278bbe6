"""HttpServerConnection: every status the endpoint answers by itself, keep-alive, limits."""

from __future__ import annotations

import base64
import json

import pytest
from deep_values import too_deep
from wire_helpers import (
    META,
    RawClient,
    call_tool,
    mcp_headers,
    request,
    serve,
)

from mrtr_core.app import Reply
from mrtr_core.app.reply import send_http_reply
from mrtr_core.errors import LocalProtocolError
from mrtr_core.http import (
    NEED_DATA,
    ConnectionEnded,
    HttpServerConfig,
    HttpServerConnection,
    MessageReceived,
)


def one(client: RawClient, server: HttpServerConnection, data: bytes):
    exchange = serve(server, data)
    responses = client.read(exchange.out)
    assert len(responses) == 1, responses
    return exchange, responses[0]


def test_valid_post_reaches_the_app_and_gets_json_200():
    client, server = RawClient(), HttpServerConnection()
    exchange, resp = one(client, server, client.post(call_tool("echo", 7, x=1)))
    assert [e.message["id"] for e in exchange.received] == [7]
    assert exchange.received[0].request_id == 7
    assert resp.status == 200
    assert resp.headers["content-type"] == "application/json"
    assert resp.json()["id"] == 7


def test_notification_gets_202_without_body():
    client, server = RawClient(), HttpServerConnection()
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    headers = mcp_headers("notifications/cancelled", None)
    exchange, resp = one(client, server, client.post(note, headers))
    assert exchange.received[0].request_id is None
    assert resp.status == 202
    assert resp.body == b""


def test_notification_without_mcp_method_gets_202():
    # Mcp-Method is required on requests only (§ Standard Request Headers), and the official
    # TypeScript client sends none on a notification: only a present one is compared.
    client, server = RawClient(), HttpServerConnection()
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    headers = [h for h in mcp_headers("notifications/cancelled", None) if h[0] != "Mcp-Method"]
    exchange, resp = one(client, server, client.post(note, headers))
    assert [e.request_id for e in exchange.received] == [None]
    assert (resp.status, resp.body) == (202, b"")


def test_notification_with_mismatched_mcp_method_is_refused():
    client, server = RawClient(), HttpServerConnection()
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    _, resp = one(client, server, client.post(note, mcp_headers("tools/call", None)))
    assert (resp.status, resp.json()["error"]["code"]) == (400, -32020)
    assert "id" not in resp.json()


def test_notification_without_protocol_version_is_refused():
    client, server = RawClient(), HttpServerConnection()
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    headers = [
        h for h in mcp_headers("notifications/cancelled", None) if h[0] != "MCP-Protocol-Version"
    ]
    exchange, resp = one(client, server, client.post(note, headers))
    assert not exchange.received
    assert (resp.status, resp.json()["error"]["code"]) == (400, -32020)
    assert "MCP-Protocol-Version header is missing" in resp.json()["error"]["message"]
    assert "id" not in resp.json()


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26", "2099-01-01", "latest"])
def test_notification_at_a_version_the_server_does_not_speak_is_refused(version):
    client, server = RawClient(), HttpServerConnection()
    note = {"jsonrpc": "2.0", "method": "notifications/x"}
    exchange, resp = one(client, server, client.post(note, mcp_headers("notifications/x", None,
                                                                        version)))
    assert not exchange.received
    assert resp.status == 400
    assert resp.json() == {
        "jsonrpc": "2.0",
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": version},
        },
    }


def test_notification_whose_body_names_another_version_than_its_header_is_refused():
    client, server = RawClient(), HttpServerConnection()
    note = {"jsonrpc": "2.0", "method": "notifications/x",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}}
    _, resp = one(client, server, client.post(note, mcp_headers("notifications/x", None)))
    assert (resp.status, resp.json()["error"]["code"]) == (400, -32020)
    assert "id" not in resp.json()


def test_the_connection_serves_on_after_refusing_a_notification():
    client, server = RawClient(), HttpServerConnection()
    note = {"jsonrpc": "2.0", "method": "notifications/x"}
    one(client, server, client.post(note, mcp_headers("notifications/x", None, "2099-01-01")))
    _, resp = one(client, server, client.post(call_tool("echo", 2)))
    assert (resp.status, resp.json()["id"]) == (200, 2)


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "HEAD", "OPTIONS"])
def test_non_post_methods_get_405_with_allow_post(method):
    client, server = RawClient(), HttpServerConnection()
    exchange, resp = one(client, server, client.request(method=method, headers=[]))
    assert resp.status == 405
    assert resp.headers["allow"] == "POST"
    assert not exchange.received
    assert not server.ended  # keep-alive survives


def test_other_path_gets_404():
    client, server = RawClient(), HttpServerConnection()
    _, resp = one(client, server, client.request(b"{}", target="/other"))
    assert resp.status == 404


def test_path_with_query_string_is_the_endpoint():
    client, server = RawClient(), HttpServerConnection()
    body = json.dumps(call_tool()).encode()
    _, resp = one(client, server, client.request(body, mcp_headers(), target="/mcp?x=1"))
    assert resp.status == 200


def test_configured_path():
    client, server = RawClient(), HttpServerConnection(HttpServerConfig(path="/api"))
    _, resp = one(client, server, client.request(b"{}", target="/mcp"))
    assert resp.status == 404


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "null", "http://localhost.evil.example", "file://"]
)
def test_bad_origin_gets_403(origin):
    client, server = RawClient(), HttpServerConnection()
    _, resp = one(client, server, client.post(call_tool(), [*mcp_headers(), ("Origin", origin)]))
    assert resp.status == 403
    assert resp.json()["error"]["code"] == -32600


@pytest.mark.parametrize(
    "origin", ["http://localhost:3000", "http://127.0.0.1", "https://[::1]:8443"]
)
def test_localhost_origins_are_allowed_by_default(origin):
    client, server = RawClient(), HttpServerConnection()
    _, resp = one(client, server, client.post(call_tool(), [*mcp_headers(), ("Origin", origin)]))
    assert resp.status == 200


def test_allowed_origins_are_configurable():
    config = HttpServerConfig(
        allowed_origins=frozenset({"https://app.example"}), allow_localhost_origins=False
    )
    client, server = RawClient(), HttpServerConnection(config)
    _, ok = one(
        client,
        server,
        client.post(call_tool(), [*mcp_headers(), ("Origin", "https://app.example")]),
    )
    _, local = one(
        client, server, client.post(call_tool(), [*mcp_headers(), ("Origin", "http://localhost")])
    )
    assert (ok.status, local.status) == (200, 403)


def test_request_without_origin_is_allowed():
    client, server = RawClient(), HttpServerConnection()
    _, resp = one(client, server, client.post(call_tool()))
    assert resp.status == 200


@pytest.mark.parametrize(
    "accept", [None, "application/json", "text/event-stream", "application/json;q=0, */*;q=0"]
)
def test_accept_without_both_types_gets_406(accept):
    headers = [h for h in mcp_headers() if h[0] != "Accept"]
    if accept is not None:
        headers.append(("Accept", accept))
    client, server = RawClient(), HttpServerConnection()
    _, resp = one(client, server, client.post(call_tool(), headers))
    assert resp.status == 406
    assert resp.json()["error"]["code"] == -32600


@pytest.mark.parametrize(
    "accept", ["*/*", "application/*, text/*", "text/event-stream; q=0.5, application/json"]
)
def test_accept_wildcards_count(accept):
    headers = [h for h in mcp_headers() if h[0] != "Accept"] + [("Accept", accept)]
    client, server = RawClient(), HttpServerConnection()
    _, resp = one(client, server, client.post(call_tool(), headers))
    assert resp.status == 200


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/json; charset=latin-1", "application/xml"]
)
def test_wrong_content_type_gets_415(content_type):
    headers = [h for h in mcp_headers() if h[0] != "Content-Type"]
    if content_type is not None:
        headers.append(("Content-Type", content_type))
    client, server = RawClient(), HttpServerConnection()
    _, resp = one(client, server, client.post(call_tool(), headers))
    assert resp.status == 415


def test_content_type_with_utf8_charset_is_fine():
    headers = [h for h in mcp_headers() if h[0] != "Content-Type"]
    headers.append(("Content-Type", "Application/JSON; charset=UTF-8"))
    client, server = RawClient(), HttpServerConnection()
    _, resp = one(client, server, client.post(call_tool(), headers))
    assert resp.status == 200


@pytest.mark.parametrize("coding", ["gzip", "br", "identity, gzip", "x-custom"])
def test_a_content_coded_body_gets_415_and_never_reaches_the_app(coding):
    # The endpoint decodes no content coding (RFC 9110 §8.4): a body labelled as compressed
    # is not read as the JSON it may look like, which a proxy would see otherwise.
    client, server = RawClient(), HttpServerConnection()
    headers = [*mcp_headers(), ("Content-Encoding", coding)]
    exchange, resp = one(client, server, client.post(call_tool("echo", 5), headers))
    assert not exchange.received
    assert (resp.status, resp.json()["error"]["code"]) == (415, -32600)
    assert coding in resp.json()["error"]["message"]
    _, good = one(client, server, client.post(call_tool("echo", 6)))
    assert good.status == 200


@pytest.mark.parametrize("coding", ["identity", "Identity", "identity, identity"])
def test_the_identity_content_coding_is_no_coding(coding):
    client, server = RawClient(), HttpServerConnection()
    headers = [*mcp_headers(), ("Content-Encoding", coding)]
    _, resp = one(client, server, client.post(call_tool("echo", 5), headers))
    assert resp.status == 200


def test_oversize_content_length_gets_413_and_closes_before_reading_the_body():
    client, server = RawClient(), HttpServerConnection(HttpServerConfig(max_body_bytes=100))
    data = client.request(b"x" * 101)
    head = data[: data.index(b"\r\n\r\n") + 4]
    exchange = serve(server, head)
    [resp] = client.read(exchange.out)
    assert resp.status == 413
    assert resp.headers["connection"] == "close"
    assert server.ended
    # RFC 9112 §9.6: the body is still coming, so the driver closes in stages, and a
    # connection doing so only waits for its client (a full server may end it).
    assert server.peer_may_still_send and server.waiting_for_peer


def test_connections_ended_by_the_client_or_between_requests_do_not_linger():
    client, server = RawClient(), HttpServerConnection()
    serve(server, client.post(call_tool(text="hi")))
    assert not server.peer_may_still_send  # open, between requests
    serve(server, b"")
    assert server.ended and not server.peer_may_still_send
    idle = HttpServerConnection()
    idle.timed_out()
    assert idle.ended and not idle.peer_may_still_send


def test_oversize_chunked_body_gets_413():
    client, server = RawClient(), HttpServerConnection(HttpServerConfig(max_body_bytes=100))
    headers = [*mcp_headers(), ("Transfer-Encoding", "chunked")]
    exchange = serve(server, client.request(b"[" * 150, headers))
    [resp] = client.read(exchange.out)
    assert resp.status == 413
    assert server.ended


def test_body_exactly_at_the_limit_is_read():
    body = json.dumps(call_tool()).encode()
    client = RawClient()
    server = HttpServerConnection(HttpServerConfig(max_body_bytes=len(body)))
    _, resp = one(client, server, client.request(body, mcp_headers()))
    assert resp.status == 200


def test_malformed_json_gets_400_parse_error_and_the_connection_stays_usable():
    client, server = RawClient(), HttpServerConnection()
    _, bad = one(client, server, client.request(b'{"jsonrpc": "2.0", "id": 1,', mcp_headers()))
    assert bad.status == 400
    assert bad.json()["error"]["code"] == -32700
    assert "id" not in bad.json()
    _, good = one(client, server, client.post(call_tool("echo", 2)))
    assert (good.status, good.json()["id"]) == (200, 2)


def test_a_number_too_large_to_be_finite_gets_400_parse_error():
    # 1e400 would reach the app as Infinity, which no reply can carry back.
    client, server = RawClient(), HttpServerConnection()
    body = json.dumps(call_tool("echo", 1, text="hi")).replace('"hi"', "1e400", 1)
    exchange, bad = one(client, server, client.request(body.encode(), mcp_headers()))
    assert not exchange.received
    assert (bad.status, bad.json()["error"]["code"]) == (400, -32700)
    _, good = one(client, server, client.post(call_tool("echo", 2)))
    assert (good.status, good.json()["id"]) == (200, 2)


@pytest.mark.parametrize(
    "body",
    [[call_tool()], "just a string", 42, None, {"jsonrpc": "1.0", "id": 1, "method": "x"}],
)
def test_batches_and_non_requests_get_400_invalid_request(body):
    client, server = RawClient(), HttpServerConnection()
    _, resp = one(client, server, client.post(body))
    assert resp.status == 400
    assert resp.json()["error"]["code"] == -32600
    _, good = one(client, server, client.post(call_tool()))
    assert good.status == 200


def test_posting_a_response_is_refused_with_its_id():
    client, server = RawClient(), HttpServerConnection()
    _, resp = one(client, server, client.post({"jsonrpc": "2.0", "id": 9, "result": {}}))
    assert resp.status == 400
    assert resp.json() == {
        "jsonrpc": "2.0",
        "id": 9,
        "error": {"code": -32600, "message": "clients must not send JSON-RPC responses"},
    }


def test_too_deep_body_is_a_parse_error():
    client, server = RawClient(), HttpServerConnection(HttpServerConfig(max_depth=5))
    _, resp = one(client, server, client.post(call_tool(x=[[[[[1]]]]])))
    assert (resp.status, resp.json()["error"]["code"]) == (400, -32700)


# -- header checks (-32020) ------------------------------------------------------------------


def header_case(headers, message=None):
    client, server = RawClient(), HttpServerConnection()
    exchange, resp = one(client, server, client.post(message or call_tool("echo", 5), headers))
    return exchange, resp


def without(name):
    return [h for h in mcp_headers() if h[0].lower() != name.lower()]


@pytest.mark.parametrize("name", ["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"])
def test_missing_required_header_gets_400_header_mismatch_with_the_id(name):
    exchange, resp = header_case(without(name))
    assert not exchange.received
    assert resp.status == 400
    assert resp.json()["id"] == 5
    assert resp.json()["error"]["code"] == -32020
    assert name in resp.json()["error"]["message"]


def test_protocol_version_header_must_equal_the_body_meta():
    _, resp = header_case(mcp_headers(version="2025-11-25"))
    assert (resp.status, resp.json()["error"]["code"]) == (400, -32020)
    assert "2025-11-25" in resp.json()["error"]["message"]


def test_body_without_meta_version_is_left_to_params_validation():
    message = call_tool()
    del message["params"]["_meta"]
    exchange, resp = header_case(mcp_headers(), message)
    assert exchange.received and resp.status == 200


def test_mcp_method_must_equal_the_body_method():
    _, resp = header_case(mcp_headers(method="prompts/get"))
    assert (resp.status, resp.json()["error"]["code"]) == (400, -32020)


def test_mcp_name_must_equal_params_name():
    _, resp = header_case(mcp_headers(name="other"))
    assert (resp.status, resp.json()["error"]["code"]) == (400, -32020)
    assert "'other'" in resp.json()["error"]["message"]


def test_header_names_are_case_insensitive():
    headers = [(k.upper(), v) for k, v in mcp_headers()]
    _, resp = header_case(headers)
    assert resp.status == 200


def test_header_values_are_case_sensitive():
    _, resp = header_case(mcp_headers(method="Tools/Call"))
    assert resp.status == 400


def test_mcp_name_base64_sentinel_is_decoded_before_comparing():
    name = "café ☕"
    encoded = "=?base64?" + base64.b64encode(name.encode()).decode() + "?="
    exchange, resp = header_case(mcp_headers(name=encoded), call_tool(name, 5))
    assert resp.status == 200
    assert exchange.received[0].parsed.params["name"] == name


def test_literal_sentinel_lookalike_name_must_arrive_encoded():
    name = "=?base64?literal?="
    encoded = "=?base64?" + base64.b64encode(name.encode()).decode() + "?="
    _, ok = header_case(mcp_headers(name=encoded), call_tool(name, 5))
    _, plain = header_case(mcp_headers(name=name), call_tool(name, 5))
    assert (ok.status, plain.status) == (200, 400)


@pytest.mark.parametrize("value", ["=?base64?not base64!?=", "=?base64?//79?="])
def test_malformed_base64_mcp_name_gets_400(value):
    _, resp = header_case(mcp_headers(name=value))
    assert (resp.status, resp.json()["error"]["code"]) == (400, -32020)


def test_header_with_non_ascii_bytes_gets_400():
    client, server = RawClient(), HttpServerConnection()
    data = client.post(call_tool("echo", 5)).replace(b"Mcp-Name: echo", b"Mcp-Name: ech\xc3\xb6")
    _, resp = one(client, server, data)
    assert (resp.status, resp.json()["error"]["code"]) == (400, -32020)


def test_repeated_mcp_method_header_gets_400():
    _, resp = header_case([*mcp_headers(), ("Mcp-Method", "tools/call")])
    assert (resp.status, resp.json()["error"]["code"]) == (400, -32020)


@pytest.mark.parametrize(("method", "field"), [("prompts/get", "name"), ("resources/read", "uri")])
def test_mcp_name_mirrors_name_or_uri(method, field):
    value = "file:///tmp/x.txt" if field == "uri" else "greet"
    message = request(method, 3, **{field: value})
    _, ok = header_case(mcp_headers(method, value), message)
    _, bad = header_case(mcp_headers(method, value + "x"), message)
    assert (ok.status, bad.status) == (200, 400)


def test_methods_without_a_name_need_no_mcp_name():
    _, resp = header_case(mcp_headers("tools/list", None), request("tools/list", 4))
    assert resp.status == 200


# -- replies and statuses --------------------------------------------------------------------


def reply_with(message, status=None, notifications=()):
    client, server = RawClient(), HttpServerConnection()
    server.receive_data(client.post(call_tool("echo", 1)))
    event = server.next_event()
    assert isinstance(event, MessageReceived)
    server.send_reply(message, status, notifications=notifications)
    [resp] = client.read(server.data_to_send())
    return resp


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (-32700, 400),
        (-32600, 400),
        (-32602, 400),
        (-32020, 400),
        (-32021, 400),
        (-32022, 400),
        (-32601, 404),
        (-32603, 200),
        (-1, 200),
    ],
)
def test_error_replies_get_the_status_for_their_code(code, status):
    resp = reply_with({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "m"}})
    assert resp.status == status


def test_explicit_status_wins():
    resp = reply_with({"jsonrpc": "2.0", "id": 1, "result": {}}, 201)
    assert resp.status == 201


def test_reply_with_notifications_is_an_event_stream():
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    resp = reply_with({"jsonrpc": "2.0", "id": 1, "result": {}}, notifications=[note])
    assert resp.headers["content-type"] == "text/event-stream"
    assert resp.headers["x-accel-buffering"] == "no"
    events = [block for block in resp.body.decode().split("\n\n") if block]
    assert [json.loads(e.split("data: ", 1)[1]) for e in events] == [
        note,
        {"jsonrpc": "2.0", "id": 1, "result": {}},
    ]


def test_a_reply_nested_too_deeply_to_encode_is_answered_with_an_internal_error():
    client, server = RawClient(), HttpServerConnection()
    server.receive_data(client.post(call_tool("echo", 1)))
    assert isinstance(server.next_event(), MessageReceived)
    send_http_reply(server, Reply.result(1, {"v": too_deep()}), 1)
    [resp] = client.read(server.data_to_send())
    assert resp.status == 500
    assert json.loads(resp.body)["error"] == {"code": -32603,
                                              "message": "internal error (LocalProtocolError)"}


def test_reply_without_a_pending_request_is_refused():
    with pytest.raises(LocalProtocolError):
        HttpServerConnection().send_reply({"jsonrpc": "2.0", "id": 1, "result": {}})


def test_next_event_before_replying_is_refused():
    client, server = RawClient(), HttpServerConnection()
    server.receive_data(client.post(call_tool()))
    assert isinstance(server.next_event(), MessageReceived)
    with pytest.raises(LocalProtocolError):
        server.next_event()


# -- keep-alive and connection life --------------------------------------------------------------


def test_keep_alive_serves_many_requests_on_one_connection():
    client, server = RawClient(), HttpServerConnection()
    for i in range(5):
        _, resp = one(client, server, client.post(call_tool("echo", i)))
        assert resp.json()["id"] == i
    assert not server.ended and server.idle


def test_pipelined_requests_are_answered_in_order():
    data = b"".join(RawClient().post(call_tool("echo", i)) for i in range(3))
    server = HttpServerConnection()
    exchange = serve(server, data)
    assert [e.request_id for e in exchange.received] == [0, 1, 2]
    responses = RawClient().read_pipelined(exchange.out, 3)
    assert [r.json()["id"] for r in responses] == [0, 1, 2]


def test_connection_close_request_ends_the_connection_after_the_reply():
    client, server = RawClient(), HttpServerConnection()
    exchange = serve(server, client.post(call_tool(), [*mcp_headers(), ("Connection", "close")]))
    assert exchange.ended and server.ended
    [resp] = client.read(exchange.out)
    assert resp.status == 200


def test_garbage_gets_400_and_close():
    server = HttpServerConnection()
    exchange = serve(server, b"NOT HTTP AT ALL\r\n\r\n")
    assert exchange.rejected[0].status == 400
    assert exchange.out.startswith(b"HTTP/1.1 400 ")
    assert b"connection: close" in exchange.out.lower()
    assert server.ended
    assert isinstance(server.next_event(), ConnectionEnded)


def test_oversized_head_gets_431():
    server = HttpServerConnection(HttpServerConfig(max_header_bytes=1024))
    exchange = serve(server, b"POST /mcp HTTP/1.1\r\nX-Big: " + b"a" * 2048)
    assert exchange.rejected[0].status == 431
    assert server.ended


def test_an_oversized_head_that_arrives_whole_gets_431_too():
    # h11 measures only a head still incomplete; one read may bring a whole large head.
    client, server = RawClient(), HttpServerConnection(HttpServerConfig(max_header_bytes=1024))
    exchange = serve(server, client.post(call_tool(), [*mcp_headers(), ("X-Big", "a" * 2048)]))
    assert exchange.rejected[0].status == 431
    assert not exchange.received
    assert server.ended


def test_content_length_with_transfer_encoding_gets_400_and_close():
    # RFC 9112 §6.1: such a request may be smuggling; the server must close after answering.
    body = json.dumps(call_tool()).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in mcp_headers())
    data = (f"POST /mcp HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n"
            f"Transfer-Encoding: chunked\r\n\r\n{len(body):x}\r\n").encode()
    data += body + b"\r\n0\r\n\r\n"
    server = HttpServerConnection()
    exchange = serve(server, data)
    assert exchange.rejected[0].status == 400
    assert not exchange.received
    assert b"connection: close" in exchange.out.lower()
    assert server.ended


def test_an_absolute_form_target_is_the_endpoint():
    # RFC 9112 §3.2.2: a server MUST accept the absolute form.
    client, server = RawClient(), HttpServerConnection()
    for target in ("http://127.0.0.1:8000/mcp", "HTTPS://example.com/mcp?x=1"):
        data = client.request(json.dumps(call_tool()).encode(), target=target)
        _, resp = one(client, server, data)
        assert resp.status == 200
    _, resp = one(client, server, client.request(b"{}", target="http://127.0.0.1:8000/other"))
    assert resp.status == 404


def test_accept_split_over_two_lines_is_one_list():
    # RFC 9110 §5.3: a list field's lines are one list.
    headers = [h for h in mcp_headers() if h[0] != "Accept"]
    headers += [("Accept", "application/json"), ("Accept", "text/event-stream")]
    client, server = RawClient(), HttpServerConnection()
    _, resp = one(client, server, client.post(call_tool(), headers))
    assert resp.status == 200


@pytest.mark.parametrize(("name", "values"), [
    ("Origin", ("http://localhost", "http://evil.example")),
    ("Content-Type", ("application/json", "text/plain")),
])
def test_a_repeated_single_valued_header_gets_400(name, values):
    # Which one would count? A check read from the first line could be passed by the
    # first and meant for the second (an Origin check bypassed).
    headers = [h for h in mcp_headers() if h[0] != name] + [(name, v) for v in values]
    client, server = RawClient(), HttpServerConnection()
    _, resp = one(client, server, client.post(call_tool(), headers))
    assert resp.status == 400
    assert name.lower() in resp.json()["error"]["message"].lower()


def test_expect_100_continue_gets_100_then_the_reply():
    client, server = RawClient(), HttpServerConnection()
    data = client.post(call_tool(), [*mcp_headers(), ("Expect", "100-continue")])
    head, body = data.split(b"\r\n\r\n", 1)
    exchange = serve(server, head + b"\r\n\r\n")
    assert exchange.out.startswith(b"HTTP/1.1 100 ")
    exchange = serve(server, body)
    assert exchange.received


def test_expect_100_continue_with_a_rejection_answers_at_once_and_closes():
    client, server = RawClient(), HttpServerConnection()
    data = client.request(b"{}", [("Expect", "100-continue"), ("Accept", "text/html")])
    head = data.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n"
    exchange = serve(server, head)
    assert exchange.rejected[0].status == 406
    assert server.ended


def test_peer_eof_when_idle_ends_quietly():
    server = HttpServerConnection()
    exchange = serve(server, b"")
    assert exchange.ended and exchange.out == b""


def test_timeout_while_idle_ends_without_a_response():
    server = HttpServerConnection()
    assert server.idle
    server.timed_out()
    assert server.ended and server.data_to_send() == b""
    assert isinstance(server.next_event(), ConnectionEnded)


def test_timeout_mid_request_gets_408():
    client, server = RawClient(), HttpServerConnection()
    partial = client.post(call_tool())[:40]
    assert serve(server, partial).events == []
    assert not server.idle
    server.timed_out()
    assert server.data_to_send().startswith(b"HTTP/1.1 408 ")
    assert server.ended


def test_message_received_carries_headers_and_target():
    client, server = RawClient(), HttpServerConnection()
    server.receive_data(client.post(call_tool(), [*mcp_headers(), ("Authorization", "Bearer t")]))
    event = server.next_event()
    assert isinstance(event, MessageReceived)
    assert event.headers["authorization"] == [b"Bearer t"]
    assert event.target == "/mcp"
    assert event.message["params"]["_meta"] == META


def test_partial_data_needs_more():
    client, server = RawClient(), HttpServerConnection()
    server.receive_data(client.post(call_tool())[:-3])
    assert server.next_event() is NEED_DATA
