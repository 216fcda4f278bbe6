"""What a definition carries beyond its name, description and schema, and where it shows.

- ``@app.tool(title=..., annotations=...)``: the ``title`` and ``ToolAnnotations`` members
  appear in ``tools/list`` as the 2026-07-28 schema names them, only when given;
- ``@app.tool(output_schema=...)``: listed as ``outputSchema``; every complete result of
  that tool that is not an error must carry ``structuredContent`` the schema accepts, else
  the call is answered -32603 naming what was wrong (server/tools.mdx § Output Schema);
- ``@app.prompt(title=...)`` (and an argument's ``title``) and ``@app.resource(title=...)``,
  for resources and templates: listed as ``title``, only when given;
- ``icons`` and ``meta`` on all four (``icons`` and ``_meta`` in the lists), and a
  resource's (template's) ``annotations`` and a resource's ``size``: listed as the
  2026-07-28 schema names them, only when given, as they were when the decorator ran;
- the same lists go through a client unchanged (in memory, as JSON text both ways).
"""

from __future__ import annotations

import logging
from typing import Any

import mrtr_sync
import pytest
from server_helpers import T0, make_codec, meta

from mrtr_core import jsonrpc
from mrtr_core.app import SERVER_LOGGER, App, drive_sync
from mrtr_core.app.registry import CallPlan, ToolDef
from mrtr_core.errors import INTERNAL_ERROR, INVALID_PARAMS, JsonRpcError
from mrtr_core.server import Context
from mrtr_core.server.schemas import CompiledSchema


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


# --- tools: outputSchema and structuredContent -------------------------------------------------

WEATHER = {
    "type": "object",
    "properties": {"temperature": {"type": "number"}, "conditions": {"type": "string"}},
    "required": ["temperature", "conditions"],
}
USERS = {"type": "array", "items": {"type": "object", "required": ["id"],
                                    "properties": {"id": {"type": "string"}}}}


def _output_app(value: Any, schema: dict[str, Any] | None = None) -> App:
    """An app whose tool ``t``, with ``schema`` (default: WEATHER) as its output schema,
    returns ``value``."""
    app = App("t", "1", codec=make_codec())
    app.tool(name="t", output_schema=WEATHER if schema is None else schema)(lambda ctx: value)
    return app


