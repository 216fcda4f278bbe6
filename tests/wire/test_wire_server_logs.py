"""Every runtime's servers log an internal error before answering it (mrtr_core.app.logs).

A failure outside any handler (here the clock of a stdio server, or the principal callback
of an HTTP server, raising) is answered with -32603 ``internal error (TYPE)`` and nothing
more; the exception and its traceback go to the ``mrtr.server`` logger at ERROR.
"""

from __future__ import annotations

import asyncio
import functools
import io
import json
import logging
from collections.abc import Callable
from typing import Any

import mrtr_asyncio.http_client
import mrtr_asyncio.http_server
import mrtr_asyncio.stdio_server
import mrtr_sync.http_client
import mrtr_sync.http_server
import mrtr_sync.stdio_server
import mrtr_trio.http_client
import mrtr_trio.http_server
import mrtr_trio.stdio_server
import pytest
import trio
import trio.testing
from wire_app import make_app
from wire_helpers import call_tool

from mrtr_core.app.logs import SERVER_LOGGER
from mrtr_core.stdio import encode_line

LIMIT = 10.0  # generous: only a broken test ever waits this long
INTERNAL = {"code": -32603, "message": "internal error (ClockBrokeError)"}


class ClockBrokeError(Exception):
    """What the failing clock or principal callback raises."""


def _failing() -> tuple[Callable[..., Any], list[BaseException]]:
    """A callable that raises a fresh :class:`ClockBrokeError`, and the list of those raised."""
    raised: list[BaseException] = []

    def fail(*args: Any) -> Any:
        exc = ClockBrokeError("no time today")
        raised.append(exc)
        raise exc

    return fail, raised


def _assert_logged(caplog: pytest.LogCaptureFixture, raised: list[BaseException],
                   request_id: int) -> None:
    records = [r for r in caplog.records if r.name.startswith("mrtr")]
    assert len(records) == len(raised) == 1, records
    [record] = records
    assert (record.name, record.levelno) == (SERVER_LOGGER, logging.ERROR)
    assert record.exc_info is not None and record.exc_info[1] is raised[0]
    assert f"request id {request_id}" in record.getMessage()


# --- stdio ----------------------------------------------------------------------------------------


def test_sync_stdio_server_logs_an_internal_error(caplog: pytest.LogCaptureFixture) -> None:
    clock, raised = _failing()
    stdin = io.BytesIO(encode_line(call_tool("echo", 4, text="x")))
    stdout = io.BytesIO()
    mrtr_sync.stdio_server.serve_stdio(make_app(), stdin=stdin, stdout=stdout, clock=clock)
    assert json.loads(stdout.getvalue()) == {"jsonrpc": "2.0", "id": 4, "error": INTERNAL}
    _assert_logged(caplog, raised, 4)


def test_trio_stdio_server_logs_an_internal_error(caplog: pytest.LogCaptureFixture) -> None:
    clock, raised = _failing()

    async def main() -> bytes:
        to_server, stdin = trio.testing.memory_stream_one_way_pair()
        stdout, from_server = trio.testing.memory_stream_one_way_pair()
        with trio.fail_after(LIMIT):
            await to_server.send_all(encode_line(call_tool("echo", 5, text="x")))
            await to_server.aclose()
            await mrtr_trio.stdio_server.serve_stdio(make_app(), stdin=stdin, stdout=stdout,
                                                     clock=clock)
            await stdout.aclose()
            data = b""
            while chunk := await from_server.receive_some():
                data += chunk
            return data

    assert json.loads(trio.run(main)) == {"jsonrpc": "2.0", "id": 5, "error": INTERNAL}
    _assert_logged(caplog, raised, 5)


class _Collect:
    """Stands for stdout: keeps what the server writes."""

    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        pass


def test_asyncio_stdio_server_logs_an_internal_error(caplog: pytest.LogCaptureFixture) -> None:
    clock, raised = _failing()

    async def main() -> bytes:
        stdin = asyncio.StreamReader()
        stdin.feed_data(encode_line(call_tool("echo", 6, text="x")))
        stdin.feed_eof()
        stdout = _Collect()
        async with asyncio.timeout(LIMIT):
            await mrtr_asyncio.stdio_server.serve_stdio(
                make_app(), stdin=stdin, stdout=stdout, clock=clock  # type: ignore[arg-type]
            )
        return stdout.data

    assert json.loads(asyncio.run(main())) == {"jsonrpc": "2.0", "id": 6, "error": INTERNAL}
    _assert_logged(caplog, raised, 6)


# --- HTTP ------------------------------------------------------------------------------------


def test_sync_http_server_logs_an_internal_error(caplog: pytest.LogCaptureFixture) -> None:
    principal, raised = _failing()
    server = mrtr_sync.http_server.serve_http(make_app(), "127.0.0.1", 0, principal=principal)
    try:
        with mrtr_sync.http_client.HttpTransport(server.url) as transport:
            answer = transport.request(call_tool("echo", 7, text="x"), timeout=LIMIT)
    finally:
        server.shutdown()
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": INTERNAL}
    _assert_logged(caplog, raised, 7)


def test_trio_http_server_logs_an_internal_error(caplog: pytest.LogCaptureFixture) -> None:
    principal, raised = _failing()

    async def main() -> Any:
        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(functools.partial(
                    mrtr_trio.http_server.serve_http, make_app(), "127.0.0.1", 0,
                    principal=principal))
                url = f"http://127.0.0.1:{port}/mcp"
                async with mrtr_trio.http_client.HttpTransport(url) as transport:
                    answer = await transport.request(call_tool("echo", 8, text="x"))
                nursery.cancel_scope.cancel()
        return answer

    assert trio.run(main) == {"jsonrpc": "2.0", "id": 8, "error": INTERNAL}
    _assert_logged(caplog, raised, 8)


def test_asyncio_http_server_logs_an_internal_error(caplog: pytest.LogCaptureFixture) -> None:
    principal, raised = _failing()

    async def main() -> Any:
        async with (
            asyncio.timeout(LIMIT),
            mrtr_asyncio.http_server.serve_http(
                make_app(), "127.0.0.1", 0, principal=principal) as server,
            mrtr_asyncio.http_client.HttpTransport(server.url) as transport,
        ):
            return await transport.request(call_tool("echo", 9, text="x"))

    assert asyncio.run(main()) == {"jsonrpc": "2.0", "id": 9, "error": INTERNAL}
    _assert_logged(caplog, raised, 9)
