"""The adapters' HTTP transports and servers refuse bad arguments where they are given.

``max_connections=0`` would make every request wait forever for a connection slot; a
timeout of ``nan`` or below zero would close every connection at once; a port outside
0-65535 fails deep in ``bind``. Each is refused, the same way in every runtime, naming the
argument, before anything is connected or bound.
"""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from typing import Any

import mrtr_asyncio
import mrtr_sync
import mrtr_trio
import pytest
import trio
import trio.testing

from mrtr_core import App, KeyRing, StateCodec
from mrtr_core.errors import LocalProtocolError

URL = "http://127.0.0.1:9/mcp"


def app() -> App:
    ring = KeyRing({"k1": bytes(range(32))}, active="k1")
    return App("srv", "1", codec=StateCodec(ring, audience="srv", nonce=os.urandom))


@pytest.mark.parametrize("transport", [mrtr_sync.HttpTransport, mrtr_trio.HttpTransport,
                                       mrtr_asyncio.HttpTransport])
@pytest.mark.parametrize("max_connections", [0, -1, True, 1.5])
def test_http_transport_refuses_a_bad_max_connections(transport: Any, max_connections: Any) -> None:
    with pytest.raises(ValueError, match="max_connections must be an integer >= 1"):
        transport(URL, max_connections=max_connections)


@pytest.mark.parametrize("connect_timeout", [0, -1.0, float("nan"), "10"])
def test_sync_http_transport_refuses_a_bad_connect_timeout(connect_timeout: Any) -> None:
    with pytest.raises(ValueError, match="connect_timeout must be a positive number of seconds"):
        mrtr_sync.HttpTransport(URL, connect_timeout=connect_timeout)


def _serve_sync(**kwargs: Any) -> None:
    mrtr_sync.serve_http(app(), **kwargs).shutdown()


def _serve_asyncio(**kwargs: Any) -> None:
    mrtr_asyncio.serve_http(app(), **kwargs)


def _serve_trio(**kwargs: Any) -> None:
    async def serve() -> None:
        # Serving starts only when an argument is wrongly accepted; the bound ends that.
        with trio.fail_after(10):
            await mrtr_trio.serve_http(app(), **kwargs)

    trio.run(serve)


BAD_SERVER_ARGUMENTS = [
    ({"port": 70000}, "port must be an integer from 0 to 65535"),
    ({"port": -1}, "port must be an integer from 0 to 65535"),
    ({"max_connections": 0}, "max_connections must be an integer >= 1"),
    ({"read_timeout": 0}, "read_timeout must be a positive number of seconds"),
    ({"read_timeout": float("nan")}, "read_timeout must be a positive number of seconds"),
    ({"idle_timeout": -1.0}, "idle_timeout must be a positive number of seconds"),
]


@pytest.mark.parametrize("serve", [_serve_sync, _serve_asyncio, _serve_trio])
@pytest.mark.parametrize(("kwargs", "message"), BAD_SERVER_ARGUMENTS)
def test_serve_http_refuses_bad_arguments(serve: Any, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        serve(**kwargs)


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request["id"], "result": {}}


CLIENTS = [
    pytest.param(mrtr_sync.Client, mrtr_sync.MemoryTransport, id="sync"),
    pytest.param(mrtr_trio.Client, mrtr_trio.MemoryTransport, id="trio"),
    pytest.param(mrtr_asyncio.Client, mrtr_asyncio.MemoryTransport, id="asyncio"),
]

BAD_CLIENT_ARGUMENTS = [
    ({"limits": {"max_rounds": 3}}, TypeError, "limits must be a ClientLimits or None, not dict"),
    ({"random": 0.5}, TypeError, "random must be a random.Random or None, not float"),
    ({"capabilities": {"roots": {}}}, TypeError,
     "capabilities must be a ClientCapabilities or None, not dict"),
    ({"protocol_version": 20260728}, TypeError, "protocol_version must be a string, not int"),
    ({"auto": "no"}, TypeError, "auto must be True or False, not str"),
    ({"protocol_version": ""}, ValueError, "protocol_version must not be empty"),
]


