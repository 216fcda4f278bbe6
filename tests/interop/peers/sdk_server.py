"""An MCP server written with the official Python SDK (``mcp`` 2.3.0): the peer that mrtr's
clients are tested against.

    python sdk_server.py http    serve Streamable HTTP on 127.0.0.1, a free port; prints
                                 ``READY <url>`` once listening
    python sdk_server.py stdio   serve one client over stdin/stdout

It uses the SDK's explicit MRTR API: a handler reads ``ctx.input_responses`` and
``ctx.request_state`` (the SDK seals and opens the state) and returns an
``InputRequiredResult`` while it still needs input.

- tool ``confirm_delete(path)``: one elicitation (key ``confirm``);
- tool ``gather()``: an elicitation, a sampling and a roots request in ONE round;
- tool ``three_rounds()``: elicitation, then sampling, then roots: three input rounds, the
  answers so far carried in ``requestState``;
- tool ``echo(text)``: no input at all;
- prompt ``briefing(topic)``: one elicitation (key ``audience``);
- resource template ``notes://{folder}``: one roots request (key ``roots``).
"""

from __future__ import annotations

import json
import socket
import sys
from typing import Any

import anyio
import mcp_types as t
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("sdk-peer", version="1.0.0")


def _form(message: str, field: str, kind: str) -> t.ElicitRequest:
    return t.ElicitRequest(params=t.ElicitRequestFormParams(
        message=message,
        requested_schema={"type": "object", "properties": {field: {"type": kind}},
                          "required": [field]},
    ))


def _sample(prompt: str) -> t.CreateMessageRequest:
    return t.CreateMessageRequest(params=t.CreateMessageRequestParams(
        messages=[t.SamplingMessage(role="user", content=t.TextContent(type="text", text=prompt))],
        max_tokens=50,
    ))


def _roots() -> t.ListRootsRequest:
    return t.ListRootsRequest()


def _responses(ctx: Context) -> dict[str, Any]:
    return dict(ctx.input_responses or {})


def _elicited(answer: Any, field: str) -> Any:
    if isinstance(answer, t.ElicitResult) and answer.action == "accept" and answer.content:
        return answer.content.get(field)
    return None


def _sampled(answer: Any) -> str | None:
    if isinstance(answer, t.CreateMessageResult) and isinstance(answer.content, t.TextContent):
        return answer.content.text
    return None


def _root_uris(answer: Any) -> list[str] | None:
    if isinstance(answer, t.ListRootsResult):
        return [str(root.uri) for root in answer.roots]
    return None


@server.tool()
def echo(text: str) -> str:
    """Echoes its text (no input needed)."""
    return text


@server.tool()
def confirm_delete(path: str, ctx: Context) -> str | t.InputRequiredResult:
    """Deletes a file after the user confirms."""
    answer = _responses(ctx).get("confirm")
    if answer is None:
        return t.InputRequiredResult(input_requests={
            "confirm": _form(f"Delete {path}?", "confirm", "boolean")})
    return f"deleted {path}" if _elicited(answer, "confirm") is True else f"kept {path}"


@server.tool()
def gather(ctx: Context) -> str | t.InputRequiredResult:
    """Asks for a name, a haiku and the roots, all in one round."""
    got = _responses(ctx)
    name = _elicited(got.get("name"), "name")
    haiku = _sampled(got.get("haiku"))
    uris = _root_uris(got.get("roots"))
    if name is None or haiku is None or uris is None:
        return t.InputRequiredResult(input_requests={
            "name": _form("Your name?", "name", "string"),
            "haiku": _sample("Write a haiku"),
            "roots": _roots(),
        })
    return f"name={name}; haiku={haiku}; roots={','.join(uris)}"


@server.tool()
def three_rounds(ctx: Context) -> str | t.InputRequiredResult:
    """Asks three things in three rounds, carrying the answers in requestState."""
    state: dict[str, Any] = json.loads(ctx.request_state) if ctx.request_state else {}
    got = _responses(ctx)
    if "name" not in state:
        name = _elicited(got.get("step1"), "name")
        if name is None:
            return t.InputRequiredResult(
                input_requests={"step1": _form("Step 1: your name?", "name", "string")},
                request_state=json.dumps(state))
        state["name"] = name
    if "poem" not in state:
        poem = _sampled(got.get("step2"))
        if poem is None:
            return t.InputRequiredResult(
                input_requests={"step2": _sample(f"A poem for {state['name']}")},
                request_state=json.dumps(state))
        state["poem"] = poem
    uris = _root_uris(got.get("step3"))
    if uris is None:
        return t.InputRequiredResult(input_requests={"step3": _roots()},
                                     request_state=json.dumps(state))
    return f"name={state['name']}; poem={state['poem']}; roots={','.join(uris)}"


@server.prompt()
def briefing(topic: str, ctx: Context) -> str | t.InputRequiredResult:
    """A briefing on a topic, for an audience the user names."""
    audience = _elicited(_responses(ctx).get("audience"), "audience")
    if audience is None:
        return t.InputRequiredResult(input_requests={
            "audience": _form("Who is the audience?", "audience", "string")})
    return f"Brief {audience} about {topic}"


@server.resource("notes://{folder}", mime_type="text/plain")
def notes(folder: str, ctx: Context) -> str | t.InputRequiredResult:
    """Notes of a folder, under the client's roots."""
    uris = _root_uris(_responses(ctx).get("roots"))
    if uris is None:
        return t.InputRequiredResult(input_requests={"roots": _roots()})
    return f"notes of {folder} under {','.join(uris)}"


async def serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections queue until uvicorn accepts them
    port = sock.getsockname()[1]
    app = server.streamable_http_app(json_response=True, stateless_http=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)
    print(f"READY http://127.0.0.1:{port}/mcp", flush=True)
    await uv.serve(sockets=[sock])


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "http":
        anyio.run(serve_http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
