"""Every thread the sync adapter starts leaves SIGINT and SIGTERM to the main thread, and a
call interrupted while it starts a handler still cancels that handler.

Python runs signal handlers in the main thread only, and a process-directed signal that the
kernel hands to another thread does not wake the main thread from a blocking wait. User code
running in each kind of mrtr_sync thread records the thread's signal mask; both signals must
be blocked there.
"""

from __future__ import annotations

import io
import json
import os
import random
import selectors
import signal
import subprocess
import sys
import threading
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from mrtr_sync import (
    Client,
    HttpServer,
    HttpTransport,
    MemoryTransport,
    StdioTransport,
    SystemClock,
)
from mrtr_sync.stdio_server import serve_stdio
from mrtr_sync.testing import VirtualClock
from mrtr_sync.threads import leave_signals_to_main_thread, signal_safe_thread

from mrtr_core.app import App
from mrtr_core.errors import TransportClosedError, TransportError
from mrtr_core.server import Context, accepted, content, form
from mrtr_core.state import KeyRing, StateCodec
from mrtr_core.testing import ScriptedServer, elicit_form, input_required, tool_result
from mrtr_core.wire import ElicitResult
from mrtr_core.wire.models import PROTOCOL_VERSION

HERE = Path(__file__).resolve().parent
MAIN_THREAD_SIGNALS = {signal.SIGINT, signal.SIGTERM}
LIMIT = 60.0  # a failure bound only: a passing test never waits this long
ASK = input_required({"ok": elicit_form("ok?", {"ok": {"type": "boolean"}})}, state="s1")
DONE = tool_result("done")
YES = ElicitResult(action="accept", content={"ok": True})


def blocked_here() -> set[signal.Signals]:
    """The calling thread's blocked signals (an empty SIG_BLOCK changes nothing)."""
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, []))


def _app(masks: list[set[signal.Signals]]) -> App:
    codec = StateCodec(
        KeyRing({"k": bytes(32)}, active="k"), audience="t", nonce=random.Random(1).randbytes
    )
    app = App("signals", "1.0", codec=codec)

    @app.tool(description="Record the signal mask of the thread serving this call.")
    def mask(ctx: Context) -> str:
        masks.append(blocked_here())
        return "recorded"

    @app.tool(description="Ask for a confirmation.")
    def confirm(ctx: Context) -> str:
        answer = ctx.ask("ok", form("ok?", ok=bool))
        return "yes" if accepted(answer) and content(answer).get("ok") else "no"

    return app


