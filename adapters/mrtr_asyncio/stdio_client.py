"""stdio client transport for asyncio: spawn the server, route responses by id.

Example::

    async with open_stdio_transport([sys.executable, "server.py"]) as transport:
        async with asyncio.timeout(30):
            response = await transport.request(message)
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import select
import shlex
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from mrtr_core import jsonrpc
from mrtr_core.errors import LocalProtocolError, MrtrError
from mrtr_core.jsonrpc import NEED_DATA
from mrtr_core.stdio import (
    InputEnded,
    ResponseReceived,
    ServerExitedError,
    StdioTransportBase,
    cancelled_notification,
)

__all__ = ["StdioTransport", "open_stdio_transport"]

JsonObject = dict[str, Any]
_READ_SIZE = 65536
_STREAM_LIMIT = 2**16  # what asyncio.create_subprocess_exec gives its streams


class _ServerProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """The streams of a server process :meth:`StdioTransport.spawn` starts; they also end
    stdout once the process has exited and all it wrote has been read.

    asyncio ends a process's stdout only when every process holding it closed it, and its
    ``wait()`` returns only after that: a process the server started may hold it for ever,
    and the requests in flight would wait as long (digest §3.4 "Crash").
    """

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self._process: asyncio.SubprocessTransport | None = None
        self.exited = False
        """The process exited (stdout ends once what it wrote before has been read)."""
        self.ended_stdout = False
        """stdout was ended here, the process having exited, not by the process."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if isinstance(transport, asyncio.SubprocessTransport):
            self._process = transport

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        super().pipe_data_received(fd, data)
        if fd == 1 and self.exited:
            self._end_stdout_once_read()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited = True
        self._end_stdout_once_read()

    def _end_stdout_once_read(self) -> None:
        stdout = self._process.get_pipe_transport(1) if self._process is not None else None
        if not isinstance(stdout, asyncio.ReadTransport) or stdout.is_closing():
            return
        # What the process wrote before exiting is in the pipe by now: while some is left,
        # the next read of it comes back here; once none is, stdout ends after what
        # ``process.stdout`` holds.
        try:
            readable, _, _ = select.select([stdout.get_extra_info("pipe")], [], [], 0)
        except (OSError, ValueError, TypeError):  # not a pipe select() can look at
            return
        if not readable:
            self.ended_stdout = True
            stdout.close()


