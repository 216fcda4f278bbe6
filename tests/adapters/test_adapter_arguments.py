"""The adapters' HTTP transports and servers refuse bad arguments where they are given.

``max_connections=0`` would make every request wait forever for a connection slot; a
timeout of ``nan`` or below zero would close every connection at once; a port outside
0-65535 fails deep in ``bind``. Each is refused, the same way in every runtime, naming the
argument, before anything is connected or bound.
"""

from __future__ import annotations

import os
from typing import Any

import mrtr_asyncio
import mrtr_sync
import mrtr_trio
import pytest
import trio

from mrtr_core import App, KeyRing, StateCodec

URL = "http://127.0.0.1:9/mcp"


def app() -> App:
    ring = KeyRing({"k1": bytes(range(32))}, active="k1")
    return App("srv", "1", codec=StateCodec(ring, audience="srv", nonce=os.urandom))


@pytest.mark.parametrize("transport", [mrtr_sync.HttpTransport, mrtr_trio.HttpTransport,
                                       mrtr_asyncio.HttpTransport])
@pytest.mark.parametrize("max_connections", [0, -1, True, 1.5])
def test_http_transport_refuses_a_bad_max_connections(transport: Any, max_connections: Any) -> None:
    with pytest.raises(ValueError, match="max_connections must be an integer >= 1"):
        transport(URL, max_connections=max_connections)


@pytest.mark.parametrize("connect_timeout", [0, -1.0, float("nan"), "10"])
def test_sync_http_transport_refuses_a_bad_connect_timeout(connect_timeout: Any) -> None:
    with pytest.raises(ValueError, match="connect_timeout must be a positive number of seconds"):
        mrtr_sync.HttpTransport(URL, connect_timeout=connect_timeout)


def _serve_sync(**kwargs: Any) -> None:
    mrtr_sync.serve_http(app(), **kwargs).shutdown()


def _serve_asyncio(**kwargs: Any) -> None:
    mrtr_asyncio.serve_http(app(), **kwargs)


def _serve_trio(**kwargs: Any) -> None:
    async def serve() -> None:
        # Serving starts only when an argument is wrongly accepted; the bound ends that.
        with trio.fail_after(10):
            await mrtr_trio.serve_http(app(), **kwargs)

    trio.run(serve)


BAD_SERVER_ARGUMENTS = [
    ({"port": 70000}, "port must be an integer from 0 to 65535"),
    ({"port": -1}, "port must be an integer from 0 to 65535"),
    ({"max_connections": 0}, "max_connections must be an integer >= 1"),
    ({"read_timeout": 0}, "read_timeout must be a positive number of seconds"),
    ({"read_timeout": float("nan")}, "read_timeout must be a positive number of seconds"),
    ({"idle_timeout": -1.0}, "idle_timeout must be a positive number of seconds"),
]


@pytest.mark.parametrize("serve", [_serve_sync, _serve_asyncio, _serve_trio])
@pytest.mark.parametrize(("kwargs", "message"), BAD_SERVER_ARGUMENTS)
def test_serve_http_refuses_bad_arguments(serve: Any, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        serve(**kwargs)