@pytest.mark.parametrize(("client", "memory"), CLIENTS)
@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_CLIENT_ARGUMENTS)
def test_client_refuses_bad_arguments(
    client: Any, memory: Any, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        client(memory(_answer), **kwargs)


@pytest.mark.parametrize(("client", "memory"), CLIENTS)
@pytest.mark.parametrize("transport", [URL, None])
def test_client_refuses_what_is_not_a_transport(client: Any, memory: Any, transport: Any) -> None:
    # A URL where the transport belongs would fail only at the first call, deep in a flow.
    with pytest.raises(TypeError, match="transport must be a Transport \\(with request and"):
        client(transport)


@pytest.mark.parametrize("max_workers", [0, -2, True, 2.0])
def test_sync_client_refuses_a_bad_max_workers(max_workers: Any) -> None:
    with pytest.raises(ValueError, match="max_workers must be an integer >= 1"):
        mrtr_sync.Client(mrtr_sync.MemoryTransport(_answer), max_workers=max_workers)


@pytest.mark.parametrize("memory", [mrtr_sync.MemoryTransport, mrtr_trio.MemoryTransport,
                                    mrtr_asyncio.MemoryTransport])
@pytest.mark.parametrize("latency", [-0.5, float("nan"), "0.1"])
def test_memory_transport_refuses_a_bad_latency(memory: Any, latency: Any) -> None:
    with pytest.raises(ValueError, match="latency must be a number of seconds >= 0"):
        memory(_answer, latency=latency)


def _through(memory: Any, handler: Any, message: dict[str, Any]) -> Any:
    """What a request through a fresh ``memory(handler)`` transport returns, in its runtime."""
    transport = memory(handler)
    if memory is mrtr_sync.MemoryTransport:
        return transport.request(message)
    if memory is mrtr_trio.MemoryTransport:
        return trio.run(transport.request, message)
    return asyncio.run(transport.request(message))


@pytest.mark.parametrize("memory", [mrtr_sync.MemoryTransport, mrtr_trio.MemoryTransport,
                                    mrtr_asyncio.MemoryTransport])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1, 2}])
def test_memory_transport_refuses_what_no_wire_carries(memory: Any, bad: Any) -> None:
    # "as on a real wire": NaN reached the handler, where every real transport refuses it.
    seen: list[Any] = []

    def handler(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        return {"jsonrpc": "2.0", "id": request["id"], "result": {"v": bad}}

    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"v": bad}}
    with pytest.raises(LocalProtocolError, match="not JSON-serialisable"):
        _through(memory, handler, request)
    assert seen == []
    request["params"] = {}
    with pytest.raises(LocalProtocolError, match="not JSON-serialisable"):
        _through(memory, handler, request)  # nor does an answer carrying it
    assert len(seen) == 1


def _stdio_sync(**kwargs: Any) -> None:
    # Empty stdin: a wrongly accepted argument serves nothing and returns.
    mrtr_sync.serve_stdio(app(), stdin=io.BytesIO(b""), stdout=io.BytesIO(), **kwargs)


def _stdio_trio(**kwargs: Any) -> None:
    async def serve() -> None:
        send, receive = trio.testing.memory_stream_pair()
        await send.aclose()
        with trio.fail_after(10):
            await mrtr_trio.serve_stdio(app(), stdin=receive, stdout=receive, **kwargs)

    trio.run(serve)


def _stdio_asyncio(**kwargs: Any) -> None:
    async def serve() -> None:
        stdin = asyncio.StreamReader()
        stdin.feed_eof()
        async with asyncio.timeout(10):
            await mrtr_asyncio.serve_stdio(app(), stdin=stdin, stdout=_NullWriter(), **kwargs)  # type: ignore[arg-type]

    asyncio.run(serve())


class _NullWriter:
    """Takes what a server would write (nothing, when it refuses its arguments)."""

    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        pass


