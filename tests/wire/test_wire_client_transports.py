"""The three runtimes' client transports keep what they share in one place: the HTTP
transports' endpoint, configuration and TLS decision (``HttpTransportBase``), the stdio
transports' process checks and request-id check (``StdioTransportBase``,
``StdioClientConnection.send_request``). Each runtime is checked on a real process.

Real processes cannot run on a virtual clock: each async test has one generous overall
timeout and asserts on outcomes only.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import mrtr_asyncio.http_client
import mrtr_asyncio.stdio_client
import mrtr_sync.http_client
import mrtr_sync.stdio_client
import mrtr_trio.http_client
import mrtr_trio.stdio_client
import pytest
import trio
import trio.testing
from wire_helpers import call_tool
from wire_peer import BrokenPeer

from mrtr_core.errors import LocalProtocolError, MrtrError, RemoteProtocolError
from mrtr_core.http import (
    AsyncHttpTransportBase,
    HttpClientConfig,
    HttpClientConnection,
    HttpTransportBase,
    ServerDisconnectedError,
    parse_url,
)
from mrtr_core.stdio import StdioTransportBase

SERVER_SCRIPT = str(Path(__file__).with_name("stdio_app_server.py"))
LIMIT = 10.0  # generous: only a broken test ever waits this long
NO_STDOUT = [sys.executable, "-c", "import sys; sys.stdin.read()"]

HTTP_TRANSPORTS = [
    mrtr_sync.http_client.HttpTransport,
    mrtr_trio.http_client.HttpTransport,
    mrtr_asyncio.http_client.HttpTransport,
]


def text_of(response):
    return response["result"]["content"][0]["text"]


def bad_id(request_id=True):
    message = call_tool("echo", 1, text="x")
    message["id"] = request_id
    return message


# -- HTTP ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", HTTP_TRANSPORTS, ids=["sync", "trio", "asyncio"])
def test_http_transports_share_the_base(cls):
    assert issubclass(cls, HttpTransportBase)
    assert issubclass(cls, AsyncHttpTransportBase) == (cls is not HTTP_TRANSPORTS[0])


@pytest.mark.parametrize("cls", HTTP_TRANSPORTS, ids=["sync", "trio", "asyncio"])
def test_http_transport_makes_a_default_tls_context_for_https(cls):
    transport = cls("https://127.0.0.1:8443/mcp")
    assert isinstance(transport._ssl, ssl.SSLContext)
    assert cls("http://127.0.0.1:8000/mcp")._ssl is None


@pytest.mark.parametrize("cls", HTTP_TRANSPORTS, ids=["sync", "trio", "asyncio"])
def test_http_transport_keeps_its_endpoint_config_and_registry(cls):
    config = HttpClientConfig(max_depth=8)
    first, second = cls("http://127.0.0.1:8000/mcp", config=config), cls("http://h:1/x")
    assert (first.endpoint.host, first.endpoint.port, first.endpoint.target) == (
        "127.0.0.1",
        8000,
        "/mcp",
    )
    assert first.config is config
    assert second.config == HttpClientConfig()
    assert first.param_headers is not second.param_headers


# -- stdio: sync ---------------------------------------------------------------------------


def test_sync_stdio_refuses_a_bad_request_id_and_keeps_working():
    with mrtr_sync.stdio_client.StdioTransport.spawn([sys.executable, SERVER_SCRIPT, "sync"]) as t:
        assert isinstance(t, StdioTransportBase)
        with pytest.raises(LocalProtocolError, match="a request needs a string or integer id"):
            t.request(bad_id(), timeout=LIMIT)
        assert t._pending == {}
        assert text_of(t.request(call_tool("echo", 1, text="x"), timeout=LIMIT)) == "x"


def test_sync_stdio_needs_both_pipes():
    process = subprocess.Popen(NO_STDOUT, stdin=subprocess.PIPE)
    try:
        with pytest.raises(ValueError, match="needs stdin and stdout pipes"):
            mrtr_sync.stdio_client.StdioTransport(process)
    finally:
        process.stdin.close()
        process.wait(LIMIT)


# -- stdio: trio ---------------------------------------------------------------------------


def test_trio_stdio_refuses_a_bad_or_in_flight_request_id_and_keeps_working():
    async def main():
        with trio.fail_after(LIMIT):
            async with mrtr_trio.stdio_client.open_stdio_transport(
                [sys.executable, SERVER_SCRIPT, "trio"]
            ) as transport:
                assert isinstance(transport, StdioTransportBase)
                with pytest.raises(LocalProtocolError, match="string or integer id"):
                    await transport.request(bad_id(1.5))
                results = {}

                async def wait():
                    results["w"] = await transport.request(call_tool("gate_wait", "w"))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(wait)
                    await trio.testing.wait_all_tasks_blocked()
                    with pytest.raises(LocalProtocolError, match="'w' is already in flight"):
                        await transport.request(call_tool("echo", "w", text="x"))
                    assert text_of(await transport.request(call_tool("gate_open", "o"))) == "open"
                assert results["w"]["id"] == "w"

    trio.run(main)


def test_trio_stdio_needs_both_pipes():
    async def main():
        with trio.fail_after(LIMIT):
            process = await trio.lowlevel.open_process(NO_STDOUT, stdin=subprocess.PIPE)
            try:
                with pytest.raises(ValueError, match="needs stdin and stdout pipes"):
                    mrtr_trio.stdio_client.StdioTransport(process)
            finally:
                await process.stdin.aclose()
                await process.wait()

    trio.run(main)


# -- stdio: asyncio ------------------------------------------------------------------------


def test_asyncio_stdio_refuses_a_bad_or_in_flight_request_id_and_keeps_working():
    async def main():
        async with (
            asyncio.timeout(LIMIT),
            mrtr_asyncio.stdio_client.open_stdio_transport(
                [sys.executable, SERVER_SCRIPT, "asyncio"]
            ) as transport,
        ):
            assert isinstance(transport, StdioTransportBase)
            with pytest.raises(LocalProtocolError, match="string or integer id"):
                await transport.request(bad_id(None))
            waiting = asyncio.create_task(transport.request(call_tool("gate_wait", "w")))
            await asyncio.sleep(0)  # the task runs up to its first wait: "w" is in flight
            with pytest.raises(LocalProtocolError, match="'w' is already in flight"):
                await transport.request(call_tool("echo", "w", text="x"))
            assert text_of(await transport.request(call_tool("gate_open", "o"))) == "open"
            assert (await waiting)["id"] == "w"

    asyncio.run(main())


def test_asyncio_stdio_needs_both_pipes():
    async def main():
        async with asyncio.timeout(LIMIT):
            process = await asyncio.create_subprocess_exec(*NO_STDOUT, stdin=subprocess.PIPE)
            try:
                with pytest.raises(ValueError, match="needs stdin and stdout pipes"):
                    mrtr_asyncio.stdio_client.StdioTransport(process)
            finally:
                process.stdin.close()
                await process.wait()

    asyncio.run(main())


# -- idle HTTP connections ---------------------------------------------------------------------


def _idle_connection(runtime: str, sock: socket.socket) -> Any:
    http = HttpClientConnection(parse_url("http://127.0.0.1:1/mcp"))
    if runtime == "sync":
        return mrtr_sync.http_client._Connection(sock, http)
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
    return mrtr_trio.http_client._Connection(stream, http)


@pytest.mark.parametrize("runtime", ["sync", "trio"])
@pytest.mark.parametrize("peer_does", ["close", "write", "nothing"])
def test_an_idle_http_connection_is_stale_once_the_server_closed_or_wrote_to_it(
    runtime: str, peer_does: str
) -> None:
    # A server may write a 408 on an idle connection before closing it: a connection with
    # anything to read cannot carry the next request (it would read that as the answer).
    # (asyncio's protocol marks bytes that came with no request outstanding instead.)
    ours, theirs = socket.socketpair()
    conn = _idle_connection(runtime, ours)
    try:
        assert not conn.stale()
        if peer_does == "close":
            theirs.close()
        elif peer_does == "write":
            theirs.sendall(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
        assert conn.stale() is (peer_does != "nothing")
        assert conn.stale() is (peer_does != "nothing")  # the check reads nothing
    finally:
        conn.sock.close()
        theirs.close()


# -- a stdio server that breaks the framing ---------------------------------------------------

# Answers the first line it reads with one line far over the limit (and over a pipe's
# buffer), then exits 0 once its stdin ends.
OVERSIZED = [
    sys.executable,
    "-c",
    "import sys; sys.stdin.buffer.readline();"
    " sys.stdout.buffer.write(b'x' * 1_000_000 + b'\\n'); sys.stdout.flush();"
    " sys.stdin.buffer.read()",
]


def _after_a_framing_error(runtime: str) -> tuple[type[BaseException], int | None]:
    """What the request raised, and the server's exit status once the transport closed."""
    opened: dict[str, Any] = {"max_line_bytes": 1000, "close_timeout": LIMIT}
    if runtime == "sync":
        transport = mrtr_sync.stdio_client.StdioTransport.spawn(OVERSIZED, **opened)
        with transport, pytest.raises(MrtrError) as info:
            transport.request(call_tool("echo", 1), timeout=LIMIT)
        return type(info.value), transport.process.returncode

    async def body(open_stdio: Any) -> tuple[type[BaseException], int | None]:
        async with open_stdio(OVERSIZED, **opened) as transport:
            with pytest.raises(MrtrError) as info:
                await transport.request(call_tool("echo", 1))
        return type(info.value), transport.process.returncode

    if runtime == "trio":
        return trio.run(body, mrtr_trio.stdio_client.open_stdio_transport)
    return asyncio.run(body(mrtr_asyncio.stdio_client.open_stdio_transport))


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_a_stdio_server_that_broke_the_framing_is_read_to_its_end_and_exits(runtime):
    # The rest of its output is read and dropped, so the server is never left blocked on
    # a full pipe: it sees its stdin close and exits by itself, without a signal.
    error, returncode = _after_a_framing_error(runtime)
    assert issubclass(error, RemoteProtocolError)
    assert returncode == 0


