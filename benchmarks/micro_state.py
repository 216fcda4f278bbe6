"""``requestState`` sealing, in process: ours against the official SDK and the bare primitives.

The unit compared is the state work of one round on the server: open the token the
client echoed (verify it, check expiry and the binding to method, target, arguments,
principal and audience) and seal the next one.

- ours: ``Binding`` for the request + ``StateCodec.open`` + ``StateCodec.seal``.
- SDK: one pass of its public ``RequestStateBoundary`` middleware over a request that
  carries a token and a handler result that carries new state (it unseals, checks the
  claims, and seals a fresh envelope: the same work). The middleware is a coroutine that
  never suspends here, so it is stepped directly (no event loop in the measurement).
- SDK codec only: ``AESGCMRequestStateCodec.seal`` + ``unseal`` of the same plaintext, with
  no envelope, no binding and no expiry (a lower bound on any sealing in that SDK).
- bare primitives: AES-256-GCM encrypt + decrypt, HMAC-SHA256 sign + verify of the same bytes.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Callable, Coroutine
from typing import Any

from harness import time_interleaved

# A representative round-2 state: one recorded elicitation answer and one memo.
STATE_PAYLOAD: dict[str, Any] = {
    "answers": {"confirm": {"action": "accept", "content": {"confirm": True}}},
    "memo": {"plan": "pending-delete:notes.txt"},
}
TOOL = "delete_file"
ARGUMENTS: dict[str, Any] = {"path": "notes.txt"}
NOW = 1_800_000_000.0


def _step(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never suspends to completion without an event loop."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("coroutine suspended; it cannot be stepped directly")


def ours_round(payload: dict[str, Any] = STATE_PAYLOAD) -> Callable[[], object]:
    """Our server's state work for one round: binding, open the echoed token, seal the next."""
    from mrtr_core.state import Binding, KeyRing, StateCodec, digest_arguments

    codec = StateCodec(
        KeyRing({"k1": os.urandom(32)}, active="k1"), audience="bench", nonce=os.urandom
    )
    first = Binding(method="tools/call", target=TOOL, arguments_digest=digest_arguments(ARGUMENTS))
    token = codec.seal(payload, first, NOW)

    def one() -> object:
        binding = Binding(
            method="tools/call", target=TOOL, arguments_digest=digest_arguments(ARGUMENTS)
        )
        opened = codec.open(token, binding, NOW + 1.0)
        return codec.seal(opened.payload, binding, NOW + 1.0)

    return one


def ours_seal_open(payload: dict[str, Any] = STATE_PAYLOAD) -> Callable[[], object]:
    """``StateCodec.seal`` then ``open`` with a binding computed once (codec cost alone)."""
    from mrtr_core.state import Binding, KeyRing, StateCodec, digest_arguments

    codec = StateCodec(
        KeyRing({"k1": os.urandom(32)}, active="k1"), audience="bench", nonce=os.urandom
    )
    binding = Binding(
        method="tools/call", target=TOOL, arguments_digest=digest_arguments(ARGUMENTS)
    )

    def one() -> object:
        return codec.open(codec.seal(payload, binding, NOW), binding, NOW + 1.0)

    return one


def sdk_round(payload: dict[str, Any] = STATE_PAYLOAD) -> Callable[[], object]:
    """The official SDK's state work for one round, through its ``RequestStateBoundary``."""
    from mcp.server.context import ServerRequestContext
    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

    security = RequestStateSecurity(keys=[os.urandom(32)], audience="bench")
    boundary = RequestStateBoundary(security, default_audience="bench")
    state = json.dumps(payload, separators=(",", ":"))
    params: dict[str, Any] = {"name": TOOL, "arguments": ARGUMENTS}

    def context(p: dict[str, Any]) -> ServerRequestContext[Any, Any]:
        return ServerRequestContext(
            session=None,  # type: ignore[arg-type]  # the boundary never touches the session
            lifespan_context=None,
            protocol_version="2026-07-28",
            method="tools/call",
            params=p,
        )

    async def handler(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        # The handler reads the plaintext the boundary recovered and returns new state.
        return {"resultType": "input_required", "requestState": ctx.params["requestState"]}  # type: ignore[index]

    async def first_round(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        return {"resultType": "input_required", "requestState": state}

    token = _step(boundary(context(params), first_round))["requestState"]
    ctx2 = context({**params, "requestState": token})
    check = _step(boundary(ctx2, handler))
    if not isinstance(check.get("requestState"), str) or check["requestState"] == state:
        raise RuntimeError("the SDK boundary did not re-seal the state")

    def one() -> object:
        return _step(boundary(ctx2, handler))

    return one


def sdk_codec_only(payload: dict[str, Any] = STATE_PAYLOAD) -> Callable[[], object]:
    """The SDK's AES-GCM codec alone (no claims envelope, no binding, no expiry)."""
    from mcp.server.request_state import AESGCMRequestStateCodec

    codec = AESGCMRequestStateCodec([os.urandom(32)])
    plain = json.dumps(payload, separators=(",", ":")).encode()

    def one() -> object:
        return codec.unseal(codec.seal(plain))

    return one


def bare_aesgcm(payload: dict[str, Any] = STATE_PAYLOAD) -> Callable[[], object]:
    """AES-256-GCM encrypt + decrypt of the payload bytes (fresh nonce each time)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    aead = AESGCM(os.urandom(32))
    plain = json.dumps(payload, separators=(",", ":")).encode()
    header = b"v1.k1."

    def one() -> object:
        nonce = os.urandom(12)
        return aead.decrypt(nonce, aead.encrypt(nonce, plain, header), header)

    return one


def bare_hmac(payload: dict[str, Any] = STATE_PAYLOAD) -> Callable[[], object]:
    """HMAC-SHA256 sign + constant-time verify of the payload bytes."""
    key = os.urandom(32)
    plain = json.dumps(payload, separators=(",", ":")).encode()

    def one() -> object:
        tag = hmac.digest(key, plain, "sha256")
        return hmac.compare_digest(tag, hmac.digest(key, plain, "sha256"))

    return one


CASES: dict[str, Callable[[], Callable[[], object]]] = {
    "ours_round": ours_round,
    "ours_seal_open": ours_seal_open,
    "sdk_round": sdk_round,
    "sdk_codec_only": sdk_codec_only,
    "bare_aesgcm": bare_aesgcm,
    "bare_hmac": bare_hmac,
}


def run(*, number: int, repeats: int) -> dict[str, dict[str, float]]:
    """Operations per second of every case (spread over ``repeats`` interleaved runs)."""
    return time_interleaved(
        {name: make() for name, make in CASES.items()}, number=number, repeats=repeats
    )
