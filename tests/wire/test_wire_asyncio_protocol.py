"""The asyncio HTTP server's connection protocol driven by hand, on a transport that does
what asyncio's socket transports do, so the order of the loop's callbacks is the test's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mrtr_asyncio.http_server import _Connection, serve_http
from wire_app import make_app
from wire_helpers import RawClient, call_tool

from mrtr_core.server import Context

LIMIT = 10.0  # a failure bound only: a passing test never waits this long


class _Transport(asyncio.Transport):
    """Records writes; ``abort`` and ``close`` report the loss on the next loop turn, as
    asyncio's socket transports do."""

    def __init__(self, protocol: asyncio.Protocol) -> None:
        super().__init__()
        self.protocol = protocol
        self.written = bytearray()
        self.ended = False

    def write(self, data: Any) -> None:
        self.written += data

    def abort(self) -> None:
        self._end()

    def close(self) -> None:
        self._end()

    def _end(self) -> None:
        if not self.ended:
            self.ended = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def is_closing(self) -> bool:
        return self.ended

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


@pytest.mark.parametrize("ending", ["client EOF", "server close"])
def test_a_request_ended_with_its_connection_cancels_its_handler_once(ending: str) -> None:
    """The handler catches the one CancelledError and cleans up (awaiting); the connection
    being lost right after the EOF (or the server closing) does not cancel it a second time
    mid-cleanup."""

    async def main() -> list[str]:
        started, cleaning = asyncio.Event(), asyncio.Event()
        finish = asyncio.Event()
        seen: list[str] = []
        app = make_app()

        @app.tool(description="Hold until cancelled, then clean up.")
        async def hold(ctx: Context) -> str:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                seen.append("cancelled")
                cleaning.set()
                try:
                    await finish.wait()
                except asyncio.CancelledError:
                    seen.append("cut mid-cleanup")
                    raise
                seen.append("cleaned up")
                raise
            return "never"

        async with asyncio.timeout(LIMIT):
            server = serve_http(app)
            conn = _Connection(server)
            transport = _Transport(conn)
            conn.connection_made(transport)
            data = RawClient().post(call_tool("hold", 1)).replace(
                b"Mcp-Name: echo", b"Mcp-Name: hold"
            )
            conn.data_received(data)
            await started.wait()
            task = conn.task
            assert task is not None
            if ending == "client EOF":
                assert conn.eof_received() is False  # the client is gone: the request is over
                closing = None
            else:
                closing = asyncio.create_task(server.aclose())
            await cleaning.wait()
            # The loss the abort reported has been delivered by now (it was queued first).
            assert transport.ended and conn.closed
            finish.set()
            await asyncio.gather(task, return_exceptions=True)
            if closing is not None:
                await closing
            assert transport.written == b""  # nothing is sent for a cancelled request
        return seen

    assert asyncio.run(main()) == ["cancelled", "cleaned up"]