# -- stdio servers keep stdout for the protocol ------------------------------------------------


def _stdio_request(runtime: str, message: dict[str, Any]) -> Any:
    """One request to ``stdio_app_server.py RUNTIME`` through that runtime's transport."""
    argv = [sys.executable, SERVER_SCRIPT, runtime]
    if runtime == "sync":
        with mrtr_sync.stdio_client.StdioTransport.spawn(argv) as transport:
            return transport.request(message, timeout=LIMIT)

    async def body(open_stdio: Any) -> Any:
        async with open_stdio(argv) as transport:
            return await transport.request(message)

    if runtime == "trio":
        return trio.run(body, mrtr_trio.stdio_client.open_stdio_transport)
    return asyncio.run(body(mrtr_asyncio.stdio_client.open_stdio_transport))


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_what_a_handler_prints_never_reaches_the_protocol_stdout(runtime: str) -> None:
    # digest §3.4: nothing but MCP messages on stdout. The print goes to stderr instead of
    # breaking the client's framing (which would fail every request on the transport).
    response = _stdio_request(runtime, call_tool("chatty", 1))
    assert response["result"]["content"][0]["text"] == "quiet"


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_a_stdio_server_with_stdin_at_dev_null_exits_at_once(runtime: str) -> None:
    # A supervisor may start a server with stdin=DEVNULL: that is end of input (§3.4).
    process = subprocess.Popen([sys.executable, SERVER_SCRIPT, runtime],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        out, _ = process.communicate(timeout=LIMIT)
    finally:
        process.kill()
    assert process.returncode == 0
    assert out == b""


# -- a request the server has received is never sent again -----------------------------------


def _second_request_fails(runtime: str, url: str) -> BaseException:
    """``echo`` then ``partial_reset`` on one keep-alive transport; what the second raised."""
    first, second = call_tool("echo", 1), call_tool("partial_reset", 2)
    if runtime == "sync":
        with mrtr_sync.http_client.HttpTransport(url) as transport:
            transport.request(first, timeout=LIMIT)
            with pytest.raises(Exception) as info:
                transport.request(second, timeout=LIMIT)
            return info.value

    async def body(cls: Any) -> BaseException:
        async with cls(url) as transport:
            await transport.request(first)
            with pytest.raises(Exception) as info:
                await transport.request(second)
            return info.value

    if runtime == "trio":
        return trio.run(body, mrtr_trio.http_client.HttpTransport)
    return asyncio.run(body(mrtr_asyncio.http_client.HttpTransport))


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_a_reset_after_the_response_began_is_not_retried(runtime: str) -> None:
    # A reused connection reset before any byte of the answer is retried on a new one (the
    # request may never have arrived); once the answer has begun, the server has the
    # request, and sending it again could run its effects twice.
    with BrokenPeer() as peer:
        error = _second_request_fails(runtime, peer.url)
    assert peer.seen == ["echo", "partial_reset"]
    assert isinstance(error, OSError | trio.BrokenResourceError | ServerDisconnectedError)
