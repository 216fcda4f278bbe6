"""Lingering close, in each runtime's HTTP server (RFC 9112 §9.6): a response that ends the
connection before the request's body was read (413 by ``Content-Length``) reaches a client
that sends its whole body before reading, instead of being lost to the reset a close with
unread bytes makes the kernel send.

Each server runs in a thread of its own (its event loop there); the client is a plain
blocking socket that writes the whole request before reading, as simple clients do (a
reset while sending is an error for them, even when the response already arrived). Every
wait is bounded by ``LIMIT``; the assertions are on outcomes only.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable

import h11
import pytest
import trio
from mrtr_asyncio.http_server import serve_http as serve_asyncio
from mrtr_sync.http_server import serve_http as serve_sync
from mrtr_trio.http_server import serve_http as serve_trio
from wire_app import make_app
from wire_helpers import RawClient, mcp_headers

from mrtr_core.http import HttpServerConfig

LIMIT = 10.0  # generous: only a broken test ever waits this long
MAX_BODY = 1024
# Larger than what loopback socket buffers hold, so most of it is unread when the server
# answers; well under LINGER_MAX_BYTES, so a lingering server reads all of it.
BODY_SIZE = 4 * 1024 * 1024


class Served:
    """One runtime's server refusing bodies over ``MAX_BODY`` bytes, running in a thread."""

    def __init__(self, runtime: str) -> None:
        self.port = 0
        self._ready = threading.Event()
        self._stop: Callable[[], None] = lambda: None
        self._config = HttpServerConfig(max_body_bytes=MAX_BODY)
        self._thread = threading.Thread(target=getattr(self, f"_run_{runtime}"), daemon=True)
        self._thread.start()
        assert self._ready.wait(LIMIT)

    def close(self) -> None:
        self._stop()
        self._thread.join(LIMIT)

    def _run_sync(self) -> None:
        server = serve_sync(make_app(), "127.0.0.1", 0, config=self._config)
        self.port, self._stop = server.port, server.shutdown
        self._ready.set()

    def _run_trio(self) -> None:
        async def main() -> None:
            stop = trio.Event()
            token = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as nursery:
                self.port = await nursery.start(
                    lambda task_status: serve_trio(make_app(), "127.0.0.1", 0,
                                                   config=self._config, task_status=task_status)
                )
                self._stop = lambda: trio.from_thread.run_sync(stop.set, trio_token=token)
                self._ready.set()
                await stop.wait()
                nursery.cancel_scope.cancel()

        trio.run(main)

    def _run_asyncio(self) -> None:
        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            async with serve_asyncio(make_app(), "127.0.0.1", 0, config=self._config) as server:
                self.port = server.port
                self._stop = lambda: loop.call_soon_threadsafe(stop.set)
                self._ready.set()
                await stop.wait()

        asyncio.run(main())


def post_oversized_body(port: int) -> tuple[str | None, RawClient, bytes]:
    """POST ``BODY_SIZE`` bytes (declared up front) as a naive client does: send everything,
    then read until the server closes. The error that sending or reading met, if any; the
    client that sent the request (to parse the reply); and the bytes received."""
    raw = RawClient()
    head = raw.conn.send(
        h11.Request(method="POST", target="/mcp",
                    headers=[*mcp_headers(), ("Content-Length", str(BODY_SIZE))])
    )
    failure: str | None = None
    received = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=LIMIT) as sock:
        try:
            sock.sendall(head + b"x" * BODY_SIZE)
            while data := sock.recv(65536):
                received += data
        except OSError as exc:  # a reset (or broken pipe): the request failed for the client
            failure = repr(exc)
    return failure, raw, bytes(received)


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_a_413_reaches_a_client_that_sends_its_whole_body_first(runtime: str) -> None:
    served = Served(runtime)
    try:
        failure, raw, received = post_oversized_body(served.port)
    finally:
        served.close()
    assert failure is None, f"{failure} after receiving {received[:300]!r}"
    replies = raw.read(received)
    assert [reply.status for reply in replies] == [413], received[:300]
    error = replies[0].json()["error"]
    assert error["code"] < 0 and str(MAX_BODY) in error["message"]
