"""What a definition carries beyond its name, description and schema, and where it shows.

- ``@app.tool(title=..., annotations=...)``: the ``title`` and ``ToolAnnotations`` members
  appear in ``tools/list`` as the 2026-07-28 schema names them, only when given;
- the same lists go through a client unchanged (in memory, as JSON text both ways).
"""

from __future__ import annotations

from typing import Any

import mrtr_sync
from server_helpers import T0, make_codec, meta

from mrtr_core.app import App, drive_sync
from mrtr_core.server import Context


def _list(app: App, method: str) -> list[dict[str, Any]]:
    """The items ``method`` (a ``*/list`` method) lists for ``app``."""
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": meta()}}
    reply = drive_sync(app, message, now=T0)
    assert reply.message is not None and "result" in reply.message, reply.message
    key = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources",
           "resources/templates/list": "resourceTemplates"}[method]
    items: list[dict[str, Any]] = reply.message["result"][key]
    return items


def _tool_app() -> App:
    app = App("t", "1", codec=make_codec())

    @app.tool(title="Delete a file", annotations={
        "title": "Delete", "readOnlyHint": False, "destructiveHint": True,
        "idempotentHint": True, "openWorldHint": False,
    })
    def delete(ctx: Context, path: str) -> str:
        """Deletes a file."""
        return path

    @app.tool(annotations={"readOnlyHint": True})
    def peek(ctx: Context) -> str:
        return "x"

    @app.tool()
    def plain(ctx: Context) -> str:
        return "x"

    return app


# --- tools: title and annotations ---------------------------------------------------------------


def test_tools_list_shows_a_tools_title_and_annotations_as_given() -> None:
    tools = _list(_tool_app(), "tools/list")
    assert tools[0] == {
        "name": "delete",
        "title": "Delete a file",
        "description": "Deletes a file.",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                        "required": ["path"], "additionalProperties": False},
        "annotations": {"title": "Delete", "readOnlyHint": False, "destructiveHint": True,
                        "idempotentHint": True, "openWorldHint": False},
    }
    # Only the members given: a hint left out keeps the default a client reads for it.
    assert tools[1]["annotations"] == {"readOnlyHint": True}
    assert "title" not in tools[1]
    assert set(tools[2]) == {"name", "inputSchema"}


def test_annotations_are_copied_when_the_tool_is_registered() -> None:
    app = App("t", "1", codec=make_codec())
    given = {"readOnlyHint": True}
    app.tool(name="t", annotations=given)(lambda ctx: "x")
    given["readOnlyHint"] = "yes"  # type: ignore[assignment]
    assert _list(app, "tools/list")[0]["annotations"] == {"readOnlyHint": True}


# --- through a client -----------------------------------------------------------------------


def _client(app: App) -> mrtr_sync.Client:
    def serve(message: dict[str, Any]) -> dict[str, Any]:
        reply = drive_sync(app, message, now=T0)
        assert reply.message is not None
        return reply.message

    return mrtr_sync.Client(mrtr_sync.MemoryTransport(serve))


def test_a_client_lists_the_tools_title_and_annotations() -> None:
    app = _tool_app()
    with _client(app) as client:
        listed = client.request("tools/list")
    assert listed["tools"] == _list(app, "tools/list")
    assert listed["tools"][0]["title"] == "Delete a file"
    assert listed["tools"][0]["annotations"]["destructiveHint"] is True
