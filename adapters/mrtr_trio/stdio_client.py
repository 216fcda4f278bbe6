"""stdio client transport for trio: spawn the server, route responses by id.

Example::

    async with open_stdio_transport([sys.executable, "server.py"]) as transport:
        with trio.fail_after(30):
            response = await transport.request(message)
"""

from __future__ import annotations

import contextlib
import copy
import os
import shlex
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import trio

from mrtr_core import jsonrpc
from mrtr_core.errors import LocalProtocolError, MrtrError
from mrtr_core.jsonrpc import NEED_DATA
from mrtr_core.stdio import (
    InputEnded,
    ResponseReceived,
    ServerExitedError,
    StdinStalledError,
    StdioTransportBase,
    cancelled_notification,
)

__all__ = ["StdioTransport", "open_stdio_transport"]

JsonObject = dict[str, Any]
_READ_SIZE = 65536


class _Pending:
    def __init__(self) -> None:
        self.done = trio.Event()
        self.response: JsonObject | None = None
        self.error: MrtrError | None = None
        self.sent = False
        """Some of the request's line went out: the server may see it."""
        self.give_up_by: float | None = None
        """Set when the caller gave up with part of the line out: the end of the one
        ``close_timeout`` that finishing the line and the cancel share."""


class _Outgoing:
    """A line being written to a non-blocking pipe, and how many of its bytes went out."""

    __slots__ = ("sent", "view")

    def __init__(self, line: bytes) -> None:
        self.view = memoryview(line)
        self.sent = 0

    async def send(self, fd: int) -> None:
        """Write the rest of the line, waiting whenever the pipe is full (the only point
        where a cancellation can come in)."""
        while self.sent < len(self.view):
            try:
                self.sent += os.write(fd, self.view[self.sent :])
            except BlockingIOError:
                await trio.lowlevel.wait_writable(fd)


