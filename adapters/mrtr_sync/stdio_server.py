"""Serve an :class:`~mrtr_core.app.App` over stdio with blocking reads (digest §3.4).

Lines are read from stdin and each request is answered in a worker thread, so requests may
interleave; responses are written to stdout one whole line at a time. The worker threads
leave SIGINT and SIGTERM to the main thread (see :mod:`mrtr_sync.threads`). The server
returns at end of input after the requests in flight are answered.

Example (the body of a server script)::

    serve_stdio(app)
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from mrtr_core import jsonrpc
from mrtr_core._checks import positive_int
from mrtr_core.app import App, Reply, RunHandler, run_inline
from mrtr_core.app.reply import internal_error_reply, reply_lines
from mrtr_core.jsonrpc import NEED_DATA, RequestId
from mrtr_core.state import claim_verdict
from mrtr_core.stdio import (
    CANCELLED,
    InputEnded,
    MessageReceived,
    MessageRejected,
    StdioServerConnection,
    encode_line,
)
from mrtr_sync.stdout import protocol_stdout
from mrtr_sync.threads import signal_safe_thread

__all__ = ["run_step", "serve_stdio"]

_READ_SIZE = 65536


def run_step(app: App, step: RunHandler, *, clock: Callable[[], float], guard: Any = None) -> Reply:
    """Run one handler step to its reply: claim a single-use state, invoke, complete.

    ``guard`` is a :class:`~mrtr_core.state.ReplayGuard` (required for single-use handlers).
    The time passed to :meth:`App.complete` is read after the handler returns.
    """
    claim = step.run.claim
    if claim is not None:
        if guard is None:
            return app.complete(
                step, clock(), raised=RuntimeError("a single-use handler needs a replay guard")
            )
        if not claim_verdict(guard.claim(claim[0], claim[1], clock())):
            return app.replayed(step)
    try:
        value = step.invoke()
        if inspect.iscoroutine(value):
            value = run_inline(value)
    except Exception as exc:
        return app.complete(step, clock(), raised=exc)
    except BaseException as exc:
        # The engine's "question without an answer yet" is a BaseException on purpose.
        if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
            raise
        return app.complete(step, clock(), raised=exc)
    return app.complete(step, clock(), returned=value)


class _Writer:
    """Whole lines to stdout, one writer at a time; a closed stdout is ignored."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def write(self, line: bytes, wanted: Callable[[], bool] | None = None) -> None:
        """Write one line; ``wanted`` is asked once this writer's turn comes (a reply can
        wait here behind a full pipe, and its request may be cancelled meanwhile)."""
        with self._lock, contextlib.suppress(OSError, ValueError):
            if wanted is not None and not wanted():
                return
            self._stream.write(line)
            self._stream.flush()


class _Job:
    """One request read from stdin: queued or running, and whether the client cancelled it.

    Kept per request, not per id: a client may reuse an id once it has cancelled it (its
    handler thread may still be running), and a bad client may send one id twice."""

    __slots__ = ("cancelled", "event")

    def __init__(self, event: MessageReceived) -> None:
        self.event = event
        self.cancelled = False


def serve_stdio(
    app: App,
    *,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    guard: Any = None,
    clock: Callable[[], float] = time.time,
    principal: str | None = None,
    max_workers: int = 8,
    max_line_bytes: int = jsonrpc.DEFAULT_MAX_MESSAGE_BYTES,
) -> None:
    """Answer requests from ``stdin`` on ``stdout`` until end of input.

    Args:
        app: The app to serve.
        stdin: Binary input (default ``sys.stdin.buffer``).
        stdout: Binary output (default ``sys.stdout.buffer``); only MCP messages go there.
        guard: Replay guard for single-use handlers.
        clock: Wall-clock seconds for ``requestState`` sealing.
        principal: The principal every request runs as (stdio has no per-request identity).
        max_workers: Requests handled at once.
        max_line_bytes: Longest message accepted; longer lines get -32600.
    """
    positive_int("max_workers", max_workers)
    positive_int("max_line_bytes", max_line_bytes)
    if stdout is None:
        # Handlers' print() must not reach the protocol's stdout (digest §3.4).
        with protocol_stdout() as fd, os.fdopen(fd, "wb") as private:
            return serve_stdio(
                app, stdin=stdin, stdout=private, guard=guard, clock=clock,
                principal=principal, max_workers=max_workers, max_line_bytes=max_line_bytes,
            )
    source = stdin if stdin is not None else sys.stdin.buffer
    writer = _Writer(stdout)
    read = getattr(source, "read1", source.read)
    conn = StdioServerConnection(max_line_bytes=max_line_bytes)
    # Requests waiting or running, by id (their threads cannot be stopped: a cancelled one's
    # response is dropped, and end of input does not wait for it).
    jobs: dict[RequestId | None, list[_Job]] = {}
    changed = threading.Condition()
    work: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()

    def is_wanted(job: _Job) -> bool:
        with changed:
            return not job.cancelled

    def answer(event: MessageReceived, job: _Job | None = None) -> None:
        rid = event.request_id
        try:
            step = app.receive(event.message, now=clock(), principal=principal)
            if isinstance(step, RunHandler):
                reply = run_step(app, step, clock=clock, guard=guard)
            else:
                reply = step
        except Exception as exc:
            reply = internal_error_reply(rid, exc)
        except BaseException as exc:  # SystemExit / KeyboardInterrupt from the handler
            # A worker thread must not die silently: the request would never be answered
            # and the pool would shrink (at zero, even end of input waits forever).
            reply = internal_error_reply(rid, exc)
        wanted = None if job is None else functools.partial(is_wanted, job)
        for line in reply_lines(reply, rid):
            writer.write(line, wanted)  # the client cancelled it: no response (cancellation.mdx)

    def worker() -> None:
        while (job := work.get()) is not None:
            rid = job.event.request_id
            try:
                if is_wanted(job):
                    answer(job.event, job)
            finally:
                with changed:
                    alive = jobs.get(rid, [])
                    if job in alive:
                        alive.remove(job)
                    if not alive:
                        jobs.pop(rid, None)
                    changed.notify_all()

    for _ in range(max_workers):
        signal_safe_thread(worker, name="mrtr-stdio-worker").start()
    try:
        while True:
            event = conn.next_event()
            if event is NEED_DATA:
                try:
                    data = read(_READ_SIZE)
                except (OSError, ValueError):  # a broken stdin (a reset socket) ends the
                    data = b""  # input, as in the trio and asyncio servers
                conn.receive_data(data)
            elif isinstance(event, MessageRejected):
                writer.write(encode_line(event.response))
            elif isinstance(event, MessageReceived):
                rid = event.request_id
                if rid is None:
                    if event.parsed.method == CANCELLED:
                        target = (event.parsed.params or {}).get("requestId")
                        if isinstance(target, str | int) and not isinstance(target, bool):
                            with changed:
                                for job in jobs.get(target, ()):
                                    job.cancelled = True
                                changed.notify_all()
                    else:
                        answer(event)  # other notifications: the app answers nothing
                    continue
                job = _Job(event)
                with changed:
                    jobs.setdefault(rid, []).append(job)
                work.put(job)
            elif isinstance(event, InputEnded):
                break
        # End of input: answer what is still wanted, then return (digest §3.4 "Shutdown").
        with changed:
            changed.wait_for(
                lambda: all(job.cancelled for alive in jobs.values() for job in alive)
            )
    finally:
        for _ in range(max_workers):
            work.put(None)