@pytest.mark.parametrize("serve", [_stdio_sync, _stdio_trio, _stdio_asyncio])
@pytest.mark.parametrize("max_line_bytes", [0, -1, 1.5])
def test_serve_stdio_refuses_a_bad_max_line_bytes(serve: Any, max_line_bytes: Any) -> None:
    with pytest.raises(ValueError, match="max_line_bytes must be an integer >= 1"):
        serve(max_line_bytes=max_line_bytes)


@pytest.mark.parametrize("max_workers", [0, -1, True])
def test_sync_serve_stdio_refuses_a_bad_max_workers(max_workers: Any) -> None:
    # max_workers=0 would start no worker: every request would wait forever.
    with pytest.raises(ValueError, match="max_workers must be an integer >= 1"):
        _stdio_sync(max_workers=max_workers)


class _Started(Exception):
    """What the stand-in for ``subprocess.Popen`` raises: a server process was started."""


def _open_stdio_sync(argv: list[str], **kwargs: Any) -> None:
    mrtr_sync.StdioTransport.spawn(argv, **kwargs).close()


def _open_stdio_trio(argv: list[str], **kwargs: Any) -> None:
    async def open_it() -> None:
        async with mrtr_trio.open_stdio_transport(argv, **kwargs):
            pass

    trio.run(open_it)


def _open_stdio_asyncio(argv: list[str], **kwargs: Any) -> None:
    async def open_it() -> None:
        async with mrtr_asyncio.open_stdio_transport(argv, **kwargs):
            pass

    asyncio.run(open_it())


STDIO_OPENERS = [_open_stdio_sync, _open_stdio_trio, _open_stdio_asyncio]


@pytest.fixture
def no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every runtime starts its server through ``subprocess.Popen``: here that raises
    :class:`_Started` instead, so a test sees whether a process would have been started."""

    def started(*args: Any, **kwargs: Any) -> None:
        raise _Started

    monkeypatch.setattr(subprocess, "Popen", started)


@pytest.mark.parametrize("open_stdio", STDIO_OPENERS)
def test_stdio_transport_starts_its_server_with_good_arguments(
    no_process: None, open_stdio: Any
) -> None:
    with pytest.raises(_Started):
        open_stdio([sys.executable, "-c", "pass"], max_line_bytes=1024, close_timeout=0)


@pytest.mark.parametrize("open_stdio", STDIO_OPENERS)
def test_stdio_transport_refuses_an_unknown_keyword_before_starting_a_server(
    no_process: None, open_stdio: Any
) -> None:
    # A misspelt keyword used to start the server, then fail, leaving the process running.
    with pytest.raises(TypeError, match="close_timeot"):
        open_stdio([sys.executable, "-c", "pass"], close_timeot=1.0)


@pytest.mark.parametrize("open_stdio", STDIO_OPENERS)
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_line_bytes": 0}, "max_line_bytes must be an integer >= 1"),
    ({"max_line_bytes": 1.5}, "max_line_bytes must be an integer >= 1"),
    ({"close_timeout": -1.0}, "close_timeout must be a finite number of seconds >= 0"),
    ({"close_timeout": float("nan")}, "close_timeout must be a finite number of seconds >= 0"),
    ({"close_timeout": float("inf")}, "close_timeout must be a finite number of seconds >= 0"),
    ({"close_timeout": "2"}, "close_timeout must be a finite number of seconds >= 0"),
])
def test_stdio_transport_refuses_a_bad_option_before_starting_a_server(
    no_process: None, open_stdio: Any, kwargs: dict[str, Any], message: str
) -> None:
    # A close_timeout of -1 or nan failed the trio transport's close halfway (nan the sync
    # one's too, inf with an OverflowError), leaving the server running; max_line_bytes=0
    # failed every answer as too long.
    with pytest.raises(ValueError, match=message):
        open_stdio([sys.executable, "-c", "pass"], **kwargs)


@pytest.mark.parametrize("transport", [mrtr_sync.StdioTransport, mrtr_trio.StdioTransport,
                                       mrtr_asyncio.StdioTransport])
def test_stdio_transport_refuses_a_bad_option_for_a_process_started_elsewhere(
    transport: Any
) -> None:
    with pytest.raises(ValueError, match="close_timeout must be a finite number"):
        transport(object(), close_timeout=-1.0)