def _call(app: App) -> dict[str, Any]:
    """The reply message to ``tools/call`` of ``t``, as the transport writes it."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "t", "_meta": meta()}}
    reply = drive_sync(app, message, now=T0)
    assert reply.message is not None
    jsonrpc.encode(reply.message)
    return reply.message


def test_tools_list_shows_the_output_schema_only_when_given() -> None:
    app = _output_app({})
    app.tool(name="users", output_schema=USERS)(lambda ctx: [])
    app.tool(name="plain")(lambda ctx: "x")
    tools = _list(app, "tools/list")
    assert tools[0] == {"name": "t", "inputSchema": {"type": "object", "properties": {},
                                                     "additionalProperties": False},
                        "outputSchema": WEATHER}
    # Any 2020-12 schema object (schema.ts; server/tools.mdx lists users as an array).
    assert tools[1]["outputSchema"] == USERS
    assert "outputSchema" not in tools[2]


def test_the_output_schema_is_copied_when_the_tool_is_registered() -> None:
    # Copied whole, as the docs promise: a change to a nested member afterwards changes
    # neither what tools/list shows nor what the tool's results are checked against.
    schema: dict[str, Any] = {"type": "object", "required": ["temperature"],
                              "properties": {"temperature": {"type": "number"}}}
    app = _output_app({"temperature": 21.5}, schema)
    schema["properties"]["temperature"]["type"] = "string"
    schema["required"].append("conditions")
    assert _list(app, "tools/list")[0]["outputSchema"] == {
        "type": "object", "required": ["temperature"],
        "properties": {"temperature": {"type": "number"}},
    }
    assert _call(app)["result"]["structuredContent"] == {"temperature": 21.5}


def test_the_input_schema_is_copied_when_the_tool_is_registered(
    no_retrieval: list[object],
) -> None:
    # Copied whole, as the outputSchema is: a nested member changed afterwards, even to
    # what registration refuses (a $ref to another document, a set no listing can write),
    # changes neither what tools/list shows nor what the arguments are checked against.
    schema: dict[str, Any] = {"type": "object", "required": ["n"],
                              "properties": {"n": {"type": "integer"}}}
    app = App("t", "1", codec=make_codec())
    app.tool(name="t", input_schema=schema)(lambda ctx, **kw: "ok")
    schema["properties"]["n"]["type"] = "string"
    schema["properties"]["n"]["$ref"] = "https://example.com/n.json"
    schema["properties"]["n"]["default"] = {1, 2}
    schema["required"].append("m")
    assert _list(app, "tools/list")[0]["inputSchema"] == {
        "type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
    sent = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "t", "arguments": {"n": 1}, "_meta": meta()}}
    assert drive_sync(app, sent, now=T0).message["result"]["content"] == [
        {"type": "text", "text": "ok"}]
    sent["params"]["arguments"] = {"n": "1"}
    assert drive_sync(app, sent, now=T0).message["error"]["code"] == INVALID_PARAMS
    assert no_retrieval == []


def test_declared_prompt_arguments_are_copied_when_the_prompt_is_registered() -> None:
    app = App("t", "1", codec=make_codec())
    argument: dict[str, Any] = {"name": "code", "title": "Code", "required": True}
    arguments: list[Any] = [argument]
    app.prompt(name="p", arguments=arguments)(lambda ctx, code: code)
    argument["title"] = "Other"
    argument["required"] = False
    arguments.append("more")
    assert _list(app, "prompts/list")[0]["arguments"] == [
        {"name": "code", "title": "Code", "required": True}]


@pytest.mark.parametrize(
    ("value", "schema"),
    [
        ({"temperature": 22.5, "conditions": "Partly cloudy"}, None),
        ({"content": [{"type": "text", "text": "22.5 C"}],
          "structuredContent": {"temperature": 22, "conditions": "Sunny"}}, None),
        ([{"id": "1"}, {"id": "2"}], USERS),
        # Checked as the client reads it: a tuple is a JSON array.
        (({"id": "1"},), USERS),
    ],
)
def test_a_result_whose_structured_content_fits_the_output_schema_passes(
    value: Any, schema: dict[str, Any] | None
) -> None:
    reply = _call(_output_app(value, schema))
    assert "result" in reply, reply
    assert reply["result"]["structuredContent"] == (
        value["structuredContent"] if "content" in value else value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"temperature": "warm", "conditions": "Sunny"},
         "structuredContent does not match the tool's outputSchema: 'warm' is not of type "
         "'number' (at temperature)"),
        ({"temperature": 20},
         "structuredContent does not match the tool's outputSchema: 'conditions' is a "
         "required property"),
        ({"content": [{"type": "text", "text": "x"}], "structuredContent": [20, "Sunny"]},
         "structuredContent does not match the tool's outputSchema: [20, 'Sunny'] is not of "
         "type 'object'"),
        ("22.5 C, sunny",
         "the tool declares an outputSchema, so its result needs structuredContent"),
        (None, "the tool declares an outputSchema, so its result needs structuredContent"),
        ({"content": [{"type": "text", "text": "x"}]},
         "the tool declares an outputSchema, so its result needs structuredContent"),
    ],
)
def test_a_result_without_structured_content_the_output_schema_accepts_is_refused(
    value: Any, problem: str
) -> None:
    # server/tools.mdx § Output Schema: servers MUST provide structured results that
    # conform to the schema; a client validating it would refuse the result.
    reply = _call(_output_app(value))
    assert reply["error"]["code"] == INTERNAL_ERROR
    assert reply["error"]["message"] == f"handler returned an invalid result: {problem}"


def test_a_refused_structured_content_is_named_without_being_sent_whole() -> None:
    # The value the schema refused is not sent: the -32603 quotes a bounded part of it.
    reply = _call(_output_app(["secret-" * 10_000]))
    message = reply["error"]["message"]
    assert message.startswith("handler returned an invalid result: structuredContent does "
                              "not match the tool's outputSchema: ['secret-secret-")
    assert message.endswith("-'] is not of type 'object'") and len(message) < 400


def test_an_error_result_needs_no_structured_content() -> None:
    built = {"content": [{"type": "text", "text": "no such city"}], "isError": True}
    assert _call(_output_app(built))["result"]["isError"] is True

    def boom(ctx: Context) -> Any:
        raise RuntimeError("no such city")

    app = App("t", "1", codec=make_codec())
    app.tool(name="t", output_schema=WEATHER)(boom)
    assert _call(app)["result"]["content"] == [{"type": "text", "text": "no such city"}]


def _lists_of(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _nested_arrays(wrappers: int = 0) -> dict[str, Any]:
    """A schema of integers in nested arrays (recursive, through ``$ref``), each level inside
    ``wrappers`` ``allOf`` more."""
    level: dict[str, Any] = {"anyOf": [{"type": "integer"},
                                       {"type": "array", "items": {"$ref": "#/$defs/t"}}]}
    for _ in range(wrappers):
        level = {"allOf": [level]}
    return {"$defs": {"t": level}, "$ref": "#/$defs/t"}


def test_structured_content_too_deep_to_check_against_the_output_schema_is_refused() -> None:
    # Written easily, but a recursive schema checks each level in several frames: deeper
    # than the interpreter recurses, the handler's mistake (-32603), and the app serves on.
    app = _output_app(_lists_of(400), _nested_arrays())
    reply = _call(app)
    assert reply["error"] == {"code": INTERNAL_ERROR, "message": (
        "handler returned an invalid result: structuredContent is nested too deeply to check "
        "against the tool's outputSchema")}
    app.tool(name="fine", output_schema=_nested_arrays())(lambda ctx: _lists_of(3))
    fine = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "fine", "_meta": meta()}}
    assert drive_sync(app, fine, now=T0).message["result"]["structuredContent"] == [[[1]]]


def test_arguments_too_deep_to_check_against_the_input_schema_are_invalid_params() -> None:
    # Within the nesting a transport decodes (64 levels), a schema that spends enough frames
    # on each level still recurses deeper than the interpreter does: the peer's arguments
    # are refused (-32602), not a RecursionError out of the app.
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/t"}},
              "$defs": _nested_arrays(wrappers=12)["$defs"]}
    app = App("t", "1", codec=make_codec())
    app.tool(name="t", input_schema=schema)(lambda ctx, x: "ok")
    sent = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "t", "arguments": {"x": _lists_of(60)}, "_meta": meta()}}
    reply = drive_sync(app, jsonrpc.decode(jsonrpc.encode(sent)), now=T0)
    assert reply.message is not None and reply.message["error"] == {
        "code": INVALID_PARAMS, "message": ("invalid arguments for tool 't': nested too deeply "
                                            "to check against the tool's inputSchema")}
    sent["params"]["arguments"] = {"x": _lists_of(3)}
    assert drive_sync(app, sent, now=T0).message["result"]["content"][0]["text"] == "ok"


# --- tools: references in their schemas -----------------------------------------------------

_TREE = {"type": "object", "required": ["value"], "properties": {
    "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#"}}}}
# The extension pattern of JSON Schema 2020-12 (Core §8.2.3.2), in one document: a strict
# tree refers to a tree through an embedded $id, and the tree's items come back through
# $dynamicRef; and an anchor.
_STRICT_TREE = {
    "$id": "https://example.com/strict-tree", "$dynamicAnchor": "node", "$ref": "tree",
    "unevaluatedProperties": False,
    "$defs": {"tree": {"$id": "tree", "$dynamicAnchor": "node", "type": "object",
                       "properties": {"data": True, "children": {
                           "type": "array", "items": {"$dynamicRef": "#node"}}}},
              "count": {"$anchor": "count", "type": "integer", "minimum": 0}},
}


@pytest.mark.parametrize(("schema", "good", "bad", "where"), [
    (_TREE, {"value": 1, "children": [{"value": 2, "children": []}]},
     {"value": 1, "children": [{"value": "2"}]}, "children/0/value"),
    ({"type": "object", "properties": {"t": {"$ref": "#/$defs/tree"}}, "$defs": {"tree": {
        "type": "array", "items": {"$ref": "#/$defs/tree"}}}},
     {"t": [[], [[]]]}, {"t": [[1]]}, "t/0/0"),
    ({**_STRICT_TREE, "type": "object", "properties": {"n": {"$ref": "#count"}}},
     {"children": [{"data": 1}], "n": 2}, {"children": [{"dta": 1}]}, "children/0"),
])
def test_a_recursive_schema_that_goes_into_the_value_is_registered_and_used(
    schema: dict[str, Any], good: dict[str, Any], bad: dict[str, Any], where: str
) -> None:
    app = App("t", "1", codec=make_codec())
    app.tool(name="t", input_schema=schema, output_schema=schema)(lambda ctx, **kw: kw)
    sent = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "t", "arguments": good, "_meta": meta()}}
    assert drive_sync(app, sent, now=T0).message["result"]["structuredContent"] == good
    sent["params"]["arguments"] = bad
    error = drive_sync(app, sent, now=T0).message["error"]
    assert error["code"] == INVALID_PARAMS and error["message"].endswith(f"(at {where})")


@pytest.mark.parametrize("ref", [
    "#/$defs/gone", "https://example.com/gone.json", "http://127.0.0.1:9/schema.json",
])
def test_a_schema_whose_ref_resolves_nowhere_at_a_call_fails_as_the_servers_fault(
    caplog: pytest.LogCaptureFixture, no_retrieval: list[object], ref: str
) -> None:
    # Registration refuses such a schema; one changed afterwards (it must not be) still
    # fails the call as the server's fault (-32603), logged, never as an exception out of
    # the app or an error blaming the client. A URI is never retrieved: the server's own
    # schemas resolve references inside themselves only, as a client's do (the server would
    # open a connection, with no time limit, on every call).
    app = App("t", "1", codec=make_codec())
    app.tool(name="t", input_schema={"type": "object", "properties": {"x": {}}})(
        lambda ctx, **kw: "ok")
    app.tool(name="out", output_schema={"type": "object"})(lambda ctx: {"a": 1})
    tool, out = app.find_tool("t"), app.find_tool("out")
    assert tool is not None and out is not None and out.output_schema is not None
    tool.input_schema["properties"]["x"] = {"$ref": ref}
    out.output_schema["$ref"] = ref
    for name, member, arguments in (("t", "inputSchema", {"x": 1}), ("out", "outputSchema", {})):
        sent = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": name, "arguments": arguments, "_meta": meta()}}
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger=SERVER_LOGGER):
            reply = drive_sync(app, sent, now=T0)
        assert reply.message is not None and reply.message["error"] == {
            "code": INTERNAL_ERROR,
            "message": f"the tool's {member} cannot be used (a $ref resolves nowhere)"}
        assert [r.getMessage() for r in caplog.records] == [
            f"tools/call {name!r}: the server failed (request id 1)"]
    assert no_retrieval == []


def test_a_tool_built_by_hand_never_retrieves_a_ref(no_retrieval: list[object]) -> None:
    schema = {"type": "object", "$ref": "https://example.com/s"}
    built = ToolDef(name="t", description=None, input_schema=schema, handler=lambda ctx: 1,
                    schema=CompiledSchema(schema), output=CompiledSchema(schema),
                    plan=CallPlan.of(lambda ctx: 1))
    with pytest.raises(JsonRpcError) as caught:
        built.check_arguments({})
    assert caught.value.code == INTERNAL_ERROR
    with pytest.raises(JsonRpcError) as caught:
        built.finish({"a": 1})
    assert caught.value.code == INTERNAL_ERROR
    assert no_retrieval == []


# --- prompts and resources: titles -------------------------------------------------------------


def _titled_app() -> App:
    app = App("t", "1", codec=make_codec())

    @app.prompt(title="Code review", arguments=[{"name": "code", "title": "Code to review",
                                                          "required": True}])
    def review(ctx: Context, code: str) -> str:
        """Review some code."""
        return code

    @app.prompt()
    def plain(ctx: Context) -> str:
        return "x"

    @app.resource("file:///readme", title="Project README", mime_type="text/plain")
    def readme(ctx: Context, uri: str) -> str:
        return "hello"

    @app.resource("file:///plain")
    def plain_file(ctx: Context, uri: str) -> str:
        return "x"

    @app.resource("file:///logs/{day}", title="Logs of a day")
    def logs(ctx: Context, uri: str, day: str) -> str:
        return day

    @app.resource("file:///other/{day}")
    def other(ctx: Context, uri: str, day: str) -> str:
        return day

    return app


def test_prompts_list_shows_a_prompts_and_its_arguments_titles_only_when_given() -> None:
    assert _list(_titled_app(), "prompts/list") == [
        {"name": "review", "title": "Code review", "description": "Review some code.",
         "arguments": [{"name": "code", "title": "Code to review", "required": True}]},
        {"name": "plain", "arguments": []},
    ]


def test_resource_lists_show_a_resources_title_only_when_given() -> None:
    app = _titled_app()
    assert _list(app, "resources/list") == [
        {"uri": "file:///readme", "name": "readme", "title": "Project README",
         "mimeType": "text/plain"},
        {"uri": "file:///plain", "name": "plain_file"},
    ]
    assert _list(app, "resources/templates/list") == [
        {"uriTemplate": "file:///logs/{day}", "name": "logs", "title": "Logs of a day"},
        {"uriTemplate": "file:///other/{day}", "name": "other"},
    ]


# --- icons, _meta, resource annotations and size ---------------------------------------------


ICON = {"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"],
        "theme": "dark"}
SVG = {"src": "data:image/svg+xml;base64,PHN2Zy8+", "sizes": ["any"]}
ANNOTATIONS = {"audience": ["user", "assistant"], "priority": 0.5,
               "lastModified": "2025-01-12T15:00:58Z"}


def _decorated_app() -> App:
    app = App("t", "1", codec=make_codec())

    @app.tool(icons=[ICON, SVG], meta={"com.example/tier": "gold"})
    def deploy(ctx: Context) -> str:
        return "x"

    @app.prompt(icons=[SVG], meta={"com.example/tags": ["a", {"b": None}]})
    def review(ctx: Context) -> str:
        return "x"

    @app.resource("file:///readme", icons=[ICON], meta={"com.example/k": 1},
                  annotations=ANNOTATIONS, size=1024)
    def readme(ctx: Context, uri: str) -> str:
        return "hello"

    @app.resource("file:///empty", size=0)
    def empty(ctx: Context, uri: str) -> str:
        return "x"

    @app.resource("file:///logs/{day}", icons=[SVG], meta={"com.example/k": True},
                  annotations={"priority": 1})
    def logs(ctx: Context, uri: str, day: str) -> str:
        return day

    return app


def test_the_lists_show_icons_meta_annotations_and_size_as_given() -> None:
    app = _decorated_app()
    assert _list(app, "tools/list") == [
        {"name": "deploy", "icons": [ICON, SVG],
         "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
         "_meta": {"com.example/tier": "gold"}},
    ]
    assert _list(app, "prompts/list") == [
        {"name": "review", "icons": [SVG], "arguments": [],
         "_meta": {"com.example/tags": ["a", {"b": None}]}},
    ]
    assert _list(app, "resources/list") == [
        {"uri": "file:///readme", "name": "readme", "icons": [ICON],
         "annotations": ANNOTATIONS, "size": 1024, "_meta": {"com.example/k": 1}},
        {"uri": "file:///empty", "name": "empty", "size": 0},
    ]
    assert _list(app, "resources/templates/list") == [
        {"uriTemplate": "file:///logs/{day}", "name": "logs", "icons": [SVG],
         "annotations": {"priority": 1}, "_meta": {"com.example/k": True}},
    ]


def test_icons_meta_and_annotations_are_copied_when_the_definition_is_registered() -> None:
    app = App("t", "1", codec=make_codec())
    icons: list[dict[str, Any]] = [{"src": "https://x.example/a.png", "sizes": ["16x16"]}]
    meta: dict[str, Any] = {"com.example/k": {"deep": [1]}}
    annotations: dict[str, Any] = {"audience": ["user"]}
    app.tool(name="t", icons=icons, meta=meta)(lambda ctx: "x")
    app.prompt(name="p", icons=icons, meta=meta)(lambda ctx: "x")
    app.resource("file:///r", icons=icons, meta=meta, annotations=annotations)(
        lambda ctx, uri: "x")
    app.resource("file:///r/{x}", icons=icons, meta=meta, annotations=annotations)(
        lambda ctx, uri, x: "x")
    icons[0]["src"] = "https://x.example/b.png"
    icons[0]["sizes"].append("any")
    icons.append({"src": "https://x.example/c.png"})
    meta["com.example/k"]["deep"].append(2)
    meta["com.example/other"] = 2
    annotations["audience"].append("assistant")
    annotations["priority"] = 1
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
        listed = _list(app, method)[0]
        assert listed["icons"] == [{"src": "https://x.example/a.png", "sizes": ["16x16"]}], method
        assert listed["_meta"] == {"com.example/k": {"deep": [1]}}, method
        if method.startswith("resources"):
            assert listed["annotations"] == {"audience": ["user"]}, method


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


def test_a_client_lists_the_output_schema_and_gets_only_results_that_fit_it() -> None:
    app = _output_app({"temperature": 22.5, "conditions": "Sunny"})
    app.tool(name="bad", output_schema=WEATHER)(lambda ctx: {"temperature": 22.5})
    with _client(app) as client:
        listed = client.request("tools/list")
        assert client.call_tool("t")["structuredContent"] == {"temperature": 22.5,
                                                              "conditions": "Sunny"}
        with pytest.raises(JsonRpcError) as refused:
            client.call_tool("bad")
    assert listed["tools"][0]["outputSchema"] == WEATHER
    assert refused.value.code == INTERNAL_ERROR
    assert "'conditions' is a required property" in refused.value.message


def test_a_client_lists_prompt_and_resource_titles() -> None:
    app = _titled_app()
    with _client(app) as client:
        prompts = client.request("prompts/list")["prompts"]
        resources = client.request("resources/list")["resources"]
        templates = client.request("resources/templates/list")["resourceTemplates"]
    assert prompts == _list(app, "prompts/list")
    assert prompts[0]["title"] == "Code review"
    assert resources[0]["title"] == "Project README"
    assert templates[0]["title"] == "Logs of a day"


def test_a_client_lists_icons_meta_annotations_and_size() -> None:
    app = _decorated_app()
    with _client(app) as client:
        listed = {method: client.request(method) for method in
                  ("tools/list", "prompts/list", "resources/list", "resources/templates/list")}
    assert listed["tools/list"]["tools"] == _list(app, "tools/list")
    assert listed["prompts/list"]["prompts"] == _list(app, "prompts/list")
    assert listed["resources/list"]["resources"] == _list(app, "resources/list")
    assert listed["resources/templates/list"]["resourceTemplates"] == _list(
        app, "resources/templates/list")
    assert listed["resources/list"]["resources"][0]["size"] == 1024
