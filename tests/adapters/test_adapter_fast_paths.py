"""The adapters' short paths behave as the long ones: plain-function handlers run in the
calling task, coroutine handlers still get tasks of their own, the HTTP client builds the same
request head whether h11 re-checks it or not, and the servers that drive sockets directly
(trio) or as a protocol (asyncio) answer pipelined requests in order."""

from __future__ import annotations

import asyncio
import random
import socket

import h11
import mrtr_asyncio
import mrtr_trio
import pytest
import trio
import trio.testing
from mrtr_asyncio.http_server import serve_http as serve_asyncio
from mrtr_asyncio.testing import run as run_virtual
from mrtr_trio.http_server import serve_http as serve_trio

from mrtr_core.app import App
from mrtr_core.client import ClientLimits
from mrtr_core.errors import HandlerTimeoutError
from mrtr_core.http import HttpClientConfig, HttpClientConnection, parse_url
from mrtr_core.server import Context
from mrtr_core.state import KeyRing, StateCodec
from mrtr_core.testing import ScriptedServer, elicit_form, input_required, sample, tool_result
from mrtr_core.wire import CreateMessageResult, ElicitResult

ASK = input_required({"ok": elicit_form("ok?", {"ok": {"type": "boolean"}})}, state="s1")
ASK_BOTH = input_required(
    {"ok": elicit_form("ok?", {"ok": {"type": "boolean"}}), "llm": sample("hi")}, state="s2"
)
DONE = tool_result("done")
YES = ElicitResult(action="accept", content={"ok": True})
TEXT = CreateMessageResult(role="assistant", content={"type": "text", "text": "x"}, model="m")
LIMIT = 10.0  # generous: only a broken test ever waits this long


# --- plain handlers run in the calling task ---------------------------------------------------


def test_trio_client_runs_a_plain_handler_in_the_calling_task() -> None:
    seen: list[object] = []

    def handler(request: object, key: str) -> ElicitResult:
        seen.append(trio.lowlevel.current_task())
        return YES

    async def main() -> None:
        client = mrtr_trio.Client(
            mrtr_trio.MemoryTransport(ScriptedServer([ASK, DONE])), elicitation=handler
        )
        assert await client.call_tool("t") == DONE
        assert seen == [trio.lowlevel.current_task()]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_trio_client_runs_plain_and_coroutine_handlers_of_one_round() -> None:
    async def write(request: object, key: str) -> CreateMessageResult:
        await trio.sleep(5)
        return TEXT

    async def main() -> float:
        client = mrtr_trio.Client(
            mrtr_trio.MemoryTransport(ScriptedServer([ASK_BOTH, DONE])),
            elicitation=lambda request, key: YES,
            sampling=write,
        )
        assert await client.call_tool("t") == DONE
        return trio.current_time()

    assert trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)) == 5


def test_trio_client_plain_handler_answering_after_its_deadline_times_out() -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)

    def slow(request: object, key: str) -> ElicitResult:
        clock.jump(20)  # the handler took 20 s of the 5 it had
        return YES

    async def main() -> None:
        client = mrtr_trio.Client(
            mrtr_trio.MemoryTransport(ScriptedServer([ASK, DONE])),
            elicitation=slow,
            limits=ClientLimits(handler_timeout=5.0),
        )
        with pytest.raises(HandlerTimeoutError):
            await client.call_tool("t")

    trio.run(main, clock=clock)


def test_asyncio_client_runs_a_plain_handler_in_the_calling_task() -> None:
    seen: list[object] = []

    def handler(request: object, key: str) -> ElicitResult:
        seen.append(asyncio.current_task())
        return YES

    async def main() -> None:
        transport = mrtr_asyncio.MemoryTransport(ScriptedServer([ASK, DONE]))
        async with mrtr_asyncio.Client(transport, elicitation=handler) as client:
            assert await client.call_tool("t") == DONE
        assert seen == [asyncio.current_task()]

    run_virtual(main())


def test_asyncio_client_runs_plain_and_coroutine_handlers_of_one_round() -> None:
    async def write(request: object, key: str) -> CreateMessageResult:
        await asyncio.sleep(5)
        return TEXT

    async def main() -> float:
        transport = mrtr_asyncio.MemoryTransport(ScriptedServer([ASK_BOTH, DONE]))
        async with mrtr_asyncio.Client(
            transport, elicitation=lambda request, key: YES, sampling=write
        ) as client:
            assert await client.call_tool("t") == DONE
        return asyncio.get_running_loop().time()

    assert run_virtual(main()) == 5


