"""Serve an :class:`~mrtr_core.app.App` over stdio under trio (digest §3.4).

Each request runs in its own task, so requests interleave; ``notifications/cancelled`` cancels
the request's task and no response is sent for it. At end of input the server waits for the
requests in flight, then returns.

Example::

    trio.run(serve_stdio, app)
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import trio
from mrtr_sync.stdout import protocol_stdout

from mrtr_core import jsonrpc
from mrtr_core._checks import positive_int
from mrtr_core.app import App, Reply, drive_async
from mrtr_core.app.drive_async import internal_error_reply
from mrtr_core.app.reply import reply_lines
from mrtr_core.jsonrpc import NEED_DATA, RequestId
from mrtr_core.stdio import (
    CANCELLED,
    InputEnded,
    MessageReceived,
    MessageRejected,
    StdioServerConnection,
    encode_line,
)

__all__ = ["internal_error_reply", "run_step", "serve_stdio"]

_READ_SIZE = 65536
# Annotated: trio.Cancelled has its own metaclass, so the inferred type would be
# tuple[object, ...] rather than a tuple of exception classes.
_PASS_THROUGH: tuple[type[BaseException], ...] = (*drive_async.EXITS, trio.Cancelled)


run_step = drive_async.step_runner(_PASS_THROUGH)
"""Run one handler step to its reply (:func:`mrtr_core.app.drive_async.run_step`); trio's
cancellation passes through untouched."""


async def serve_stdio(
    app: App,
    *,
    stdin: trio.abc.ReceiveStream | None = None,
    stdout: trio.abc.SendStream | None = None,
    guard: Any = None,
    clock: Callable[[], float] = time.time,
    principal: str | None = None,
    max_line_bytes: int = jsonrpc.DEFAULT_MAX_MESSAGE_BYTES,
) -> None:
    """Answer requests from ``stdin`` on ``stdout`` until end of input.

    Args:
        app: The app to serve.
        stdin: Where requests come from (default: the process's stdin, as a ``FdStream``).
        stdout: Where responses go (default: the process's stdout); only MCP messages.
        guard: Replay guard for single-use handlers (sync or async).
        clock: Wall-clock seconds for ``requestState`` sealing.
        principal: The principal every request runs as.
        max_line_bytes: Longest message accepted; longer lines get -32600.
    """
    positive_int("max_line_bytes", max_line_bytes)
    if stdout is None:
        # Handlers' print() must not reach the protocol's stdout (digest §3.4).
        with protocol_stdout() as fd:
            return await serve_stdio(
                app, stdin=stdin, stdout=trio.lowlevel.FdStream(fd), guard=guard, clock=clock,
                principal=principal, max_line_bytes=max_line_bytes,
            )
    owned: list[trio.abc.AsyncResource] = [stdout]
    if stdin is None:
        stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
        owned.append(stdin)
    source, sink = stdin, stdout
    conn = StdioServerConnection(max_line_bytes=max_line_bytes)
    write_lock = trio.Lock()
    # Requests in flight, by id: a list, as a bad client may send one id twice, and a
    # cancel for that id must silence each of them (cancellation.mdx).
    scopes: dict[RequestId, list[trio.CancelScope]] = {}

    async def write(*lines: bytes) -> None:
        async with write_lock:  # waiting for its turn can be cancelled; writing cannot:
            with trio.CancelScope(shield=True), contextlib.suppress(  # never half a line
                trio.BrokenResourceError, trio.ClosedResourceError
            ):
                for line in lines:
                    await sink.send_all(line)

    async def answer(event: MessageReceived, scope: trio.CancelScope) -> None:
        rid = event.request_id
        # The client's cancel also covers the wait for stdout (a full pipe holds a ready
        # reply back): nothing is sent for it once cancelled.
        try:
            with scope:
                reply: Reply = await drive_async.answer(
                    app, event.message, rid, clock=clock, principal=principal, guard=guard,
                    pass_through=_PASS_THROUGH,
                )
                await write(*reply_lines(reply, rid))
        finally:
            if rid is not None:
                alive = scopes.get(rid, [])
                if scope in alive:
                    alive.remove(scope)
                if not alive:
                    scopes.pop(rid, None)

    try:
        async with trio.open_nursery() as nursery:
            while True:
                event = conn.next_event()
                if event is NEED_DATA:
                    try:
                        data = await source.receive_some(_READ_SIZE)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        data = b""
                    conn.receive_data(data)
                elif isinstance(event, MessageRejected):
                    await write(encode_line(event.response))
                elif isinstance(event, MessageReceived):
                    if event.request_id is None and event.parsed.method == CANCELLED:
                        target = (event.parsed.params or {}).get("requestId")
                        if isinstance(target, str | int) and not isinstance(target, bool):
                            for victim in scopes.get(target, ()):
                                victim.cancel()
                        continue
                    # The scope exists before the task runs: a cancellation that arrives in
                    # the same read as its request still finds it.
                    scope = trio.CancelScope()
                    if event.request_id is not None:
                        scopes.setdefault(event.request_id, []).append(scope)
                    nursery.start_soon(answer, event, scope)
                elif isinstance(event, InputEnded):
                    break
    finally:
        for resource in owned:
            with contextlib.suppress(Exception):
                await resource.aclose()
