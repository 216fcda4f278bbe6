"""Serve an :class:`~mrtr_core.app.App` over Streamable HTTP under asyncio.

One task per connection; framing and every transport check happen in
:class:`~mrtr_core.http.HttpServerConnection`. While a handler runs the connection is
watched: a client that closes it cancels the request (closing the response stream is the
cancellation signal on HTTP, streamable-http.mdx § Cancellation).

Example::

    async with serve_http(app, "127.0.0.1", 0) as server:
        print(server.url)
        await server.serve_forever()
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from mrtr_asyncio.stdio_server import internal_error_reply, run_step
from mrtr_core.app import App, Reply, RunHandler
from mrtr_core.http import (
    NEED_DATA,
    ConnectionEnded,
    HttpServerConfig,
    HttpServerConnection,
    MessageReceived,
)

__all__ = ["HttpServer", "PrincipalOf", "serve_http"]

PrincipalOf = Callable[[Mapping[str, list[bytes]]], "str | None"]
"""Derives the authenticated principal from a request's headers (lower-cased names)."""

_READ_SIZE = 65536


class HttpServer:
    """A Streamable HTTP server for one app; use as ``async with serve_http(...) as server``.

    See :func:`serve_http` for the arguments.
    """

    def __init__(
        self,
        app: App,
        host: str,
        port: int,
        *,
        guard: Any,
        config: HttpServerConfig | None,
        clock: Callable[[], float],
        principal: PrincipalOf | None,
        read_timeout: float,
        idle_timeout: float,
        max_connections: int,
    ) -> None:
        self.app = app
        self.guard = guard
        self.config = config or HttpServerConfig()
        self.clock = clock
        self.principal = principal
        self.read_timeout = read_timeout
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self._host, self._port = host, port
        self.host, self.port = host, port
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def url(self) -> str:
        """The MCP endpoint URL, e.g. ``http://127.0.0.1:8000/mcp``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.config.path}"

    async def start(self) -> HttpServer:
        """Bind and start accepting; :attr:`port` is then the bound port."""
        self._server = await asyncio.start_server(self._handle, self._host, self._port)
        self.host, self.port = self._server.sockets[0].getsockname()[:2]
        return self

    async def serve_forever(self) -> None:
        """Wait until the server is closed (or the calling task cancelled)."""
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def aclose(self) -> None:
        """Stop accepting, cancel every connection task, and wait for them."""
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> HttpServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- connections -------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self._tasks) >= self.max_connections or task is None:
            writer.transport.abort()
            return
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the peer went away or stalled; only this connection is affected
        finally:
            self._tasks.discard(task)
            writer.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        conn = HttpServerConnection(self.config, tool_schema=self._tool_schema)
        started: float | None = None
        while True:
            event = conn.next_event()
            await self._send(writer, conn.data_to_send())
            if event is NEED_DATA:
                if conn.idle:
                    started, deadline = None, loop.time() + self.idle_timeout
                else:
                    started = loop.time() if started is None else started
                    deadline = started + self.read_timeout
                try:
                    async with asyncio.timeout_at(deadline):
                        data = await reader.read(_READ_SIZE)
                except TimeoutError:
                    conn.timed_out()
                    await self._send(writer, conn.data_to_send())
                    return
                conn.receive_data(data)
            elif isinstance(event, MessageReceived):
                started = None
                reply = await self._answer(event, reader, conn)
                if reply is None:
                    return  # the client closed the connection: the request is cancelled
                conn.send_reply(reply.message, reply.status, notifications=reply.notifications)
            elif isinstance(event, ConnectionEnded):
                return

    def _tool_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's ``inputSchema``, so ``Mcp-Param-*`` headers are checked against it."""
        tool = self.app.find_tool(name)
        return tool.input_schema if tool is not None else None

    async def _send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        if data:
            writer.write(data)
            if not writer.transport.get_write_buffer_size():
                await writer.drain()  # all written: drain cannot wait, no timer needed
                return
            async with asyncio.timeout(self.read_timeout):
                await writer.drain()

    async def _answer(
        self,
        event: MessageReceived,
        reader: asyncio.StreamReader,
        conn: HttpServerConnection,
    ) -> Reply | None:
        try:
            principal = self.principal(event.headers) if self.principal is not None else None
            step = self.app.receive(
                event.message, now=self.clock(), principal=principal, parsed=event.parsed
            )
        except Exception as exc:
            return internal_error_reply(event.request_id, exc)
        if not isinstance(step, RunHandler):
            return step
        if not step.may_suspend and step.run.claim is None:
            # A plain function runs without yielding to the loop: nothing can observe the
            # client going away meanwhile, so no reader task is needed.
            try:
                return await run_step(self.app, step, clock=self.clock, guard=self.guard)
            except Exception as exc:
                return internal_error_reply(event.request_id, exc)
        handler = asyncio.create_task(run_step(self.app, step, clock=self.clock, guard=self.guard))
        budget = self.config.max_body_bytes + self.config.max_header_bytes
        read: asyncio.Task[bytes] | None = None
        try:
            while True:
                if read is None and budget > 0:
                    read = asyncio.create_task(reader.read(_READ_SIZE))
                waiting: set[asyncio.Future[Any]] = {handler} if read is None else {handler, read}
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if read is not None and read.done():
                    data = b"" if read.cancelled() or read.exception() else read.result()
                    read = None
                    # Bytes of a pipelined request wait in ``conn``; EOF means the client
                    # gave up on this request.
                    conn.receive_data(data)
                    if not data:
                        handler.cancel()
                        with contextlib.suppress(BaseException):
                            await handler
                        return None
                    budget -= len(data)
                if handler.done():
                    try:
                        return handler.result()
                    except Exception as exc:
                        return internal_error_reply(event.request_id, exc)
        finally:
            for task in (handler, read):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task


def serve_http(
    app: App,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    guard: Any = None,
    config: HttpServerConfig | None = None,
    clock: Callable[[], float] = time.time,
    principal: PrincipalOf | None = None,
    read_timeout: float = 30.0,
    idle_timeout: float = 60.0,
    max_connections: int = 256,
) -> HttpServer:
    """A server for ``app``; ``async with serve_http(app, host, 0) as server`` binds it.

    Args:
        app: The app to serve.
        host: Address to listen on (keep ``127.0.0.1`` for local servers, digest §3.3).
        port: Port to listen on; ``0`` picks a free one (see ``server.port``).
        guard: Replay guard for single-use handlers (sync or async).
        config: Endpoint path, body limits, allowed origins.
        clock: Wall-clock seconds for ``requestState`` sealing (default ``time.time``).
        principal: Derives the principal from request headers (default: none).
        read_timeout: Seconds a client gets to send a whole request (and to read the reply).
        idle_timeout: Seconds an idle keep-alive connection is kept open.
        max_connections: Connections served at once; more are closed on accept.
    """
    return HttpServer(
        app,
        host,
        port,
        guard=guard,
        config=config,
        clock=clock,
        principal=principal,
        read_timeout=read_timeout,
        idle_timeout=idle_timeout,
        max_connections=max_connections,
    )
