"""Shared helpers for the app tests: a deterministic codec, request builders, a driver."""

from __future__ import annotations

import itertools
from typing import Any

from mrtr_core.app import App, Reply, drive_sync
from mrtr_core.state import KeyRing, MemoryReplayGuard, StateCodec

PROTOCOL = "2026-07-28"
KEY = b"k" * 32


def counter_nonce() -> Any:
    """A deterministic nonce source: 1, 2, 3, ... as big-endian bytes."""
    counter = itertools.count(1)

    def nonce(n: int) -> bytes:
        return next(counter).to_bytes(n, "big")

    return nonce


def make_codec(audience: str = "test-app") -> StateCodec:
    """A codec over one fixed test key and a deterministic nonce source."""
    return StateCodec(KeyRing({"k1": KEY}, active="k1"), audience=audience, nonce=counter_nonce())


def meta(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A valid per-request ``_meta``."""
    out: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": (
            {"elicitation": {}, "sampling": {}, "roots": {}} if capabilities is None
            else capabilities
        ),
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
    }
    out.update(extra)
    return out


def request(
    method: str, params: dict[str, Any] | None = None, *, rid: int | str = 1,
    capabilities: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A JSON-RPC request with a valid ``_meta`` merged into ``params``."""
    full = dict(params or {})
    full.setdefault("_meta", meta(capabilities))
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": full}


class Driver:
    """Sends requests to an app through ``drive_sync`` with a virtual clock."""

    def __init__(self, app: App, *, now: float = 1_000.0) -> None:
        self.app = app
        self.now = now
        self.guard = MemoryReplayGuard()
        self._ids = itertools.count(1)

    def send(self, message: object, *, principal: str | None = None) -> Reply:
        """Drive one message; the clock moves one second per message."""
        self.now += 1.0
        return drive_sync(self.app, message, now=self.now, principal=principal, guard=self.guard)

    def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Reply:
        """Send a request with a fresh id."""
        return self.send(request(method, params, rid=next(self._ids), **kw))


def result(reply: Reply) -> dict[str, Any]:
    """The result of a successful reply (asserting it is one)."""
    assert reply.message is not None, reply
    assert "result" in reply.message, reply.message
    assert reply.status == 200
    out: dict[str, Any] = reply.message["result"]
    return out


def error(reply: Reply) -> dict[str, Any]:
    """The error object of an error reply (asserting it is one)."""
    assert reply.message is not None, reply
    assert "error" in reply.message, reply.message
    out: dict[str, Any] = reply.message["error"]
    return out
