"""The three runtimes' client transports keep what they share in one place: the HTTP
transports' endpoint, configuration and TLS decision (``HttpTransportBase``), the stdio
transports' process checks and request-id check (``StdioTransportBase``,
``StdioClientConnection.send_request``). Each runtime is checked on a real process.

Real processes cannot run on a virtual clock: each async test has one generous overall
timeout and asserts on outcomes only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import mrtr_asyncio
import mrtr_asyncio.http_client
import mrtr_asyncio.stdio_client
import mrtr_asyncio.testing
import mrtr_sync
import mrtr_sync.http_client
import mrtr_sync.stdio_client
import mrtr_trio
import mrtr_trio.http_client
import mrtr_trio.stdio_client
import pytest
import trio
import trio.testing
from wire_helpers import call_tool
from wire_peer import BrokenPeer

from mrtr_core.errors import (
    LocalProtocolError,
    MrtrError,
    RemoteProtocolError,
    TransportClosedError,
    TransportError,
)
from mrtr_core.http import (
    AsyncHttpTransportBase,
    HttpClientConfig,
    HttpClientConnection,
    HttpTransportBase,
    ServerDisconnectedError,
    parse_url,
)
from mrtr_core.stdio import (
    ServerExitedError,
    StdinStalledError,
    StdioTransportBase,
    cancelled_notification,
    encode_line,
)

SERVER_SCRIPT = str(Path(__file__).with_name("stdio_app_server.py"))
LIMIT = 10.0  # generous: only a broken test ever waits this long
NO_STDOUT = [sys.executable, "-c", "import sys; sys.stdin.read()"]
DEAF = [sys.executable, "-c", "import signal; signal.pause()"]  # never reads its stdin

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


class _AnnouncingStdin:
    """A server's stdin that tells when a write begins: the transport asks for its file
    descriptor, under its write lock, to write to it."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.writing = threading.Event()

    def fileno(self) -> int:
        self.writing.set()
        return int(self.stream.fileno())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _blocked_request(transport: Any) -> tuple[threading.Thread, dict[str, BaseException]]:
    """A thread (not started) sending a request larger than any pipe holds, and where the
    error it ends with is put (under ``"error"``)."""
    outcome: dict[str, BaseException] = {}

    def call() -> None:
        try:
            transport.request(call_tool("echo", 1, text="x" * 1_000_000), timeout=LIMIT)
        except Exception as exc:
            outcome["error"] = exc

    return threading.Thread(target=call, daemon=True), outcome


def test_sync_stdio_close_signals_a_server_that_does_not_read_while_a_request_writes():
    # digest §3.4 "Shutdown": close stdin, wait, then SIGTERM and SIGKILL. A request
    # blocked on a full stdin pipe holds stdin; close() goes on to the signals instead of
    # waiting for that write for ever, and the write then fails as the server's exit.
    transport = mrtr_sync.stdio_client.StdioTransport.spawn(DEAF, close_timeout=0.5)
    stdin = transport._stdin = _AnnouncingStdin(transport._stdin)
    requester, outcome = _blocked_request(transport)
    closer = threading.Thread(target=transport.close, daemon=True)
    try:
        requester.start()
        assert stdin.writing.wait(LIMIT)
        closer.start()
        closer.join(LIMIT)
        assert not closer.is_alive(), "close() waited on the blocked write"
        assert transport.process.returncode == -signal.SIGTERM
        requester.join(LIMIT)
        assert isinstance(outcome.get("error"), ServerExitedError)
    finally:
        transport.process.kill()


def test_sync_stdio_close_leaves_no_stdin_open_when_the_blocked_write_fails_late():
    # close() gave up waiting for a blocked write, signalled the server, and looked once
    # more: if the write had not yet failed at that moment, stdin stayed open for good.
    # The write that fails after close() began closes stdin itself.
    transport = mrtr_sync.stdio_client.StdioTransport.spawn(DEAF, close_timeout=0.2)
    stdin = transport._stdin = _AnnouncingStdin(transport._stdin)
    closer = threading.Thread(target=transport.close, daemon=True)
    failed = transport._stdin_closed

    def fail_once_close_returned() -> ServerExitedError:
        closer.join(LIMIT)  # the write's failure comes after close() is done
        return failed()

    transport._stdin_closed = fail_once_close_returned  # type: ignore[method-assign]
    requester, outcome = _blocked_request(transport)
    try:
        requester.start()
        assert stdin.writing.wait(LIMIT)
        closer.start()
        requester.join(LIMIT)
        assert not requester.is_alive() and not closer.is_alive()
        assert isinstance(outcome.get("error"), ServerExitedError)
        assert stdin.stream.closed
    finally:
        transport.process.kill()
        stdin.stream.close()


