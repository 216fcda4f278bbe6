"""The fixture server the official MCP conformance suite expects (protocol 2026-07-28).

The suite calls tools, prompts and resources by fixed names; this app serves all of those
that the ``--requirements 2026-07-28`` server set uses: the MRTR fixtures
(``test_input_required_result_*``), the content, error and progress tools, the diagnostic
tools of the stateless scenario, the prompts and resources, a resource template, completion,
a tool with a JSON Schema 2020-12 input schema and one with an ``x-mcp-header`` argument.

Serve it with an adapter on 127.0.0.1, e.g. ``mrtr serve examples/conformance_server.py:app``.
``requestState`` keys come from ``MRTR_KEYS`` as in ``examples/deploy.py`` (a public
development key otherwise).
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from mrtr_core.app import App
from mrtr_core.server import Context, content, form, root_uris, roots, sample, text
from mrtr_core.state import KeyRing, StateCodec

__all__ = ["app"]

# Public, for local testing only: set MRTR_KEYS ({kid: base64 key}, last one active) otherwise.
DEVELOPMENT_KEY = b"mrtr-development-key-NOT-SECRET!"

# A 1x1 PNG and a tiny 8 kHz WAV, for the image/audio content fixtures.
PNG_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)
WAV_BASE64 = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="


def _codec() -> StateCodec:
    raw = os.environ.get("MRTR_KEYS")
    if raw:
        decoded = json.loads(raw)
        keys = {str(kid): base64.b64decode(value, validate=True) for kid, value in decoded.items()}
        ring = KeyRing(keys, active=list(keys)[-1])
    else:
        ring = KeyRing({"dev": DEVELOPMENT_KEY}, active="dev")
    return StateCodec(ring, audience="mrtr-conformance-server", nonce=os.urandom)


app = App("mrtr-conformance-server", "0.1.0", codec=_codec(),
          instructions="Fixture server for the MCP conformance suite.")


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


# --- plain tools (tools-*, http-header-validation uses the first one) ----------------------


@app.tool()
def test_simple_text(ctx: Context) -> str:
    """Returns a simple text response."""
    return "This is a simple text response for testing."


@app.tool()
def test_image_content(ctx: Context) -> dict[str, Any]:
    """Returns an image (a 1x1 PNG)."""
    return {"content": [{"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}]}


@app.tool()
def test_audio_content(ctx: Context) -> dict[str, Any]:
    """Returns audio (a few samples of WAV)."""
    return {"content": [{"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"}]}


@app.tool()
def test_embedded_resource(ctx: Context) -> dict[str, Any]:
    """Returns an embedded text resource."""
    return {"content": [{"type": "resource", "resource": {
        "uri": "test://embedded-resource", "mimeType": "text/plain",
        "text": "This is an embedded resource content."}}]}


@app.tool()
def test_multiple_content_types(ctx: Context) -> dict[str, Any]:
    """Returns text, an image and an embedded resource."""
    return {"content": [
        _text("Multiple content types test:"),
        {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"},
        {"type": "resource", "resource": {
            "uri": "test://mixed-content-resource", "mimeType": "application/json",
            "text": json.dumps({"test": "data", "value": 123})}},
    ]}


@app.tool()
def test_error_handling(ctx: Context) -> str:
    """Always fails (reported as a result with isError)."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@app.tool()
def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100 when the request has a progressToken."""
    for done in (0, 50, 100):
        app.report_progress(ctx, done, 100)
    return "Progress test completed"


@app.tool()
def test_logging_tool(ctx: Context) -> str:
    """Would log, but only when the request sets a logLevel (none is sent otherwise)."""
    return "Logging test completed"


@app.tool()
def test_missing_capability(ctx: Context) -> str:
    """Needs sampling: without it the request fails with -32021."""
    answer = ctx.ask("sample", sample("Say hello", 20))
    return f"Sampled: {text(answer)}"


@app.tool()
def test_streaming_elicitation(ctx: Context) -> str:
    """Asks for a confirmation through input_required (never a server request)."""
    answer = ctx.ask("confirm", form("Please confirm", ok=bool))
    return f"Confirmed: {(content(answer) or {}).get('ok')}"


@app.tool(
    description="Tool with JSON Schema 2020-12 features",
    input_schema={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}},
               "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": False,
    },
)
def json_schema_2020_12_tool(ctx: Context, **arguments: Any) -> Any:
    """Echoes its arguments."""
    return arguments


@app.tool(
    description="Echoes a region that is mirrored into the Mcp-Param-Region header",
    input_schema={
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        "required": ["region"],
    },
)
def test_header_param(ctx: Context, region: str) -> str:
    """Echoes ``region``."""
    return f"region={region}"


# --- MRTR fixtures (input-required-result-*) -----------------------------------------------


@app.tool()
def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks for the user's name (key user_name), then greets them."""
    answer = ctx.ask("user_name", form("What is your name?", name=str))
    return f"Hello, {(content(answer) or {}).get('name', 'stranger')}!"


