"""Connection slots, in each runtime's HTTP server: a full server makes room for a new
connection by closing the oldest one that only waits for its client (between requests, or a
request still arriving), and refuses the new one only when every connection is being
answered. So silent or slow clients cannot keep everyone else out until their timeouts.
And a client that leaves while a request is answered cancels what it pipelined behind it.

Each server runs in a thread of its own (its event loop there) and the clients are plain
blocking sockets; every wait is bounded by ``LIMIT`` and the assertions are on outcomes only.
"""

from __future__ import annotations

import asyncio
import select
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest
import trio
from mrtr_asyncio.http_server import serve_http as serve_asyncio
from mrtr_sync.http_server import serve_http as serve_sync
from mrtr_trio.http_server import serve_http as serve_trio
from wire_app import make_app
from wire_helpers import RawClient, RawResponse, call_tool, mcp_headers

LIMIT = 10.0  # generous: only a broken test ever waits this long


class Served:
    """One runtime's server with ``max_connections`` slots, running in a thread."""

    def __init__(self, runtime: str, max_connections: int) -> None:
        self.port = 0
        self._ready = threading.Event()
        self.entered = threading.Event()  # a gate_wait call is being answered
        self._open_gate: Callable[[], None] = lambda: None
        self._stop: Callable[[], None] = lambda: None
        runner = getattr(self, f"_run_{runtime}")
        self._thread = threading.Thread(target=runner, args=(max_connections,), daemon=True)
        self._thread.start()
        assert self._ready.wait(LIMIT)

    def open_gate(self) -> None:
        """Let every ``gate_wait`` call finish."""
        self._open_gate()

    def close(self) -> None:
        self._stop()
        self._thread.join(LIMIT)

    def _run_sync(self, max_connections: int) -> None:
        gate = threading.Event()
        app = make_app(gate, entered=self.entered)
        server = serve_sync(app, "127.0.0.1", 0, max_connections=max_connections)
        self.port, self._open_gate, self._stop = server.port, gate.set, server.shutdown
        self._ready.set()

    def _run_trio(self, max_connections: int) -> None:
        async def main() -> None:
            gate, stop = trio.Event(), trio.Event()
            token = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as nursery:
                self.port = await nursery.start(
                    lambda task_status: serve_trio(make_app(gate, entered=self.entered),
                                                   "127.0.0.1", 0,
                                                   max_connections=max_connections,
                                                   task_status=task_status)
                )
                self._open_gate = lambda: trio.from_thread.run_sync(gate.set, trio_token=token)
                self._stop = lambda: trio.from_thread.run_sync(stop.set, trio_token=token)
                self._ready.set()
                await stop.wait()
                nursery.cancel_scope.cancel()

        trio.run(main)

    def _run_asyncio(self, max_connections: int) -> None:
        async def main() -> None:
            gate, stop = asyncio.Event(), asyncio.Event()
            loop = asyncio.get_running_loop()
            app = make_app(gate, entered=self.entered)
            async with serve_asyncio(app, "127.0.0.1", 0,
                                     max_connections=max_connections) as server:
                self.port = server.port
                self._open_gate = lambda: loop.call_soon_threadsafe(gate.set)
                self._stop = lambda: loop.call_soon_threadsafe(stop.set)
                self._ready.set()
                await stop.wait()

        asyncio.run(main())


