"""Fixtures for the deployment tests: a throwaway Redis on a unix socket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import Watched, ensure_installed

# A safety net: readiness is a line the process prints; only a hang waits this long.
START_TIMEOUT = 120.0


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A fresh redis-server of this test's own (no TCP port, no persistence); its URL."""
    server = ensure_installed("redis-server", ["scripts/redis.sh", "install"])
    sock = tmp_path / "redis.sock"
    process = Watched([server, "--port", "0", "--unixsocket", str(sock), "--save", "",
                       "--appendonly", "no", "--daemonize", "no", "--logfile", ""])
    try:
        process.wait_for(r"(?i)ready to accept connections", START_TIMEOUT)
        yield f"unix://{sock}"
    finally:
        process.stop()
