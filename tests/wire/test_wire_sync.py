"""The sync adapter on real sockets and processes: HTTP client <-> server, stdio."""

from __future__ import annotations

import errno
import io
import json
import os
import socket
import sys
import threading
import types
from pathlib import Path

import pytest
import wire_helpers
from mrtr_sync.http_client import HttpTransport
from mrtr_sync.http_server import serve_http
from mrtr_sync.stdio_client import StdioTransport
from mrtr_sync.stdio_server import serve_stdio
from wire_app import make_app
from wire_helpers import LeftBehind, RawClient, call_tool, request, with_progress_token
from wire_peer import BrokenPeer, self_signed_tls

from mrtr_core.errors import TransportClosedError
from mrtr_core.http import HttpStatusError
from mrtr_core.state import MemoryReplayGuard
from mrtr_core.stdio import ServerExitedError, encode_line

SERVER_SCRIPT = str(Path(__file__).with_name("stdio_app_server.py"))
TIMEOUT = 10.0  # generous: only a broken test ever waits this long
NEVER = 3600.0  # a request timeout no passing test reaches


@pytest.fixture
def gate():
    return threading.Event()


@pytest.fixture
def server(gate):
    srv = serve_http(
        make_app(gate),
        "127.0.0.1",
        0,
        guard=MemoryReplayGuard(),
        read_timeout=2.0,
        idle_timeout=5.0,
    )
    yield srv
    gate.set()
    srv.shutdown()


def text_of(response):
    return response["result"]["content"][0]["text"]


def test_http_loopback_mrtr_round_trip(server):
    with HttpTransport(server.url) as transport:
        first = transport.request(call_tool("confirm", 1, path="a.txt"), timeout=TIMEOUT)
        result = first["result"]
        assert result["resultType"] == "input_required"
        retry = call_tool("confirm", 2, path="a.txt")
        retry["params"]["inputResponses"] = {
            "ok": {"action": "accept", "content": {"confirm": True}}
        }
        retry["params"]["requestState"] = result.get("requestState")
        if retry["params"]["requestState"] is None:
            del retry["params"]["requestState"]
        second = transport.request(retry, timeout=TIMEOUT)
        assert text_of(second) == "deleted a.txt"


def test_http_client_keeps_one_connection_alive():
    with BrokenPeer() as peer, HttpTransport(peer.url) as transport:
        for i in range(5):
            assert transport.request(call_tool("echo", i), timeout=TIMEOUT)["id"] == i
        assert peer.connections == 1


def test_http_server_answers_many_requests_on_one_socket(server):
    client = RawClient()
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
        for i in range(3):
            sock.sendall(client.post(call_tool("echo", i, text=str(i))))
            got = []
            while not got:
                got = client.read(sock.recv(65536))
            assert got[0].json()["id"] == i


def test_http_server_answers_a_reply_it_cannot_encode_with_an_internal_error_and_goes_on(
    monkeypatch,
):
    # A bug in the app must not take the connection down: the request gets -32603 and the
    # next one on the same connection is answered.
    app = make_app(threading.Event())
    wire_helpers.unencodable_reply_to(app, 1, monkeypatch)
    srv = serve_http(app, "127.0.0.1", 0)
    try:
        with HttpTransport(srv.url, max_connections=1) as transport:
            first = transport.request(call_tool("echo", 1, text="a"), timeout=TIMEOUT)
            assert first["error"]["code"] == -32603
            second = transport.request(call_tool("echo", 2, text="b"), timeout=TIMEOUT)
            assert text_of(second) == "b"
    finally:
        srv.shutdown()