class Client:
    """A blocking keep-alive connection that sends hand-built requests."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=LIMIT)
        self._raw = RawClient()

    def send(self, message: dict[str, Any]) -> None:
        self._raw = RawClient()  # a fresh h11 client per request: one request, one reply
        headers = mcp_headers(name=message["params"]["name"])
        self.sock.sendall(self._raw.post(message, headers))

    def reply(self) -> RawResponse | None:
        """The reply to the request sent last, or ``None`` when the server closed first."""
        while True:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not data:
                return None
            replies = self._raw.read(data)
            if replies:
                return replies[0]

    def closed_by_server(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


def echo(client: Client, text: str) -> RawResponse | None:
    client.send(call_tool("echo", text, text=text))
    return client.reply()


@pytest.fixture(params=["sync", "trio", "asyncio"])
def runtime(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_a_full_server_closes_its_oldest_waiting_connection_for_a_new_one(runtime: str) -> None:
    served = Served(runtime, max_connections=2)
    clients = [Client(served.port) for _ in range(2)]
    try:
        for i, client in enumerate(clients):  # both slots taken, both idle after a reply
            reply = echo(client, f"keep-{i}")
            assert reply is not None and reply.status == 200
        newcomer = Client(served.port)
        clients.append(newcomer)
        reply = echo(newcomer, "new")
        assert reply is not None and reply.status == 200
        assert b'"new"' in reply.body
        # One of the two made room: the oldest, unless its reply's last bytes were still
        # being written when the newcomer came (then it was not yet only waiting).
        readable, _, _ = select.select([c.sock for c in clients[:2]], [], [], LIMIT)
        assert len(readable) == 1
        closed = next(c for c in clients[:2] if c.sock is readable[0])
        assert closed.closed_by_server()
        still = next(c for c in clients[:2] if c is not closed)
        reply = echo(still, "still")  # the other one is still served
        assert reply is not None and reply.status == 200
    finally:
        for client in clients:
            client.close()
        served.close()


def test_a_silent_connection_is_closed_for_a_new_one(runtime: str) -> None:
    served = Served(runtime, max_connections=1)
    silent = Client(served.port)  # never sends a byte
    try:
        first = Client(served.port)
        reply = echo(first, "heard")
        assert reply is not None and reply.status == 200
        assert silent.closed_by_server()
        first.close()
    finally:
        silent.close()
        served.close()


def test_a_server_whose_connections_are_all_being_answered_refuses_a_new_one(
    runtime: str,
) -> None:
    served = Served(runtime, max_connections=1)
    busy = Client(served.port)
    try:
        busy.send(call_tool("gate_wait", 1))
        assert served.entered.wait(LIMIT)
        newcomer = Client(served.port)
        reply = echo(newcomer, "refused")  # the lone slot is answering: no room is made
        newcomer.close()
        assert reply is None
        served.open_gate()
        answered = busy.reply()
        assert answered is not None and b"opened" in answered.body
    finally:
        busy.close()
        served.close()


def test_a_client_leaving_while_a_request_is_answered_cancels_what_it_pipelined(
    runtime: str,
) -> None:
    """Closing is the cancellation on HTTP (digest §2.7), of the request being answered and
    of the one pipelined behind it. The client half-closes (on the wire the same as a close)
    so that it can still read what the server sends before closing. The trio and asyncio
    servers cancel the handler and close; the sync one, whose handler thread cannot be
    stopped, writes that reply once it returns, but starts no handler for the next request."""
    served = Served(runtime, max_connections=2)
    client = Client(served.port)
    try:
        pipelined = RawClient().post(call_tool("echo", 2, text="pipelined"), mcp_headers())
        client.send(call_tool("gate_wait", 1))
        client.sock.sendall(pipelined)
        client.sock.shutdown(socket.SHUT_WR)
        assert served.entered.wait(LIMIT)
        if runtime == "sync":
            served.open_gate()
        received = bytearray()
        while data := client.sock.recv(65536):  # until the server closes (LIMIT bounds it)
            received += data
        served.open_gate()
        assert b"pipelined" not in received
        replies = RawClient().read_pipelined(bytes(received), 1) if received else []
        assert [reply.json()["id"] for reply in replies] == ([1] if runtime == "sync" else [])
    finally:
        client.close()
        served.close()


class _SignallingCondition(threading.Condition):
    """A condition that says when the server starts waiting on it."""

    def __init__(self, lock: Any, waiting: threading.Event) -> None:
        super().__init__(lock)
        self._waiting = waiting

    def wait_for(self, predicate: Callable[[], Any], timeout: float | None = None) -> Any:
        self._waiting.set()
        return super().wait_for(predicate, timeout)


def test_a_connection_whose_thread_has_not_come_back_from_writing_its_reply_makes_room() -> None:
    # The client of the only slot reads its whole reply while the thread that wrote it is
    # still on its way back from the write (parked here until the server waits): a full
    # server must wait for it to finish instead of refusing the newcomer.
    gate = threading.Event()
    server = serve_sync(make_app(gate), "127.0.0.1", 0, max_connections=1)
    accept_waits = threading.Event()
    server._answered = _SignallingCondition(server._lock, accept_waits)
    written = server._send

    def send_then_linger(sock: socket.socket, data: bytes) -> None:
        written(sock, data)
        if b"HTTP/1.1 200" in data:
            accept_waits.wait(LIMIT)

    server._send = send_then_linger  # type: ignore[method-assign]
    first = Client(server.port)
    newcomer = None
    try:
        reply = echo(first, "first")
        assert reply is not None and reply.status == 200
        newcomer = Client(server.port)
        reply = echo(newcomer, "new")
        assert reply is not None and reply.status == 200
        assert accept_waits.is_set()
        assert first.closed_by_server()  # the room was made by closing the first one
    finally:
        first.close()
        if newcomer is not None:
            newcomer.close()
        server.shutdown()
