"""An incremental Server-Sent Events parser and writer (WHATWG HTML § 9.2 "Server-sent events").

Clients MUST read SSE responses (digest §3.3 "Server responses"): a POST may be answered by an
event stream carrying request-related notifications and then the final response. The parser
takes bytes in any chunking and returns whole events; it never holds more than
``max_event_bytes`` of one event.
"""

from __future__ import annotations

import re
from typing import Final

import attrs

from mrtr_core.errors import RemoteProtocolError

__all__ = ["EventStreamError", "SseEvent", "SseParser", "encode_sse_event"]

_BOM: Final = b"\xef\xbb\xbf"
_LINE_END: Final = re.compile(rb"\r\n|\r|\n")
_RETRY_MAX: Final = 2**64 - 1
_RETRY_DIGITS: Final = len(str(_RETRY_MAX))


class EventStreamError(RemoteProtocolError):
    """The server's event stream broke a limit or could not be read."""


@attrs.frozen(kw_only=True)
class SseEvent:
    """One dispatched event."""

    event: str = "message"
    """The event type (``event:`` field); ``"message"`` when the stream gave none."""
    data: str = ""
    """The ``data:`` lines joined with newlines."""
    id: str | None = None
    """The last event id seen on the stream so far, if any."""
    retry: int | None = None
    """The ``retry:`` value given with this event, if any."""


class SseParser:
    """Turn event-stream bytes into :class:`SseEvent` values, incrementally.

    Args:
        max_event_bytes: Largest event (all its lines, including field names) accepted.
    """

    def __init__(self, *, max_event_bytes: int = 4 * 1024 * 1024) -> None:
        self._max = max_event_bytes
        self._pending = bytearray()  # an unterminated line
        self._started = False  # past the optional byte-order mark
        self._skip_lf = False  # the last line ended with CR: a following LF belongs to it
        self._event_bytes = 0
        self._data: list[bytes] = []
        self._type = b""
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, data: bytes | bytearray) -> list[SseEvent]:
        """Take the next chunk of the stream and return the events it completed.

        Raises:
            EventStreamError: An event grew beyond ``max_event_bytes``.
        """
        chunk = bytes(data)
        if self._skip_lf and chunk:
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]
            self._skip_lf = False
        if self._started and b"\n" not in chunk and b"\r" not in chunk:
            # No line ends here: the pending line only grows (amortised O(len(chunk)),
            # where rescanning pending + chunk made a large event quadratic in its chunks).
            self._pending += chunk
            if self._event_bytes + len(self._pending) > self._max:
                raise EventStreamError(f"an event-stream event exceeds {self._max} bytes")
            return []
        buf = bytes(self._pending) + chunk
        if not self._started:
            if len(buf) < len(_BOM) and _BOM.startswith(buf):
                self._pending = bytearray(buf)
                return []
            self._started = True
            if buf.startswith(_BOM):
                buf = buf[len(_BOM) :]
        events: list[SseEvent] = []
        pos = 0
        for match in _LINE_END.finditer(buf):
            line = buf[pos : match.start()]
            pos = match.end()
            self._grow(len(line) + 1)
            event = self._line(line)
            if event is not None:
                events.append(event)
        self._pending = bytearray(buf[pos:])
        if buf.endswith(b"\r"):
            self._skip_lf = True
        if self._event_bytes + len(self._pending) > self._max:
            raise EventStreamError(f"an event-stream event exceeds {self._max} bytes")
        return events

    def _grow(self, size: int) -> None:
        self._event_bytes += size
        if self._event_bytes > self._max:
            raise EventStreamError(f"an event-stream event exceeds {self._max} bytes")

    def _line(self, line: bytes) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(b":"):
            return None  # a comment, e.g. a keep-alive ":"
        field, sep, value = line.partition(b":")
        if sep and value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            self._data.append(value)
        elif field == b"event":
            self._type = value
        elif field == b"id":
            if b"\x00" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif field == b"retry" and value.isdigit() and len(value) <= _RETRY_DIGITS:
            # A value past 64 bits is ignored, as browsers ignore it; never handed to int()
            # whole (which refuses strings beyond 4300 digits with a ValueError).
            retry = int(value)
            if retry <= _RETRY_MAX:
                self._retry = retry
        return None  # other fields are ignored, as the standard says

    def _dispatch(self) -> SseEvent | None:
        data, event_type, retry = self._data, self._type, self._retry
        self._data, self._type, self._retry, self._event_bytes = [], b"", None, 0
        if not data:
            return None
        return SseEvent(
            event=event_type.decode("utf-8", "replace") or "message",
            data=b"\n".join(data).decode("utf-8", "replace"),
            id=self._last_id,
            retry=retry,
        )


def encode_sse_event(data: str, *, event: str = "message") -> bytes:
    """Encode one event: an ``event:`` line, one ``data:`` line per line of data, a blank line."""
    lines = [f"event: {event}"] if event else []
    lines.extend(f"data: {part}" for part in re.split(r"\r\n|\r|\n", data))
    return ("\n".join(lines) + "\n\n").encode("utf-8")
