"""Fixtures for the server engine tests: one run per runtime, and a real Redis."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import pytest
import redis
from server_helpers import REDIS_SCRIPT, RUNTIMES, Runtime


@pytest.fixture(params=RUNTIMES)
def rt(request: pytest.FixtureRequest) -> Runtime:
    """Each test using this runs once per runtime."""
    return Runtime(request.param)


# --- a real Redis ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def redis_port() -> Iterator[int]:
    """A redis-server started for this test session (installed first if missing) and
    stopped at the end, by pid."""
    port = _free_port()
    started = subprocess.run(
        ["bash", str(REDIS_SCRIPT), "start", str(port)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if started.returncode != 0:
        raise RuntimeError(f"could not start redis-server: {started.stderr.strip()}")
    pid = started.stdout.strip().splitlines()[-1]
    try:
        yield port
    finally:
        subprocess.run(["bash", str(REDIS_SCRIPT), "stop", pid], check=False, timeout=60)


@pytest.fixture
def redis_client(redis_port: int) -> Iterator[redis.Redis]:
    client = redis.Redis(host="127.0.0.1", port=redis_port)
    client.flushdb()
    try:
        yield client
    finally:
        client.close()
