"""Interop with the official Python SDK (``mcp`` 2.3.0), both directions, HTTP and stdio.

1. mrtr's client (sync, trio, asyncio) against a server written with the SDK
   (``peers/sdk_server.py``): elicitation, sampling and roots inputs, three of them in one
   round, three rounds in a row, a prompt and a resource template that ask too; and a
   notification POST it accepts.
2. The SDK's client (``peers/sdk_client.py``, its automatic MRTR loop) against mrtr's server
   (``peers/mrtr_app.py``, served by each runtime's adapter), same cases.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from interop_helpers import (
    PEERS,
    RUNNERS,
    RUNTIMES,
    TRANSPORTS,
    check_our_client,
    check_peer_client,
    notify_over_http,
    our_http_server,
    our_stdio_server,
    run_peer_client,
    serving,
)

SDK_SERVER = PEERS / "sdk_server.py"
SDK_CLIENT = [sys.executable, str(PEERS / "sdk_client.py")]
SDK_STDIO = [sys.executable, str(SDK_SERVER), "stdio"]
SDK_ROOT = "file:///interop/root"


@pytest.fixture(scope="module")
def sdk_http_url() -> Iterator[str]:
    """The SDK server over Streamable HTTP (one process for the module)."""
    with serving([sys.executable, str(SDK_SERVER), "http"]) as url:
        yield url


@pytest.mark.parametrize("kind", TRANSPORTS)
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_our_client_against_sdk_server(runtime: str, kind: str, sdk_http_url: str) -> None:
    check_our_client(RUNNERS[runtime](kind, sdk_http_url, SDK_STDIO))


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_sdk_server_accepts_our_notification(runtime: str, sdk_http_url: str) -> None:
    # Its POST carries MCP-Protocol-Version, which the SDK's 2026-07-28 entry checks.
    notify_over_http(runtime, sdk_http_url)


# --- the SDK's client against mrtr's server ------------------------------------------------------


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_sdk_client_against_our_http_server(runtime: str) -> None:
    with our_http_server(runtime) as url:
        check_peer_client(run_peer_client([*SDK_CLIENT, "http", url]), "sdk", SDK_ROOT)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_sdk_client_against_our_stdio_server(runtime: str) -> None:
    results = run_peer_client([*SDK_CLIENT, "stdio", *our_stdio_server(runtime)])
    check_peer_client(results, "sdk", SDK_ROOT)
