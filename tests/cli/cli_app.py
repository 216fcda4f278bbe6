"""A small app exercising every input kind, for the CLI tests (served in memory or over HTTP)."""

from __future__ import annotations

import os
from typing import Any

from mrtr_core.app import App
from mrtr_core.server import Context, accepted, content, form, root_uris, roots, sample, text, url
from mrtr_core.state import KeyRing, StateCodec

TEST_KEY = b"cli-tests-key-0123456789abcdefgh"


def make_app(nonce: Any = os.urandom) -> App:
    """A fresh app (the key is fixed: tests only)."""
    codec = StateCodec(KeyRing({"t": TEST_KEY}, active="t"), audience="cli-test", nonce=nonce)
    app = App("cli-test", "1.0.0", codec=codec)

    @app.tool(description="Greets whoever fills the form.")
    def greet(ctx: Context) -> Any:
        answer = ctx.ask("who", form("Who are you?", {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "email": {"type": "string", "format": "email"},
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "role": {"type": "string", "oneOf": [{"const": "dev", "title": "Developer"},
                                                     {"const": "ops", "title": "Operator"}]},
            },
            "required": ["name", "role"],
        }))
        if not accepted(answer):
            return {"content": [{"type": "text", "text": f"no answer ({answer.action})"}],
                    "isError": True}
        got = content(answer) or {}
        return f"Hello {got['name']} ({got['role']})"

    @app.tool(description="Two rounds: a then b.")
    def two_step(ctx: Context) -> str:
        first = content(ctx.ask("step1", form("First?", a=str))) or {}
        second = content(ctx.ask("step2", form("Second?", b=int))) or {}
        return f"a={first.get('a')} b={second.get('b')}"

    @app.tool(description="Three forms in one round.")
    def survey(ctx: Context) -> str:
        got = ctx.ask_all({"first": form("First?", a=str), "second": form("Second?", b=str),
                           "third": form("Third?", c=str)})
        values = [(content(got[k]) or {}).get(f) for k, f in
                  (("first", "a"), ("second", "b"), ("third", "c"))]
        return " ".join(f"{name}={value}" for name, value in zip("abc", values, strict=True))

    @app.tool(description="Asks for consent to open a URL.")
    def connect(ctx: Context) -> str:
        answer = ctx.ask("login", url("Sign in to continue", "https://auth.example.com/x?s=1"))
        return "consented" if accepted(answer) else f"not consented ({answer.action})"

    @app.tool(description="Asks the client's model.")
    def summarise(ctx: Context, topic: str) -> str:
        answer = ctx.ask("llm", sample(f"Summarise {topic}", 20))
        return f"model says: {text(answer)}"  # type: ignore[arg-type]

    @app.tool(description="Lists the client's roots.")
    def where(ctx: Context) -> str:
        answer = ctx.ask("roots", roots())
        return " ".join(root_uris(answer))  # type: ignore[arg-type]

    @app.prompt(description="A prompt that asks first.")
    def story(ctx: Context, hero: str) -> str:
        got = content(ctx.ask("mood", form("Mood?", mood=["happy", "sad"]))) or {}
        return f"A {got.get('mood')} story about {hero}"

    @app.resource("memo://note", description="A resource that asks first.")
    def note(ctx: Context, uri: str) -> str:
        got = content(ctx.ask("pin", form("PIN?", pin=int))) or {}
        return f"note unlocked with {got.get('pin')}"

    return app