def _fill(fd: int) -> int:
    """Fill the non-blocking pipe ``fd`` to its last byte with empty lines; how many."""
    filled = 0
    for size in (4096, 1):
        with contextlib.suppress(BlockingIOError):
            while True:
                filled += os.write(fd, b"\n" * size)
    return filled


def _pipe_capacity() -> int:
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(write_end, False)
        return _fill(write_end)
    finally:
        os.close(read_end)
        os.close(write_end)


def _in_a_thread(call: Any) -> Any:
    """What ``call()`` returns or raises, from a thread that must end within LIMIT."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except Exception as exc:
            outcome["value"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(LIMIT)
    assert not thread.is_alive(), "the call blocked"
    return outcome["value"]


def _close_a_deaf_server(transport: Any) -> None:
    try:
        assert _in_a_thread(transport.close) is None
        assert transport.process.returncode == -signal.SIGTERM
    finally:
        transport.process.kill()


def test_sync_stdio_request_timeout_covers_a_write_that_cannot_begin():
    # A server that does not read its stdin held request() for ever: its timeout only
    # began once the line was written. Out of time before any byte went out, the request
    # fails like one that got no response, and the transport stays usable.
    transport = mrtr_sync.stdio_client.StdioTransport.spawn(DEAF, close_timeout=0.1)
    try:
        with transport._write_lock:  # another request's write holds the pipe
            error = _in_a_thread(lambda: transport.request(call_tool("echo", 1), timeout=0.05))
        assert type(error) is TimeoutError
        assert str(error) == "request 1 could not be sent within 0.05 s"
        _fill(transport._stdin.fileno())
        error = _in_a_thread(lambda: transport.request(call_tool("echo", 2), timeout=0.05))
        assert type(error) is TimeoutError
        assert str(error) == "request 2 could not be sent within 0.05 s"
        assert transport._failure is None
        assert transport._pending == {}
    finally:
        _close_a_deaf_server(transport)


def test_sync_stdio_notify_timeout_covers_a_server_that_does_not_read():
    # notify() waited for ever on a server that does not read its stdin; with a timeout it
    # fails before writing anything, and the transport stays usable.
    transport = mrtr_sync.stdio_client.StdioTransport.spawn(DEAF, close_timeout=0.1)
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
    try:
        _fill(transport._stdin.fileno())
        error = _in_a_thread(lambda: transport.notify(note, timeout=0.05))
        assert type(error) is TimeoutError
        assert str(error) == (
            "notification 'notifications/progress' could not be sent within 0.05 s"
        )
        assert transport._failure is None
    finally:
        _close_a_deaf_server(transport)


def test_sync_stdio_request_timeout_on_a_half_written_line_fails_the_transport():
    # digest §3.4: one message per line. Out of time halfway through the line, nothing
    # may follow it on the pipe: the transport fails, and close() still returns.
    transport = mrtr_sync.stdio_client.StdioTransport.spawn(DEAF, close_timeout=0.1)
    try:
        big = call_tool("echo", 1, text="x" * 2_000_000)  # more than any pipe holds
        error = _in_a_thread(lambda: transport.request(big, timeout=0.05))
        assert isinstance(error, StdinStalledError)
        assert str(error) == "the server stopped reading its stdin halfway through a line"
        with pytest.raises(StdinStalledError):
            transport.request(call_tool("echo", 2), timeout=LIMIT)
    finally:
        _close_a_deaf_server(transport)


def test_sync_stdio_cancel_after_a_timeout_waits_for_stdin_no_longer_than_close_timeout():
    # The request fills the pipe to its last byte and gets no answer: its
    # notifications/cancelled finds no room, and is given up after close_timeout.
    transport = mrtr_sync.stdio_client.StdioTransport.spawn(DEAF, close_timeout=0.1)
    try:
        size = _pipe_capacity() - len(encode_line(call_tool("echo", 1, text="")))
        exact = call_tool("echo", 1, text="x" * size)
        error = _in_a_thread(lambda: transport.request(exact, timeout=0.05))
        assert type(error) is TimeoutError
        assert str(error) == "no response to request 1 within 0.05 s"
        assert transport._failure is None
    finally:
        _close_a_deaf_server(transport)


def test_sync_stdio_cancel_waits_for_stdin_until_exactly_close_timeout(monkeypatch):
    # The one rule of the three runtimes: notifications/cancelled waits for stdin to take
    # it for close_timeout seconds from the moment the caller gave up, no more.
    monkeypatch.setattr(mrtr_sync.stdio_client, "time", _FrozenClock(1000.0))
    deadlines: list[float | None] = []

    def full(fd: int, deadline: float | None) -> bool:
        deadlines.append(deadline)
        return False

    monkeypatch.setattr(mrtr_sync.stdio_client, "_wait_writable", full)
    transport = mrtr_sync.stdio_client.StdioTransport.spawn(DEAF, close_timeout=7.0)
    try:
        size = _pipe_capacity() - len(encode_line(call_tool("echo", 1, text="")))
        with pytest.raises(TimeoutError, match="no response to request 1"):
            transport.request(call_tool("echo", 1, text="x" * size), timeout=0.05)
        assert deadlines == [1007.0]  # the line filled the pipe; only the cancel waited
        assert transport._failure is None
    finally:
        transport.close_timeout = 0.1  # close() waits as long for the deaf server
        _close_a_deaf_server(transport)


class _FrozenClock:
    """A ``time`` module whose monotonic clock stands still."""

    def __init__(self, now: float) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now


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


class _PipeProcess:
    """A stdio server whose stdin is a real pipe that the test reads when it likes (or
    never), and whose stdout stays silent."""

    def __init__(self) -> None:
        self.read_end, write_end = os.pipe()
        os.set_blocking(self.read_end, False)
        self.stdin = trio.lowlevel.FdStream(write_end)
        self.stdout = trio.testing.MemoryReceiveStream()

    def poll(self) -> int | None:
        return None

    def fill(self) -> None:
        """Fill the pipe to the last byte, with empty lines."""
        for size in (4096, 1):
            with contextlib.suppress(BlockingIOError):
                while True:
                    os.write(self.stdin.fileno(), b"\n" * size)

    def drain(self) -> bytes:
        """All that is in the pipe now."""
        data = bytearray()
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.read_end, 65536):
                data += chunk
        return bytes(data)

    async def receive(self, size: int) -> bytes:
        """The next ``size`` bytes written to the pipe."""
        data = bytearray()
        while len(data) < size:
            await trio.lowlevel.wait_readable(self.read_end)
            data += os.read(self.read_end, size - len(data))
        return bytes(data)

    async def aclose(self) -> None:
        await self.stdin.aclose()
        os.close(self.read_end)


def _run_on_a_pipe(main: Any) -> None:
    """Run ``main(process, transport)`` on trio's virtual clock over a :class:`_PipeProcess`
    (``close_timeout`` 0.5 s), then close the pipe."""
    process = _PipeProcess()
    transport = mrtr_trio.stdio_client.StdioTransport(process, close_timeout=0.5)

    async def run() -> None:
        try:
            with trio.fail_after(LIMIT):  # virtual seconds
                await main(process, transport)
        finally:
            await process.aclose()

    trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))


BIG = call_tool("echo", 1, text="x" * 2_000_000)  # more than any pipe holds


def test_trio_stdio_never_writes_after_a_cancelled_half_line():
    # digest §3.4: one message per line. A request cancelled while its line was half
    # written left the half on the pipe, and the cancel notification written after it was
    # read as the rest of that line. The write is finished (here it never can be, so the
    # transport fails once close_timeout is spent) and nothing is written after it.
    line = encode_line(BIG)

    async def main(process: _PipeProcess, transport: Any) -> None:
        with trio.move_on_after(0.1) as scope:
            await transport.request(BIG)
        assert scope.cancelled_caught
        assert trio.current_time() == pytest.approx(0.6)
        with pytest.raises(StdinStalledError, match=r"within 0\.5 s"):
            await transport.request(call_tool("echo", 2, text="y"))
        received = process.drain()
        assert 0 < len(received) < len(line)
        assert received == line[: len(received)]

    _run_on_a_pipe(main)


def test_trio_stdio_finishes_a_cancelled_half_line_then_sends_the_cancel():
    line = encode_line(BIG)
    cancel = encode_line(cancelled_notification(1, "cancelled"))

    async def main(process: _PipeProcess, transport: Any) -> None:
        async def read_late() -> None:
            await trio.sleep(0.3)  # after the cancel, before close_timeout is spent
            assert await process.receive(len(line) + len(cancel)) == line + cancel

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_late)
            with trio.move_on_after(0.1) as scope:
                await transport.request(BIG)
            assert scope.cancelled_caught
        assert transport._failure is None

    _run_on_a_pipe(main)


def test_trio_stdio_waits_for_a_slow_reader_as_long_as_the_caller_does():
    # A server busy for longer than close_timeout before it reads its stdin again is no
    # failure: only a cancelled caller's half line is bounded by close_timeout.
    notification = {"jsonrpc": "2.0", "method": "notifications/x", "params": {"p": "x" * 2**21}}
    line = encode_line(notification)

    async def main(process: _PipeProcess, transport: Any) -> None:
        async def read_late() -> None:
            await trio.sleep(5.0)
            assert await process.receive(len(line)) == line

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_late)
            await transport.notify(notification)
        assert trio.current_time() == 5.0
        assert transport._failure is None

    _run_on_a_pipe(main)


def test_trio_stdio_cancelled_before_its_line_began_writes_nothing_and_keeps_working():
    line = encode_line(call_tool("echo", 2, text="y"))

    async def main(process: _PipeProcess, transport: Any) -> None:
        process.fill()
        with trio.move_on_after(0.1) as scope:
            await transport.request(call_tool("echo", 1, text="x"))
        assert scope.cancelled_caught
        assert trio.current_time() == pytest.approx(0.1)
        assert set(process.drain()) == {ord("\n")}  # the filling alone: no line, no cancel
        assert transport._failure is None
        assert transport._pending == {}
        await transport.notify(call_tool("echo", 2, text="y"))
        assert process.drain() == line

    _run_on_a_pipe(main)


def test_trio_stdio_cancel_notification_waits_for_stdin_no_longer_than_close_timeout():
    # The request fills the pipe to its last byte and is cancelled: its
    # notifications/cancelled finds no room and is given up after close_timeout (0.5 s),
    # the one bound all three runtimes use, not after a fixed second.
    size = _pipe_capacity() - len(encode_line(call_tool("echo", 1, text="")))
    exact = call_tool("echo", 1, text="x" * size)

    async def main(process: _PipeProcess, transport: Any) -> None:
        with trio.move_on_after(0.1) as scope:
            await transport.request(exact)
        assert scope.cancelled_caught
        assert trio.current_time() == pytest.approx(0.6)
        assert process.drain() == encode_line(exact)  # the line whole, no part of the cancel
        assert transport._failure is None

    _run_on_a_pipe(main)


def test_trio_stdio_cancel_of_a_half_line_holds_its_caller_no_longer_than_close_timeout():
    # The request's line is twice what the pipe holds, and it is cancelled with half of it
    # out. The server reads that half late (the rest goes out) and then nothing more:
    # finishing the line and offering notifications/cancelled share the one close_timeout
    # (0.5 s) from the cancel, not one each (0.9 s here before).
    capacity = _pipe_capacity()
    size = 2 * capacity - len(encode_line(call_tool("echo", 1, text="")))
    twice = call_tool("echo", 1, text="x" * size)
    line = encode_line(twice)

    async def main(process: _PipeProcess, transport: Any) -> None:
        async def read_late() -> None:
            await trio.sleep(0.4)  # after the cancel, before close_timeout is spent
            assert await process.receive(capacity) == line[:capacity]

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_late)
            with trio.move_on_after(0.1) as scope:
                await transport.request(twice)
            assert scope.cancelled_caught
            assert trio.current_time() == pytest.approx(0.6)
        assert process.drain() == line[capacity:]  # the line whole, no part of the cancel
        assert transport._failure is None

    _run_on_a_pipe(main)


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


class _AsyncioPipeProcess:
    """A stdio server for asyncio whose stdin is a real pipe that the test reads when it
    likes (or never), and whose stdout stays silent."""

    returncode = None

    def __init__(self, read_end: int, stdin: asyncio.StreamWriter) -> None:
        self.read_end = read_end
        self.stdin = stdin
        self.stdout = asyncio.StreamReader()

    @classmethod
    async def open(cls) -> _AsyncioPipeProcess:
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        loop = asyncio.get_running_loop()
        pipe, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()),
            os.fdopen(write_end, "wb", buffering=0),
        )
        return cls(read_end, asyncio.StreamWriter(pipe, protocol, None, loop))

    def buffered(self) -> int:
        """Bytes the transport holds, not yet in the pipe."""
        return self.stdin.transport.get_write_buffer_size()

    async def receive(self, size: int) -> bytes:
        """The next ``size`` bytes written to the pipe."""
        loop = asyncio.get_running_loop()
        data = bytearray()
        while len(data) < size:
            readable = loop.create_future()
            loop.add_reader(self.read_end, readable.set_result, None)
            try:
                await readable
            finally:
                loop.remove_reader(self.read_end)
            data += os.read(self.read_end, size - len(data))
        return bytes(data)

    def close(self) -> None:
        self.stdin.transport.abort()
        os.close(self.read_end)


def _run_asyncio_on_a_pipe(main: Any) -> None:
    """Run ``main(process, transport)`` on a virtual clock over an
    :class:`_AsyncioPipeProcess` (``close_timeout`` 0.5 s), then close the pipe."""

    async def run() -> None:
        process = await _AsyncioPipeProcess.open()
        transport = mrtr_asyncio.stdio_client.StdioTransport(process, close_timeout=0.5)
        try:
            async with asyncio.timeout(LIMIT):  # virtual seconds
                await main(process, transport)
        finally:
            transport._reader.cancel()
            process.close()

    mrtr_asyncio.testing.run(run())


def test_asyncio_stdio_cancelled_while_waiting_for_room_writes_nothing_and_keeps_working():
    # A server that does not read its stdin: the transport holds more than its high-water
    # mark. A request timed out there had its line, and then its notifications/cancelled,
    # added to what the transport holds: each such request grew it for good, and the
    # server was to see a request and a cancel for a round that was never in flight. The
    # request now waits for room before it hands over its line; timed out, it wrote
    # nothing, and the transport stays usable.
    filler = b"\n" * (_pipe_capacity() + 100_000)
    line = encode_line(call_tool("echo", 4, text="y"))

    async def main(process: _AsyncioPipeProcess, transport: Any) -> None:
        loop = asyncio.get_running_loop()
        process.stdin.write(filler)
        held = process.buffered()
        assert held > 0
        for rid in (1, 2, 3):
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.1):
                    await transport.request(call_tool("echo", rid, text="x"))
        assert loop.time() == pytest.approx(0.3)
        assert process.buffered() == held
        assert transport._failure is None
        assert transport._pending == {}
        reading = asyncio.create_task(process.receive(len(filler) + len(line)))
        await transport.notify(call_tool("echo", 4, text="y"))
        assert await reading == filler + line

    _run_asyncio_on_a_pipe(main)


def test_asyncio_stdio_cancel_notification_follows_a_handed_over_line_at_once():
    # A line handed to the transport goes out whole whenever the server reads: the round
    # is in flight, and its notifications/cancelled (digest §2.7) is handed over right
    # behind it. That takes no wait at all, well within close_timeout, even when the
    # server reads nothing.
    line = encode_line(call_tool("echo", 1, text="x"))
    cancel = encode_line(cancelled_notification(1, "cancelled"))
    filler = b"\n" * _pipe_capacity()

    async def main(process: _AsyncioPipeProcess, transport: Any) -> None:
        loop = asyncio.get_running_loop()
        process.stdin.write(filler)  # the pipe is full, the transport holds nothing
        assert process.buffered() == 0
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await transport.request(call_tool("echo", 1, text="x"))
        assert loop.time() == pytest.approx(0.1)
        assert process.buffered() == len(line) + len(cancel)
        assert transport._failure is None
        assert await process.receive(len(filler) + len(line) + len(cancel)) == (
            filler + line + cancel
        )

    _run_asyncio_on_a_pipe(main)


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


def test_a_trio_http_read_of_bytes_already_there_is_a_checkpoint() -> None:
    # A server writing faster than the client reads (102 Processing or keep-alive comments
    # for ever) always has bytes ready: a read that never yields would hold the event loop
    # and never see the caller's timeout.
    ours, theirs = socket.socketpair()
    conn = _idle_connection("trio", ours)
    theirs.sendall(b"HTTP/1.1 102 Processing\r\n\r\n")

    async def main() -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            await conn.receive()  # a cancelled read closes its connection: what it read goes
        assert scope.cancelled_caught

    try:
        trio.run(main)
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


# Reads the first line, writes the first part of its answer and dies with status 3.
DIES_MID_LINE = [
    sys.executable,
    "-c",
    "import os, sys; sys.stdin.buffer.readline();"
    " sys.stdout.buffer.write(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"res'); sys.stdout.flush();"
    " os._exit(3)",
]


def _request_outcome(runtime: str, argv: list[str]) -> BaseException:
    """What one request to the server ``argv`` raised through that runtime's transport."""
    if runtime == "sync":
        with mrtr_sync.stdio_client.StdioTransport.spawn(argv) as transport, pytest.raises(
            MrtrError
        ) as info:
            transport.request(call_tool("echo", 1), timeout=LIMIT)
        return info.value

    async def body(open_stdio: Any) -> BaseException:
        async with open_stdio(argv) as transport:
            with pytest.raises(MrtrError) as info:
                await transport.request(call_tool("echo", 1))
        return info.value

    if runtime == "trio":
        return trio.run(body, mrtr_trio.stdio_client.open_stdio_transport)
    return asyncio.run(body(mrtr_asyncio.stdio_client.open_stdio_transport))


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_a_stdio_server_that_dies_mid_line_fails_its_requests_as_exited(runtime):
    # digest §3.4 "Crash": in-flight requests are lost with the process and may be retried
    # on a new one. Half a line at the end of stdout is that crash, not a framing error.
    error = _request_outcome(runtime, DIES_MID_LINE)
    assert isinstance(error, ServerExitedError)
    assert error.returncode == 3


