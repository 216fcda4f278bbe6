"""Shared across the test directories: free ports for servers that cannot report theirs, and
the Hypothesis profile every property test runs under."""

from __future__ import annotations

import gc
import os
import socket
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw their examples from a seed derived from the test itself and keep no
# example database, so every run on every machine tries the same inputs: a failure in CI is
# the failure a developer gets by running the test again (tests are deterministic).
settings.register_profile("mrtr", derandomize=True, database=None)
settings.load_profile("mrtr")


def _ephemeral_ports() -> range:
    """The ports the kernel hands out for outgoing connections and for port 0."""
    try:
        low, high = (int(v) for v in
                     Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def _consecutive_free_ports(count: int = 1) -> int:
    """The first of ``count`` consecutive ports free on 127.0.0.1 now, below the ephemeral
    range.

    Ports from the ephemeral range (what a bind to port 0 returns) are handed to outgoing
    connections and to other servers at any moment, so one free now may be taken before the
    server that needs it binds it; ports below that range are only taken by servers that ask
    for them by number. The search starts at a place that depends on this process, so two
    test runs at once start at different ports.
    """
    ephemeral = _ephemeral_ports()
    first, last = 10_000, min(ephemeral.start, 65_536) - count
    assert last > first, f"no ports below the ephemeral range {ephemeral}"
    span = last - first
    start = first + (os.getpid() * 7919) % span
    for step in range(0, span, count):
        base = first + (start - first + step) % span
        sockets = []
        try:
            for offset in range(count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", base + offset))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise AssertionError("no free ports")


@pytest.fixture
def free_ports() -> Callable[..., int]:
    """``free_ports(count=1)``: the first of ``count`` consecutive ports free on 127.0.0.1,
    below the ephemeral range (for servers told their port by number: nginx, ``serve
    --workers``)."""
    return _consecutive_free_ports


@pytest.fixture
def no_retrieval(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every URL anything asks ``urllib.request.urlopen`` for while the test runs (the test
    asserts it stays empty); each such call fails as if there were no network, so nothing
    leaves the machine even when a test fails."""
    fetched: list[object] = []

    def urlopen(request: object, *args: object, **kwargs: object) -> object:
        fetched.append(request)
        raise OSError("no network in tests")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return fetched


@pytest.fixture(autouse=True, scope="session")
def _collect_all_garbage_at_the_end() -> Iterator[None]:
    """Thaw what :func:`_collect_garbage_after_each_test` froze and collect it once more, so
    a cycle among objects that outlived one test and died in a later one is still collected
    (and its unclosed file still reported) before the run ends."""
    yield
    gc.unfreeze()
    gc.collect()


@pytest.fixture(autouse=True)
def _collect_garbage_after_each_test() -> Iterator[None]:
    """Collect the garbage a test left in reference cycles as the test ends, so a file, socket
    or pipe in it that was never closed fails this test (pyproject.toml turns ResourceWarning
    into an error), not whichever later test the collector happens to run in.

    What survives the collection is frozen (``gc.freeze``): the next test's collection then
    looks only at the objects made since, instead of walking every module, fixture and cached
    schema of the run each time (tens of milliseconds per test, minutes over the suite)."""
    yield
    gc.collect()
    gc.freeze()
