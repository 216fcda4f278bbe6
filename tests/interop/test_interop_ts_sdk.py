"""Interop with the official TypeScript SDK v2 (``@modelcontextprotocol/server`` and
``/client`` 2.4.0 on Node 22), both directions, HTTP and stdio.

1. mrtr's client (sync, trio, asyncio) against a server written with the SDK
   (``ts/server.mjs``, its ``inputRequired`` results and its HMAC ``requestState`` codec):
   elicitation, sampling and roots inputs, three of them in one round, three rounds in a row
   carrying state, a prompt and a resource template that ask too; and a notification POST it
   accepts.
2. The SDK's client (``ts/client.mjs``, its automatic ``input_required`` loop, pinned to
   2026-07-28) against mrtr's server (``peers/mrtr_app.py``, served by each runtime's adapter),
   same cases, and a notification the server accepts.

``scripts/ts_sdk.sh`` installs Node 22 and the pinned packages from the npm registry into the
cache folder (``scripts/test.sh`` runs it too).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from interop_helpers import (
    ROOT,
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

TS_PEERS = Path(__file__).resolve().parent / "ts"
TS_ROOT = "file:///interop/ts"


class Peers:
    """The TypeScript peers, in a folder whose ``node_modules`` holds the SDK packages (ES
    modules resolve packages from where the importing file lies)."""

    def __init__(self, node: str, folder: Path) -> None:
        self.node = node
        self.server = str(folder / "server.mjs")
        self.client = str(folder / "client.mjs")


@pytest.fixture(scope="module")
def ts(tmp_path_factory: pytest.TempPathFactory) -> Peers:
    done = subprocess.run(["bash", str(ROOT / "scripts" / "ts_sdk.sh"), "--install"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    node, packages = done.stdout.split()
    folder = tmp_path_factory.mktemp("ts-peers")
    (folder / "node_modules").symlink_to(Path(packages) / "node_modules")
    for name in ("server.mjs", "client.mjs"):
        shutil.copy(TS_PEERS / name, folder / name)
    return Peers(node, folder)


@pytest.fixture(scope="module")
def ts_http_url(ts: Peers) -> Iterator[str]:
    """The SDK server over Streamable HTTP (one process for the module)."""
    with serving([ts.node, ts.server, "http"]) as url:
        yield url


@pytest.mark.parametrize("kind", TRANSPORTS)
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_our_client_against_ts_sdk_server(
    runtime: str, kind: str, ts: Peers, ts_http_url: str
) -> None:
    check_our_client(RUNNERS[runtime](kind, ts_http_url, [ts.node, ts.server, "stdio"]))


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_ts_sdk_server_accepts_our_notification(runtime: str, ts_http_url: str) -> None:
    notify_over_http(runtime, ts_http_url)


# --- the SDK's client against mrtr's server ------------------------------------------------------


def check_ts_client(results: dict[str, Any]) -> None:
    """The SDK's client got every case right, and its notification was accepted (on HTTP
    its POST carries MCP-Protocol-Version and no Mcp-Method)."""
    assert results.pop("notify") == "accepted"
    check_peer_client(results, "ts", TS_ROOT)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_ts_sdk_client_against_our_http_server(runtime: str, ts: Peers) -> None:
    with our_http_server(runtime) as url:
        check_ts_client(run_peer_client([ts.node, ts.client, "http", url]))


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_ts_sdk_client_against_our_stdio_server(runtime: str, ts: Peers) -> None:
    check_ts_client(run_peer_client([ts.node, ts.client, "stdio", *our_stdio_server(runtime)]))