# -- the server's process group ----------------------------------------------------------------


def _server_group(runtime: str, **spawned: Any) -> tuple[int, int, str]:
    """The spawned server's process id and process group, and its answer to an echo."""
    argv = [sys.executable, SERVER_SCRIPT, runtime]
    echo = call_tool("echo", 1, text="grouped")
    if runtime == "sync":
        with mrtr_sync.stdio_client.StdioTransport.spawn(argv, **spawned) as transport:
            pid = transport.process.pid
            return pid, os.getpgid(pid), text_of(transport.request(echo, timeout=LIMIT))

    async def body(open_stdio: Any) -> tuple[int, int, str]:
        async with open_stdio(argv, **spawned) as transport:
            pid = transport.process.pid
            return pid, os.getpgid(pid), text_of(await transport.request(echo))

    if runtime == "trio":
        return trio.run(body, mrtr_trio.stdio_client.open_stdio_transport)
    return asyncio.run(body(mrtr_asyncio.stdio_client.open_stdio_transport))


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_a_stdio_server_can_run_in_a_process_group_of_its_own(runtime):
    # Out of the terminal's group, Ctrl-C reaches the client alone, which then ends the
    # server itself; by default the server shares the client's group.
    pid, group, answer = _server_group(runtime, process_group=0)
    assert group == pid and answer == "grouped"
    pid, group, answer = _server_group(runtime)
    assert group == os.getpgid(0) != pid and answer == "grouped"


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


