"""A tiny round-robin HTTP balancer, for the demo: each request goes to the next instance.

It forwards every HTTP request whole (method, path, headers, body) to the next backend in
turn, returns the backend's response whole, and records one :class:`Hop` per request: which
instance took it, the JSON-RPC method and id read from the body, and the status. That log is
what shows an MRTR retry landing on another instance than the round before.

Stdlib only (``http.server`` in front, ``http.client`` behind); it listens on 127.0.0.1.
Not a production proxy: ``deploy/`` puts nginx in front of real deployments.
"""

from __future__ import annotations

import http.client
import itertools
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

import attrs
from mrtr_sync.threads import leave_signals_to_main_thread

from mrtr_core.jsonrpc import ParseError, decode

__all__ = ["Backend", "Balancer", "Hop"]

_HOP_BY_HOP: Final = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
    "trailer", "trailers", "transfer-encoding", "upgrade", "content-length", "host",
})
_SET_BY_US: Final = frozenset({"server", "date"})
MAX_BODY: Final = 16 * 1024 * 1024


@attrs.frozen
class Backend:
    """One instance behind the balancer."""

    name: str
    host: str
    port: int


@attrs.frozen(kw_only=True)
class Hop:
    """One request that passed through the balancer."""

    seq: int
    backend: str
    http_method: str
    method: str | None
    request_id: Any
    status: int


def _rpc_fields(body: bytes) -> tuple[str | None, Any]:
    """The JSON-RPC method and id of a request body, read as the server reads it: a body
    its decoder refuses (not JSON, duplicate member names, too deep) has neither, and is
    forwarded untouched for the server to answer."""
    try:
        message = decode(body, max_bytes=MAX_BODY)
    except ParseError:
        return None, None
    if not isinstance(message, dict):
        return None, None
    method = message.get("method")
    return (method if isinstance(method, str) else None), message.get("id")


class Balancer:
    """Round-robin HTTP proxy over ``backends``.

    Args:
        backends: The instances, in the order they take turns.
        on_hop: Called (on the balancer's thread) after each forwarded request.
        timeout: Seconds to wait for a backend, and for a client to send a request.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        backends: Sequence[Backend],
        *,
        on_hop: Callable[[Hop], None] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        timeout: float = 30.0,
    ) -> None:
        if not backends:
            raise ValueError("a balancer needs at least one backend")
        self.backends = tuple(backends)
        self.hops: list[Hop] = []
        self._on_hop = on_hop
        self._timeout = timeout
        self._turns = itertools.cycle(self.backends)
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port the balancer listens on."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The balancer's MCP endpoint base URL (``http://127.0.0.1:PORT``)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Balancer:
        """Serve on a background thread."""
        self._thread = threading.Thread(target=self._serve, name="mrtr-balancer", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        # Its request threads inherit this: Ctrl-C must reach the command's main thread.
        leave_signals_to_main_thread()
        self._server.serve_forever()

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> Balancer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self) -> tuple[int, Backend]:
        with self._lock:
            return next(self._seq), next(self._turns)

    def _record(self, hop: Hop) -> None:
        with self._lock:
            self.hops.append(hop)
        if self._on_hop is not None:
            self._on_hop(hop)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        balancer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Every read from the client is bounded too: a request that stops halfway, or
            # a keep-alive connection left idle, is closed after this many seconds.
            timeout = balancer._timeout

            def log_message(self, format: str, *args: Any) -> None:
                pass  # hops are reported through on_hop

            def _forward(self) -> None:
                # RFC 9110 §8.6: Content-Length = 1*DIGIT (int() would take "+1", "1_0",
                # " 1" and other digits, and refuses more than 4300 of them).
                digits = (self.headers.get("Content-Length") or "0").lstrip("0") or "0"
                if not (digits.isascii() and digits.isdigit()):
                    self.send_error(400, "Content-Length is not a number")
                    return
                if len(digits) > len(str(MAX_BODY)) or int(digits) > MAX_BODY:
                    self.send_error(413)
                    return
                length = int(digits)
                body = self.rfile.read(length) if length else b""
                seq, backend = balancer._next()
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in _HOP_BY_HOP}
                headers["Host"] = f"{backend.host}:{backend.port}"
                conn = http.client.HTTPConnection(backend.host, backend.port,
                                                  timeout=balancer._timeout)
                method, request_id = _rpc_fields(body)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    response = conn.getresponse()
                    payload = response.read()
                    status = response.status
                    out_headers = [(k, v) for k, v in response.getheaders()
                                   if k.lower() not in _HOP_BY_HOP | _SET_BY_US]
                except OSError:
                    status, payload, out_headers = 502, b"bad gateway\n", [
                        ("Content-Type", "text/plain")]
                finally:
                    conn.close()
                balancer._record(Hop(seq=seq, backend=backend.name, http_method=self.command,
                                     method=method, request_id=request_id, status=status))
                self.send_response(status)
                for key, value in out_headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_POST = _forward
            do_GET = _forward
            do_DELETE = _forward
            do_PUT = _forward

        return Handler
