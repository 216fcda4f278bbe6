"""Tamper campaign: no altered requestState is ever accepted, and no handler code runs.

For seeded tokens of several sizes, in both modes: every single-character change (each
position, several replacements including the same letter in the other case), every
truncation, and a set of extensions. Each must be refused with the fixed -32602 error,
before the handler is called.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs
import pytest
from mrtr_sync.server_engine import run_handler
from server_helpers import T0, accept, make_engine, tool_call

from mrtr_core.server import Context, HandlerSpec, NeedsInput, form
from mrtr_core.state import REJECTION_REASONS, StateRejectedError

TOKENS_PER_MODE = 8
EXTENSIONS = ["A", "AA", "AAA", "AAAA", "=", "==", ".", "-", "_", " ", "\n", "é", "\x00"]
WIRE = {
    "code": -32602,
    "message": "Invalid or expired requestState",
    "data": {"reason": "invalid_request_state"},
}


def _replacements(ch: str) -> set[str]:
    options = {ch.swapcase(), chr(ord(ch) ^ 0x01), "A" if ch != "A" else "B", ".", "é", "\x00"}
    options.discard(ch)
    return options


def _mutations(token: str) -> list[str]:
    out: list[str] = []
    for i, ch in enumerate(token):
        for repl in _replacements(ch):
            out.append(token[:i] + repl + token[i + 1 :])
    out.extend(token[:length] for length in range(len(token)))
    out.extend(token + suffix for suffix in EXTENSIONS)
    out.extend(prefix + token for prefix in (" ", "v1."))
    return out


def _mint(mode: str, seed: int) -> tuple[Any, NeedsInput]:
    """A round-1 token for a flow whose state size varies with the seed."""

    def minting(ctx: Context, version: str) -> Any:
        ctx.memo("notes", lambda: "n" * (seed * 37))
        return ctx.ask("confirm", form(f"Deploy {version}?", ok=bool))

    engine = make_engine(seed=seed, mode=mode)
    first = tool_call("deploy", {"version": f"v{seed}"})
    outcome = run_handler(engine, first, HandlerSpec(handler=minting), now=T0)
    assert isinstance(outcome, NeedsInput)
    return engine, outcome


@pytest.mark.parametrize("mode", ["aead", "hmac"])
def test_every_altered_token_is_refused_before_the_handler_runs(mode: str) -> None:
    runs = {"n": 0}

    def counted(ctx: Context, version: str) -> Any:
        runs["n"] += 1
        return ctx.ask("confirm", form(f"Deploy {version}?", ok=bool))

    spec = HandlerSpec(handler=counted)
    reasons: Counter[str] = Counter()
    attempts = 0
    for seed in range(TOKENS_PER_MODE):
        engine, outcome = _mint(mode, seed)
        token = outcome.request_state
        retry = tool_call(
            "deploy",
            {"version": f"v{seed}"},
            responses={"confirm": accept(ok=True)},
            state=token,
        )
        for altered in _mutations(token):
            assert altered != token
            with pytest.raises(StateRejectedError) as info:
                run_handler(engine, attrs.evolve(retry, request_state=altered), spec, now=T0 + 1)
            assert info.value.to_error_object() == WIRE
            reasons[info.value.reason] += 1
            attempts += 1
        assert runs["n"] == 0
        # Control: the untouched token is accepted and runs the handler.
        run_handler(engine, retry, spec, now=T0 + 1)
        assert runs["n"] == 1
        runs["n"] = 0
    assert attempts > 10_000
    assert set(reasons) <= REJECTION_REASONS
    assert {"malformed", "bad_mac", "unknown_key"} <= set(reasons)