def test_http_error_statuses_reach_the_client(server):
    with HttpTransport(server.url) as transport:
        unknown = transport.request(request("nope/nothing", 1), timeout=TIMEOUT)
        assert unknown["error"]["code"] == -32601
        bad_version = call_tool("echo", 2, text="x")
        bad_version["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "1999-01-01"
        assert transport.request(bad_version, timeout=TIMEOUT)["error"]["code"] == -32022


def test_http_error_after_progress_reaches_the_client_as_the_error(server):
    # A handler that reported progress and then failed: the reply is an event stream with
    # the error's own status (400 for -32602), and "Clients MUST handle both" JSON and SSE
    # (digest §3.3 "Server responses"), so the JSON-RPC error is the answer, not a bare 400.
    with HttpTransport(server.url) as transport:
        message = with_progress_token(call_tool("refuse_after_progress", 1))
        answer = transport.request(message, timeout=TIMEOUT)
        assert answer["error"] == {"code": -32602, "message": "refused after progress"}


def test_http_wrong_path_is_a_typed_status_error(server):
    with (
        HttpTransport(server.url.replace("/mcp", "/other")) as transport,
        pytest.raises(HttpStatusError) as info,
    ):
        transport.request(call_tool("echo", 1, text="x"), timeout=TIMEOUT)
    assert info.value.status == 404


def test_http_server_serves_connections_concurrently(server, gate):
    with HttpTransport(server.url) as transport:
        results = {}
        waiter = threading.Thread(
            target=lambda: results.setdefault(
                "wait", transport.request(call_tool("gate_wait", 1), timeout=TIMEOUT)
            )
        )
        waiter.start()
        opened = transport.request(call_tool("gate_open", 2), timeout=TIMEOUT)
        waiter.join(TIMEOUT)
        assert text_of(opened) == "open"
        assert text_of(results["wait"]) == "opened"


def _read_to_the_end(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_http_server_out_of_descriptors_pauses_accepting_instead_of_spinning(gate):
    # accept() failing with EMFILE leaves the listener readable: retrying at once would
    # spin a core until a descriptor is freed. The server waits for a connection to end
    # (or a pause) first, then accepts what is waiting.
    from mrtr_sync.http_server import HttpServer

    srv = HttpServer(make_app(gate), "127.0.0.1", 0)
    real = srv._listener
    calls: list[str] = []
    parked, release = threading.Event(), threading.Event()

    class Exhausted:
        """The listener of a process out of file descriptors, until ``release``."""

        def fileno(self):
            return real.fileno()

        def accept(self):
            calls.append("accept")
            if not release.is_set():
                raise OSError(errno.EMFILE, "Too many open files")
            return real.accept()

        def close(self):
            real.close()

    class Freed(threading.Event):
        def wait(self, timeout=None):
            calls.append("wait")
            parked.set()
            return release.wait(TIMEOUT)

    srv._listener, srv._freed = Exhausted(), Freed()
    srv.start()
    try:
        with HttpTransport(srv.url) as transport:
            answer: dict = {}
            asking = threading.Thread(target=lambda: answer.update(
                transport.request(call_tool("echo", 1, text="hi"), timeout=TIMEOUT)))
            asking.start()
            assert parked.wait(TIMEOUT)
            assert calls == ["accept", "wait"]  # parked after one failure, not retrying
            release.set()
            asking.join(TIMEOUT)
            assert text_of(answer) == "hi"
    finally:
        release.set()
        srv.shutdown()


def test_http_server_times_out_a_stalled_client(gate):
    srv = serve_http(make_app(gate), "127.0.0.1", 0, read_timeout=0.3)
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT) as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            assert _read_to_the_end(sock).startswith(b"HTTP/1.1 408 ")
    finally:
        srv.shutdown()


def test_http_server_answers_408_when_more_of_a_request_comes_after_its_deadline(
    gate, monkeypatch
):
    # Part of a request arrives, then more of it once read_timeout has passed (a clock
    # that jumps after the server has read the first part): the server answers 408
    # instead of closing without a word.
    import mrtr_sync.http_server

    first_read = threading.Event()
    calls = 0

    def monotonic() -> float:
        nonlocal calls
        calls += 1
        if calls == 2:  # the server read the first part and computed its deadline
            first_read.set()
        return 0.0 if calls <= 2 else 100.0

    monkeypatch.setattr(mrtr_sync.http_server, "time", types.SimpleNamespace(monotonic=monotonic))
    srv = serve_http(make_app(gate), "127.0.0.1", 0, read_timeout=5.0)
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT) as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
            assert first_read.wait(TIMEOUT)
            sock.sendall(b"Content-Length: 100\r\n")
            assert _read_to_the_end(sock).startswith(b"HTTP/1.1 408 ")
    finally:
        srv.shutdown()


def test_http_server_drops_a_silent_idle_connection(gate):
    srv = serve_http(make_app(gate), "127.0.0.1", 0, idle_timeout=0.2)
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT) as sock:
            assert sock.recv(4096) == b""
    finally:
        srv.shutdown()


def test_http_broken_client_connection_leaves_others_served(server, gate):
    victim = socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)
    victim.sendall(b'POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"jsonrpc"')
    victim.close()
    with HttpTransport(server.url) as transport:
        assert text_of(transport.request(call_tool("echo", 1, text="ok"), timeout=TIMEOUT)) == "ok"


