"""Benchmark peer: the HTTP floor client, h11 and a socket with no MCP logic at all.

It sends what the mrtr client sends (the same headers, ``_meta`` and body shapes; a
``delete_file`` call is the first POST, then the retry carrying the answer and the
``requestState`` echoed) and reads the JSON answers, checking nothing and running no
handler. With ``floor_server.py`` it measures what an MCP call over HTTP on h11 costs
before any protocol logic. Driven over stdin like the other client peers (``loop.py``).

Run: ``python floor_client.py URL``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import h11

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop import Call, serve_commands_sync

_READ_SIZE = 65536
_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "mrtr", "version": "0.1.0"},
}
_ACCEPT = {"confirm": {"action": "accept", "content": {"confirm": True}}}


class FloorClient:
    """One keep-alive connection; ``call`` makes one tool call, retrying once on
    ``input_required``."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "", parts.port or 80, parts.path
        self.sock = socket.create_connection((self.host, self.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = h11.Connection(h11.CLIENT)
        self.ids = itertools.count(1)

    def post(self, params: dict[str, Any]) -> dict[str, Any]:
        """One POST of ``tools/call`` with ``params``; the decoded ``result``."""
        body = json.dumps(
            {"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/call", "params": params}
        ).encode()
        head = h11.Request(
            method="POST",
            target=self.path,
            headers=[
                ("Host", f"{self.host}:{self.port}"),
                ("Accept", "application/json, text/event-stream"),
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", params["name"]),
            ],
        )
        conn = self.conn
        self.sock.sendall(
            conn.send(head) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
        )
        answer = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(self.sock.recv(_READ_SIZE))
            elif type(event) is h11.Data:
                answer += event.data
            elif type(event) is h11.EndOfMessage:
                break
            elif type(event) is h11.ConnectionClosed:
                raise ConnectionError("the server closed the connection")
        conn.start_next_cycle()
        result: dict[str, Any] = json.loads(answer)["result"]
        return result

    def call(self, call: Call) -> None:
        """The call, and its retry when the server asks for input."""
        params = {"name": call.tool, "arguments": call.arguments, "_meta": _META}
        result = self.post(params)
        if result.get("resultType") == "input_required":
            self.post({**params, "inputResponses": _ACCEPT, "requestState": result["requestState"]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    args = parser.parse_args()
    serve_commands_sync(FloorClient(args.url).call)


if __name__ == "__main__":
    main()
