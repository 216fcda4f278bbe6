"""The app the nginx cluster test serves: a single-use two-round operation with a recorded
side effect.

``redeem(op)`` asks for a confirmation in round 1; round 2 (its ``requestState`` can be
redeemed once across the deployment: ``single_use=True``) performs the side effect, one Redis
``INCR effect:<op>``, and completes. Counting those keys afterwards shows whether any
operation's effect ran twice. Keys come from ``MRTR_KEYS`` (``mrtr serve --keys``), the Redis
URL from ``MRTR_TEST_REDIS``.
"""

from __future__ import annotations

import os
from typing import Any

import redis
from mrtr_cli.keys import ring_from_environment

from mrtr_core.app import App
from mrtr_core.server import Context, accepted, form
from mrtr_core.state import StateCodec

ring = ring_from_environment()
if ring is None:
    raise RuntimeError("serve this app with --keys (MRTR_KEYS)")
effects = redis.Redis.from_url(os.environ["MRTR_TEST_REDIS"])
app = App("cluster-test", "1.0.0", codec=StateCodec(ring, audience="cluster-test",
                                                      nonce=os.urandom))


@app.tool(description="Redeem operation `op` once, after a confirmation.", single_use=True)
def redeem(ctx: Context, op: str) -> Any:
    answer = ctx.ask("confirm", form(f"Redeem {op}?", confirm=bool))
    if not accepted(answer):
        return {"content": [{"type": "text", "text": "not confirmed"}], "isError": True}
    count = effects.incr(f"effect:{op}")
    return f"redeemed {op} ({count})"