# --- the HTTP client's request head -------------------------------------------------------------

MESSAGE = {
    "jsonrpc": "2.0",
    "id": 3,
    "method": "tools/call",
    "params": {
        "name": "dé ploy",
        "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
    },
}


def test_http_client_head_is_the_same_with_configured_or_per_request_headers() -> None:
    endpoint = parse_url("http://127.0.0.1:8000/mcp")
    configured = HttpClientConnection(
        endpoint, HttpClientConfig(headers=(("Authorization", "Bearer t"),))
    )
    per_request = HttpClientConnection(endpoint)
    head = configured.send_request(MESSAGE)
    assert head == per_request.send_request(MESSAGE, headers=(("Authorization", "Bearer t"),))
    assert b"Mcp-Name: =?base64?" in head  # a name that is not plain ASCII goes encoded


def test_http_client_refuses_a_bad_configured_header_before_any_request() -> None:
    # The remembered request heads are never made from a configured header h11 would refuse.
    with pytest.raises(ValueError, match="headers holds an invalid header"):
        HttpClientConfig(headers=(("X-Bad", "line\nbreak"),))


# --- servers: pipelined requests on one connection ----------------------------------------------


def _app() -> App:
    codec = StateCodec(
        KeyRing({"k": bytes(32)}, active="k"), audience="t", nonce=random.Random(1).randbytes
    )
    app = App("fast", "1.0", codec=codec)

    @app.tool(description="Echo the text back.")
    def echo(ctx: Context, text: str) -> str:
        return text

    return app


def _two_requests() -> bytes:
    endpoint = parse_url("http://127.0.0.1:1/mcp")
    out = b""
    for rid, text in ((1, "first"), (2, "second")):
        message = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {
                "name": "echo",
                "arguments": {"text": text},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        out += HttpClientConnection(endpoint).send_request(message)
    return out


def _complete(data: bytes) -> bool:
    return data.count(b"HTTP/1.1 200 ") == 2 and data.endswith(b"}")


def _mirror(conn: h11.Connection) -> None:
    """Tell a client-side h11 connection a request went out (to parse the answer)."""
    conn.send(h11.Request(method="POST", target="/mcp", headers=[("Host", "x")]))
    conn.send(h11.EndOfMessage())


def _answers(data: bytes) -> list[bytes]:
    conn = h11.Connection(h11.CLIENT)
    _mirror(conn)
    conn.receive_data(data)
    bodies: list[bytes] = []
    body = b""
    while True:
        event = conn.next_event()
        if isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            bodies.append(body)
            body = b""
            if len(bodies) == 2:
                return bodies
            conn.start_next_cycle()
            _mirror(conn)
        elif event is h11.NEED_DATA:
            raise AssertionError(f"incomplete answers: {data!r}")


def test_trio_server_answers_pipelined_requests_in_order() -> None:
    async def main() -> bytes:
        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(serve_trio, _app(), "127.0.0.1", 0)
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                await stream.send_all(_two_requests())
                data = b""
                while not _complete(data):
                    data += await stream.receive_some(65536)
                await stream.aclose()
                nursery.cancel_scope.cancel()
        return data

    first, second = _answers(trio.run(main))
    assert b'"first"' in first and b'"id":1' in first
    assert b'"second"' in second and b'"id":2' in second


def test_asyncio_server_answers_pipelined_requests_in_order() -> None:
    async def main() -> bytes:
        async with asyncio.timeout(LIMIT), serve_asyncio(_app(), "127.0.0.1", 0) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(_two_requests())
            data = b""
            while not _complete(data):
                data += await reader.read(65536)
            writer.close()
        return data

    first, second = _answers(asyncio.run(main()))
    assert b'"first"' in first and b'"id":1' in first
    assert b'"second"' in second and b'"id":2' in second


def test_trio_server_drives_plain_tcp_without_a_socket_stream() -> None:
    # The connection's socket is taken out of trio's wrapper: a plain socket client works.
    async def main() -> bytes:
        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(serve_trio, _app(), "127.0.0.1", 0)
                sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                await sock.connect(("127.0.0.1", port))
                await sock.send(_two_requests())
                data = b""
                while not _complete(data):
                    data += await sock.recv(65536)
                sock.close()
                nursery.cancel_scope.cancel()
        return data

    assert len(_answers(trio.run(main))) == 2