class StdioTransport(StdioTransportBase[asyncio.subprocess.Process, asyncio.Future[JsonObject]]):
    """The asyncio :class:`~mrtr_asyncio.Transport` over a stdio server subprocess (§3.4).

    Start one with :meth:`spawn` (or :func:`open_stdio_transport`). Requests interleave on the
    one pipe and a reader task routes responses by id. When the process dies (or writes
    something that is not an MCP message to stdout), every request in flight fails with a
    typed error; for a process :meth:`spawn` started, also while a process it started still
    holds its stdout open (replies it wrote before it died are delivered first; a process
    built elsewhere is seen to end when its stdout does). A request cancelled by its caller
    once its line was handed over sends ``notifications/cancelled``.
    """

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        *,
        max_line_bytes: int = jsonrpc.DEFAULT_MAX_MESSAGE_BYTES,
        close_timeout: float = 2.0,
    ) -> None:
        super().__init__(process, max_line_bytes=max_line_bytes, close_timeout=close_timeout)
        self._streams: _ServerProtocol | None = None
        """The process's streams when :meth:`spawn` started it."""
        self._reader = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def spawn(
        cls,
        command: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr: int | None = None,
        max_line_bytes: int = jsonrpc.DEFAULT_MAX_MESSAGE_BYTES,
        close_timeout: float = 2.0,
        process_group: int | None = None,
    ) -> StdioTransport:
        """Start ``command`` (a list, or a string split like a shell would) as the server.

        The server's stderr is inherited unless ``stderr`` says otherwise. ``process_group``
        is :class:`subprocess.Popen`'s (POSIX): ``0`` puts the server in a group of its own,
        out of reach of the terminal's Ctrl-C, which then reaches this process alone and
        :meth:`aclose` ends the server.
        """
        cls.check_options(max_line_bytes=max_line_bytes, close_timeout=close_timeout)
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        loop = asyncio.get_running_loop()
        # What asyncio.create_subprocess_exec does, with streams that see the process exit.
        subprocess_transport, streams = await loop.subprocess_exec(
            lambda: _ServerProtocol(limit=_STREAM_LIMIT, loop=loop),
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            process_group=process_group,
        )
        process = asyncio.subprocess.Process(subprocess_transport, streams, loop)
        transport = cls(process, max_line_bytes=max_line_bytes, close_timeout=close_timeout)
        transport._streams = streams
        return transport

    async def request(self, message: Mapping[str, Any]) -> JsonObject:
        """Send one request and wait for the response with its id.

        Writing the request waits, for as long as the caller does, until stdin has room
        (see :meth:`_send`); a caller that gives up before its line is handed over sends
        nothing, not even ``notifications/cancelled``.

        Raises:
            ServerExitedError: The process ended (or closed stdout) before answering.
            mrtr_core.errors.TransportClosedError: The transport was closed before.
            mrtr_core.errors.RemoteProtocolError: The server wrote something that is not an
                MCP message to stdout (the transport is unusable afterwards).
        """
        rid, line = self._conn.send_request(message)
        if self._failure is not None:
            raise copy.copy(self._failure)
        if rid in self._pending:
            raise LocalProtocolError(f"request id {rid!r} is already in flight")
        future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        sent = False
        try:
            await self._send(line)
            sent = True
            return await future
        except asyncio.CancelledError:
            if sent:
                # The caller gave up (its timeout or cancellation) on a round in flight:
                # tell the server (digest §2.7, §3.4). Handed over at once, behind the
                # line, however full the buffer: no wait, well within close_timeout, and
                # one small line per request that went out.
                with contextlib.suppress(MrtrError):
                    self._write(self._conn.send(cancelled_notification(rid, "cancelled")))
            raise
        except MrtrError as exc:
            raise copy.copy(exc) from None
        finally:
            self._pending.pop(rid, None)

    async def notify(self, message: Mapping[str, Any]) -> None:
        """Send one notification (see :meth:`_send`)."""
        await self._send(self._conn.send(message))

    async def aclose(self) -> None:
        """Close stdin, wait, then SIGTERM, then SIGKILL (digest §3.4 "Shutdown")."""
        with contextlib.suppress(OSError, RuntimeError):
            self._stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), self.close_timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), self.close_timeout)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                await self.process.wait()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        self._fail_closed()

    async def __aenter__(self) -> StdioTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- internals ---------------------------------------------------------------------------

    async def _send(self, line: bytes) -> None:
        """Wait until stdin has room (the transport holds less than its high-water mark),
        then hand it ``line`` whole.

        The transport keeps a line it was handed until all of it is written, so a line is
        never cut (digest §3.4: one message per line). Waiting before the line is handed
        over, not after, keeps a caller that gives up from leaving its line behind: the
        buffer holds at most the high-water mark plus the lines let in when room came
        (each maybe with its ``notifications/cancelled`` behind it), however long the
        server reads nothing, and a round whose caller gave up while waiting was never in
        flight. The caller's own deadline bounds the wait.
        """
        await self._drain()
        self._write(line)

    def _write(self, line: bytes) -> None:
        if self._failure is not None:
            raise copy.copy(self._failure)
        if self._stdin.is_closing():
            raise ServerExitedError(
                "the server's stdin is closed", returncode=self.process.returncode
            )
        self._stdin.write(line)

    async def _drain(self) -> None:
        try:
            await self._stdin.drain()
        except (ConnectionError, RuntimeError):
            raise ServerExitedError(
                "the server's stdin is closed", returncode=self.process.returncode
            ) from None

    async def _read_loop(self) -> None:
        try:
            while True:
                event = self._conn.next_event()
                if event is NEED_DATA:
                    try:
                        data = await self._stdout.read(_READ_SIZE)
                    except (OSError, ValueError):
                        data = b""
                    self._conn.receive_data(data)
                elif isinstance(event, ResponseReceived):
                    future = self._pending.get(event.request_id)  # type: ignore[arg-type]
                    if future is not None and not future.done():  # else: caller gave up
                        future.set_result(event.message)
                elif isinstance(event, InputEnded):
                    returncode = self.process.returncode
                    if returncode is None:
                        with contextlib.suppress(TimeoutError):
                            returncode = await asyncio.wait_for(self.process.wait(), 0.5)
                    ended_here = self._streams is not None and self._streams.ended_stdout
                    reason = "the server exited" if ended_here else "the server closed its stdout"
                    self._fail(ServerExitedError(reason, returncode=returncode))
                    return
                # NotificationReceived: progress and logs are not a transport's concern
        except MrtrError as exc:  # the server broke the framing: nothing can be trusted
            self._fail(exc)
            # Read on, discarding, until stdout ends: a server blocked writing to a full
            # pipe would never see its stdin close, and aclose() would have to kill it.
            with contextlib.suppress(OSError, ValueError):
                while await self._stdout.read(_READ_SIZE):
                    pass

    def _fail(self, error: MrtrError) -> None:
        if self._failure is None:
            self._failure = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)


@contextlib.asynccontextmanager
async def open_stdio_transport(
    command: str | Sequence[str], **kwargs: Any
) -> AsyncIterator[StdioTransport]:
    """Start ``command`` as a stdio server and yield its transport; shut it down on exit.

    Takes the keyword arguments of :meth:`StdioTransport.spawn`.
    """
    transport = await StdioTransport.spawn(command, **kwargs)
    try:
        yield transport
    finally:
        await transport.aclose()