@app.tool()
def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question (key capital_question)."""
    answer = ctx.ask("capital_question", sample("What is the capital of France?", 100))
    return f"The model answered: {text(answer)}"


@app.tool()
def test_input_required_result_list_roots(ctx: Context) -> str:
    """Asks for the client's roots (key client_roots)."""
    answer = ctx.ask("client_roots", roots())
    return f"Client roots: {', '.join(root_uris(answer)) or '(none)'}"


@app.tool()
def test_input_required_result_request_state(ctx: Context) -> str:
    """Asks for a confirmation; the retry must echo the sealed requestState."""
    ctx.ask("confirm", form("Please confirm", ok=bool))
    # Reaching here means the sealed state opened and verified on this round.
    return "state-ok: the requestState was received and validated"


@app.tool()
def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks an elicitation, a sampling and a roots request in one round."""
    answers = ctx.ask_all({
        "user_name": form("What is your name?", name=str),
        "greeting": sample("Generate a greeting", 50),
        "client_roots": roots(),
    })
    name = (content(answers["user_name"]) or {}).get("name", "stranger")
    greeting = text(answers["greeting"])
    uris = root_uris(answers["client_roots"])
    return f"{greeting} {name} (roots: {', '.join(uris)})"


@app.tool()
def test_input_required_result_multi_round(ctx: Context) -> str:
    """Asks step1, then (next round, new state) step2, then completes."""
    first = ctx.ask("step1", form("Step 1: What is your name?", name=str))
    second = ctx.ask("step2", form("Step 2: What is your favorite color?", color=str))
    name = (content(first) or {}).get("name")
    color = (content(second) or {}).get("color")
    return f"{name} likes {color}."


@app.tool()
def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Asks for a confirmation; a tampered requestState on the retry is refused (-32602)."""
    ctx.ask("confirm", form("Please confirm", ok=bool))
    return "state verified"


@app.tool()
def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only for what the client declared: elicitation if it can, else sampling."""
    if ctx.can_ask("elicitation/create"):
        answer = ctx.ask("confirm", form("Please confirm", ok=bool))
        return f"Confirmed: {(content(answer) or {}).get('ok')}"
    if ctx.can_ask("sampling/createMessage"):
        sampled = ctx.ask("sample", sample("Say hello", 50))
        return f"Sampled: {text(sampled)}"
    return "The client declared neither elicitation nor sampling."


# --- prompts ------------------------------------------------------------------------------


@app.prompt()
def test_simple_prompt(ctx: Context) -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@app.prompt(arguments=[
    {"name": "arg1", "description": "First test argument", "required": True},
    {"name": "arg2", "description": "Second test argument", "required": True},
])
def test_prompt_with_arguments(ctx: Context, arg1: str, arg2: str) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@app.prompt(arguments=[
    {"name": "resourceUri", "description": "URI of the resource to embed", "required": True},
])
def test_prompt_with_embedded_resource(ctx: Context, resourceUri: str) -> list[Any]:
    """A prompt embedding a resource."""
    return [
        {"role": "user", "content": {"type": "resource", "resource": {
            "uri": resourceUri, "mimeType": "text/plain",
            "text": "Embedded resource content for testing."}}},
        "Please process the embedded resource above.",
    ]


@app.prompt()
def test_prompt_with_image(ctx: Context) -> list[Any]:
    """A prompt with an image."""
    return [
        {"role": "user", "content": {"type": "image", "data": PNG_BASE64,
                                     "mimeType": "image/png"}},
        "Please analyze the image above.",
    ]


@app.prompt()
def test_input_required_result_prompt(ctx: Context) -> dict[str, Any]:
    """Asks what context to use (key user_context), then builds the prompt."""
    answer = ctx.ask("user_context", form("What context should the prompt use?", context=str))
    used = (content(answer) or {}).get("context", "")
    return {"description": "A prompt built from MRTR input",
            "messages": [{"role": "user", "content": _text(f"Use this context: {used}")}]}


# --- resources ----------------------------------------------------------------------------


@app.resource("test://static-text", name="static-text", mime_type="text/plain",
              description="A static text resource")
def static_text(ctx: Context, uri: str) -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@app.resource("test://static-binary", name="static-binary", mime_type="image/png",
              description="A static binary resource (a PNG)")
def static_binary(ctx: Context, uri: str) -> bytes:
    """A static binary resource."""
    return base64.b64decode(PNG_BASE64)


@app.resource("test://template/{id}/data", name="template-data", mime_type="application/json",
              description="Data for an id")
def template_data(ctx: Context, uri: str, id: str) -> str:
    """Data for ``id``."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


# --- completion -----------------------------------------------------------------------------


@app.completion()
def complete(ref: dict[str, Any], argument: dict[str, Any], context: Any) -> list[str]:
    """Suggests values starting with what was typed."""
    words = ["paris", "park", "party", "test", "testing", "tester"]
    typed = str(argument.get("value", ""))
    return [w for w in words if w.startswith(typed)]
