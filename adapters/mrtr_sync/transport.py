"""Sync client transports: the protocol, and an in-memory transport for tests and demos."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from mrtr_core._checks import non_negative_seconds
from mrtr_core.errors import TransportClosedError
from mrtr_core.testing.memory import through_wire
from mrtr_sync.clock import Clock, SystemClock

__all__ = ["MemoryTransport", "Transport"]

JsonObject = dict[str, Any]


class Transport(Protocol):
    """Carries one JSON-RPC request and returns the response with the same id.

    ``request`` raises ``TimeoutError`` when ``timeout`` seconds pass without a response, and
    ``ConnectionError`` (or another ``OSError``) when the connection is broken.
    """

    def request(self, message: JsonObject, *, timeout: float | None) -> JsonObject:
        """Send ``message`` and return its response."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


class MemoryTransport:
    """Hands each request to ``handler`` (request dict -> response dict) in the same thread.

    Messages pass through JSON text both ways, as on a real wire
    (:func:`~mrtr_core.testing.memory.through_wire`). ``latency`` (seconds, or a
    function of the request) is slept on ``clock`` after the handler answered; a latency over
    the caller's ``timeout`` sleeps the timeout and raises ``TimeoutError``. A handler that
    raises ``OSError`` simulates a broken connection; so does any request after :meth:`close`.
    """

    def __init__(
        self,
        handler: Callable[[JsonObject], JsonObject],
        *,
        latency: float | Callable[[JsonObject], float] = 0.0,
        clock: Clock | None = None,
    ) -> None:
        if not callable(latency):
            non_negative_seconds("latency", latency)
        self._handler = handler
        self._latency = latency
        self._clock = clock or SystemClock()
        self._closed = False

    def request(self, message: JsonObject, *, timeout: float | None = None) -> JsonObject:
        """Answer one request (see the class docstring)."""
        if self._closed:
            raise TransportClosedError("the transport was closed")
        wire = through_wire(message)
        response = self._handler(wire)
        delay = self._latency(wire) if callable(self._latency) else self._latency
        if timeout is not None and delay > timeout:
            self._clock.sleep(timeout)
            raise TimeoutError(f"no response within {timeout} s")
        self._clock.sleep(delay)
        return through_wire(response)

    def close(self) -> None:
        """Refuse further requests."""
        self._closed = True
