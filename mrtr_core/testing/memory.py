"""The in-memory client transport of the trio and asyncio adapters, less its runtime.

Both adapters' ``MemoryTransport`` are this class with their runtime's sleep and the
exception a closed transport raises; nothing here waits on an event loop itself.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from mrtr_core import jsonrpc
from mrtr_core._checks import non_negative_seconds
from mrtr_core.errors import TransportClosedError

__all__ = ["AsyncMemoryTransport", "through_wire"]

JsonObject = dict[str, Any]


def through_wire(message: JsonObject) -> JsonObject:
    """``message`` as the peer reads it: encoded and decoded as the real transports do, so
    what no transport can send (NaN, an infinity, a set) raises
    :class:`~mrtr_core.errors.LocalProtocolError` here too, instead of arriving.
    """
    decoded: JsonObject = jsonrpc.decode(jsonrpc.encode(message))
    return decoded


class AsyncMemoryTransport(abc.ABC):
    """Hands each request to ``handler`` (request dict -> response dict, sync or async).

    Messages pass through JSON text both ways, as on a real wire (:func:`through_wire`).
    ``latency`` (seconds, or a function of the request) is slept with :meth:`_sleep` after
    the handler answered. A handler that raises ``OSError`` simulates a broken connection;
    so does any request after :meth:`aclose` (it raises :attr:`_closed_error`).
    """

    _closed_error: type[Exception] = TransportClosedError
    """What a request after :meth:`aclose` raises (a broken-connection error)."""

    def __init__(
        self,
        handler: Callable[[JsonObject], JsonObject | Awaitable[JsonObject]],
        *,
        latency: float | Callable[[JsonObject], float] = 0.0,
    ) -> None:
        if not callable(latency):
            non_negative_seconds("latency", latency)
        self._handler = handler
        self._latency = latency
        self._closed = False

    async def request(self, message: JsonObject) -> JsonObject:
        """Answer one request (see the class docstring)."""
        if self._closed:
            raise self._closed_error("the transport was closed")
        wire = through_wire(message)
        response = self._handler(wire)
        if inspect.isawaitable(response):
            response = await response
        delay = self._latency(wire) if callable(self._latency) else self._latency
        if delay > 0:
            await self._sleep(delay)
        return through_wire(response)

    async def aclose(self) -> None:
        """Refuse further requests."""
        self._closed = True

    @staticmethod
    @abc.abstractmethod
    async def _sleep(seconds: float, /) -> None:
        """The runtime's sleep (virtual time under a virtual clock).

        Positional-only: :meth:`request` passes the delay positionally, so a runtime's own
        sleep fits whatever it names its parameter (``trio.sleep(seconds)``,
        ``asyncio.sleep(delay)``)."""
