"""Benchmark peer: the HTTP floor server, h11 and a socket with no MCP logic at all.

It answers every POST with a JSON-RPC result of the shapes and sizes the benchmark app
sends (``delete_file``: an ``input_required`` result with a 358-character ``requestState``
on the first leg, the complete result on the retry; ``echo``: the complete result). It
checks nothing, seals nothing and runs no handler: its cost is what framing one HTTP
exchange with h11 on a socket and reading and writing its JSON costs, the part of every
call a server on h11 cannot avoid. ``run.py`` measures it beside the real pairs so their
figures can be read against it.

Run: ``python floor_server.py --port 8765`` (127.0.0.1 only). Stop it with SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
from typing import Any

import h11

HOST = "127.0.0.1"
_READ_SIZE = 65536
_SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "mrtr-bench", "version": "1.0"}}
_CONFIRM = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Delete notes.txt?",
        "requestedSchema": {
            "type": "object",
            "properties": {"confirm": {"type": "boolean", "description": "Really do it?"}},
            "required": ["confirm"],
        },
    },
}
INPUT_REQUIRED: dict[str, Any] = {
    "resultType": "input_required",
    "inputRequests": {"confirm": _CONFIRM},
    "requestState": "s" * 358,  # the length of the benchmark app's sealed state
    "_meta": _SERVER_INFO,
}


def complete(text: str) -> dict[str, Any]:
    """A complete tool result carrying ``text``."""
    return {
        "content": [{"type": "text", "text": text}],
        "resultType": "complete",
        "_meta": _SERVER_INFO,
    }


def result_for(message: dict[str, Any]) -> dict[str, Any]:
    """The canned result for one request (no validation: this is the floor)."""
    params = message.get("params") or {}
    arguments = params.get("arguments") or {}
    if params.get("name") == "echo":
        return complete(str(arguments.get("text")))
    if "requestState" in params:
        return complete(f"deleted {arguments.get('path')}")
    return INPUT_REQUIRED


def serve_connection(sock: socket.socket) -> None:
    """Answer the requests of one keep-alive connection until the client closes it."""
    conn = h11.Connection(h11.SERVER)
    body = bytearray()
    with sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(sock.recv(_READ_SIZE))
            elif type(event) is h11.Request:
                body = bytearray()
            elif type(event) is h11.Data:
                body += event.data
            elif type(event) is h11.EndOfMessage:
                message = json.loads(body)
                out = json.dumps(
                    {"jsonrpc": "2.0", "id": message["id"], "result": result_for(message)}
                ).encode()
                head = h11.Response(
                    status_code=200,
                    headers=[
                        ("Content-Type", "application/json"),
                        ("Content-Length", str(len(out))),
                    ],
                )
                sock.sendall(
                    conn.send(head) + conn.send(h11.Data(data=out)) + conn.send(h11.EndOfMessage())
                )
                conn.start_next_cycle()
            else:  # ConnectionClosed
                return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    listener = socket.create_server((HOST, args.port))
    while True:
        sock, _ = listener.accept()
        threading.Thread(target=serve_connection, args=(sock,), daemon=True).start()


if __name__ == "__main__":
    main()
