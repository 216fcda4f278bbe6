"""deploy_production: the protocol's own MRTR example as an mrtr app.

The tool asks two questions in ONE round (a confirmation and a change ticket), keeps the
deployment plan across rounds with ``ctx.memo`` (computed once, carried sealed in
``requestState``), and completes with a text result naming the version and the ticket. A
declined or cancelled confirmation completes with ``isError``.

Serve it with any adapter, for example ``mrtr serve examples/deploy.py:app``.

Keys. ``requestState`` is sealed with the key ring in the environment variable
``MRTR_KEYS``: a JSON object ``{"<key id>": "<base64 of at least 32 random bytes>", ...}``;
the last key seals, every key opens. Rotate in three steps, each rolled out to every instance
before the next (``deploy/README.md``): add the new key before the old one, then move it last,
then drop the old one a state lifetime and twice the clock-skew allowance later (12 minutes with
the defaults). Every instance behind a load balancer needs the same ring. Without ``MRTR_KEYS``
a fixed DEVELOPMENT key is used: it is public (it is in this file), so anyone can forge states
for a server that uses it; never deploy with it.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from mrtr_core.app import App
from mrtr_core.server import Context, accepted, content, form
from mrtr_core.state import KeyRing, StateCodec

__all__ = ["DEVELOPMENT_KEY", "app", "codec_from_env", "compute_plan", "deploy_production"]

# Public, for local development only (see the module docstring).
DEVELOPMENT_KEY = b"mrtr-development-key-NOT-SECRET!"


def codec_from_env(audience: str, environ: dict[str, str] | None = None) -> StateCodec:
    """A ``StateCodec`` over the ring in ``MRTR_KEYS`` (last key active), or over the public
    development key when the variable is not set."""
    env = os.environ if environ is None else environ
    raw = env.get("MRTR_KEYS")
    if raw:
        decoded = json.loads(raw)
        if not isinstance(decoded, dict) or not decoded:
            raise ValueError("MRTR_KEYS must be a non-empty JSON object {kid: base64 key}")
        keys = {str(kid): base64.b64decode(value, validate=True) for kid, value in decoded.items()}
        ring = KeyRing(keys, active=list(keys)[-1])
    else:
        ring = KeyRing({"dev": DEVELOPMENT_KEY}, active="dev")
    return StateCodec(ring, audience=audience, nonce=os.urandom)


app = App(
    "deploy",
    "1.0.0",
    codec=codec_from_env("deploy"),
    instructions="Deploys a version to production after a confirmation and a change ticket.",
)


def compute_plan(version: str) -> dict[str, Any]:
    """The rollout plan for ``version`` (stands in for an expensive call worth doing once)."""
    return {"version": version, "steps": ["drain canary", "roll 10%", "roll 100%"]}


@app.tool(description="Deploy a version to production (asks for confirmation and a ticket).")
def deploy_production(ctx: Context, version: str) -> Any:
    """Deploy ``version`` to production once the user confirms and gives a change ticket."""
    plan = ctx.memo("plan", lambda: compute_plan(version))
    answers = ctx.ask_all({
        "confirm_deploy": form(
            f"Deploy {version} to production ({', '.join(plan['steps'])})?", confirm=bool
        ),
        "change_ticket": form("Change ticket number for this deployment", ticket=str),
    })
    confirmation = answers["confirm_deploy"]
    confirmed = content(confirmation) if accepted(confirmation) else None
    if not confirmed or confirmed.get("confirm") is not True:
        return {
            "content": [{"type": "text", "text": f"Deployment of {version} was not confirmed."}],
            "isError": True,
        }
    ticket_answer = content(answers["change_ticket"])
    ticket = str(ticket_answer.get("ticket", "")).strip() if ticket_answer else ""
    if not ticket:
        return {
            "content": [{"type": "text", "text": "A change ticket is required to deploy."}],
            "isError": True,
        }
    return f"Deployed {version} to production under change ticket {ticket}."