def test_http_client_timeout_raises_timeout_error(server):
    with HttpTransport(server.url) as transport, pytest.raises(TimeoutError):
        transport.request(call_tool("gate_wait", 1), timeout=0.2)


def test_http_client_reconnects_after_the_server_closed_an_idle_connection():
    with BrokenPeer() as peer, HttpTransport(peer.url) as transport:
        assert transport.request(call_tool("close_after", 1), timeout=TIMEOUT)["id"] == 1
        assert transport.request(call_tool("echo", 2), timeout=TIMEOUT)["id"] == 2
        assert peer.connections == 2


def test_http_broken_connection_fails_only_its_request():
    with BrokenPeer() as peer, HttpTransport(peer.url, max_connections=2) as transport:
        results: dict[str, object] = {}

        def call(name, rid):
            try:
                results[name] = transport.request(call_tool(name, rid), timeout=TIMEOUT)
            except Exception as exc:
                results[name] = exc

        threads = [threading.Thread(target=call, args=a) for a in [("break", 1), ("echo", 2)]]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert isinstance(results["break"], ConnectionError)
        assert results["echo"]["id"] == 2
        assert transport.request(call_tool("echo", 3), timeout=TIMEOUT)["id"] == 3


def test_http_client_reports_a_connect_that_timed_out_as_a_broken_connection():
    # A connect limit is not the caller's time limit: nothing was sent, so the request
    # fails at once as a broken transport instead of waiting out its whole timeout.
    with socket.create_server(("127.0.0.1", 0), backlog=0) as listener:
        port = listener.getsockname()[1]
        fillers = []
        try:
            for _ in range(8):  # fill the accept queue: later SYNs are dropped
                try:
                    fillers.append(socket.create_connection(("127.0.0.1", port), timeout=0.2))
                except TimeoutError:
                    break
            else:
                pytest.fail("the accept queue never filled")
            url = f"http://127.0.0.1:{port}/mcp"
            refused = pytest.raises(ConnectionError, match=r"no connection to .* within 0\.2 s")
            with HttpTransport(url, connect_timeout=0.2) as transport, refused:
                transport.request(call_tool("echo", 1), timeout=TIMEOUT)
        finally:
            for sock in fillers:
                sock.close()


def test_http_client_times_out_a_stalled_server():
    with BrokenPeer() as peer, HttpTransport(peer.url) as transport:
        with pytest.raises(TimeoutError):
            transport.request(call_tool("stall", 1), timeout=0.2)
        assert transport.request(call_tool("echo", 2), timeout=TIMEOUT)["id"] == 2


# -- stdio ---------------------------------------------------------------------------------


@pytest.fixture
def stdio():
    transport = StdioTransport.spawn([sys.executable, SERVER_SCRIPT, "sync"])
    yield transport
    transport.close()


def test_stdio_loopback_round_trip(stdio):
    assert text_of(stdio.request(call_tool("echo", 1, text="hi"), timeout=TIMEOUT)) == "hi"
    first = stdio.request(call_tool("confirm", 2, path="b"), timeout=TIMEOUT)
    assert first["result"]["resultType"] == "input_required"


def test_stdio_requests_interleave_and_route_by_id(stdio):
    results = {}
    waiter = threading.Thread(
        target=lambda: results.setdefault(
            "w", stdio.request(call_tool("gate_wait", "w"), timeout=TIMEOUT)
        )
    )
    waiter.start()
    assert text_of(stdio.request(call_tool("gate_open", "o"), timeout=TIMEOUT)) == "open"
    waiter.join(TIMEOUT)
    assert results["w"]["id"] == "w"


def test_stdio_bad_line_gets_parse_error_response(stdio):
    stdio._stdin.write(b"{not json\n")
    stdio._stdin.flush()
    assert (
        text_of(stdio.request(call_tool("echo", 1, text="still fine"), timeout=TIMEOUT))
        == "still fine"
    )


def test_stdio_crash_fails_in_flight_requests_with_a_typed_error(stdio):
    results = {}
    waiter = threading.Thread(
        target=lambda: results.setdefault("w", _try(stdio, call_tool("gate_wait", 1)))
    )
    waiter.start()
    with pytest.raises(ServerExitedError) as info:
        stdio.request(call_tool("crash", 2), timeout=TIMEOUT)
    waiter.join(TIMEOUT)
    assert isinstance(results["w"], ServerExitedError)
    assert info.value.returncode == 3
    with pytest.raises(ServerExitedError):
        stdio.request(call_tool("echo", 3, text="x"), timeout=TIMEOUT)


