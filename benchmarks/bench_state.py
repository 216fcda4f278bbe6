"""requestState sealing speed: ours against the bare primitives and the official SDK.

Prints operations per second (one op = seal + open of a 1 KiB state) for:

* our codec, AES-256-GCM mode, next to bare AES-GCM encrypt+decrypt of the same bytes;
* our codec, HMAC-SHA256 mode, next to bare HMAC sign+verify of the same bytes;
* the "floor" of each mode: the work no design that turns a dict into an ASCII token can
  skip (a fresh nonce, JSON dump and load of the state, the primitive, base64 encode and
  decode), done with the same fast libraries the codec uses (orjson, pybase64), so the
  codec's own overhead shows apart from what JSON and base64 cost; and the same floor
  with the standard library's ``json`` and ``binascii``, for scale;
* the official Python SDK (``mcp``), when installed: its codec alone, and its full
  boundary path (claims envelope + codec, plus the JSON dump/load of the handler's state,
  which the SDK leaves to the handler), next to ours.

Targets: ours within 2x of the bare primitive (ratio >= 0.5), and at least 2x the SDK's
full path. Every candidate is measured in interleaved batches in the same run (best batch
wins), so load from other processes hits all of them alike. Nothing here is asserted.

Run: ``.venv/bin/python benchmarks/bench_state.py [--quick]``
"""

from __future__ import annotations

import argparse
import binascii
import hmac
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pybase64

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mrtr_core.state import Binding, KeyRing, StateCodec, digest_arguments

NOW = 1_800_000_000.0
dumps = json.JSONEncoder(separators=(",", ":")).encode
loads = json.loads


def state_of_size(target: int = 1024) -> dict[str, Any]:
    """An engine-shaped state whose compact JSON is ``target`` bytes."""
    state: dict[str, Any] = {
        "n": 2,
        "q": {"change_ticket": ["elicitation/create", "Qm9ndXNEaWdlc3RWYWx1ZQ", None]},
        "a": {
            "confirm_deploy": [
                "RGlnZXN0T2ZRdWVzdGlvbg",
                "elicitation/create",
                {"action": "accept", "content": {"confirm": True}},
            ]
        },
        "m": {"plan": ""},
    }
    size = len(dumps(state))
    state["m"]["plan"] = "x" * (target - size)
    assert len(dumps(state)) == target
    return state


def rates(fns: dict[str, Callable[[], object]], *, seconds: float, rounds: int) -> dict[str, float]:
    """Best batch rate (ops/s) of each function, batches interleaved across ``rounds``."""
    batches: dict[str, int] = {}
    slot = seconds / rounds / max(1, len(fns))
    for name, fn in fns.items():  # calibrate: a batch takes about `slot` seconds
        n = 1
        while True:
            start = time.perf_counter()
            for _ in range(n):
                fn()
            elapsed = time.perf_counter() - start
            if elapsed > slot / 4:
                break
            n *= 2
        batches[name] = max(1, int(n * slot / max(elapsed, 1e-9)))
    best = dict.fromkeys(fns, 0.0)
    for _ in range(rounds):
        for name, fn in fns.items():
            batch = batches[name]
            start = time.perf_counter()
            for _ in range(batch):
                fn()
            best[name] = max(best[name], batch / (time.perf_counter() - start))
    return best


def candidates(key: bytes, payload: dict[str, Any]) -> dict[str, Callable[[], object]]:
    """Everything to measure, by name."""
    data = dumps(payload).encode()
    ring = KeyRing({"k1": key}, active="k1")
    binding = Binding(
        method="tools/call",
        target="deploy_production",
        arguments_digest=digest_arguments({"version": "2.4.1"}),
        principal="user-42",
    )
    aead_codec = StateCodec(ring, audience="deploy", nonce=os.urandom, mode="aead")
    hmac_codec = StateCodec(ring, audience="deploy", nonce=os.urandom, mode="hmac")
    aes = AESGCM(key)
    aad = b"v1.k1."

    def ours_aead() -> None:
        aead_codec.open(aead_codec.seal(payload, binding, NOW), binding, NOW)

    def bare_aead() -> None:
        nonce = os.urandom(12)
        aes.decrypt(nonce, aes.encrypt(nonce, data, aad), aad)

    def floor_aead() -> None:
        nonce = os.urandom(12)
        text = pybase64.b64encode_as_string(aes.encrypt(nonce, orjson.dumps(payload), aad))
        orjson.loads(aes.decrypt(nonce, pybase64.b64decode(text, validate=True), aad))

    def stdlib_floor_aead() -> None:
        nonce = os.urandom(12)
        text = binascii.b2a_base64(aes.encrypt(nonce, dumps(payload).encode(), aad))
        loads(aes.decrypt(nonce, binascii.a2b_base64(text), aad))

    def ours_hmac() -> None:
        hmac_codec.open(hmac_codec.seal(payload, binding, NOW), binding, NOW)

    def bare_hmac() -> None:
        tag = hmac.digest(key, data, "sha256")
        hmac.compare_digest(tag, hmac.digest(key, data, "sha256"))

    def floor_hmac() -> None:
        body = os.urandom(12) + orjson.dumps(payload)
        text = pybase64.b64encode_as_string(body + hmac.digest(key, body, "sha256"))
        raw = pybase64.b64decode(text, validate=True)
        hmac.compare_digest(raw[-32:], hmac.digest(key, raw[:-32], "sha256"))
        orjson.loads(raw[12:-32])

    def stdlib_floor_hmac() -> None:
        body = os.urandom(12) + dumps(payload).encode()
        raw = binascii.a2b_base64(binascii.b2a_base64(body + hmac.digest(key, body, "sha256")))
        hmac.compare_digest(raw[-32:], hmac.digest(key, raw[:-32], "sha256"))
        loads(raw[12:-32])

    fns: dict[str, Callable[[], object]] = {
        "bare_aead": bare_aead,
        "floor_aead": floor_aead,
        "stdlib_floor_aead": stdlib_floor_aead,
        "ours_aead": ours_aead,
        "bare_hmac": bare_hmac,
        "floor_hmac": floor_hmac,
        "stdlib_floor_hmac": stdlib_floor_hmac,
        "ours_hmac": ours_hmac,
    }
    fns.update(sdk_candidates(key, payload))
    return fns


