"""Hostile peers: servers that break MRTR on purpose, and probes a hostile client sends.

A hostile server answers every request of the flows sent to it in one broken way; the
client flow must end each of them with the typed error listed in
:data:`HOSTILE_SERVER_ERRORS` (or a timeout, when the network lost something first), within
its round and time budget, and pace state-only rounds (digest §2.4, §2.6).

A hostile client sends probes next to its honest flow: a tampered, swapped, foreign,
replayed, expired or malformed use of a ``requestState`` it was given, one under another
method, or one that answers again a question of an earlier round. Every probe in
:data:`PROBES_REFUSED` must be refused with ``-32602`` before any handler runs (S9-S13);
:data:`PROBES` says what the others must get.
"""

from __future__ import annotations

from typing import Any, Final

from mrtr_core.errors import (
    CodecError,
    FlowDeadlineError,
    InputRequestsLimitError,
    JsonRpcError,
    MrtrError,
    RemoteProtocolError,
    RoundLimitError,
    StateSizeLimitError,
    UnsupportedInputError,
)
from mrtr_core.sim.prng import Prng
from mrtr_core.wire.models import JsonObject

__all__ = [
    "HOSTILE_SERVERS",
    "HOSTILE_SERVER_ERRORS",
    "PROBES",
    "PROBES_REFUSED",
    "hostile_reply",
    "malformed_answers",
    "tamper",
]

HOSTILE_SERVER_ERRORS: Final[dict[str, tuple[type[MrtrError], ...]]] = {
    # input_required, forever: the client's round limit stops it (digest §2.6).
    "forever": (RoundLimitError,),
    # input_required forever, each question taking its person nearly the handler limit
    # (Timing.long_think): the flow's budget stops it (the round limit only when the
    # timing leaves the budget out of reach).
    "endless": (FlowDeadlineError, RoundLimitError),
    # state-only rounds in a hot loop, every third round a question (which resets the
    # pacing): paced, then stopped by the round limit (§2.4).
    "state_loop": (RoundLimitError,),
    # a requestState larger than the client accepts.
    "oversized": (StateSizeLimitError,),
    # an input request of a kind that does not exist.
    "unknown_kind": (CodecError,),
    # URL-mode elicitation the client never declared (S6a).
    "undeclared": (UnsupportedInputError,),
    # a resultType no one advertised (C7).
    "bad_result_type": (RemoteProtocolError,),
    # input_required with neither inputRequests nor requestState (S5).
    "empty": (CodecError,),
    # more inputRequests than the client accepts in one round.
    "too_many": (InputRequestsLimitError,),
    # neither result nor error.
    "malformed": (RemoteProtocolError,),
    # a JSON-RPC error.
    "error": (JsonRpcError,),
    # -32022 on every request while listing the client's own version as supported: the
    # client sends the leg once more on a new id (digest §3.2), then fails with the error.
    "version_refused": (JsonRpcError,),
}
"""The typed error each hostile server behaviour must end its flows with."""

HOSTILE_SERVERS: Final = tuple(HOSTILE_SERVER_ERRORS)

PROBES_REFUSED: Final = ("tamper", "swap", "foreign", "expired", "malformed")
"""Probes the server must refuse (-32602) whatever the handler."""

PROBES: Final = (*PROBES_REFUSED, "replay", "late_replay", "cross_method", "stale_answer")
"""Every probe; ``replay`` and ``late_replay`` must be refused for single-use targets (S12)
and may be served again otherwise. ``cross_method`` sends the state with the same name and
arguments under the other of ``tools/call`` and ``prompts/get`` (the reference app has a
tool and a prompt of one name): it must get an error, never a result (S11a; an app without
that namesake answers -32602 or, without prompts at all, -32601). ``stale_answer``
(targets that are not single-use) answers the round just asked as an honest client would,
plus another answer under a key an earlier round asked: the server must ignore that key
(S14), so a complete result still echoes the answer given first."""


def _form(message: str) -> JsonObject:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {"note": {"type": "string"}}},
        },
    }