# -- closing an HTTP transport ---------------------------------------------------------------


def _wait_until_seen(peer: BrokenPeer, names: list[str]) -> None:
    with peer.arrived:
        assert peer.arrived.wait_for(lambda: peer.seen == names, LIMIT), peer.seen


def _signal_when_blocked(monkeypatch: pytest.MonkeyPatch, name: str) -> threading.Event:
    """An event set once the thread called ``name`` waits on a ``threading.Condition`` (what
    a wait for a free connection comes down to, a semaphore's included). It is set while
    that thread still holds the condition's lock, so what needs the lock happens after."""
    blocked = threading.Event()
    wait = threading.Condition.wait

    def signalling_wait(self: threading.Condition, timeout: float | None = None) -> bool:
        if threading.current_thread().name == name:
            blocked.set()
        return wait(self, timeout)

    monkeypatch.setattr(threading.Condition, "wait", signalling_wait)
    return blocked


def _sync_close_outcomes(peer: BrokenPeer, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    transport = mrtr_sync.http_client.HttpTransport(peer.url, max_connections=1)
    outcomes: dict[str, Any] = {}

    def call(name: str) -> None:
        try:
            outcomes[name] = transport.request(call_tool(name, name), timeout=LIMIT)
        except Exception as exc:
            outcomes[name] = exc

    in_flight = threading.Thread(target=call, args=("stall",))
    in_flight.start()
    _wait_until_seen(peer, ["stall"])
    waiter_blocked = _signal_when_blocked(monkeypatch, "waiter")
    waiter = threading.Thread(target=call, args=("echo",), name="waiter")
    waiter.start()
    assert waiter_blocked.wait(LIMIT)
    transport.close()
    for thread in (in_flight, waiter):
        thread.join(LIMIT)
    try:
        transport.request(call_tool("echo", "after"), timeout=LIMIT)
    except Exception as exc:
        outcomes["after"] = exc
    return outcomes


async def _trio_close_outcomes(peer: BrokenPeer) -> dict[str, Any]:
    outcomes: dict[str, Any] = {}
    with trio.fail_after(LIMIT):
        transport = mrtr_trio.http_client.HttpTransport(peer.url, max_connections=1)

        async def call(name: str) -> None:
            try:
                outcomes[name] = await transport.request(call_tool(name, name))
            except Exception as exc:
                outcomes[name] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, "stall")
            await trio.to_thread.run_sync(_wait_until_seen, peer, ["stall"])
            nursery.start_soon(call, "echo")
            await trio.testing.wait_all_tasks_blocked()  # "echo" waits for the one connection
            assert outcomes == {}
            await transport.aclose()
        try:
            await transport.request(call_tool("echo", "after"))
        except Exception as exc:
            outcomes["after"] = exc
    return outcomes