def test_stdio_request_after_close_is_a_typed_error():
    transport = StdioTransport.spawn([sys.executable, SERVER_SCRIPT, "sync"])
    assert text_of(transport.request(call_tool("echo", 1, text="x"), timeout=TIMEOUT)) == "x"
    transport.close()
    assert transport.process.returncode == 0
    with pytest.raises(TransportClosedError):  # closed on purpose, not a crash
        transport.request(call_tool("echo", 2, text="y"), timeout=TIMEOUT)


def test_stdio_timeout_sends_cancel_and_the_transport_keeps_working(stdio):
    with pytest.raises(TimeoutError):
        stdio.request(call_tool("gate_wait", 1), timeout=0.2)
    assert text_of(stdio.request(call_tool("echo", 3, text="x"), timeout=TIMEOUT)) == "x"
    stdio.close()
    assert stdio.process.returncode == 0  # exited on EOF without waiting for the cancelled one


def test_stdio_server_honours_a_cancel_in_the_same_read_as_its_request():
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    stdin = io.BytesIO(encode_line(call_tool("gate_wait", 1)) + encode_line(cancel))
    stdout = io.BytesIO()
    serve_stdio(make_app(threading.Event()), stdin=stdin, stdout=stdout)
    assert stdout.getvalue() == b""


def _serve_lines(app, *messages, **options) -> list[dict]:
    """Serve ``messages`` (then end of input) in a thread; the lines written, once it ends."""
    stdin = io.BytesIO(b"".join(encode_line(m) for m in messages))
    stdout = io.BytesIO()
    server = threading.Thread(target=serve_stdio, args=(app,),
                              kwargs={"stdin": stdin, "stdout": stdout, **options}, daemon=True)
    server.start()
    server.join(TIMEOUT)
    assert not server.is_alive(), "the server did not end at end of input"
    return [json.loads(line) for line in stdout.getvalue().splitlines()]


def test_stdio_server_answers_an_id_reused_after_its_cancel_and_not_the_cancelled_one():
    # A client may send an id again once it cancelled it (the sync client retries so after
    # a timeout): the new request is answered, the cancelled one never (cancellation.mdx).
    gate, entered = threading.Event(), threading.Event()
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
    read_end, write_end = os.pipe()
    stdout = io.BytesIO()
    server_stdin = os.fdopen(read_end, "rb")  # the caller's stream: serve_stdio leaves it open
    server = threading.Thread(
        target=serve_stdio, args=(make_app(gate, entered=entered),),
        kwargs={"stdin": server_stdin, "stdout": stdout}, daemon=True)
    server.start()
    try:
        with os.fdopen(write_end, "wb") as stdin:
            stdin.write(encode_line(call_tool("gate_wait", 3)))
            stdin.flush()
            assert entered.wait(TIMEOUT)  # its handler runs: the cancel cannot skip it
            stdin.write(encode_line(cancel) + encode_line(call_tool("echo", 3, text="again")))
        server.join(TIMEOUT)
        assert not server.is_alive(), "the server did not end at end of input"
        lines = [json.loads(line) for line in stdout.getvalue().splitlines()]
    finally:
        gate.set()  # the cancelled handler's thread ends; its answer is dropped
        if not server.is_alive():
            server_stdin.close()
    assert [(line["id"], text_of(line)) for line in lines] == [(3, "again")]


def test_stdio_server_answers_a_handler_that_raised_system_exit_and_goes_on():
    # A worker thread must not die with its request unanswered (at zero workers even end of
    # input would wait forever).
    app = make_app()

    @app.tool(description="Raise SystemExit.")
    def leave(ctx) -> str:
        raise SystemExit(3)

    lines = _serve_lines(app, *[call_tool("leave", i) for i in range(10)],
                         call_tool("echo", 10, text="still here"))
    assert sorted(line["id"] for line in lines) == list(range(11))
    errors = [line["error"]["code"] for line in lines if line["id"] != 10]
    assert errors == [-32603] * 10
    assert [text_of(line) for line in lines if line["id"] == 10] == ["still here"]


