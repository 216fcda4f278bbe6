"""The trio adapter on real sockets and processes: HTTP client <-> server, stdio.

Real sockets cannot run on a virtual clock, so these tests use trio's real clock with short
timeouts where a timeout is the behaviour under test, and assert on outcomes only.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pytest
import trio
import trio.testing
import wire_helpers
from mrtr_trio.http_client import HttpTransport
from mrtr_trio.http_server import serve_http
from mrtr_trio.stdio_client import open_stdio_transport
from mrtr_trio.stdio_server import serve_stdio
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
    """Run an async test body with a served app: ``test(url, gate, nursery)``."""

    async def main():
        gate = trio.Event()
        app = make_app(gate)
        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(
                    functools.partial(serve_http, app, "127.0.0.1", 0, guard=MemoryReplayGuard())
                )
                await test(f"http://127.0.0.1:{port}/mcp", gate, nursery)
                nursery.cancel_scope.cancel()

    trio.run(main)


def test_http_error_after_progress_reaches_the_client_as_the_error():
    # A handler that reported progress and then failed: the reply is an event stream with
    # the error's own status (400 for -32602), and "Clients MUST handle both" JSON and SSE
    # (digest §3.3 "Server responses"), so the JSON-RPC error is the answer, not a bare 400.
    async def body(url, gate, nursery):
        async with HttpTransport(url) as transport:
            message = with_progress_token(call_tool("refuse_after_progress", 1))
            answer = await transport.request(message)
            assert answer["error"] == {"code": -32602, "message": "refused after progress"}

    run(body)


def test_http_loopback_mrtr_round_trip():
    async def body(url, gate, nursery):
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
    app = make_app(trio.Event())
    wire_helpers.unencodable_reply_to(app, 1, monkeypatch)

    async def main():
        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(functools.partial(serve_http, app, "127.0.0.1", 0))
                url = f"http://127.0.0.1:{port}/mcp"
                async with HttpTransport(url, max_connections=1) as transport:
                    first = await transport.request(call_tool("echo", 1, text="a"))
                    assert first["error"]["code"] == -32603
                    second = await transport.request(call_tool("echo", 2, text="b"))
                    assert text_of(second) == "b"
                nursery.cancel_scope.cancel()

    trio.run(main)


def test_http_error_codes_reach_the_client():
    async def body(url, gate, nursery):
        async with HttpTransport(url) as transport:
            response = await transport.request(request("nope/nothing", 1))
            assert response["error"]["code"] == -32601

    run(body)


def test_http_wrong_path_is_a_typed_status_error():
    async def body(url, gate, nursery):
        async with HttpTransport(url.replace("/mcp", "/x")) as transport:
            with pytest.raises(HttpStatusError) as info:
                await transport.request(call_tool("echo", 1, text="x"))
            assert info.value.status == 404

    run(body)


def test_http_concurrent_requests_use_several_connections():
    async def body(url, gate, nursery):
        results = {}
        async with HttpTransport(url, max_connections=2) as transport:

            async def wait():
                results["wait"] = await transport.request(call_tool("gate_wait", 1))

            async with trio.open_nursery() as inner:
                inner.start_soon(wait)
                results["open"] = await transport.request(call_tool("gate_open", 2))
        assert text_of(results["wait"]) == "opened"
        assert text_of(results["open"]) == "open"

    run(body)


def test_http_server_times_out_a_stalled_client():
    async def main():
        async with trio.open_nursery() as nursery:
            port = await nursery.start(
                functools.partial(serve_http, make_app(), "127.0.0.1", 0, read_timeout=0.3)
            )
            with trio.fail_after(LIMIT):
                async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
                    await stream.send_all(
                        b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{"
                    )
                    data = b""
                    while chunk := await stream.receive_some(4096):
                        data += chunk
            assert data.startswith(b"HTTP/1.1 408 ")
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_http_client_closing_the_connection_cancels_the_handler():
    async def main():
        started, cancelled = trio.Event(), trio.Event()
        app = make_app()

        @app.tool(description="Hold until cancelled.")
        async def hold(ctx: Context) -> str:
            started.set()
            try:
                await trio.sleep_forever()
            finally:
                cancelled.set()

        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(functools.partial(serve_http, app, "127.0.0.1", 0))
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                await stream.send_all(
                    RawClient()
                    .post(call_tool("hold", 1))
                    .replace(b"Mcp-Name: echo", b"Mcp-Name: hold")
                )
                await started.wait()
                await stream.aclose()
                await cancelled.wait()
                nursery.cancel_scope.cancel()

    trio.run(main)


def test_http_client_cancel_scope_times_out_a_stalled_server():
    async def main():
        with BrokenPeer() as peer, trio.fail_after(LIMIT):
            async with HttpTransport(peer.url) as transport:
                with pytest.raises(trio.TooSlowError), trio.fail_after(0.2):
                    await transport.request(call_tool("stall", 1))
                assert (await transport.request(call_tool("echo", 2)))["id"] == 2

    trio.run(main)


def test_http_client_reconnects_after_the_server_closed_an_idle_connection():
    async def main():
        with BrokenPeer() as peer, trio.fail_after(LIMIT):
            async with HttpTransport(peer.url) as transport:
                assert (await transport.request(call_tool("close_after", 1)))["id"] == 1
                assert (await transport.request(call_tool("echo", 2)))["id"] == 2
            assert peer.connections == 2

    trio.run(main)


def test_http_client_keeps_one_connection_alive():
    async def main():
        with BrokenPeer() as peer, trio.fail_after(LIMIT):
            async with HttpTransport(peer.url) as transport:
                for i in range(4):
                    assert (await transport.request(call_tool("echo", i)))["id"] == i
            assert peer.connections == 1

    trio.run(main)


def test_http_broken_connection_fails_only_its_request():
    async def main():
        results = {}
        with BrokenPeer() as peer, trio.fail_after(LIMIT):
            async with HttpTransport(peer.url, max_connections=2) as transport:

                async def call(name, rid):
                    try:
                        results[name] = await transport.request(call_tool(name, rid))
                    except Exception as exc:
                        results[name] = exc

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(call, "break", 1)
                    nursery.start_soon(call, "echo", 2)
                assert (await transport.request(call_tool("echo", 3)))["id"] == 3
        assert isinstance(results["break"], ConnectionError | trio.BrokenResourceError)
        assert results["echo"]["id"] == 2

    trio.run(main)


# -- stdio ---------------------------------------------------------------------------------


def run_stdio(test):
    async def main():
        with trio.fail_after(LIMIT):
            async with open_stdio_transport([sys.executable, SERVER_SCRIPT, "trio"]) as transport:
                await test(transport)

    trio.run(main)


def test_stdio_loopback_round_trip():
    async def body(transport):
        assert text_of(await transport.request(call_tool("echo", 1, text="hi"))) == "hi"
        first = await transport.request(call_tool("confirm", 2, path="b"))
        assert first["result"]["resultType"] == "input_required"

    run_stdio(body)


def test_stdio_requests_interleave_and_route_by_id():
    async def body(transport):
        results = {}

        async def wait():
            results["w"] = await transport.request(call_tool("gate_wait", "w"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            assert text_of(await transport.request(call_tool("gate_open", "o"))) == "open"
        assert results["w"]["id"] == "w"

    run_stdio(body)


def test_stdio_cancelled_request_sends_cancel_and_the_transport_keeps_working():
    async def main():
        with trio.fail_after(LIMIT):
            async with open_stdio_transport([sys.executable, SERVER_SCRIPT, "trio"],
                                            close_timeout=CLOSE_WAIT) as transport:
                with trio.move_on_after(0.2) as scope:
                    await transport.request(call_tool("gate_wait", 1))
                assert scope.cancelled_caught
                assert text_of(await transport.request(call_tool("echo", 2, text="x"))) == "x"
            assert transport.process.returncode == 0  # the handler was cancelled: clean EOF exit

    trio.run(main)


def test_stdio_server_honours_a_cancel_in_the_same_read_as_its_request():
    async def main():
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        to_server, stdin = trio.testing.memory_stream_one_way_pair()
        stdout, from_server = trio.testing.memory_stream_one_way_pair()
        with trio.fail_after(LIMIT):
            await to_server.send_all(encode_line(call_tool("gate_wait", 1)) + encode_line(cancel))
            await to_server.aclose()
            await serve_stdio(make_app(trio.Event()), stdin=stdin, stdout=stdout)
            await stdout.aclose()
            assert await from_server.receive_some() == b""

    trio.run(main)


def test_stdio_server_cancels_every_request_in_flight_under_the_cancelled_id():
    # A bad client sent id 1 twice: after its cancel nothing more goes out for id 1
    # (cancellation.mdx), from either request; the sync server does the same.
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    lines = _serve_lines(make_app(trio.Event()), call_tool("gate_wait", 1),
                         call_tool("gate_wait", 1), cancel, call_tool("gate_open", 2))
    assert [line["id"] for line in lines] == [2]


def _serve_lines(app, *messages) -> list[dict]:
    """Serve ``messages`` (then end of input) from memory; the lines written, once it ends."""

    async def main():
        to_server, stdin = trio.testing.memory_stream_one_way_pair()
        stdout, from_server = trio.testing.memory_stream_one_way_pair()
        written = b""

        async def collect():
            nonlocal written
            while data := await from_server.receive_some():
                written += data

        with trio.fail_after(LIMIT):
            await to_server.send_all(b"".join(encode_line(m) for m in messages))
            await to_server.aclose()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(collect)
                await serve_stdio(app, stdin=stdin, stdout=stdout)
        return [json.loads(line) for line in written.splitlines()]

    return trio.run(main)


def test_stdio_server_answers_a_reply_it_cannot_encode_with_an_internal_error_and_goes_on(
    monkeypatch,
):
    app = make_app(trio.Event())
    wire_helpers.unencodable_reply_to(app, 1, monkeypatch)
    lines = _serve_lines(app, call_tool("echo", 1, text="a"), call_tool("echo", 2, text="b"))
    lines.sort(key=lambda line: line["id"])
    assert [line["id"] for line in lines] == [1, 2]
    assert lines[0]["error"]["code"] == -32603
    assert text_of(lines[1]) == "b"


def test_stdio_crash_fails_in_flight_requests_with_a_typed_error():
    async def body(transport):
        results = {}

        async def wait():
            try:
                results["w"] = await transport.request(call_tool("gate_wait", 1))
            except ServerExitedError as exc:
                results["w"] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            with pytest.raises(ServerExitedError) as info:
                await transport.request(call_tool("crash", 2))
        assert isinstance(results["w"], ServerExitedError)
        assert info.value.returncode == 3
        with pytest.raises(ServerExitedError):
            await transport.request(call_tool("echo", 3, text="x"))

    run_stdio(body)


def test_stdio_errors_leave_the_transport_as_themselves_not_as_a_group():
    # The transport's reader runs in a nursery; what the body raises must still reach
    # the caller as the typed error it is (an ``except ServerExitedError`` must work).
    async def main():
        with trio.fail_after(LIMIT):
            async with open_stdio_transport([sys.executable, SERVER_SCRIPT, "trio"]) as transport:
                await transport.request(call_tool("crash", 1))

    with pytest.raises(ServerExitedError) as info:
        trio.run(main)
    assert info.value.returncode == 3


def test_stdio_server_exit_fails_what_it_left_unanswered_while_a_left_behind_process_holds_stdout(
    tmp_path,
):
    # The server answers the ping, exits without answering the call, and its child keeps
    # stdout open: no end of stdout comes, yet the call fails as soon as the server is gone,
    # and the reply written just before the exit is still delivered.
    left = LeftBehind.in_folder(tmp_path, reads=2)

    async def main():
        results = {}

        async def call(transport, message):
            try:
                results[message["id"]] = await transport.request(message)
            except ServerExitedError as exc:
                results[message["id"]] = exc

        with trio.fail_after(LIMIT):
            async with open_stdio_transport([sys.executable, SERVER_SCRIPT, "trio"],
                                            env=left.env, close_timeout=0.1) as transport:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(call, transport, request("ping", "p"))
                    nursery.start_soon(call, transport, call_tool("echo", "c"))
                assert results["p"]["result"] == {}
                assert isinstance(results["c"], ServerExitedError)
                assert results["c"].returncode == 3 and "exit status 3" in str(results["c"])
                with pytest.raises(ServerExitedError) as later:
                    await transport.request(call_tool("echo", "later"))
                assert later.value.returncode == 3

    try:
        trio.run(main)
    finally:
        left.end()


def test_stdio_close_ends_the_process():
    async def main():
        with trio.fail_after(LIMIT):
            async with open_stdio_transport([sys.executable, SERVER_SCRIPT, "trio"],
                                            close_timeout=CLOSE_WAIT) as transport:
                assert text_of(await transport.request(call_tool("echo", 1, text="x"))) == "x"
            assert transport.process.returncode == 0
            with pytest.raises(TransportClosedError):  # closed on purpose, not a crash
                await transport.request(call_tool("echo", 2, text="y"))

    trio.run(main)


COPY_STDIN = (  # a "server" that only records what it is sent, one line at a time
    "import sys\nwith open(sys.argv[1], 'wb', buffering=0) as out:\n"
    "    for line in sys.stdin.buffer:\n        out.write(line)\n"
)


def test_stdio_request_abandoned_by_ctrl_c_sends_cancel(tmp_path, monkeypatch):
    # digest §2.7: on stdio the client MUST send notifications/cancelled for the request in
    # flight when it gives up on it; trio raises a Ctrl-C in the main task's wait itself.
    import json

    import mrtr_trio.stdio_client

    class InterruptedWait:
        """A response event whose wait is ended by a Ctrl-C."""

        def is_set(self) -> bool:
            return False

        def set(self) -> None:
            pass

        async def wait(self) -> None:
            await trio.lowlevel.checkpoint()
            raise KeyboardInterrupt

    class Pending(mrtr_trio.stdio_client._Pending):
        def __init__(self) -> None:
            super().__init__()
            self.done = InterruptedWait()

    monkeypatch.setattr(mrtr_trio.stdio_client, "_Pending", Pending)
    record = tmp_path / "stdin.jsonl"

    async def main():
        with trio.fail_after(LIMIT):
            async with open_stdio_transport([sys.executable, "-c", COPY_STDIN, str(record)],
                                            close_timeout=LIMIT) as transport:
                with pytest.raises(KeyboardInterrupt):
                    await transport.request(call_tool("gate_wait", 7))

    trio.run(main)
    sent = [json.loads(line) for line in record.read_bytes().splitlines()]
    assert [message.get("method") for message in sent] == ["tools/call",
                                                          "notifications/cancelled"]
    assert sent[1]["params"]["requestId"] == 7
