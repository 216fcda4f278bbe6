"""A misbehaving Streamable HTTP peer for client-transport tests (a thread per connection).

It frames with the real :class:`~mrtr_core.http.HttpServerConnection` and answers
``tools/call`` by tool name: ``echo`` answers; ``break`` closes the socket without answering;
``stall`` never answers; ``close_after`` answers and then closes the connection (as a server
dropping an idle keep-alive connection would); ``partial_reset`` sends the first bytes of its
answer and then resets the connection (the request was certainly received). ``seen`` lists
the tool names of the requests received, in order.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from mrtr_core.http import NEED_DATA, ConnectionEnded, HttpServerConnection, MessageReceived


class BrokenPeer:
    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.connections = 0
        self.seen: list[str] = []
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._accepter = threading.Thread(target=self._accept_loop, daemon=True)

    def __enter__(self) -> BrokenPeer:
        self._accepter.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
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
                    self.seen.append(str(name))
                    if name == "break":
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                        return
                    if name == "stall":
                        self._stop.wait()
                        return
                    reply = {"jsonrpc": "2.0", "id": event.request_id, "result": {"name": name}}
                    conn.send_reply(reply if event.request_id is not None else None)
                    if name == "close_after":
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
