"""Helpers for the server engine tests: runtimes, codecs, request builders."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import redis
import redis.asyncio
import trio
from mrtr_asyncio.replay_redis import AsyncRedisReplayGuard
from mrtr_asyncio.server_engine import run_handler as asyncio_run_handler
from mrtr_sync.replay_redis import RedisReplayGuard
from mrtr_sync.server_engine import run_handler as sync_run_handler
from mrtr_trio.replay_redis import TrioRedisReplayGuard
from mrtr_trio.server_engine import run_handler as trio_run_handler

from mrtr_core.server import Completed, HandlerSpec, NeedsInput, ServerEngine, ServerLimits
from mrtr_core.state import KeyRing, StateCodec
from mrtr_core.wire import MrtrParams, structure_params

REPO = Path(__file__).resolve().parents[2]
REDIS_SCRIPT = REPO / "scripts" / "redis.sh"

PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
ALL_CAPS: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}, "context": {}},
    "roots": {},
}

KEY1 = bytes(range(32))
KEY2 = bytes(range(32, 64))
T0 = 1_800_000_000.0  # a virtual "now" (Unix seconds)


# --- codecs and engines ---------------------------------------------------------------------


def seeded_nonce(seed: int) -> Callable[[int], bytes]:
    """A deterministic nonce source."""
    return random.Random(seed).randbytes


def make_codec(
    ring: KeyRing | None = None,
    *,
    seed: int = 1,
    audience: str = "deploy-server",
    mode: str = "aead",
    **kwargs: Any,
) -> StateCodec:
    ring = ring if ring is not None else KeyRing({"k1": KEY1}, active="k1")
    return StateCodec(ring, audience=audience, nonce=seeded_nonce(seed), mode=mode, **kwargs)  # type: ignore[arg-type]


def make_engine(
    ring: KeyRing | None = None, *, seed: int = 1, limits: ServerLimits | None = None, **kw: Any
) -> ServerEngine:
    return ServerEngine(make_codec(ring, seed=seed, **kw), limits=limits)


# --- request builders -------------------------------------------------------------------------


def meta(caps: dict[str, Any] | None = None) -> dict[str, Any]:
    return {PV: "2026-07-28", CC: ALL_CAPS if caps is None else caps}


def tool_call(
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    caps: dict[str, Any] | None = None,
    responses: Any = None,
    state: str | None = None,
) -> MrtrParams:
    """``tools/call`` params, read through the wire converter like a real request."""
    obj: dict[str, Any] = {"name": name, "_meta": meta(caps)}
    if arguments is not None:
        obj["arguments"] = arguments
    if responses is not None:
        obj["inputResponses"] = responses
    if state is not None:
        obj["requestState"] = state
    return structure_params("tools/call", obj)


def retry(params: MrtrParams, outcome: NeedsInput, responses: dict[str, Any] | None) -> MrtrParams:
    """The client's retry: same request, the answers, the state echoed byte for byte."""
    obj: dict[str, Any] = {"_meta": meta(_caps_of(params))}
    if params.method == "resources/read":
        obj["uri"] = params.target
    else:
        obj["name"] = params.target
        arguments = getattr(params, "arguments", None)
        if arguments is not None:
            obj["arguments"] = arguments
    if responses is not None:
        obj["inputResponses"] = responses
    obj["requestState"] = outcome.result["requestState"]
    return structure_params(params.method, obj)


def _caps_of(params: MrtrParams) -> dict[str, Any]:
    from mrtr_core.wire import unstructure

    return unstructure(params.meta.client_capabilities)  # type: ignore[no-any-return]


def nested_sampled(levels: int) -> dict[str, Any]:
    """A sampling answer whose content's ``_meta`` nests ``levels`` objects."""
    meta: Any = {}
    for _ in range(levels):
        meta = {"m": meta}
    return {"role": "assistant", "model": "m",
            "content": {"type": "text", "text": "x", "_meta": meta}}


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


# --- runtimes -----------------------------------------------------------------------------------


class Runtime:
    """Runs handlers as sync functions, trio coroutines or asyncio coroutines."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def handler(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` (written as plain code using ctx) in this runtime's style."""
        if self.name == "sync":
            return fn
        if self.name == "trio":

            @functools.wraps(fn)
            async def trio_handler(*args: Any, **kwargs: Any) -> Any:
                await trio.lowlevel.checkpoint()
                return fn(*args, **kwargs)

            return trio_handler

        @functools.wraps(fn)
        async def asyncio_handler(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0)
            return fn(*args, **kwargs)

        return asyncio_handler

    def spec(self, fn: Callable[..., Any], **kwargs: Any) -> HandlerSpec:
        return HandlerSpec(handler=self.handler(fn), **kwargs)

    def call(
        self,
        engine: ServerEngine,
        params: MrtrParams,
        spec: HandlerSpec,
        *,
        now: float = T0,
        principal: str | None = None,
        guard: Any = None,
    ) -> Completed | NeedsInput:
        """One round through this runtime's driver."""
        if self.name == "sync":
            return sync_run_handler(engine, params, spec, now=now, principal=principal, guard=guard)
        if self.name == "trio":

            async def trio_main() -> Completed | NeedsInput:
                return await trio_run_handler(
                    engine, params, spec, now=now, principal=principal, guard=guard
                )

            return trio.run(trio_main)

        async def asyncio_main() -> Completed | NeedsInput:
            if isinstance(guard, RedisPort):
                client = redis.asyncio.Redis(host="127.0.0.1", port=guard.port)
                try:
                    return await asyncio_run_handler(
                        engine,
                        params,
                        spec,
                        now=now,
                        principal=principal,
                        guard=AsyncRedisReplayGuard(client),
                    )
                finally:
                    await client.aclose()
            return await asyncio_run_handler(
                engine, params, spec, now=now, principal=principal, guard=guard
            )

        return asyncio.run(asyncio_main())

    @contextlib.contextmanager
    def redis_guard(self, port: int) -> Iterator[Any]:
        """A replay guard on the Redis at ``port``, of this runtime's kind; its client is
        closed on the way out (the guard does not own it)."""
        if self.name == "asyncio":
            yield RedisPort(port)  # the asyncio client is made inside each event loop
            return
        with redis.Redis(host="127.0.0.1", port=port) as client:
            yield (RedisReplayGuard if self.name == "sync" else TrioRedisReplayGuard)(client)


class RedisPort:
    """Where the asyncio runtime should connect its ``redis.asyncio`` guard."""

    def __init__(self, port: int) -> None:
        self.port = port


RUNTIMES = ["sync", "trio", "asyncio"]
