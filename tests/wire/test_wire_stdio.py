"""stdio framing: the line framer and both connection roles."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_helpers import call_tool

from mrtr_core.errors import LocalProtocolError, RemoteProtocolError
from mrtr_core.jsonrpc import NEED_DATA
from mrtr_core.stdio import (
    InputEnded,
    LineFramer,
    LineTooLong,
    MessageReceived,
    MessageRejected,
    NotificationReceived,
    ResponseReceived,
    StdioClientConnection,
    StdioServerConnection,
    cancelled_notification,
    encode_line,
)


def test_framer_splits_lines_and_drops_cr():
    framer = LineFramer()
    assert framer.feed(b"a\r\nb\nc") == [b"a", b"b"]
    assert framer.feed(b"d\n") == [b"cd"]


def test_framer_skips_blank_lines():
    assert LineFramer().feed(b"\n\r\n  \na\n") == [b"a"]


def test_framer_emits_a_final_unterminated_line_at_eof():
    framer = LineFramer()
    assert framer.feed(b"tail") == []
    assert framer.feed(b"") == [b"tail"]
    assert framer.feed(b"") == []


def test_framer_reports_a_long_line_once_and_recovers():
    framer = LineFramer(max_line_bytes=10)
    out = framer.feed(b"x" * 8)
    out += framer.feed(b"x" * 8)
    out += framer.feed(b"x" * 30)
    out += framer.feed(b"yy\nok\n")
    assert out == [LineTooLong(10), b"ok"]


def test_framer_accepts_a_line_exactly_at_the_limit_with_crlf():
    assert LineFramer(max_line_bytes=4).feed(b"abcd\r\n") == [b"abcd"]
    assert LineFramer(max_line_bytes=4).feed(b"abcde\n") == [LineTooLong(4)]


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(
        st.binary(min_size=1, max_size=20).filter(lambda b: b"\n" not in b and b.strip(b" \t\r")),
        max_size=8,
    ),
    cuts=st.lists(st.integers(0, 400), max_size=10),
)
def test_framer_chunking_never_changes_the_lines(lines, cuts):
    data = b"".join(line.rstrip(b"\r") + b"\n" for line in lines)
    framer = LineFramer()
    got = []
    points = sorted(c for c in cuts if c <= len(data))
    for a, b in zip([0, *points], [*points, len(data)], strict=True):
        if a < b:
            got.extend(framer.feed(data[a:b]))
    assert got == [line.rstrip(b"\r") for line in lines]


def test_encode_line_is_one_line():
    line = encode_line({"jsonrpc": "2.0", "method": "n", "params": {"t": "a\nb\r\n"}})
    assert line.endswith(b"\n") and line.count(b"\n") == 1


def test_cancelled_notification():
    assert cancelled_notification(3, "user") == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 3, "reason": "user"},
    }
    assert "reason" not in cancelled_notification("a")["params"]


def drain(conn):
    out = []
    while (event := conn.next_event()) is not NEED_DATA:
        out.append(event)
        if isinstance(event, InputEnded):
            break
    return out


def test_server_reads_interleaved_requests():
    server = StdioServerConnection()
    server.receive_data(encode_line(call_tool("a", 1)) + encode_line(call_tool("b", 2))[:10])
    [first] = drain(server)
    assert isinstance(first, MessageReceived) and first.request_id == 1
    server.receive_data(encode_line(call_tool("b", 2))[10:])
    [second] = drain(server)
    assert second.request_id == 2


def test_server_reads_many_messages_from_one_read_in_order():
    # A peer may pack thousands of short messages into one read; each comes out once, in order.
    count = 20_000
    server = StdioServerConnection()
    server.receive_data(b"".join(encode_line(call_tool("t", i)) for i in range(count)))
    events = drain(server)
    assert [event.request_id for event in events] == list(range(count))


def test_server_answers_invalid_json_with_parse_error_and_continues():
    server = StdioServerConnection()
    server.receive_data(b"{oops\n" + encode_line(call_tool("a", 1)))
    rejected, ok = drain(server)
    assert isinstance(rejected, MessageRejected)
    assert rejected.response == {
        "jsonrpc": "2.0",
        "error": {"code": -32700, "message": rejected.response["error"]["message"]},
    }
    assert isinstance(ok, MessageReceived)


@pytest.mark.parametrize(
    ("line", "rid"),
    [
        (b"[1,2]", None),
        (b'{"jsonrpc":"2.0","id":4}', 4),
        (b'{"jsonrpc":"2.0","id":5,"result":{}}', 5),
    ],
)
def test_server_answers_invalid_requests_with_invalid_request(line, rid):
    server = StdioServerConnection()
    server.receive_data(line + b"\n")
    [event] = drain(server)
    assert event.response["error"]["code"] == -32600
    assert event.response.get("id") == rid


def test_server_answers_a_long_line_and_keeps_reading():
    server = StdioServerConnection(max_line_bytes=50)
    server.receive_data(b"x" * 100 + b"\n" + encode_line({"jsonrpc": "2.0", "method": "n"}))
    rejected, note = drain(server)
    assert rejected.response["error"]["code"] == -32600
    assert isinstance(note, MessageReceived) and note.request_id is None


def test_server_sees_end_of_input():
    server = StdioServerConnection()
    server.receive_data(b"")
    assert drain(server) == [InputEnded()]
    assert server.send({"jsonrpc": "2.0", "id": 1, "result": {}}).endswith(b"\n")


def test_client_routes_responses_and_notifications():
    client = StdioClientConnection()
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
    client.receive_data(encode_line(note) + encode_line({"jsonrpc": "2.0", "id": 2, "result": {}}))
    got_note, response = drain(client)
    assert isinstance(got_note, NotificationReceived)
    assert isinstance(response, ResponseReceived) and response.request_id == 2


@pytest.mark.parametrize(
    "line",
    [b"starting server...", b'{"jsonrpc":"2.0","id":1,"method":"roots/list"}', b"[]"],
)
def test_client_treats_anything_but_messages_on_stdout_as_a_protocol_error(line):
    client = StdioClientConnection()
    client.receive_data(line + b"\n" + encode_line({"jsonrpc": "2.0", "id": 1, "result": {}}))
    with pytest.raises(RemoteProtocolError):
        client.next_event()
    assert isinstance(client.next_event(), ResponseReceived)


def test_client_reads_a_message_cut_off_by_the_end_of_stdout_as_the_end():
    # A server that died mid-write (digest §3.4 "Crash") left half a line: its requests are
    # lost with the process, which is no framing error. A whole last message without its
    # newline is still read, as the server side reads one.
    whole = encode_line({"jsonrpc": "2.0", "id": 1, "result": {}})
    client = StdioClientConnection()
    client.receive_data(whole + whole[:20])
    client.receive_data(b"")
    assert [type(event) for event in drain(client)] == [ResponseReceived, InputEnded]
    client = StdioClientConnection()
    client.receive_data(whole.rstrip(b"\n"))
    client.receive_data(b"")
    assert [type(event) for event in drain(client)] == [ResponseReceived, InputEnded]


def test_client_still_refuses_a_bad_line_that_ended_before_stdout_did():
    client = StdioClientConnection()
    client.receive_data(b'{"jsonrpc":"2.0","id":1,"res\n')
    client.receive_data(b"")
    with pytest.raises(RemoteProtocolError):
        client.next_event()
    assert client.next_event() == InputEnded()


def test_client_refuses_a_long_line():
    client = StdioClientConnection(max_line_bytes=10)
    client.receive_data(b"x" * 50 + b"\n")
    with pytest.raises(RemoteProtocolError, match="longer than 10"):
        client.next_event()


def test_client_send_encodes_requests_only():
    client = StdioClientConnection()
    assert json.loads(client.send(call_tool())) == call_tool()
    with pytest.raises(LocalProtocolError):
        client.send({"jsonrpc": "2.0", "id": 1, "result": {}})
