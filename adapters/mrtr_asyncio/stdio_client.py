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


class StdioTransport(StdioTransportBase[asyncio.subprocess.Process, asyncio.Future[JsonObject]]):
    """The asyncio :class:`~mrtr_asyncio.Transport` over a stdio server subprocess (§3.4).

    Start one with :meth:`spawn` (or :func:`open_stdio_transport`). Requests interleave on the
    one pipe and a reader task routes responses by id. When the process dies (or writes
    something that is not an MCP message to stdout), every request in flight fails with a
    typed error. A request cancelled by its caller sends ``notifications/cancelled``.
    """

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        *,
        max_line_bytes: int = jsonrpc.DEFAULT_MAX_MESSAGE_BYTES,
        close_timeout: float = 2.0,
    ) -> None:
        super().__init__(process, max_line_bytes=max_line_bytes, close_timeout=close_timeout)
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
    ) -> StdioTransport:
        """Start ``command`` (a list, or a string split like a shell would) as the server.

        The server's stderr is inherited unless ``stderr`` says otherwise.
        """
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
        return cls(process, max_line_bytes=max_line_bytes, close_timeout=close_timeout)

    async def request(self, message: Mapping[str, Any]) -> JsonObject:
        """Send one request and wait for the response with its id.

        Raises:
            ServerExitedError: The process ended (or closed stdout) before answering.
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
        try:
            self._write(line)
            await self._drain()
            return await future
        except asyncio.CancelledError:
            # The caller gave up (its timeout or cancellation): tell the server (§3.4).
            with contextlib.suppress(MrtrError):
                self._write(self._conn.send(cancelled_notification(rid, "cancelled")))
            raise
        except MrtrError as exc:
            raise copy.copy(exc) from None
        finally:
            self._pending.pop(rid, None)

    async def notify(self, message: Mapping[str, Any]) -> None:
        """Send one notification."""
        self._write(self._conn.send(message))
        await self._drain()

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
        self._fail(ServerExitedError("transport closed", returncode=self.process.returncode))

    async def __aenter__(self) -> StdioTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- internals ---------------------------------------------------------------------------

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
                    returncode: int | None = None
                    with contextlib.suppress(TimeoutError):
                        returncode = await asyncio.wait_for(self.process.wait(), 0.5)
                    self._fail(
                        ServerExitedError("the server closed its stdout", returncode=returncode)
                    )
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
