"""Serve an :class:`~mrtr_core.app.App` over stdio under asyncio (digest §3.4).

Each request runs in its own task, so requests interleave; ``notifications/cancelled`` cancels
the request's task and no response is sent for it. At end of input the server waits for the
requests in flight, then returns.

Example::

    asyncio.run(serve_stdio(app))
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import stat
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mrtr_sync.stdout import protocol_stdout

from mrtr_core import jsonrpc
from mrtr_core._checks import positive_int
from mrtr_core.app import App, drive_async
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
_PASS_THROUGH: tuple[type[BaseException], ...] = (*drive_async.EXITS, asyncio.CancelledError)


run_step = drive_async.step_runner(_PASS_THROUGH)
"""Run one handler step to its reply (:func:`mrtr_core.app.drive_async.run_step`); asyncio's
cancellation passes through untouched."""


async def _pipe_reader(fd: int) -> Callable[[], Awaitable[bytes]]:
    """Read from ``fd`` via the loop when it is a pipe, else in a thread (a regular file)."""
    loop = asyncio.get_running_loop()
    stream = os.fdopen(os.dup(fd), "rb", buffering=0)
    # Only pipes and sockets can be polled for sure. connect_read_pipe also takes a character
    # device, but /dev/null (a supervisor's stdin=DEVNULL) cannot be registered with epoll;
    # the error surfaces in a loop callback, not here, and the read would never finish.
    mode = os.fstat(stream.fileno()).st_mode
    try:
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            raise ValueError("not a pipe or a socket")
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stream)
    except (ValueError, OSError):

        async def read_in_thread() -> bytes:
            return await asyncio.to_thread(stream.read, _READ_SIZE) or b""

        return read_in_thread

    async def read() -> bytes:
        return await reader.read(_READ_SIZE)

    return read


async def _pipe_writer(fd: int) -> Callable[[bytes], Awaitable[None]]:
    """Write to ``fd`` via the loop when it is a pipe, else in a thread."""
    loop = asyncio.get_running_loop()
    stream = os.fdopen(os.dup(fd), "wb", buffering=0)
    try:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, stream
        )
    except (ValueError, OSError):

        async def write_in_thread(data: bytes) -> None:
            await asyncio.to_thread(stream.write, data)

        return write_in_thread
    writer = asyncio.StreamWriter(transport, protocol, None, loop)

    async def write(data: bytes) -> None:
        writer.write(data)
        await writer.drain()

    return write


async def serve_stdio(
    app: App,
    *,
    stdin: asyncio.StreamReader | None = None,
    stdout: asyncio.StreamWriter | None = None,
    guard: Any = None,
    clock: Callable[[], float] = time.time,
    principal: str | None = None,
    max_line_bytes: int = jsonrpc.DEFAULT_MAX_MESSAGE_BYTES,
) -> None:
    """Answer requests from ``stdin`` on ``stdout`` until end of input.

    Args:
        app: The app to serve.
        stdin: Where requests come from (default: the process's stdin through the loop).
        stdout: Where responses go (default: the process's stdout); only MCP messages.
        guard: Replay guard for single-use handlers (sync or async).
        clock: Wall-clock seconds for ``requestState`` sealing.
        principal: The principal every request runs as.
        max_line_bytes: Longest message accepted; longer lines get -32600.
    """
    positive_int("max_line_bytes", max_line_bytes)
    read: Callable[[], Awaitable[bytes]]
    if stdin is not None:
        read = functools.partial(stdin.read, _READ_SIZE)
    else:
        read = await _pipe_reader(sys.stdin.fileno())
    if stdout is None:
        # Handlers' print() must not reach the protocol's stdout (digest §3.4).
        with protocol_stdout() as fd:
            try:
                send = await _pipe_writer(fd)
                return await _serve(app, read, send, guard, clock, principal, max_line_bytes)
            finally:
                os.close(fd)  # _pipe_writer works on its own duplicate
    send = functools.partial(_write_drain, stdout)
    return await _serve(app, read, send, guard, clock, principal, max_line_bytes)


async def _serve(
    app: App,
    read: Callable[[], Awaitable[bytes]],
    send: Callable[[bytes], Awaitable[None]],
    guard: Any,
    clock: Callable[[], float],
    principal: str | None,
    max_line_bytes: int,
) -> None:
    conn = StdioServerConnection(max_line_bytes=max_line_bytes)
    write_lock = asyncio.Lock()
    # Requests in flight, by id: a set, as a bad client may send one id twice, and a
    # cancel for that id must silence each of them (cancellation.mdx).
    tasks: dict[RequestId, set[asyncio.Task[None]]] = {}

    async def write(line: bytes) -> None:
        async with write_lock:
            with contextlib.suppress(OSError, RuntimeError):
                await send(line)

    async def answer(event: MessageReceived) -> None:
        reply = await drive_async.answer(
            app, event.message, event.request_id, clock=clock, principal=principal, guard=guard,
            pass_through=_PASS_THROUGH,
        )
        for line in reply_lines(reply, event.request_id):
            await write(line)

    async with asyncio.TaskGroup() as group:
        while True:
            event = conn.next_event()
            if event is NEED_DATA:
                try:
                    data = await read()
                except (OSError, ValueError):
                    data = b""
                conn.receive_data(data)
            elif isinstance(event, MessageRejected):
                await write(encode_line(event.response))
            elif isinstance(event, MessageReceived):
                rid = event.request_id
                if rid is None and event.parsed.method == CANCELLED:
                    target = (event.parsed.params or {}).get("requestId")
                    if isinstance(target, str | int) and not isinstance(target, bool):
                        for victim in tasks.get(target, ()):
                            victim.cancel()  # no response for a cancelled request
                    continue
                # A task cancelled by the client ends alone: TaskGroup ignores cancelled
                # children, and one cancelled before it starts never runs.
                task = group.create_task(answer(event))
                if rid is not None:
                    tasks.setdefault(rid, set()).add(task)
                    task.add_done_callback(functools.partial(_forget, tasks, rid))
            elif isinstance(event, InputEnded):
                break


async def _write_drain(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(data)
    await writer.drain()


def _forget(
    tasks: dict[RequestId, set[asyncio.Task[None]]], rid: RequestId, task: Any
) -> None:
    alive = tasks.get(rid, set())
    alive.discard(task)
    if not alive:
        tasks.pop(rid, None)