SDK_ERRORS: list[str] = []


def sdk_candidates(key: bytes, payload: dict[str, Any]) -> dict[str, Callable[[], object]]:
    """The ``mcp`` SDK's own sealing, when its API is the one this was written against."""
    try:
        from types import SimpleNamespace

        from mcp.server.request_state import (
            AESGCMRequestStateCodec,
            RequestStateBoundary,
            RequestStateSecurity,
        )

        codec = AESGCMRequestStateCodec([key])
        blob = dumps(payload).encode()
        boundary = RequestStateBoundary(RequestStateSecurity(keys=[key]), default_audience="deploy")
        params = {"name": "deploy_production", "arguments": {"version": "2.4.1"}}
        ctx = SimpleNamespace(method="tools/call", params=params)

        def sdk_codec() -> None:
            codec.unseal(codec.seal(blob))

        def sdk_full() -> None:
            token = boundary._seal(ctx, dumps(payload))  # type: ignore[arg-type]
            opened = SimpleNamespace(method="tools/call", params={**params, "requestState": token})
            plain, _ = boundary._unseal(opened)  # type: ignore[arg-type]
            loads(plain)

        sdk_codec()  # fail here, not mid-measurement, if the API changed
        sdk_full()
    except Exception as exc:
        SDK_ERRORS.append(f"{type(exc).__name__}: {exc}")
        return {}
    return {"sdk_codec": sdk_codec, "sdk_full": sdk_full}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter measurement")
    args = parser.parse_args()
    seconds, rounds = (2.0, 4) if args.quick else (12.0, 8)

    r = rates(candidates(os.urandom(32), state_of_size(1024)), seconds=seconds, rounds=rounds)
    rows: list[tuple[str, float, str]] = []
    for mode, primitive in (
        ("aead", "AES-256-GCM encrypt+decrypt"),
        ("hmac", "HMAC-SHA256 sign+verify"),
    ):
        bare, floor, ours = r[f"bare_{mode}"], r[f"floor_{mode}"], r[f"ours_{mode}"]
        stdlib_floor = r[f"stdlib_floor_{mode}"]
        rows += [
            (f"bare {primitive} (1 KiB)", bare, "reference"),
            (
                f"floor {mode}: nonce + orjson + pybase64 + primitive",
                floor,
                f"{floor / bare:.2f}x bare",
            ),
            (
                f"floor {mode} with stdlib json + binascii",
                stdlib_floor,
                f"{stdlib_floor / bare:.2f}x bare",
            ),
            (
                f"mrtr seal+open, {mode}",
                ours,
                f"{ours / bare:.2f}x bare (target >= 0.50); {ours / floor:.2f}x floor",
            ),
        ]
    if "sdk_full" in r:
        ours = r["ours_aead"]
        rows += [
            (
                "mcp SDK codec only, seal+unseal",
                r["sdk_codec"],
                f"mrtr aead is {ours / r['sdk_codec']:.2f}x this",
            ),
            (
                "mcp SDK boundary + state JSON, seal+unseal",
                r["sdk_full"],
                f"mrtr aead is {ours / r['sdk_full']:.2f}x this (target >= 2.00)",
            ),
        ]
    else:
        rows.append(("mcp SDK request_state", 0.0, f"n/a ({'; '.join(SDK_ERRORS)})"))

    width = max(len(name) for name, _, _ in rows)
    print(f"requestState seal+open, 1 KiB state ({'quick' if args.quick else 'full'} run)")
    for name, ops, note in rows:
        shown = f"{ops:12,.0f} ops/s" if ops > 0 else "         n/a"
        print(f"  {name:<{width}}  {shown}  {note}")


if __name__ == "__main__":
    main()
