"""The incremental SSE parser (WHATWG event-stream rules) and writer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_core.http import EventStreamError, SseEvent, SseParser, encode_sse_event


def parse(data: bytes, **kw) -> list[SseEvent]:
    return SseParser(**kw).feed(data)


def test_one_event_with_type_and_data():
    assert parse(b"event: message\ndata: {}\n\n") == [SseEvent(event="message", data="{}")]


def test_event_type_defaults_to_message():
    assert parse(b"data: x\n\n")[0].event == "message"


def test_multi_line_data_is_joined_with_newlines():
    assert parse(b"data: a\ndata: b\ndata\n\n")[0].data == "a\nb\n"


@pytest.mark.parametrize("sep", [b"\r\n", b"\r", b"\n"])
def test_all_line_endings(sep):
    data = b"data: x" + sep + sep + b"data: y" + sep + sep
    assert [e.data for e in parse(data)] == ["x", "y"]


def test_comments_and_unknown_fields_are_ignored():
    assert parse(b": ping\nfoo: bar\ndata: x\n\n:\n\n") == [SseEvent(data="x")]


def test_space_after_colon_is_optional_and_only_one_is_dropped():
    assert [e.data for e in parse(b"data:x\n\ndata:  y\n\n")] == ["x", " y"]


def test_event_without_data_is_not_dispatched():
    assert parse(b"event: ping\n\n") == []
    assert parse(b"event: ping\n\ndata: x\n\n") == [SseEvent(data="x")]


def test_id_persists_and_retry_is_per_event():
    events = parse(b"id: 7\nretry: 100\ndata: a\n\ndata: b\n\nid: 8\0\ndata: c\n\n")
    assert [(e.id, e.retry) for e in events] == [("7", 100), ("7", None), ("7", None)]


@pytest.mark.parametrize("digits", [b"18446744073709551616", b"9" * 5000])
def test_a_retry_beyond_64_bits_is_ignored_as_browsers_ignore_it(digits):
    # Still ASCII digits (WHATWG: a reconnection time), but no reconnection time a client
    # could keep: ignored (as an unparsable value is), never turned into an int past
    # Python's limit on digit strings (ValueError beyond 4300 digits).
    events = parse(b"retry: 18446744073709551615\ndata: a\n\nretry: " + digits + b"\ndata: b\n\n")
    assert [e.retry for e in events] == [2**64 - 1, None]


def test_leading_bom_is_skipped_even_when_split():
    parser = SseParser()
    assert parser.feed(b"\xef") == []
    assert parser.feed(b"\xbb") == []
    assert parser.feed(b"\xbfdata: x\n\n") == [SseEvent(data="x")]


def test_unterminated_event_is_not_dispatched():
    assert parse(b"data: x\n") == []


def test_crlf_split_between_chunks_is_one_line_end():
    parser = SseParser()
    assert parser.feed(b"data: x\r") == []
    assert parser.feed(b"\n\r") == [SseEvent(data="x")]
    assert parser.feed(b"\ndata: y\n\n") == [SseEvent(data="y")]


def test_event_over_the_limit_is_refused():
    with pytest.raises(EventStreamError):
        parse(b"data: " + b"x" * 200 + b"\n\n", max_event_bytes=100)


def test_unterminated_line_over_the_limit_is_refused():
    parser = SseParser(max_event_bytes=100)
    with pytest.raises(EventStreamError):
        for _ in range(20):
            parser.feed(b"data: xxxxxxxxxx")


def test_many_small_events_stay_within_the_per_event_limit():
    data = b"data: 0123456789\n\n" * 100
    assert len(parse(data, max_event_bytes=30)) == 100


def test_encode_sse_event_round_trips():
    assert parse(encode_sse_event('{"a":1}')) == [SseEvent(data='{"a":1}')]
    assert parse(encode_sse_event("a\nb", event="x")) == [SseEvent(event="x", data="a\nb")]


STREAM = (
    b"\xef\xbb\xbf: hello\r\nevent: message\r\ndata: one\r\n\r\n"
    b"data: two\rdata: more\r\rid: 5\ndata: three\n\n"
)


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(0, len(STREAM)), max_size=10))
def test_chunking_never_changes_the_events(cuts):
    parser = SseParser()
    got = []
    points = sorted(cuts)
    for a, b in zip([0, *points], [*points, len(STREAM)], strict=True):
        got.extend(parser.feed(STREAM[a:b]))
    assert got == parse(STREAM)
    assert [e.data for e in got] == ["one", "two\nmore", "three"]


def test_a_long_line_grown_chunk_by_chunk_is_one_event():
    # Chunks without a line end only extend the pending line (no rescan of what came
    # before); the line, once ended, is the same as if it came whole.
    parser = SseParser(max_event_bytes=200_000)
    payload = b"x" * 100_000
    assert parser.feed(b"data: ") == []
    for start in range(0, len(payload), 100):
        assert parser.feed(payload[start:start + 100]) == []
    assert parser.feed(b"\n\n") == [SseEvent(data=payload.decode())]
    assert parser.feed(b"data: y\r") == []
    assert parser.feed(b"\n\n") == [SseEvent(data="y")]
