"""The mrtr app the official SDK's client is tested against (same cases as ``sdk_server.py``).

Served by ``tests/conformance/serve_app.py RUNTIME http|stdio tests/interop/peers/mrtr_app.py``.

- tool ``confirm_delete(path)``: one elicitation (key ``confirm``);
- tool ``gather()``: an elicitation, a sampling and a roots request in ONE round;
- tool ``three_rounds()``: elicitation, then sampling, then roots: three input rounds;
- tool ``echo(text)``: no input;
- prompt ``briefing(topic)``: one elicitation (key ``audience``);
- resource template ``notes://{folder}``: one roots request (key ``roots``).
"""

from __future__ import annotations

import os

from mrtr_core.app import App
from mrtr_core.server import Context, accepted, content, form, root_uris, roots, sample, text
from mrtr_core.state import KeyRing, StateCodec

# A fixed key for this test peer only.
_RING = KeyRing({"interop": b"interop-peer-key-for-tests-only!"}, active="interop")

app = App("mrtr-peer", "1.0.0", codec=StateCodec(_RING, audience="mrtr-peer", nonce=os.urandom))


def _field(answer: object, name: str) -> object:
    return (content(answer) or {}).get(name) if accepted(answer) else None  # type: ignore[arg-type]


@app.tool()
def echo(ctx: Context, text: str) -> str:
    """Echoes its text (no input needed)."""
    return text


@app.tool()
def confirm_delete(ctx: Context, path: str) -> str:
    """Deletes a file after the user confirms."""
    answer = ctx.ask("confirm", form(f"Delete {path}?", confirm=bool))
    return f"deleted {path}" if _field(answer, "confirm") is True else f"kept {path}"


@app.tool()
def gather(ctx: Context) -> str:
    """Asks for a name, a haiku and the roots, all in one round."""
    got = ctx.ask_all({"name": form("Your name?", name=str),
                       "haiku": sample("Write a haiku", 50),
                       "roots": roots()})
    return (f"name={_field(got['name'], 'name')}; haiku={text(got['haiku'])}; "  # type: ignore[arg-type]
            f"roots={','.join(root_uris(got['roots']))}")  # type: ignore[arg-type]


@app.tool()
def three_rounds(ctx: Context) -> str:
    """Asks three things in three rounds."""
    name = _field(ctx.ask("step1", form("Step 1: your name?", name=str)), "name")
    poem = text(ctx.ask("step2", sample(f"A poem for {name}", 50)))
    uris = root_uris(ctx.ask("step3", roots()))
    return f"name={name}; poem={poem}; roots={','.join(uris)}"


@app.prompt()
def briefing(ctx: Context, topic: str) -> str:
    """A briefing on a topic, for an audience the user names."""
    audience = _field(ctx.ask("audience", form("Who is the audience?", audience=str)), "audience")
    return f"Brief {audience} about {topic}"


@app.resource("notes://{folder}", mime_type="text/plain", description="Notes of a folder")
def notes(ctx: Context, uri: str, folder: str) -> str:
    """Notes of a folder, under the client's roots."""
    uris = root_uris(ctx.ask("roots", roots()))
    return f"notes of {folder} under {','.join(uris)}"
