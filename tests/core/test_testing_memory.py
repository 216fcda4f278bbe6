"""The in-memory transport shared by the trio and asyncio adapters
(mrtr_core.testing.memory.AsyncMemoryTransport), with a recording sleep: no event loop."""

from __future__ import annotations

from typing import Any

import mrtr_asyncio
import mrtr_trio
import pytest

from mrtr_core.app import run_inline
from mrtr_core.errors import TransportClosedError
from mrtr_core.testing.memory import AsyncMemoryTransport


class _Recorded(AsyncMemoryTransport):
    _closed_error = EOFError
    slept: list[float] = []

    @staticmethod
    async def _sleep(seconds: float) -> None:
        _Recorded.slept.append(seconds)


def test_messages_pass_through_json_and_latency_is_slept() -> None:
    _Recorded.slept = []

    async def handler(message: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": message["id"], "result": {"n": (1, 2)}}

    transport = _Recorded(handler, latency=lambda message: message["id"] / 10)
    response = run_inline(transport.request({"jsonrpc": "2.0", "id": 3, "method": "x"}))
    assert response == {"jsonrpc": "2.0", "id": 3, "result": {"n": [1, 2]}}
    assert _Recorded.slept == [0.3]
    plain = _Recorded(lambda message: {"id": message["id"]})
    assert run_inline(plain.request({"id": 1})) == {"id": 1}
    assert _Recorded.slept == [0.3]  # no latency: no sleep


def test_a_closed_transport_raises_its_runtimes_broken_connection_error() -> None:
    transport = _Recorded(lambda message: {})
    run_inline(transport.aclose())
    with pytest.raises(EOFError):
        run_inline(transport.request({"id": 1}))


def test_the_adapters_memory_transports_are_the_shared_one() -> None:
    assert issubclass(mrtr_trio.MemoryTransport, AsyncMemoryTransport)
    assert issubclass(mrtr_asyncio.MemoryTransport, AsyncMemoryTransport)
    # A request after aclose() fails alike in every runtime (a ConnectionError).
    assert mrtr_trio.MemoryTransport._closed_error is TransportClosedError
    assert mrtr_asyncio.MemoryTransport._closed_error is TransportClosedError
