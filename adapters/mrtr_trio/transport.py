"""trio client transports: the protocol, and an in-memory transport for tests and demos."""

from __future__ import annotations

from typing import Any, Protocol

import trio

from mrtr_core.testing.memory import AsyncMemoryTransport

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


class MemoryTransport(AsyncMemoryTransport):
    """Hands each request to ``handler`` (request dict -> response dict, sync or async).

    See :class:`~mrtr_core.testing.memory.AsyncMemoryTransport`. ``latency`` is slept with
    ``trio.sleep``, so under ``MockClock`` it costs virtual time only; a request after
    :meth:`aclose` raises :class:`~mrtr_core.errors.TransportClosedError`.
    """

    _sleep = staticmethod(trio.sleep)
