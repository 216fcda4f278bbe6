"""trio client transports: the protocol, and an in-memory transport for tests and demos."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

__all__ = ["MemoryTransport", "Transport"]

JsonObject = dict[str, Any]


class Transport(Protocol):
    """Carries one JSON-RPC request and returns the response with the same id.

    Timeouts come from the caller's cancel scope. A broken connection raises ``OSError``
    (``ConnectionError``), ``trio.BrokenResourceError`` or ``trio.ClosedResourceError``.
    """

    async def request(self, message: JsonObject) -> JsonObject:
        """Send ``message`` and return its response."""
        ...

    async def aclose(self) -> None:
        """Release the connection."""
        ...


class MemoryTransport:
    """Hands each request to ``handler`` (request dict -> response dict, sync or async).

    Messages pass through JSON text both ways, as on a real wire. ``latency`` (seconds, or a
    function of the request) is slept with ``trio.sleep`` after the handler answered, so
    under ``MockClock`` it costs virtual time only. A handler that raises ``OSError``
    simulates a broken connection; so does any request after :meth:`aclose`.
    """

    def __init__(
        self,
        handler: Callable[[JsonObject], JsonObject | Awaitable[JsonObject]],
        *,
        latency: float | Callable[[JsonObject], float] = 0.0,
    ) -> None:
        self._handler = handler
        self._latency = latency
        self._closed = False

    async def request(self, message: JsonObject) -> JsonObject:
        """Answer one request (see the class docstring)."""
        if self._closed:
            raise trio.ClosedResourceError("transport is closed")
        wire = json.loads(json.dumps(message))
        response = self._handler(wire)
        if inspect.isawaitable(response):
            response = await response
        delay = self._latency(wire) if callable(self._latency) else self._latency
        if delay > 0:
            await trio.sleep(delay)
        return json.loads(json.dumps(response))  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        """Refuse further requests."""
        self._closed = True
