"""The benchmark app on mrtr: the same tools, names and wire shapes as ``sdk_server.py``.

- ``echo(text)``: one plain round.
- ``delete_file(path)``: two rounds; round 1 asks the elicitation form ``{"confirm": boolean}``.
- ``multi_round(rounds, inputs, state_bytes)``: ``rounds`` input_required rounds of
  ``inputs`` forms each, carrying ``state_bytes`` of memoised state, then completes.

Used by ``our_server.py`` (over HTTP) and by ``benchmarks/micro_core.py`` (in process).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from mrtr_core.app import App
from mrtr_core.server import Context, ServerLimits, form
from mrtr_core.state import KeyRing, StateCodec

CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "description": "Really do it?"}},
    "required": ["confirm"],
}
MAX_STATE_BYTES = 256 * 1024  # room for the 64 KiB point of the growth curve
MAX_INPUT_REQUESTS = 64


def build_app(nonce: Callable[[int], bytes] = os.urandom, key: bytes | None = None) -> App:
    """The benchmark app; ``requestState`` sealed with AES-GCM under ``key`` (random by default)."""
    codec = StateCodec(
        KeyRing({"k1": key if key is not None else os.urandom(32)}, active="k1"),
        audience="mrtr-bench",
        nonce=nonce,
        max_bytes=MAX_STATE_BYTES,
    )
    app = App(
        "mrtr-bench",
        "1.0",
        codec=codec,
        limits=ServerLimits(
            max_input_requests=MAX_INPUT_REQUESTS,
            max_rounds=16,
            max_input_responses=MAX_INPUT_REQUESTS * 16,
        ),
    )

    @app.tool()
    def echo(ctx: Context, text: str) -> str:
        """Return the text unchanged."""
        return text

    @app.tool()
    def delete_file(ctx: Context, path: str) -> str:
        """Ask for confirmation, then report the deletion."""
        answer = ctx.ask("confirm", form(f"Delete {path}?", CONFIRM_SCHEMA))
        if answer.action != "accept" or not (answer.content or {}).get("confirm"):
            return f"kept {path}"
        return f"deleted {path}"

    @app.tool()
    def multi_round(ctx: Context, rounds: int, inputs: int, state_bytes: int) -> str:
        """``rounds`` rounds of ``inputs`` forms each, carrying ``state_bytes`` of state."""
        if state_bytes > 0:
            ctx.memo("pad", lambda: "x" * state_bytes)
        for r in range(rounds):
            ctx.ask_all(
                {
                    f"q{r}_{i}": form(f"Question {i} of round {r + 1}", CONFIRM_SCHEMA)
                    for i in range(inputs)
                }
            )
        return f"finished {rounds} rounds"

    return app