def _call_tool(
    name: str, request_id: int, arguments: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {
            "name": name,
            "arguments": arguments or {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }


# --- the helper ---------------------------------------------------------------------------------


def test_leaving_signals_changes_nothing_in_the_main_thread() -> None:
    assert threading.current_thread() is threading.main_thread()
    before = blocked_here()
    leave_signals_to_main_thread()
    assert blocked_here() == before


def test_a_signal_safe_thread_blocks_the_signals_before_its_target_runs() -> None:
    masks: list[set[signal.Signals]] = []
    thread = signal_safe_thread(lambda tag: masks.append(blocked_here()), "x", name="t")
    assert thread.daemon
    thread.start()
    thread.join(LIMIT)
    assert masks[0] >= MAIN_THREAD_SIGNALS


# --- each kind of thread ----------------------------------------------------------------------


def test_http_server_connection_threads_leave_signals_to_the_main_thread() -> None:
    masks: list[set[signal.Signals]] = []
    with HttpServer(_app(masks)).start() as server, Client(HttpTransport(server.url)) as client:
        client.call_tool("mask")
    [mask] = masks
    assert mask >= MAIN_THREAD_SIGNALS


def test_http_server_accept_thread_leaves_signals_to_the_main_thread() -> None:
    masks: list[set[signal.Signals]] = []

    class Recording(HttpServer):
        def serve_forever(self) -> None:
            masks.append(blocked_here())
            super().serve_forever()

    with Recording(_app([])).start() as server, Client(HttpTransport(server.url)) as client:
        client.call_tool("mask")
    [mask] = masks
    assert mask >= MAIN_THREAD_SIGNALS


def test_client_handler_pool_threads_leave_signals_to_the_main_thread() -> None:
    masks: list[set[signal.Signals]] = []

    def handler(request: object, key: str) -> ElicitResult:
        masks.append(blocked_here())
        return YES

    with HttpServer(_app([])).start() as server, Client(
        HttpTransport(server.url), elicitation=handler
    ) as client:
        assert client.call_tool("confirm")["content"][0]["text"] == "yes"
    [mask] = masks
    assert mask >= MAIN_THREAD_SIGNALS


def test_virtual_clock_pool_threads_leave_signals_to_the_main_thread() -> None:
    masks: list[set[signal.Signals]] = []

    def handler(request: object, key: str) -> ElicitResult:
        masks.append(blocked_here())
        return YES

    clock = VirtualClock()
    transport = MemoryTransport(ScriptedServer([ASK, DONE]), clock=clock)
    with Client(transport, elicitation=handler, clock=clock) as client:
        assert client.call_tool("t") == DONE
    [mask] = masks
    assert mask >= MAIN_THREAD_SIGNALS


def test_stdio_server_workers_leave_signals_to_the_main_thread() -> None:
    masks: list[set[signal.Signals]] = []
    stdin = io.BytesIO(b"".join(json.dumps(_call_tool("mask", i)).encode() + b"\n"
                                for i in (1, 2)))
    stdout = io.BytesIO()
    serve_stdio(_app(masks), stdin=stdin, stdout=stdout, max_workers=2)
    replies = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert sorted(reply["id"] for reply in replies) == [1, 2]
    assert len(masks) == 2
    assert all(mask >= MAIN_THREAD_SIGNALS for mask in masks)


class _RecordingStdout:
    """The server's stdout pipe, noting the mask of the thread that reads it."""

    def __init__(self, pipe: Any, masks: list[set[signal.Signals]]) -> None:
        self._pipe = pipe
        self._masks = masks

    def read1(self, size: int) -> bytes:
        self._masks.append(blocked_here())
        return self._pipe.read1(size)  # type: ignore[no-any-return]

    read = read1

    def fileno(self) -> int:
        return self._pipe.fileno()  # type: ignore[no-any-return]

    def close(self) -> None:
        self._pipe.close()


def test_stdio_transport_reader_thread_leaves_signals_to_the_main_thread() -> None:
    masks: list[set[signal.Signals]] = []
    # A server that reads until its stdin closes, then exits (its stdout ends).
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read()"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    process.stdout = _RecordingStdout(process.stdout, masks)  # type: ignore[assignment]
    transport = StdioTransport(process, close_timeout=LIMIT)
    transport.close()
    assert process.returncode == 0
    assert masks
    assert all(mask >= MAIN_THREAD_SIGNALS for mask in masks)


@pytest.mark.timeout(2 * LIMIT)
def test_a_server_process_stops_on_one_sigterm_while_its_main_thread_sleeps() -> None:
    child = subprocess.Popen([sys.executable, str(HERE / "sync_sigterm_server.py")],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # readiness: the child's own line, no waiting here
        assert line.startswith("ready "), line
        # A kept-alive connection gives the process a connection thread besides the
        # accepting one: either could be handed the signal if it did not block it.
        with HttpTransport(line.split()[1]) as transport:
            reply = transport.request(_call_tool("echo", 1, {"text": "hi"}), timeout=LIMIT)
            assert reply["result"]["content"][0]["text"] == "hi"
            os.kill(child.pid, signal.SIGTERM)  # once
            assert child.wait(LIMIT) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()


# --- a handler started while the call is interrupted is still cancelled -------------------------


class _PoolClock(SystemClock):
    """The real clock, whose handler pool is the one given."""

    def __init__(self, pool: Executor) -> None:
        self._pool = pool

    def executor(self, max_workers: int) -> Executor:
        return self._pool


class _InterruptedSubmit(ThreadPoolExecutor):
    """A pool whose ``submit`` queues the work and then raises (Ctrl-C landing right there);
    with ``after`` set, it raises once that event is set."""

    def __init__(self, *, initializer: Any = None, after: threading.Event | None = None) -> None:
        super().__init__(max_workers=1, initializer=initializer)
        self._after = after

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        super().submit(fn, *args, **kwargs)
        if self._after is not None:
            assert self._after.wait(LIMIT), "the handler did not start"
        raise KeyboardInterrupt


def test_a_handler_submitted_as_the_call_is_interrupted_never_runs() -> None:
    calls: list[str] = []
    gate = threading.Event()  # holds the pool's thread until the call has ended
    pool = _InterruptedSubmit(initializer=gate.wait)

    def handler(request: object, key: str) -> ElicitResult:
        calls.append(key)
        return YES

    client = Client(MemoryTransport(ScriptedServer([ASK, DONE])), elicitation=handler,
                    clock=_PoolClock(pool))
    with pytest.raises(KeyboardInterrupt):
        client.call_tool("t")
    gate.set()
    pool.shutdown(wait=True)
    assert calls == []


def test_a_handler_running_as_the_call_is_interrupted_is_cancelled() -> None:
    started = threading.Event()
    seen: list[bool] = []
    pool = _InterruptedSubmit(after=started)

    def handler(request: object, key: str, cancel: threading.Event) -> ElicitResult:
        started.set()
        seen.append(cancel.wait(LIMIT))
        return YES

    client = Client(MemoryTransport(ScriptedServer([ASK, DONE])), elicitation=handler,
                    clock=_PoolClock(pool))
    with pytest.raises(KeyboardInterrupt):
        client.call_tool("t")
    pool.shutdown(wait=True)
    assert seen == [True]


class _SignallingPool(ThreadPoolExecutor):
    """A one-thread pool held in its initializer by ``gate``; ``queued`` is set once work
    is submitted."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__(max_workers=1, initializer=gate.wait)
        self.queued = threading.Event()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        self.queued.set()
        return future


def _call_in_thread(client: Client) -> tuple[threading.Thread, list[BaseException | None]]:
    """Start ``client.call_tool("t")`` in a thread; the list gets what it raised (or None)."""
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            client.call_tool("t")
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    return caller, outcome


def test_closing_the_client_ends_a_call_whose_handler_was_still_queued() -> None:
    calls: list[str] = []
    gate = threading.Event()
    pool = _SignallingPool(gate)

    def handler(request: object, key: str) -> ElicitResult:
        calls.append(key)
        return YES

    client = Client(MemoryTransport(ScriptedServer([ASK, DONE])), elicitation=handler,
                    clock=_PoolClock(pool))
    caller, outcome = _call_in_thread(client)
    assert pool.queued.wait(LIMIT)
    client.close()  # drops the queued handler
    caller.join(LIMIT)
    gate.set()
    pool.shutdown(wait=True)
    assert calls == []
    # The typed error of a closed client, naming the handler that never ran (not the
    # pool's bare ``concurrent.futures.CancelledError``).
    [error] = outcome
    assert type(error) is TransportError
    assert type(error.cause) is TransportClosedError
    assert str(error.cause) == "the client was closed before the handler for input request 'ok' ran"


def test_closing_the_client_signals_a_running_handler_and_ends_its_call() -> None:
    started = threading.Event()
    seen: list[bool] = []

    def handler(request: object, key: str, cancel: threading.Event) -> ElicitResult:
        started.set()
        seen.append(cancel.wait(LIMIT))  # returns as soon as its cancel signal is set
        return YES

    transport = MemoryTransport(ScriptedServer([ASK, DONE]))
    client = Client(transport, elicitation=handler)
    caller, outcome = _call_in_thread(client)
    assert started.wait(LIMIT)
    client.close()  # the handler is running: its cancel signal is set
    caller.join(LIMIT)
    assert not caller.is_alive()
    assert seen == [True]
    [error] = outcome
    assert type(error) is TransportError
    assert type(error.cause) is TransportClosedError
    assert str(error.cause) == "the client was closed"


class _Announcing(threading.Condition):
    """A future's condition that says when its waiter is about to block."""

    def __init__(self) -> None:
        super().__init__()
        self.blocking = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.blocking.set()
        return super().wait(timeout)


def _trip_when(blocking: threading.Event) -> threading.Thread:
    """A helper thread that marks SIGINT as tripped (``interrupt_main``: no wait is woken)
    once ``blocking`` is set. It can only run once the main thread has blocked: the main
    thread holds the GIL until then."""

    def trip() -> None:
        if blocking.wait(LIMIT):
            import _thread

            _thread.interrupt_main()

    thread = threading.Thread(target=trip, daemon=True)
    thread.start()
    return thread


def test_a_ctrl_c_noted_while_the_main_thread_waits_ends_an_endless_wait() -> None:
    """A person's form may never be answered (no handler time limit), so the client's wait
    may never end by itself. A Ctrl-C noted while the main thread is blocked on a lock (as
    when the signal lands just before it blocks) must still end it: ``interrupt_main``
    marks SIGINT as tripped without waking any wait, so only a wait that wakes by itself
    acts on it. ``LIMIT`` seconds on, the future completes: the wait then returns, which is
    what a lost Ctrl-C looks like."""
    future: Future[Any] = Future()
    condition = future._condition = _Announcing()  # type: ignore[attr-defined]
    helper = _trip_when(condition.blocking)
    timer = threading.Timer(LIMIT, lambda: future.set_result(None))
    timer.daemon = True
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            SystemClock().wait([future], None)
        assert not future.done()  # the interrupt ended the wait, not the future
    finally:
        timer.cancel()
        helper.join(LIMIT)


class _AnnouncingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """The server's selector, saying when it is about to wait for a connection."""

    blocking = threading.Event()

    def select(self, timeout: float | None = None) -> Any:
        type(self).blocking.set()
        return super().select(timeout)


def test_a_signal_noted_while_the_server_waits_for_a_connection_stops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``mrtr serve`` waits for connections in its main thread: a SIGTERM or Ctrl-C noted
    while it blocks (landing just before) must stop it then, not at the next connection
    (``LIMIT`` seconds on, a shutdown from a timer stands for that connection)."""
    import mrtr_sync.http_server

    _AnnouncingSelector.blocking = threading.Event()
    monkeypatch.setattr(mrtr_sync.http_server.selectors, "DefaultSelector", _AnnouncingSelector)
    server = HttpServer(_app([]), "127.0.0.1", 0)
    ended: list[str] = []
    timer = threading.Timer(LIMIT, lambda: (ended.append("timer"), server.shutdown()))
    timer.daemon = True
    helper = _trip_when(_AnnouncingSelector.blocking)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            server.serve_forever()
        assert ended == []  # the interrupt stopped it, not the timer
    finally:
        timer.cancel()
        helper.join(LIMIT)
        server.shutdown()