def test_stdio_server_answers_a_reply_it_cannot_encode_with_an_internal_error_and_goes_on(
    monkeypatch,
):
    # Its one worker must not die: the next request is still answered.
    app = make_app()
    wire_helpers.unencodable_reply_to(app, 1, monkeypatch)
    lines = _serve_lines(app, call_tool("echo", 1, text="a"), call_tool("echo", 2, text="b"),
                         max_workers=1)
    assert [line["id"] for line in lines] == [1, 2]
    assert lines[0]["error"]["code"] == -32603
    assert text_of(lines[1]) == "b"


def test_stdio_server_answers_in_process_streams():
    stdin = io.BytesIO(encode_line(call_tool("echo", 1, text="a")) + b"[]\n")
    stdout = io.BytesIO()
    serve_stdio(make_app(), stdin=stdin, stdout=stdout)
    lines = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert sorted(line.get("id", 0) for line in lines) == [0, 1]
    assert {line.get("error", {}).get("code") for line in lines} == {None, -32600}


class _ResetStdin:
    """A stdin (a socket, say) that gives some lines, then fails as a reset connection."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read1(self, size: int) -> bytes:
        if not self.data:
            raise ConnectionResetError("connection reset by peer")
        data, self.data = self.data[:size], self.data[size:]
        return data

    read = read1


def test_stdio_server_takes_a_broken_stdin_as_end_of_input():
    # As the trio and asyncio servers do: what was read is answered, then the server returns
    # (digest §3.4: the server exits at end of input) instead of raising the read's error.
    stdout = io.BytesIO()
    serve_stdio(make_app(), stdin=_ResetStdin(encode_line(call_tool("echo", 1, text="a"))),
                stdout=stdout)
    assert [text_of(json.loads(line)) for line in stdout.getvalue().splitlines()] == ["a"]


def test_stdio_close_ends_the_process():
    # Closing stdin is what ends the server (it exits 0 by itself, digest §3.4): the wait
    # before the signals is generous, so a loaded machine cannot turn this into SIGTERM,
    # and the first answer makes sure the server is up and reading before stdin closes.
    transport = StdioTransport.spawn([sys.executable, SERVER_SCRIPT, "sync"],
                                     close_timeout=TIMEOUT)
    assert text_of(transport.request(call_tool("echo", 1, text="x"), timeout=TIMEOUT)) == "x"
    transport.close()
    assert transport.process.returncode == 0


def test_stdio_close_returns_while_a_left_behind_process_holds_stdout(tmp_path):
    # The server exited but a child it started still holds the pipe: the reader thread
    # stays blocked in its read, and close() must not wait on it (it waited for the
    # child to end).
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    env = {**os.environ, "ORPHAN_FIFO": str(fifo)}
    transport = StdioTransport.spawn([sys.executable, SERVER_SCRIPT, "sync"], env=env,
                                     close_timeout=0.1)
    assert transport.process.wait(TIMEOUT) == 3  # exited, its child started
    try:
        closer = threading.Thread(target=transport.close, daemon=True)
        closer.start()
        closer.join(TIMEOUT)
        assert not closer.is_alive()  # the child cannot have ended: it waits for the FIFO
    finally:
        with open(fifo, "w"):  # lets the child read its end and exit
            pass


def test_stdio_server_exit_fails_what_it_left_unanswered_while_a_left_behind_process_holds_stdout(
    tmp_path,
):
    # The server answers the ping, exits without answering the call, and its child keeps
    # stdout open: no end of stdout comes, yet the call fails as soon as the server is gone,
    # and the reply written just before the exit is still delivered.
    left = LeftBehind.in_folder(tmp_path, reads=2)
    transport = StdioTransport.spawn([sys.executable, SERVER_SCRIPT, "sync"], env=left.env,
                                     close_timeout=0.1)
    try:
        results = {}
        callers = [threading.Thread(target=lambda m=message: results.setdefault(
            m["id"], _try(transport, m, timeout=NEVER)), daemon=True)
            for message in (request("ping", "p"), call_tool("echo", "c"))]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(TIMEOUT)
        assert not any(caller.is_alive() for caller in callers), "a request outlived the server"
        assert results["p"]["result"] == {}
        assert isinstance(results["c"], ServerExitedError)
        assert results["c"].returncode == 3 and "exit status 3" in str(results["c"])
        with pytest.raises(ServerExitedError) as later:  # at once: the timeout is only a bound
            transport.request(call_tool("echo", "later"), timeout=TIMEOUT)
        assert later.value.returncode == 3
        closer = threading.Thread(target=transport.close, daemon=True)
        closer.start()
        closer.join(TIMEOUT)
        assert not closer.is_alive()
    finally:
        left.end()


def _try(transport, message, timeout=TIMEOUT):
    try:
        return transport.request(message, timeout=timeout)
    except Exception as exc:
        return exc


def test_http_param_headers_flow_from_tools_list_to_tools_call():
    app = make_app()

    @app.tool(
        description="Echo the region.",
        input_schema={
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"],
        },
    )
    def where(ctx, region: str) -> str:
        return region

    srv = serve_http(app, "127.0.0.1", 0)
    try:
        with HttpTransport(srv.url) as fresh:
            refused = fresh.request(call_tool("where", 1, region="eu"), timeout=TIMEOUT)
            assert refused["error"]["code"] == -32020  # the value is in the body, no header
        with HttpTransport(srv.url) as transport:
            listed = transport.request(request("tools/list", 2), timeout=TIMEOUT)
            assert "where" in [tool["name"] for tool in listed["result"]["tools"]]
            answered = transport.request(call_tool("where", 3, region="Zürich"), timeout=TIMEOUT)
            assert text_of(answered) == "Zürich"
    finally:
        srv.shutdown()


def test_https_retry_opens_a_new_connection_when_idle_ones_went_stale(tmp_path):
    # An idle TLS connection cannot be checked for staleness; when the server closed two
    # of them, the retry must not take the second: it opens a new connection.
    server_tls, client_tls = self_signed_tls(tmp_path)
    with BrokenPeer(tls=server_tls) as peer, HttpTransport(
        peer.url, ssl_context=client_tls, max_connections=2
    ) as transport:
        results = []
        held = [threading.Thread(target=lambda i=i: results.append(transport.request(
            call_tool("held_close_after", i), timeout=TIMEOUT))) for i in (1, 2)]
        for thread in held:
            thread.start()
        with peer.arrived:  # both requests reached the server, each on its own connection
            assert peer.arrived.wait_for(lambda: len(peer.seen) == 2, TIMEOUT)
        peer.release.set()  # both answered, then closed by the server: two stale idle ones
        for thread in held:
            thread.join(TIMEOUT)
        assert len(results) == 2
        assert transport.request(call_tool("echo", 3), timeout=TIMEOUT)["id"] == 3
    assert peer.connections == 3


def test_https_handshake_that_times_out_is_a_broken_connection():
    # A server that accepts but never speaks TLS: the connect limit, not the request's.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        url = f"https://127.0.0.1:{listener.getsockname()[1]}/mcp"
        refused = pytest.raises(ConnectionError, match=r"no connection to .* within 0\.2 s")
        with HttpTransport(url, connect_timeout=0.2) as transport, refused:
            transport.request(call_tool("echo", 1), timeout=TIMEOUT)


class _InterruptedWait(threading.Event):
    """A response event whose wait is ended by a Ctrl-C (``KeyboardInterrupt``)."""

    def wait(self, timeout: float | None = None) -> bool:
        raise KeyboardInterrupt


def test_stdio_request_abandoned_by_ctrl_c_sends_cancel(tmp_path, monkeypatch):
    # digest §2.7: on stdio the client MUST send notifications/cancelled for the request in
    # flight when it gives up on it, whether a timeout or the caller ends the wait.
    import mrtr_sync.stdio_client

    class Pending(mrtr_sync.stdio_client._Pending):
        def __init__(self) -> None:
            super().__init__()
            self.done = _InterruptedWait()

    record = tmp_path / "stdin.jsonl"
    copier = "import sys\nwith open(sys.argv[1], 'wb', buffering=0) as out:\n" \
             "    for line in sys.stdin.buffer:\n        out.write(line)\n"
    transport = StdioTransport.spawn([sys.executable, "-c", copier, str(record)],
                                     close_timeout=TIMEOUT)
    monkeypatch.setattr(mrtr_sync.stdio_client, "_Pending", Pending)
    try:
        with pytest.raises(KeyboardInterrupt):
            transport.request(call_tool("gate_wait", 7), timeout=NEVER)
    finally:
        transport.close()  # the copier ends at end of input, having written every line
    sent = [json.loads(line) for line in record.read_bytes().splitlines()]
    assert [message.get("method") for message in sent] == ["tools/call",
                                                          "notifications/cancelled"]
    assert sent[1]["params"]["requestId"] == 7