class StdioTransport(StdioTransportBase[trio.Process, _Pending]):
    """The trio :class:`~mrtr_trio.Transport` over a stdio server subprocess (digest §3.4).

    Build it with :func:`open_stdio_transport`, which also runs its reader task. Requests
    interleave on the one pipe and responses are routed by id. When the process dies (or
    writes something that is not an MCP message to stdout), every request in flight fails
    with a typed error, even while a process it started still holds its stdout open; replies
    it wrote before it died are delivered first. A request cancelled by its caller once
    some of its line went out sends ``notifications/cancelled``, holding the caller at most
    ``close_timeout`` seconds in all (the rest of a half-written line goes out first).
    """

    def __init__(
        self,
        process: trio.Process,
        *,
        max_line_bytes: int = jsonrpc.DEFAULT_MAX_MESSAGE_BYTES,
        close_timeout: float = 2.0,
    ) -> None:
        super().__init__(process, max_line_bytes=max_line_bytes, close_timeout=close_timeout)
        self._write_lock = trio.Lock()
        self._reader_scope = trio.CancelScope()
        self._receive_scope = trio.CancelScope()
        """Around the reader's wait for stdout: cancelled when the process exits."""
        self._exited = False
        """The exit was seen: only what is already in stdout is read."""

    async def request(self, message: Mapping[str, Any]) -> JsonObject:
        """Send one request and wait for the response with its id.

        Writing the request waits for as long as the server takes to read it; the caller's
        deadline bounds that (see :meth:`_write` for a line cancelled halfway).

        Raises:
            ServerExitedError: The process ended (or closed stdout) before answering.
            StdinStalledError: A line cancelled halfway (this one or an earlier one) could
                not be finished within ``close_timeout`` (the transport is unusable
                afterwards).
            mrtr_core.errors.TransportClosedError: The transport was closed before.
            mrtr_core.errors.RemoteProtocolError: The server wrote something that is not an
                MCP message to stdout (the transport is unusable afterwards).
        """
        rid, line = self._conn.send_request(message)
        if self._failure is not None:
            raise copy.copy(self._failure)
        if rid in self._pending:
            raise LocalProtocolError(f"request id {rid!r} is already in flight")
        pending = self._pending[rid] = _Pending()
        try:
            await self._write(line, pending)
            await pending.done.wait()
        except (trio.Cancelled, KeyboardInterrupt):
            if not pending.sent:  # the server never saw the request
                raise
            # The caller gave up (its timeout, its cancellation, or a Ctrl-C trio raised in
            # this wait): tell the server (digest §2.7, §3.4), within close_timeout of the
            # give-up, the finishing of a half-written line included.
            give_up_by = pending.give_up_by
            if give_up_by is None:
                give_up_by = trio.current_time() + self.close_timeout
            with (
                trio.CancelScope(shield=True),
                trio.move_on_at(give_up_by),
                contextlib.suppress(MrtrError),
            ):
                await self._write(self._conn.send(cancelled_notification(rid, "cancelled")))
            raise
        finally:
            self._pending.pop(rid, None)
        if pending.error is not None:
            raise copy.copy(pending.error)
        assert pending.response is not None
        return pending.response

    async def notify(self, message: Mapping[str, Any]) -> None:
        """Send one notification."""
        await self._write(self._conn.send(message))

    async def aclose(self) -> None:
        """Close stdin, wait, then SIGTERM, then SIGKILL (digest §3.4 "Shutdown")."""
        with trio.CancelScope(shield=True):
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self._stdin.aclose()
            with trio.move_on_after(self.close_timeout):
                await self.process.wait()
            if self.process.returncode is None:
                self.process.terminate()
                with trio.move_on_after(self.close_timeout):
                    await self.process.wait()
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()
            self._reader_scope.cancel()
            await self._stdout.aclose()
        self._fail_closed()

    # -- internals ---------------------------------------------------------------------------

    async def _write(self, line: bytes, pending: _Pending | None = None) -> None:
        """Write ``line`` whole; never anything after part of it (digest §3.4: one
        message per line).

        An uncancelled write waits for as long as the server takes to read its stdin (the
        caller's own deadline bounds it). A caller cancelled before any byte went out gets
        its ``Cancelled`` and nothing is written. One cancelled (or interrupted) once part
        of the line went out has the rest finished, shielded, for up to ``close_timeout``
        seconds: a half line would swallow the next message. If even that fails the
        transport fails (:class:`StdinStalledError`) so nothing is written after the half.
        ``pending.sent`` tells whether any of the line went out.
        """
        async with self._write_lock:
            if self._failure is not None:
                raise copy.copy(self._failure)
            # The pipe is non-blocking (trio's process streams): writing the fd directly
            # counts the bytes that went out, which a cancelled send_all cannot tell.
            fd = self._stdin.fileno()
            out = _Outgoing(line)
            try:
                await out.send(fd)
            except (OSError, trio.ClosedResourceError):
                raise self._stdin_closed() from None
            except BaseException:
                if out.sent:
                    deadline = trio.current_time() + self.close_timeout
                    if pending is not None:
                        pending.give_up_by = deadline
                    await self._finish_line(fd, out, deadline)
                raise
            finally:
                if pending is not None and out.sent:
                    pending.sent = True

    async def _finish_line(self, fd: int, out: _Outgoing, deadline: float) -> None:
        """Finish a line its caller gave up on halfway, shielded, until ``deadline``
        (``close_timeout`` after the give-up); failing that, fail the transport."""
        with trio.CancelScope(shield=True) as shield:
            shield.deadline = deadline
            try:
                await out.send(fd)
            except (OSError, trio.ClosedResourceError):
                self._fail(self._stdin_closed())
            return
        # Here only when the deadline cut the send short.
        self._fail(StdinStalledError(
            f"the server did not read a line of its stdin within {self.close_timeout} s"
        ))

    def _stdin_closed(self) -> ServerExitedError:
        return ServerExitedError("the server's stdin is closed", returncode=self.process.poll())

    async def read_loop(self) -> None:
        """Route what the server writes; runs until stdout closes or the process exited
        (started by the opener)."""
        with self._reader_scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_exit)
                await self._route_replies()
                nursery.cancel_scope.cancel()

    async def _watch_exit(self) -> None:
        await self.process.wait()
        self._exited = True
        self._receive_scope.cancel()

    async def _receive(self) -> bytes | None:
        """The next bytes from stdout (``b""``: it ended), or ``None`` once the process has
        exited and all it wrote has been read: a process it started may hold stdout open,
        and no end of it would ever come (digest §3.4 "Crash")."""
        if not self._exited:
            with trio.CancelScope() as self._receive_scope:
                try:
                    data: bytes = await self._stdout.receive_some(_READ_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return b""
                return data
        # The process exited: what it wrote before is in the pipe by now; read what is there
        # without waiting for more (the pipe is non-blocking).
        await trio.lowlevel.checkpoint()
        try:
            return os.read(self._stdout.fileno(), _READ_SIZE)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    async def _route_replies(self) -> None:
        try:
            while True:
                event = self._conn.next_event()
                if event is NEED_DATA:
                    data = await self._receive()
                    if data is None:
                        self._fail(ServerExitedError(
                            "the server exited", returncode=self.process.returncode
                        ))
                        return
                    self._conn.receive_data(data)
                elif isinstance(event, ResponseReceived):
                    pending = self._pending.get(event.request_id)  # type: ignore[arg-type]
                    if pending is not None:  # else: its caller gave up; dropped
                        pending.response = event.message
                        pending.done.set()
                elif isinstance(event, InputEnded):
                    returncode = None
                    with trio.move_on_after(0.5):
                        returncode = await self.process.wait()
                    self._fail(
                        ServerExitedError("the server closed its stdout", returncode=returncode)
                    )
                    return
                # NotificationReceived: progress and logs are not a transport's concern
        except MrtrError as exc:  # the server broke the framing: nothing can be trusted
            self._fail(exc)
            # Read on, discarding, until stdout ends or the process exited: a server
            # blocked writing to a full pipe would never see its stdin close, and aclose()
            # would have to kill it.
            while await self._receive():
                pass

    def _fail(self, error: MrtrError) -> None:
        if self._failure is None:
            self._failure = error
        for pending in self._pending.values():
            if not pending.done.is_set():
                pending.error = error
                pending.done.set()


@contextlib.asynccontextmanager
async def open_stdio_transport(
    command: str | Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stderr: int | None = None,
    max_line_bytes: int = jsonrpc.DEFAULT_MAX_MESSAGE_BYTES,
    close_timeout: float = 2.0,
    process_group: int | None = None,
) -> AsyncIterator[StdioTransport]:
    """Start ``command`` (a list, or a string split like a shell would) as a stdio server and
    yield its transport; on exit the server is shut down (:meth:`StdioTransport.aclose`).

    The server's stderr is inherited unless ``stderr`` says otherwise. ``process_group`` is
    :class:`subprocess.Popen`'s (POSIX): ``0`` puts the server in a group of its own, out of
    reach of the terminal's Ctrl-C, which then reaches this process alone and the exit of
    this context ends the server.
    """
    StdioTransport.check_options(max_line_bytes=max_line_bytes, close_timeout=close_timeout)
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    process = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        process_group=process_group,
    )
    transport = StdioTransport(process, max_line_bytes=max_line_bytes, close_timeout=close_timeout)
    error: Exception | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(transport.read_loop)
        try:
            yield transport
        except Exception as exc:  # raised below, outside the nursery: no ExceptionGroup
            error = exc
        finally:
            await transport.aclose()
    if error is not None:
        raise error
