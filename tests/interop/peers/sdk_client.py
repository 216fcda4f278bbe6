"""A client written with the official Python SDK (``mcp`` 2.3.0): the peer that mrtr's
servers are tested against.

    python sdk_client.py http URL
    python sdk_client.py stdio COMMAND [ARG ...]     (launches the server itself)

Runs every interop case through the SDK's automatic MRTR loop (its elicitation, sampling and
roots callbacks answer) and prints one JSON object: case name -> the text of the result, or
``{"error": ...}``. Exit status 0 when it got that far.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp_types as t
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT_URI = "file:///interop/root"


async def on_elicit(context: Any, params: Any) -> t.ElicitResult:
    schema = getattr(params, "requested_schema", None) or {}
    field = next(iter(schema.get("properties", {})), "value")
    value: Any = True if field == "confirm" else f"{field}-from-sdk"
    return t.ElicitResult(action="accept", content={field: value})


async def on_sample(context: Any, params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
    return t.CreateMessageResult(role="assistant", model="sdk-model",
                                 content=t.TextContent(type="text", text="sampled-by-sdk"))


async def on_roots(context: Any) -> t.ListRootsResult:
    return t.ListRootsResult(roots=[t.Root(uri=ROOT_URI, name="interop")])


def _text(result: Any) -> str:
    if isinstance(result, t.CallToolResult):
        return " ".join(b.text for b in result.content if isinstance(b, t.TextContent))
    if isinstance(result, t.GetPromptResult):
        return " ".join(m.content.text for m in result.messages
                        if isinstance(m.content, t.TextContent))
    if isinstance(result, t.ReadResourceResult):
        return " ".join(getattr(c, "text", "") for c in result.contents)
    return repr(result)


async def run(server: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with Client(server, elicitation_callback=on_elicit, sampling_callback=on_sample,
                      list_roots_callback=on_roots) as client:
        cases: dict[str, Any] = {
            "tools": lambda: client.list_tools(),
            "echo": lambda: client.call_tool("echo", {"text": "hello"}),
            "confirm_delete": lambda: client.call_tool("confirm_delete", {"path": "a.txt"}),
            "gather": lambda: client.call_tool("gather", {}),
            "three_rounds": lambda: client.call_tool("three_rounds", {}),
            "briefing": lambda: client.get_prompt("briefing", {"topic": "mrtr"}),
            "notes": lambda: client.read_resource("notes://work"),
        }
        for name, call in cases.items():
            try:
                result = await call()
            except Exception as exc:
                out[name] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            if name == "tools":
                out[name] = sorted(tool.name for tool in result.tools)
            else:
                out[name] = _text(result)
    return out


def main() -> int:
    mode, rest = sys.argv[1], sys.argv[2:]
    server: Any = (rest[0] if mode == "http"
                   else StdioServerParameters(command=rest[0], args=rest[1:]))
    print(json.dumps(anyio.run(run, server)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
