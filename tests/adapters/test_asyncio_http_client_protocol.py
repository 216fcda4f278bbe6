"""The asyncio HTTP client's connections as :class:`asyncio.Protocol`: bytes in any split,
event streams, limits, cancellation and servers that hang up, against a scripted raw peer.

The peer is a plain asyncio server on 127.0.0.1 that reads each request (head and
``Content-Length`` body) and answers with bytes a test writes, so framing is under the
test's control. Real sockets cannot run on a virtual clock: each test has one generous
overall timeout and asserts on outcomes only.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import re
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mrtr_asyncio.http_client import HttpTransport

from mrtr_core.errors import RemoteProtocolError
from mrtr_core.http import HttpClientConfig, ServerDisconnectedError

LIMIT = 10.0  # generous: only a broken test ever waits this long
_LENGTH = re.compile(rb"(?im)^content-length:[ \t]*(\d+)")

Script = Callable[
    [int, dict[str, Any], asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]
]
"""Answers request number ``n`` (from 0, across connections); ``False`` ends the connection."""


class ScriptedPeer:
    """Counts connections and requests; each request is answered by ``script``."""

    def __init__(self, script: Script, *, tls: ssl.SSLContext | None = None) -> None:
        self.script = script
        self.tls = tls
        self.connections = 0
        self.requests: list[dict[str, Any]] = []
        self.eof = asyncio.Event()  # a connection saw the client close it
        self._server: asyncio.Server | None = None
        self.url = ""

    async def __aenter__(self) -> ScriptedPeer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        port = self._server.sockets[0].getsockname()[1]
        scheme = "https" if self.tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{port}/mcp"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    self.eof.set()
                    return
                match = _LENGTH.search(head)
                assert match is not None
                message = json.loads(await reader.readexactly(int(match.group(1))))
                self.requests.append(message)
                if not await self.script(len(self.requests) - 1, message, reader, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()


def call(request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {}},
    }


def json_reply(message: dict[str, Any], *, body: bytes | None = None) -> bytes:
    data = json.dumps(message).encode() if body is None else body
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    return head % len(data) + data


def result_for(message: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message["id"], "result": {"ok": True}}


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_reply(*events: dict[str, Any]) -> bytes:
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    body = b"".join(chunk(b"event: message\ndata: %s\n\n" % json.dumps(e).encode()) for e in events)
    return head + body + b"0\r\n\r\n"


def run(test: Callable[[], Awaitable[None]]) -> None:
    async def main() -> None:
        async with asyncio.timeout(LIMIT):
            await test()

    asyncio.run(main())


def test_a_response_arriving_a_byte_at_a_time_is_assembled_and_the_connection_kept():
    async def script(n, message, reader, writer):
        for byte in json_reply(result_for(message)):
            writer.write(bytes([byte]))
            await writer.drain()
        return True

    async def test():
        async with ScriptedPeer(script) as peer, HttpTransport(peer.url) as transport:
            for i in range(3):
                assert (await transport.request(call(i)))["result"] == {"ok": True}
            assert peer.connections == 1

    run(test)


def test_an_event_stream_answer_skips_notifications_and_keeps_the_connection():
    notice = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}

    async def script(n, message, reader, writer):
        writer.write(sse_reply(notice, result_for(message)))
        await writer.drain()
        return True

    async def test():
        async with ScriptedPeer(script) as peer, HttpTransport(peer.url) as transport:
            for i in range(2):
                response = await transport.request(call(i))
                assert response == result_for(call(i))
            assert peer.connections == 1

    run(test)


def test_an_event_stream_still_open_after_its_response_is_not_reused():
    async def script(n, message, reader, writer):
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        event = b"event: message\ndata: %s\n\n" % json.dumps(result_for(message)).encode()
        writer.write(head + chunk(event))  # the stream does not end
        await writer.drain()
        await reader.read()  # until the client closes it
        return False

    async def test():
        async with ScriptedPeer(script) as peer, HttpTransport(peer.url) as transport:
            assert (await transport.request(call(1)))["id"] == 1
            assert (await transport.request(call(2)))["id"] == 2
            assert peer.connections == 2

    run(test)


def test_a_response_over_the_size_limit_fails_and_its_connection_is_replaced():
    async def script(n, message, reader, writer):
        if n == 0:
            writer.write(json_reply(message, body=b'{"pad": "' + b"x" * 4000 + b'"}'))
        else:
            writer.write(json_reply(result_for(message)))
        await writer.drain()
        return True

    async def test():
        config = HttpClientConfig(max_response_bytes=1000)
        async with (
            ScriptedPeer(script) as peer,
            HttpTransport(peer.url, config=config) as transport,
        ):
            with pytest.raises(RemoteProtocolError, match="limit"):
                await transport.request(call(1))
            assert (await transport.request(call(2)))["id"] == 2
            assert peer.connections == 2

    run(test)


def test_a_cancelled_request_closes_its_connection():
    asked = asyncio.Event()

    async def script(n, message, reader, writer):
        if n == 0:
            asked.set()
            return True  # never answers; the next read sees the client close
        writer.write(json_reply(result_for(message)))
        await writer.drain()
        return True

    async def test():
        async with ScriptedPeer(script) as peer, HttpTransport(peer.url) as transport:
            pending = asyncio.ensure_future(transport.request(call(1)))
            await asked.wait()
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending
            await peer.eof.wait()  # the HTTP way of cancelling: the connection is closed
            assert (await transport.request(call(2)))["id"] == 2
            assert peer.connections == 2

    run(test)


def test_a_server_hanging_up_mid_response_fails_the_request_without_a_retry():
    async def script(n, message, reader, writer):
        if n == 0:
            writer.write(json_reply(result_for(message)))
            await writer.drain()
            return True
        writer.write(json_reply(result_for(message))[:20])
        await writer.drain()
        return False

    async def test():
        async with ScriptedPeer(script) as peer, HttpTransport(peer.url) as transport:
            assert (await transport.request(call(1)))["id"] == 1
            with pytest.raises(ServerDisconnectedError) as caught:
                await transport.request(call(2))
            assert caught.value.response_started
            assert len(peer.requests) == 2  # part of an answer came: never sent again

    run(test)


def test_a_response_with_more_of_the_stream_behind_it_completes_at_once():
    async def script(n, message, reader, writer):
        # The answer and an unrelated trailing notification stream in one write.
        notice = {"jsonrpc": "2.0", "method": "notifications/message", "params": {}}
        writer.write(sse_reply(result_for(message), notice))
        await writer.drain()
        return True

    async def test():
        async with ScriptedPeer(script) as peer, HttpTransport(peer.url) as transport:
            assert (await transport.request(call(1)))["id"] == 1
            assert (await transport.request(call(2)))["id"] == 2
            assert peer.connections == 1

    run(test)


def self_signed(directory: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a fresh certificate for 127.0.0.1, and a client trusting it."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    start = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=365 * 100))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client


def test_https_requests_go_over_tls_on_one_kept_alive_connection(tmp_path):
    server_tls, client_tls = self_signed(tmp_path)

    async def script(n, message, reader, writer):
        writer.write(json_reply(result_for(message)))
        await writer.drain()
        return True

    async def test():
        async with (
            ScriptedPeer(script, tls=server_tls) as peer,
            HttpTransport(peer.url, ssl_context=client_tls) as transport,
        ):
            assert peer.url.startswith("https://")
            for i in range(3):
                assert (await transport.request(call(i)))["id"] == i
            assert peer.connections == 1

    run(test)