def hostile_reply(behaviour: str, message: JsonObject, leg: int, prng: Prng,
                  max_state_bytes: int) -> JsonObject:
    """The hostile server's answer to one request.

    Args:
        behaviour: One of :data:`HOSTILE_SERVERS`.
        message: The client's request.
        leg: How many requests of this flow the hostile server has seen (1-based).
        prng: The flow's stream (for the states it makes up).
        max_state_bytes: The client's limit (``oversized`` goes one byte over it).
    """
    request_id = message.get("id")
    state = f"hostile-{leg}-{prng.next_u64():016x}"
    result: Any
    if behaviour in ("forever", "endless"):
        result = {"resultType": "input_required", "inputRequests": {f"q{leg}": _form("again?")},
                  "requestState": state}
    elif behaviour == "state_loop":
        result = {"resultType": "input_required", "requestState": state}
        if leg % 3 == 0:
            # A round with a question between state-only ones: the pacing after it starts
            # over from pacing_initial (digest §2.4).
            result["inputRequests"] = {f"q{leg}": _form("still there?")}
    elif behaviour == "oversized":
        result = {"resultType": "input_required", "inputRequests": {"q": _form("big")},
                  "requestState": "x" * (max_state_bytes + 1)}
    elif behaviour == "unknown_kind":
        result = {"resultType": "input_required",
                  "inputRequests": {"q": {"method": "weird/thing", "params": {}}},
                  "requestState": state}
    elif behaviour == "undeclared":
        result = {"resultType": "input_required", "requestState": state, "inputRequests": {
            "q": {"method": "elicitation/create",
                  "params": {"mode": "url", "message": "open", "url": "https://example.com/x"}}}}
    elif behaviour == "bad_result_type":
        result = {"resultType": "task", "task": {"taskId": state}}
    elif behaviour == "empty":
        result = {"resultType": "input_required"}
    elif behaviour == "too_many":
        result = {"resultType": "input_required", "requestState": state,
                  "inputRequests": {f"q{i}": _form(f"q{i}") for i in range(100)}}
    elif behaviour == "malformed":
        return {"jsonrpc": "2.0", "id": request_id}
    elif behaviour == "error":
        return {"jsonrpc": "2.0", "id": request_id,
                "error": {"code": -32603, "message": "hostile failure"}}
    elif behaviour == "version_refused":
        version = message.get("params", {}).get("_meta", {}).get(
            "io.modelcontextprotocol/protocolVersion")
        return {"jsonrpc": "2.0", "id": request_id, "error": {
            "code": -32022, "message": "Unsupported protocol version",
            "data": {"supported": [version], "requested": version}}}
    else:
        raise ValueError(f"unknown hostile server behaviour {behaviour!r}")
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def tamper(token: str, prng: Prng) -> str:
    """``token`` with one character of its body changed (or cut short, or extended)."""
    how = prng.below(4)
    if how == 0 or len(token) < 8:
        return token + "A"
    if how == 1:
        return token[: len(token) - 1 - prng.below(len(token) // 2)]
    body = token.rfind(".") + 1
    index = body + prng.below(max(1, len(token) - body))
    old = token[index]
    new = _B64[(_B64.find(old) + 1 + prng.below(len(_B64) - 1)) % len(_B64)]
    if how == 2:
        return token[:index] + new + token[index + 1 :]
    # A different key id, same body.
    head, _, rest = token.partition(".")
    _, _, body_text = rest.partition(".")
    return f"{head}.zz{prng.below(100)}.{body_text}"


def malformed_answers(keys: list[str], prng: Prng) -> Any:
    """``inputResponses`` that must be refused with -32602 (S13, S18)."""
    if not keys:
        # Nothing was asked: any object would be ignored (S14); only a non-object is wrong.
        return ["not", "an", "object"] if prng.below(2) else "not an object"
    key = keys[prng.below(len(keys))]
    how = prng.below(5)
    if how == 0:
        return "not an object"
    if how == 1:
        return {key: None}
    if how == 2:
        return {key: {"action": 42}}
    if how == 3:
        return {key: {"action": "accept", "content": {"note": ["nested", {"x": 1}]}}}
    return {key: ["not", "an", "answer"]}