async def _asyncio_close_outcomes(peer: BrokenPeer) -> dict[str, Any]:
    outcomes: dict[str, Any] = {}
    async with asyncio.timeout(LIMIT):
        transport = mrtr_asyncio.http_client.HttpTransport(peer.url, max_connections=1)
        in_flight = asyncio.create_task(transport.request(call_tool("stall", "stall")))
        await asyncio.to_thread(_wait_until_seen, peer, ["stall"])
        waiter = asyncio.create_task(transport.request(call_tool("echo", "echo")))
        await asyncio.sleep(0)  # the task runs up to its first wait: the one connection
        assert not in_flight.done() and not waiter.done()
        await transport.aclose()
        for name, task in (("stall", in_flight), ("echo", waiter)):
            try:
                outcomes[name] = await task
            except Exception as exc:
                outcomes[name] = exc
        try:
            await transport.request(call_tool("echo", "after"))
        except Exception as exc:
            outcomes["after"] = exc
    return outcomes


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_closing_an_http_transport_fails_what_is_in_flight_or_waiting_and_what_comes_after(
    runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One connection: "stall" holds it at the server (which never answers), "echo" waits
    # for it. Closing the transport fails both at once, and any later request, with the
    # same typed error in every runtime; the waiting request never reaches the server.
    with BrokenPeer() as peer:
        if runtime == "sync":
            outcomes = _sync_close_outcomes(peer, monkeypatch)
        elif runtime == "trio":
            outcomes = trio.run(_trio_close_outcomes, peer)
        else:
            outcomes = asyncio.run(_asyncio_close_outcomes(peer))
        assert peer.seen == ["stall"]
    assert set(outcomes) == {"stall", "echo", "after"}
    for name, outcome in outcomes.items():
        assert isinstance(outcome, TransportClosedError), (name, outcome)
        assert isinstance(outcome, ConnectionError)
        assert "closed" in str(outcome)


def _client_call_outcome(runtime: str, peer: BrokenPeer) -> BaseException:
    """What ``call_tool("stall")`` raised when its client was closed with the call in flight."""
    if runtime == "sync":
        client = mrtr_sync.Client(mrtr_sync.http_client.HttpTransport(peer.url))
        outcome: list[BaseException] = []

        def call() -> None:
            try:
                client.call_tool("stall")
            except BaseException as exc:
                outcome.append(exc)

        caller = threading.Thread(target=call)
        caller.start()
        _wait_until_seen(peer, ["stall"])
        client.close()
        caller.join(LIMIT)
        assert len(outcome) == 1
        return outcome[0]

    async def in_trio() -> BaseException:
        with trio.fail_after(LIMIT):
            client = mrtr_trio.Client(mrtr_trio.http_client.HttpTransport(peer.url))
            outcome: list[BaseException] = []

            async def call() -> None:
                try:
                    await client.call_tool("stall")
                except BaseException as exc:
                    outcome.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await trio.to_thread.run_sync(_wait_until_seen, peer, ["stall"])
                await client.aclose()
            return outcome[0]

    async def in_asyncio() -> BaseException:
        async with asyncio.timeout(LIMIT):
            client = mrtr_asyncio.Client(mrtr_asyncio.http_client.HttpTransport(peer.url))
            call = asyncio.create_task(client.call_tool("stall"))
            await asyncio.to_thread(_wait_until_seen, peer, ["stall"])
            await client.aclose()
            try:
                await call
            except BaseException as exc:
                return exc
            raise AssertionError("the call succeeded")

    if runtime == "trio":
        return trio.run(in_trio)
    return asyncio.run(in_asyncio())


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_closing_a_client_fails_its_call_in_flight_with_the_typed_transport_error(
    runtime: str,
) -> None:
    # The caller of call_tool gets the client's typed error for a broken transport, caused
    # by the transport's closing: not an ExceptionGroup, not a runtime's own exception.
    with BrokenPeer() as peer:
        error = _client_call_outcome(runtime, peer)
    assert type(error) is TransportError, repr(error)
    assert isinstance(error.cause, TransportClosedError)


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_a_request_after_closing_an_http_transport_fails_at_once_with_the_typed_error(
    runtime: str,
) -> None:
    # trio's own ClosedResourceError is an implementation detail: every runtime raises the
    # same error, a ConnectionError as callers of a transport expect for a broken one.
    with BrokenPeer() as peer:
        if runtime == "sync":
            transport = mrtr_sync.http_client.HttpTransport(peer.url)
            assert transport.request(call_tool("echo", 1), timeout=LIMIT)["id"] == 1
            transport.close()
            with pytest.raises(TransportClosedError) as info:
                transport.request(call_tool("echo", 2), timeout=LIMIT)
        else:

            async def body(cls: Any) -> pytest.ExceptionInfo[TransportClosedError]:
                async with cls(peer.url) as transport:
                    assert (await transport.request(call_tool("echo", 1)))["id"] == 1
                with pytest.raises(TransportClosedError) as info:
                    await transport.request(call_tool("echo", 2))
                return info

            if runtime == "trio":
                info = trio.run(body, mrtr_trio.http_client.HttpTransport)
            else:
                info = asyncio.run(body(mrtr_asyncio.http_client.HttpTransport))
        assert peer.seen == ["echo"]
    assert isinstance(info.value, ConnectionError)
    assert str(info.value) == f"the HTTP transport to 127.0.0.1:{peer.port} was closed"
