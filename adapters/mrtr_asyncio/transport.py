"""asyncio client transports: the protocol, and an in-memory transport for tests and demos."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from mrtr_core.testing.memory import AsyncMemoryTransport

__all__ = ["MemoryTransport", "Transport"]

JsonObject = dict[str, Any]


class Transport(Protocol):
    """Carries one JSON-RPC request and returns the response with the same id.

    Timeouts come from the caller (``asyncio.timeout_at``). A broken connection raises
    ``OSError`` (``ConnectionError``) or ``EOFError``.
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
    ``asyncio.sleep``, so on a :class:`~mrtr_asyncio.testing.VirtualEventLoop` it costs
    virtual time only; a request after :meth:`aclose` raises
    :class:`~mrtr_core.errors.TransportClosedError`.
    """

    _sleep = staticmethod(asyncio.sleep)
