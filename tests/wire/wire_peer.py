"""A misbehaving Streamable HTTP peer for client-transport tests (a thread per connection).

It frames with the real :class:`~mrtr_core.http.HttpServerConnection` and answers
``tools/call`` by tool name: ``echo`` answers; ``break`` closes the socket without answering;
``stall`` never answers; ``close_after`` answers and then closes the connection (as a server
dropping an idle keep-alive connection would); ``partial_reset`` sends the first bytes of its
answer and then resets the connection (the request was certainly received);
``held_close_after`` waits for :attr:`release`, then answers and closes. ``seen`` lists the
tool names of the requests received, in order. With ``tls`` (a server context) it speaks
HTTPS.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import socket
import ssl
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mrtr_core.http import NEED_DATA, ConnectionEnded, HttpServerConnection, MessageReceived


class BrokenPeer:
    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}/mcp"
        self._tls = tls
        self.connections = 0
        self.seen: list[str] = []
        self.arrived = threading.Condition()  # notified as each request is seen
        self.release = threading.Event()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._accepter = threading.Thread(target=self._accept_loop, daemon=True)

    def __enter__(self) -> BrokenPeer:
        self._accepter.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.release.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for sock in list(self._socks):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._accepter.join(5)
        for thread in self._threads:
            thread.join(5)

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            self._socks.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        conn = HttpServerConnection()
        try:
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_side=True)
                self._socks.append(sock)  # what __exit__ shuts down
            while True:
                event = conn.next_event()
                sock.sendall(conn.data_to_send())
                if event is NEED_DATA:
                    data = sock.recv(65536)
                    conn.receive_data(data)
                    if not data and self._stop.is_set():
                        return
                elif isinstance(event, MessageReceived):
                    name = (event.parsed.params or {}).get("name")
                    with self.arrived:
                        self.seen.append(str(name))
                        self.arrived.notify_all()
                    if name == "break":
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                        return
                    if name == "stall":
                        self._stop.wait()
                        return
                    if name == "held_close_after":
                        self.release.wait()
                    reply = {"jsonrpc": "2.0", "id": event.request_id, "result": {"name": name}}
                    conn.send_reply(reply if event.request_id is not None else None)
                    if name in ("close_after", "held_close_after"):
                        sock.sendall(conn.data_to_send())
                        return
                    if name == "partial_reset":
                        sock.sendall(conn.data_to_send()[:40])
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                        return
                elif isinstance(event, ConnectionEnded):
                    return
        except OSError:
            return
        finally:
            sock.close()


def self_signed_tls(folder: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a fresh self-signed certificate for 127.0.0.1 (written to
    ``folder``), and a client context that trusts it and nothing else."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    start = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(1)
        .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=365 * 30))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    return server, ssl.create_default_context(cafile=str(cert_file))
