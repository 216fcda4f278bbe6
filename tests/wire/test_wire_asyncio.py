"""The asyncio adapter on real sockets and processes: HTTP client <-> server, stdio.

Real sockets cannot run on a virtual clock, so these tests use the loop's real clock with
short timeouts where a timeout is the behaviour under test, and assert on outcomes only.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

import pytest
import wire_helpers
from mrtr_asyncio.http_client import HttpTransport
from mrtr_asyncio.http_server import serve_http
from mrtr_asyncio.stdio_client import StdioTransport, open_stdio_transport
from mrtr_asyncio.stdio_server import serve_stdio
from wire_app import make_app
from wire_helpers import LeftBehind, RawClient, call_tool, request, with_progress_token
from wire_peer import BrokenPeer

from mrtr_core.errors import TransportClosedError
from mrtr_core.http import HttpStatusError
from mrtr_core.server import Context
from mrtr_core.state import MemoryReplayGuard
from mrtr_core.stdio import ServerExitedError, encode_line

SERVER_SCRIPT = str(Path(__file__).with_name("stdio_app_server.py"))
LIMIT = 10.0  # generous: only a broken test ever waits this long
CLOSE_WAIT = LIMIT / 2  # for a server to exit by itself once stdin ends, on a loaded machine


def text_of(response):
    return response["result"]["content"][0]["text"]


def run(test):
    """Run an async test body with a served app: ``test(url, gate)``."""

    async def main():
        gate = asyncio.Event()
        async with (
            asyncio.timeout(LIMIT),
            serve_http(make_app(gate), "127.0.0.1", 0, guard=MemoryReplayGuard()) as server,
        ):
            await test(server.url, gate)

    asyncio.run(main())


def test_http_error_after_progress_reaches_the_client_as_the_error():
    # A handler that reported progress and then failed: the reply is an event stream with
    # the error's own status (400 for -32602), and "Clients MUST handle both" JSON and SSE
    # (digest §3.3 "Server responses"), so the JSON-RPC error is the answer, not a bare 400.
    async def body(url, gate):
        async with HttpTransport(url) as transport:
            message = with_progress_token(call_tool("refuse_after_progress", 1))
            answer = await transport.request(message)
            assert answer["error"] == {"code": -32602, "message": "refused after progress"}

    run(body)


def test_http_loopback_mrtr_round_trip():
    async def body(url, gate):
        async with HttpTransport(url) as transport:
            first = await transport.request(call_tool("confirm", 1, path="a"))
            result = first["result"]
            assert result["resultType"] == "input_required"
            retry = call_tool("confirm", 2, path="a")
            retry["params"]["inputResponses"] = {
                "ok": {"action": "accept", "content": {"confirm": True}}
            }
            if "requestState" in result:
                retry["params"]["requestState"] = result["requestState"]
            assert text_of(await transport.request(retry)) == "deleted a"

    run(body)


def test_http_server_answers_a_reply_it_cannot_encode_with_an_internal_error_and_goes_on(
    monkeypatch,
):
    # A bug in the app must not take the connection down: the request gets -32603 and the
    # next one on the same connection is answered.
    app = make_app(asyncio.Event())
    wire_helpers.unencodable_reply_to(app, 1, monkeypatch)

    async def main():
        async with (
            asyncio.timeout(LIMIT),
            serve_http(app, "127.0.0.1", 0) as server,
            HttpTransport(server.url, max_connections=1) as transport,
        ):
            first = await transport.request(call_tool("echo", 1, text="a"))
            assert first["error"]["code"] == -32603
            second = await transport.request(call_tool("echo", 2, text="b"))
            assert text_of(second) == "b"

    asyncio.run(main())


def test_http_error_codes_reach_the_client():
    async def body(url, gate):
        async with HttpTransport(url) as transport:
            response = await transport.request(request("nope/nothing", 1))
            assert response["error"]["code"] == -32601

    run(body)


def test_http_wrong_path_is_a_typed_status_error():
    async def body(url, gate):
        async with HttpTransport(url.replace("/mcp", "/x")) as transport:
            with pytest.raises(HttpStatusError) as info:
                await transport.request(call_tool("echo", 1, text="x"))
            assert info.value.status == 404

    run(body)


def test_http_concurrent_requests_use_several_connections():
    async def body(url, gate):
        async with HttpTransport(url, max_connections=2) as transport, asyncio.TaskGroup() as group:
            waiting = group.create_task(transport.request(call_tool("gate_wait", 1)))
            opened = await transport.request(call_tool("gate_open", 2))
        assert text_of(waiting.result()) == "opened"
        assert text_of(opened) == "open"

    run(body)


def test_http_server_times_out_a_stalled_client():
    async def main():
        async with (
            asyncio.timeout(LIMIT),
            serve_http(make_app(), "127.0.0.1", 0, read_timeout=0.3) as server,
        ):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{")
            data = await reader.read()
            writer.close()
        assert data.startswith(b"HTTP/1.1 408 ")

    asyncio.run(main())


def test_http_client_closing_the_connection_cancels_the_handler():
    async def main():
        started, cancelled = asyncio.Event(), asyncio.Event()
        app = make_app()

        @app.tool(description="Hold until cancelled.")
        async def hold(ctx: Context) -> str:
            started.set()
            try:
                await asyncio.Event().wait()
            finally:
                cancelled.set()
            return "never"

        async with asyncio.timeout(LIMIT), serve_http(app, "127.0.0.1", 0) as server:
            _, writer = await asyncio.open_connection("127.0.0.1", server.port)
            data = (
                RawClient().post(call_tool("hold", 1)).replace(b"Mcp-Name: echo", b"Mcp-Name: hold")
            )
            writer.write(data)
            await started.wait()
            writer.close()
            await cancelled.wait()

    asyncio.run(main())


def test_http_client_timeout_on_a_stalled_server():
    async def main():
        with BrokenPeer() as peer:
            async with asyncio.timeout(LIMIT), HttpTransport(peer.url) as transport:
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await transport.request(call_tool("stall", 1))
                assert (await transport.request(call_tool("echo", 2)))["id"] == 2

    asyncio.run(main())


def test_http_client_reconnects_after_the_server_closed_an_idle_connection():
    async def main():
        with BrokenPeer() as peer:
            async with asyncio.timeout(LIMIT), HttpTransport(peer.url) as transport:
                assert (await transport.request(call_tool("close_after", 1)))["id"] == 1
                assert (await transport.request(call_tool("echo", 2)))["id"] == 2
            assert peer.connections == 2

    asyncio.run(main())


def test_http_client_keeps_one_connection_alive():
    async def main():
        with BrokenPeer() as peer:
            async with asyncio.timeout(LIMIT), HttpTransport(peer.url) as transport:
                for i in range(4):
                    assert (await transport.request(call_tool("echo", i)))["id"] == i
            assert peer.connections == 1

    asyncio.run(main())


def test_http_broken_connection_fails_only_its_request():
    async def main():
        with BrokenPeer() as peer:
            async with (
                asyncio.timeout(LIMIT),
                HttpTransport(peer.url, max_connections=2) as transport,
            ):
                broken, ok = await asyncio.gather(
                    transport.request(call_tool("break", 1)),
                    transport.request(call_tool("echo", 2)),
                    return_exceptions=True,
                )
                assert isinstance(broken, ConnectionError)
                assert ok["id"] == 2
                assert (await transport.request(call_tool("echo", 3)))["id"] == 3

    asyncio.run(main())


# -- stdio ---------------------------------------------------------------------------------


def run_stdio(test):
    async def main():
        async with (
            asyncio.timeout(LIMIT),
            open_stdio_transport([sys.executable, SERVER_SCRIPT, "asyncio"]) as transport,
        ):
            await test(transport)

    asyncio.run(main())


def test_stdio_loopback_round_trip():
    async def body(transport):
        assert text_of(await transport.request(call_tool("echo", 1, text="hi"))) == "hi"
        first = await transport.request(call_tool("confirm", 2, path="b"))
        assert first["result"]["resultType"] == "input_required"

    run_stdio(body)


def test_stdio_requests_interleave_and_route_by_id():
    async def body(transport):
        async with asyncio.TaskGroup() as group:
            waiting = group.create_task(transport.request(call_tool("gate_wait", "w")))
            assert text_of(await transport.request(call_tool("gate_open", "o"))) == "open"
        assert waiting.result()["id"] == "w"

    run_stdio(body)


def test_stdio_cancelled_request_sends_cancel_and_the_transport_keeps_working():
    async def main():
        async with (
            asyncio.timeout(LIMIT),
            open_stdio_transport([sys.executable, SERVER_SCRIPT, "asyncio"],
                                 close_timeout=CLOSE_WAIT) as transport,
        ):
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await transport.request(call_tool("gate_wait", 1))
            assert text_of(await transport.request(call_tool("echo", 2, text="x"))) == "x"
        assert transport.process.returncode == 0  # the handler was cancelled: clean EOF exit

    asyncio.run(main())


class _Collect:
    """Stands for stdout: keeps what the server writes."""

    def __init__(self):
        self.data = b""

    def write(self, data):
        self.data += data

    async def drain(self):
        pass


def test_stdio_server_honours_a_cancel_in_the_same_read_as_its_request():
    async def main():
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        stdin = asyncio.StreamReader()
        stdin.feed_data(encode_line(call_tool("gate_wait", 1)) + encode_line(cancel))
        stdin.feed_eof()
        stdout = _Collect()
        async with asyncio.timeout(LIMIT):
            await serve_stdio(make_app(asyncio.Event()), stdin=stdin, stdout=stdout)
        assert stdout.data == b""

    asyncio.run(main())


def test_stdio_server_cancels_every_request_in_flight_under_the_cancelled_id():
    # A bad client sent id 1 twice: after its cancel nothing more goes out for id 1
    # (cancellation.mdx), from either request; the sync server does the same.
    async def main():
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        lines = [call_tool("gate_wait", 1), call_tool("gate_wait", 1), cancel,
                 call_tool("gate_open", 2)]
        stdin = asyncio.StreamReader()
        stdin.feed_data(b"".join(encode_line(line) for line in lines))
        stdin.feed_eof()
        stdout = _Collect()
        async with asyncio.timeout(LIMIT):
            await serve_stdio(make_app(asyncio.Event()), stdin=stdin, stdout=stdout)
        assert [json.loads(line)["id"] for line in stdout.data.splitlines()] == [2]

    asyncio.run(main())


def test_stdio_server_answers_a_reply_it_cannot_encode_with_an_internal_error_and_goes_on(
    monkeypatch,
):
    async def main():
        app = make_app(asyncio.Event())
        wire_helpers.unencodable_reply_to(app, 1, monkeypatch)
        stdin = asyncio.StreamReader()
        stdin.feed_data(encode_line(call_tool("echo", 1, text="a"))
                        + encode_line(call_tool("echo", 2, text="b")))
        stdin.feed_eof()
        stdout = _Collect()
        async with asyncio.timeout(LIMIT):
            await serve_stdio(app, stdin=stdin, stdout=stdout)
        lines = sorted((json.loads(line) for line in stdout.data.splitlines()),
                       key=lambda line: line["id"])
        assert [line["id"] for line in lines] == [1, 2]
        assert lines[0]["error"]["code"] == -32603
        assert text_of(lines[1]) == "b"

    asyncio.run(main())


def test_stdio_crash_fails_in_flight_requests_with_a_typed_error():
    async def body(transport):
        waiting, crashed = await asyncio.gather(
            transport.request(call_tool("gate_wait", 1)),
            transport.request(call_tool("crash", 2)),
            return_exceptions=True,
        )
        assert isinstance(waiting, ServerExitedError)
        assert isinstance(crashed, ServerExitedError) and crashed.returncode == 3
        with pytest.raises(ServerExitedError):
            await transport.request(call_tool("echo", 3, text="x"))

    run_stdio(body)


def test_stdio_server_exit_fails_what_it_left_unanswered_while_a_left_behind_process_holds_stdout(
    tmp_path,
):
    # The server answers the ping, exits without answering the call, and its child keeps
    # stdout open: no end of stdout comes, yet the call fails as soon as the server is gone,
    # the reply written just before the exit is still delivered, and closing returns.
    left = LeftBehind.in_folder(tmp_path, reads=2)

    async def main():
        async with asyncio.timeout(LIMIT):
            transport = await StdioTransport.spawn([sys.executable, SERVER_SCRIPT, "asyncio"],
                                                   env=left.env, close_timeout=0.1)
            try:
                ping, call = await asyncio.gather(
                    transport.request(request("ping", "p")),
                    transport.request(call_tool("echo", "c")),
                    return_exceptions=True,
                )
                assert ping["result"] == {}
                assert isinstance(call, ServerExitedError)
                assert call.returncode == 3 and "exit status 3" in str(call)
                with pytest.raises(ServerExitedError) as later:
                    await transport.request(call_tool("echo", "later"))
                assert later.value.returncode == 3
                await transport.aclose()  # the child still holds stdout (and stdin)
            finally:
                left.end()  # a close cut short by the time limit then finds nothing held
                await transport.aclose()

    asyncio.run(main())


def test_stdio_close_ends_the_process():
    async def main():
        async with (
            asyncio.timeout(LIMIT),
            open_stdio_transport([sys.executable, SERVER_SCRIPT, "asyncio"],
                                 close_timeout=CLOSE_WAIT) as transport,
        ):
            assert text_of(await transport.request(call_tool("echo", 1, text="x"))) == "x"
        assert transport.process.returncode == 0
        with pytest.raises(TransportClosedError):  # closed on purpose, not a crash
            await transport.request(call_tool("echo", 2, text="y"))

    asyncio.run(main())


def test_http_server_drops_a_client_that_stops_reading_its_replies():
    # Pipelined requests whose replies are never read fill the buffers: the server stops
    # reading and writing, and must drop the client once read_timeout passes (on a
    # virtual clock; the write timer used to be disarmed by the request that filled them).
    from mrtr_asyncio.testing import run as run_virtual

    async def main():
        loop = asyncio.get_running_loop()
        async with serve_http(make_app(), "127.0.0.1", 0, read_timeout=1.0,
                              idle_timeout=3600.0) as server:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window
            sock.setblocking(False)
            await loop.sock_connect(sock, ("127.0.0.1", server.port))
            reader, writer = await asyncio.open_connection(sock=sock)
            one = RawClient().post(call_tool("echo", 1, text="x" * 60_000))
            for _ in range(100):  # replies that are not read for a while
                writer.write(one)
            await asyncio.sleep(60.0)  # virtual: only the server's timers fire
            received = 0
            try:  # now read all there is: a dropped client gets only what was in flight
                while chunk := await reader.read(1 << 20):
                    received += len(chunk)
            except ConnectionResetError:
                pass
            writer.transport.abort()
        return received

    assert run_virtual(main()) < 10 * 60_000  # not the 100 replies a kept client gets
