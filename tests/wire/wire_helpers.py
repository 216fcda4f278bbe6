"""Shared helpers for the wire tests: message builders, an in-memory HTTP peer, and a stdio
server that leaves a process behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import h11

from mrtr_core.app import App, Reply
from mrtr_core.http import (
    NEED_DATA,
    ConnectionEnded,
    HttpServerConnection,
    MessageReceived,
    RequestRejected,
)

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}


def call_tool(name: str = "echo", request_id: int | str = 1, **arguments: Any) -> dict[str, Any]:
    """A tools/call request with the required _meta."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": dict(META)},
    }


def unencodable_reply_to(app: App, request_id: int | str, monkeypatch: Any) -> None:
    """Make ``app`` answer ``request_id`` with a reply JSON cannot encode (a bug in the app:
    every known path refuses such a value earlier)."""
    receive = app.receive

    def patched(message: Any, **kwargs: Any) -> Any:
        if message.get("id") == request_id:
            return Reply.result(request_id, {"content": [], "bad": object()})
        return receive(message, **kwargs)

    monkeypatch.setattr(app, "receive", patched)


def with_progress_token(message: dict[str, Any], token: str = "p") -> dict[str, Any]:
    """``message`` asking for progress notifications (``_meta.progressToken``)."""
    message["params"]["_meta"]["progressToken"] = token
    return message


def request(method: str, request_id: int | str = 1, **params: Any) -> dict[str, Any]:
    """Any request with the required _meta."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": dict(META)},
    }


def mcp_headers(
    method: str = "tools/call", name: str | None = "echo", version: str = VERSION
) -> list[tuple[str, str]]:
    """The headers a correct client sends (for hand-built requests)."""
    headers = [
        ("Host", "127.0.0.1"),
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", version),
        ("Mcp-Method", method),
    ]
    if name is not None:
        headers.append(("Mcp-Name", name))
    return headers


@attrs.frozen
class RawResponse:
    """One HTTP response as a raw h11 client saw it."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class RawClient:
    """A plain h11 client, to send requests no well-behaved client would send."""

    def __init__(self) -> None:
        self.conn = h11.Connection(h11.CLIENT)

    def request(
        self,
        body: bytes = b"",
        headers: Iterable[tuple[str, str]] | None = None,
        *,
        method: str = "POST",
        target: str = "/mcp",
    ) -> bytes:
        head = list(headers if headers is not None else mcp_headers())
        if not any(k.lower() == "host" for k, _ in head):
            head.insert(0, ("Host", "127.0.0.1"))
        if not any(k.lower() in ("content-length", "transfer-encoding") for k, _ in head):
            head.append(("Content-Length", str(len(body))))
        out = self.conn.send(h11.Request(method=method, target=target, headers=head))
        if body:
            out += self.conn.send(h11.Data(data=body))
        out += self.conn.send(h11.EndOfMessage())
        return out

    def post(self, message: Any, headers: Iterable[tuple[str, str]] | None = None) -> bytes:
        return self.request(json.dumps(message).encode(), headers)

    def read_pipelined(self, data: bytes, count: int) -> list[RawResponse]:
        """Parse ``count`` responses to requests this client did not send itself."""
        self.conn.receive_data(data)
        out: list[RawResponse] = []
        for _ in range(count):
            self.conn.send(h11.Request(method="POST", target="/mcp", headers=[("Host", "x")]))
            self.conn.send(h11.EndOfMessage())
            status, body = 0, bytearray()
            while True:
                event = self.conn.next_event()
                if isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
            out.append(RawResponse(status, {}, bytes(body)))
            self.conn.start_next_cycle()
        return out

    def read(self, data: bytes) -> list[RawResponse]:
        """Parse every complete response in ``data`` (cycling for keep-alive)."""
        self.conn.receive_data(data)
        out: list[RawResponse] = []
        status, headers, body = 0, {}, bytearray()
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                return out
            if isinstance(event, h11.Response):
                status = event.status_code
                headers = {k.decode().lower(): v.decode() for k, v in event.headers}
                body = bytearray()
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                out.append(RawResponse(status, headers, bytes(body)))
                if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
                    self.conn.start_next_cycle()
                else:
                    return out


Replier = Callable[[MessageReceived], tuple[Mapping[str, Any] | None, int | None]]


def echo_replier(event: MessageReceived) -> tuple[Mapping[str, Any] | None, int | None]:
    """Answer requests with their params, notifications with 202."""
    if event.request_id is None:
        return None, None
    return {"jsonrpc": "2.0", "id": event.request_id, "result": {"echo": event.message}}, None


@attrs.define
class Exchange:
    """What a server connection did with some input."""

    events: list[Any]
    out: bytes

    @property
    def received(self) -> list[MessageReceived]:
        return [e for e in self.events if isinstance(e, MessageReceived)]

    @property
    def rejected(self) -> list[RequestRejected]:
        return [e for e in self.events if isinstance(e, RequestRejected)]

    @property
    def ended(self) -> bool:
        return any(isinstance(e, ConnectionEnded) for e in self.events)


def serve(server: HttpServerConnection, data: bytes, replier: Replier = echo_replier) -> Exchange:
    """Feed ``data`` and run the server until it needs more (or ends), answering requests."""
    server.receive_data(data)
    events: list[Any] = []
    while True:
        event = server.next_event()
        if event is NEED_DATA:
            break
        events.append(event)
        if isinstance(event, MessageReceived):
            message, status = replier(event)
            server.send_reply(message, status)
        if isinstance(event, ConnectionEnded):
            break
    return Exchange(events, server.data_to_send())


# -- a stdio server that leaves a process behind -----------------------------------------------


@attrs.frozen
class LeftBehind:
    """How to start ``stdio_app_server.py`` so that it starts a child holding its stdout,
    reads ``reads`` requests, answers the pings among them and exits with status 3; and how
    to end that child afterwards."""

    env: dict[str, str]
    pid_file: Path

    @classmethod
    def in_folder(cls, folder: Path, reads: int) -> LeftBehind:
        """Its FIFO and pid file in ``folder``."""
        fifo = folder / "release"
        os.mkfifo(fifo)
        pid_file = folder / "orphan.pid"
        env = {**os.environ, "ORPHAN_FIFO": str(fifo), "ORPHAN_PID_FILE": str(pid_file),
               "ORPHAN_READS": str(reads)}
        return cls(env=env, pid_file=pid_file)

    def end(self) -> None:
        """Kill the child by the pid the server wrote (it waits on the FIFO, on no timer)."""
        if self.pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(self.pid_file.read_text()), signal.SIGKILL)
