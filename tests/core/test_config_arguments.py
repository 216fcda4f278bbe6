"""Bad configuration from the developer is refused where it is given, naming the argument.

A limit of 0, a path without its slash, a bool where a count belongs or a decorator used
without its parentheses would otherwise hang a call, answer every request with 404, never
enforce a limit, or register nothing, long after the line that got it wrong.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from deep_values import too_deep, too_deep_key

from mrtr_core import App, KeyRing, StateCodec
from mrtr_core.app import PromptArgument
from mrtr_core.http import HttpClientConfig, HttpServerConfig
from mrtr_core.server import ServerEngine, ServerLimits

KEY = bytes(range(32))
RING = KeyRing({"k1": KEY}, active="k1")


def codec(**kwargs: Any) -> StateCodec:
    return StateCodec(RING, **{"audience": "srv", "nonce": os.urandom, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"path": "mcp"}, "path must be a path starting with '/'"),
        ({"path": ""}, "path must be a path starting with '/'"),
        ({"path": "/mcp?x=1"}, "path must be a path starting with '/'"),
        ({"max_body_bytes": 0}, "max_body_bytes must be an integer >= 1, got 0"),
        ({"max_header_bytes": -1}, "max_header_bytes must be an integer >= 1"),
        ({"max_depth": True}, "max_depth must be an integer >= 1, got True"),
        ({"max_body_bytes": float("nan")}, "max_body_bytes must be an integer >= 1"),
        ({"allowed_origins": {"https://app.example/"}}, "allowed_origins holds 'https://app.example/'"),
    ],
)
def test_http_server_config_refuses_bad_values(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("?", r"\?")):
        HttpServerConfig(**kwargs)


def test_http_server_config_refuses_a_string_of_origins() -> None:
    # A string would be searched by substring, letting in origins never listed.
    with pytest.raises(TypeError, match="allowed_origins must be a set of origins, not str"):
        HttpServerConfig(allowed_origins="https://app.example")  # type: ignore[arg-type]


def test_http_server_config_keeps_good_values() -> None:
    config = HttpServerConfig(
        path="/v1/mcp", allowed_origins=frozenset({"https://app.example:8443", "null"})
    )
    assert config.origin_allowed("https://app.example:8443")
    assert not config.origin_allowed("https://app.example")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_response_bytes": 0}, ValueError, "max_response_bytes must be an integer >= 1"),
        ({"max_stream_bytes": -1}, ValueError, "max_stream_bytes must be an integer >= 1"),
        ({"max_header_bytes": 1.5}, ValueError, "max_header_bytes must be an integer >= 1"),
        ({"max_depth": 0}, ValueError, "max_depth must be an integer >= 1"),
        ({"headers": {"Authorization": "Bearer x"}}, TypeError, "headers must be a tuple"),
        ({"headers": (("X-A", "1\r\nX-B: 2"),)}, ValueError, "headers holds an invalid header"),
    ],
)
def test_http_client_config_refuses_bad_values(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        HttpClientConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_rounds": True}, {"max_rounds": 2.5}, {"max_rounds": float("nan")},
        {"max_rounds": "3"}, {"max_rounds": None}, {"max_input_requests": 0},
        {"max_state_bytes": float("inf")}, {"max_input_responses_bytes": 1.5},
    ],
)
def test_server_limits_must_be_integers(kwargs: dict[str, Any]) -> None:
    (name,) = kwargs
    with pytest.raises(ValueError, match=f"{name} must be an integer >= 1"):
        ServerLimits(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"ttl": True}, ValueError, "ttl must be a positive finite number"),
        ({"ttl": "600"}, ValueError, "ttl must be a positive finite number"),
        ({"skew": True}, ValueError, "skew must be a non-negative finite number"),
        ({"skew": None}, ValueError, "skew must be a non-negative finite number"),
        # Far beyond any real lifetime; in milliseconds (a Redis guard's PX) past 64 bits.
        ({"ttl": 1e16}, ValueError, r"ttl must be a positive finite number of seconds up to "
                                    r"1e\+09, got 1e\+16"),
        ({"ttl": 1e308}, ValueError, "ttl must be a positive finite number of seconds up to"),
        ({"ttl": 10**9 + 1}, ValueError, "ttl must be a positive finite number of seconds up to"),
        ({"skew": 1e16}, ValueError, r"skew must be a non-negative finite number of seconds up "
                                     r"to 1e\+09, got 1e\+16"),
        ({"max_bytes": float("nan")}, ValueError, "max_bytes must be an integer of at least 64"),
        ({"max_bytes": 1e6}, ValueError, "max_bytes must be an integer of at least 64"),
        ({"max_bytes": "4096"}, ValueError, "max_bytes must be an integer of at least 64"),
        ({"audience": ""}, ValueError, "audience must not be empty"),
        ({"nonce": None}, TypeError, "nonce must be a callable"),
    ],
)
def test_state_codec_refuses_bad_values(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        codec(**kwargs)


def test_state_codec_takes_the_longest_ttl_and_skew() -> None:
    state = codec(ttl=1e9, skew=1e9)
    assert (state.ttl, state.skew) == (1e9, 1e9)



def test_state_codec_needs_a_key_ring() -> None:
    with pytest.raises(TypeError, match="ring must be a KeyRing, not dict"):
        StateCodec({"k1": KEY}, audience="srv", nonce=os.urandom)  # type: ignore[arg-type]


def test_key_ring_needs_a_mapping_and_drops_only_keys_it_has() -> None:
    with pytest.raises(TypeError, match="keys must map key ids to secrets, not list"):
        KeyRing([("k1", KEY)], active="k1")  # type: ignore[arg-type]
    ring = KeyRing({"k1": KEY, "k2": KEY}, active="k1")
    # A mistyped id in the last rotation step would leave the old key verifying.
    with pytest.raises(ValueError, match="key 'k3' is not in the ring"):
        ring.without("k3")
    assert ring.without("k2").ids == {"k1"}


def test_engine_and_app_refuse_a_codec_or_limits_of_the_wrong_type() -> None:
    with pytest.raises(TypeError, match="codec must be a StateCodec, not NoneType"):
        App("srv", "1", codec=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="limits must be ServerLimits or None, not dict"):
        ServerEngine(codec(), limits={"max_rounds": 3})  # type: ignore[arg-type]


def test_tool_and_prompt_decorators_used_without_parentheses_are_refused() -> None:
    app = App("srv", "1", codec=codec())

    def greet(ctx: Any) -> str:
        return "hi"

    with pytest.raises(TypeError, match=r"write @app.tool\(\), not @app.tool"):
        app.tool(greet)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"write @app.prompt\(\), not @app.prompt"):
        app.prompt(greet)  # type: ignore[arg-type]
    assert app.tools == () and app.prompts == ()


@pytest.mark.parametrize("name", ["", "greet\n", 5])
def test_a_tool_name_given_must_itself_be_valid(name: Any) -> None:
    app = App("srv", "1", codec=codec())

    def greet(ctx: Any) -> str:
        return "hi"

    with pytest.raises(ValueError, match="must be 1-128 characters"):
        app.tool(name)(greet)
    assert app.tools == ()


def _greet(ctx: Any) -> str:
    return "hi"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"input_schema": {"type": "object", "properties": {"n": {"type": 5}}}}, ValueError,
         "tool 'greet': inputSchema is not a valid JSON Schema 2020-12: .*"
         " \\(at properties/n/type\\)"),
        # Listed as it is in tools/list: a value JSON cannot write would fail every listing.
        ({"input_schema": {"type": "object", "default": {1, 2}}}, ValueError,
         "tool 'greet': inputSchema is not JSON \\(Object of type set is not JSON"),
        ({"input_schema": {"type": "object", "properties": {"n": {"maximum": float("nan")}}}},
         ValueError, "tool 'greet': inputSchema is not JSON \\(Out of range float values"),
        ({"input_schema": {"type": "object", "properties": {"a": {"default": b"x"}}}},
         ValueError, "tool 'greet': inputSchema is not JSON \\(Object of type bytes"),
        ({"input_schema": "{}"}, TypeError,
         "tool 'greet': input_schema must be a JSON Schema mapping or None, not str"),
        # Every call is checked against the schema: a reference it cannot use would fail
        # each call (a referencing error out of the app, or -32602 blaming the client).
        ({"input_schema": {"type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}}},
         ValueError, "tool 'greet': inputSchema cannot be used: \\$ref '#/\\$defs/n' \\(at"
         " properties/n/\\$ref\\) resolves to nothing in the schema"),
        ({"input_schema": {"type": "object", "$ref": "#nowhere"}}, ValueError,
         "tool 'greet': inputSchema cannot be used: \\$ref '#nowhere' \\(at \\$ref\\) resolves"
         " to nothing"),
        ({"input_schema": {"type": "object", "required": [], "$ref": "#/required"}},
         ValueError, "inputSchema cannot be used: \\$ref '#/required' \\(at \\$ref\\) leads to"
         " list, not to a schema"),
        # Nothing is retrieved: a URI outside the schema (a meta-schema's too) is refused.
        ({"input_schema": {"type": "object", "$ref": "https://example.com/args.json"}},
         ValueError, "inputSchema cannot be used: \\$ref 'https://example.com/args.json'"
         " \\(at \\$ref\\) names a document other than the schema, and no document is"
         " retrieved"),
        ({"input_schema": {"type": "object", "properties": {"s": {
            "$ref": "https://json-schema.org/draft/2020-12/schema"}}}}, ValueError,
         "inputSchema cannot be used: \\$ref 'https://json-schema.org/draft/2020-12/schema'"
         " \\(at properties/s/\\$ref\\) names a document other than the schema"),
        # A loop that never goes into the value: checking any value would never end.
        ({"input_schema": {"type": "object", "$ref": "#"}}, ValueError,
         "tool 'greet': inputSchema cannot be used: \\$ref '#' \\(at \\$ref\\) is in a loop"
         " that never goes into the value: checking any value would never end"),
        ({"input_schema": {"type": "object", "properties": {"n": {"$ref": "#/$defs/a"}},
                           "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}]},
                                     "b": {"not": {"$ref": "#/$defs/a"}}}}}, ValueError,
         "inputSchema cannot be used: \\$ref '#/\\$defs/a' \\(at \\$defs/b/not/\\$ref\\) is in"
         " a loop"),
        ({"input_schema": {"type": "object", "$dynamicAnchor": "n",
                           "if": {"$dynamicRef": "#n"}}}, ValueError,
         "inputSchema cannot be used: \\$dynamicRef '#n' \\(at if/\\$dynamicRef\\) is in a loop"),
        ({"description": 5}, TypeError,
         "tool 'greet': description must be a string or None, not int"),
        ({"single_use": "yes"}, TypeError,
         "tool 'greet': single_use must be True or False, not str"),
        # Tool.title and ToolAnnotations (schema.ts) go on the wire as they are.
        ({"title": 5}, TypeError, "tool 'greet': title must be a string or None, not int"),
        ({"annotations": [("readOnlyHint", True)]}, TypeError,
         "tool 'greet': annotations must be a mapping of ToolAnnotations members or None,"
         " not list"),
        ({"annotations": {"title": 5}}, TypeError,
         "tool 'greet': annotations title must be a string, not int"),
        ({"annotations": {"readOnlyHint": "yes"}}, TypeError,
         "tool 'greet': annotations readOnlyHint must be True or False, not str"),
        ({"annotations": {"destructiveHint": 0}}, TypeError,
         "tool 'greet': annotations destructiveHint must be True or False, not int"),
        ({"annotations": {"idempotentHint": None}}, TypeError,
         "tool 'greet': annotations idempotentHint must be True or False, not NoneType"),
        ({"annotations": {"openWorldHint": 1.0}}, TypeError,
         "tool 'greet': annotations openWorldHint must be True or False, not float"),
        # A misspelt hint would be dropped by every client without a word.
        ({"annotations": {"readonlyHint": True}}, ValueError,
         "tool 'greet': annotations member 'readonlyHint' is not one of title, readOnlyHint,"),
        ({"annotations": {1: True}}, ValueError, "tool 'greet': annotations member 1 is not"),
        # outputSchema is checked as inputSchema is (any 2020-12 schema object, JSON only).
        ({"output_schema": "{}"}, TypeError,
         "tool 'greet': output_schema must be a JSON Schema mapping or None, not str"),
        ({"output_schema": {"type": "object", "properties": {"n": {"type": 5}}}}, ValueError,
         "tool 'greet': outputSchema is not a valid JSON Schema 2020-12: .*"
         " \\(at properties/n/type\\)"),
        ({"output_schema": {"type": "array", "default": {1, 2}}}, ValueError,
         "tool 'greet': outputSchema is not JSON \\(Object of type set is not JSON"),
        ({"output_schema": {"maximum": float("inf")}}, ValueError,
         "tool 'greet': outputSchema is not JSON \\(Out of range float values"),
        ({"output_schema": {"items": {"$ref": "#/$defs/row"}}}, ValueError,
         "tool 'greet': outputSchema cannot be used: \\$ref '#/\\$defs/row' \\(at"
         " items/\\$ref\\) resolves to nothing in the schema"),
        ({"output_schema": {"$ref": "#/$defs/a", "$defs": {"a": {"allOf": [{"$ref": "#"}]}}}},
         ValueError, "tool 'greet': outputSchema cannot be used: \\$ref '#/\\$defs/a' \\(at"
         " \\$ref\\) is in a loop"),
        # Tool.icons is a list of Icon (schema.ts): src a URI, mimeType a string, sizes a
        # list of sizes, theme 'light' or 'dark'; a misspelt member is refused too.
        ({"icons": "x.png"}, TypeError, "tool 'greet': icons must be a list of icons or None,"
         " not str"),
        ({"icons": {"src": "https://x.example/x.png"}}, TypeError,
         "tool 'greet': icons must be a list of icons or None, not dict"),
        ({"icons": ["x.png"]}, TypeError,
         "tool 'greet': icons\\[0\\] must be a mapping of Icon members, not str"),
        ({"icons": [{"mimeType": "image/png"}]}, ValueError,
         "tool 'greet': icons\\[0\\] needs a src"),
        ({"icons": [{"src": "https://x.example/a.png"}, {"src": 5}]}, TypeError,
         "tool 'greet': icons\\[1\\] src must be a URI with a scheme \\(RFC 3986 §3.1\\) and"
         " no whitespace or control character, not int"),
        # Icon.src has format "uri" (schema.json: an https or a data: URI, say), and each of
        # Icon.sizes is WxH or "any" (schema.ts).
        ({"icons": [{"src": "a.png"}]}, ValueError,
         "tool 'greet': icons\\[0\\] src must be a URI with a scheme \\(RFC 3986 §3.1\\) and"
         " no whitespace or control character, got 'a.png'"),
        ({"icons": [{"src": "https://x.example/a.png", "sizes": ["48"]}]}, ValueError,
         "tool 'greet': icons\\[0\\] sizes must be a list of sizes, each WxH \\(48x48\\) or"
         " 'any', got \\['48'\\]"),
        ({"icons": [{"src": "https://x.example/a.png", "sizes": ["48x48", "big"]}]}, ValueError,
         "tool 'greet': icons\\[0\\] sizes must be a list of sizes"),
        ({"icons": [{"src": "https://x.example/a.png", "mimeType": 5}]}, TypeError,
         "tool 'greet': icons\\[0\\] mimeType must be a string, not int"),
        ({"icons": [{"src": "https://x.example/a.png", "sizes": "48x48"}]}, TypeError,
         "tool 'greet': icons\\[0\\] sizes must be a list of sizes, each WxH \\(48x48\\) or"
         " 'any', not str"),
        ({"icons": [{"src": "https://x.example/a.png", "sizes": [48]}]}, ValueError,
         "tool 'greet': icons\\[0\\] sizes must be a list of sizes, each WxH \\(48x48\\) or"
         " 'any', got \\[48\\]"),
        ({"icons": [{"src": "https://x.example/a.png", "theme": "blue"}]}, ValueError,
         "tool 'greet': icons\\[0\\] theme must be 'light' or 'dark', got 'blue'"),
        ({"icons": [{"src": "https://x.example/a.png", "theme": None}]}, TypeError,
         "tool 'greet': icons\\[0\\] theme must be 'light' or 'dark', not NoneType"),
        ({"icons": [{"src": "https://x.example/a.png", "size": "48x48"}]}, ValueError,
         "tool 'greet': icons\\[0\\] member 'size' is not one of src, mimeType, sizes,"
         " theme"),
        # Tool._meta is a JSON object (schema.ts MetaObject), listed as it is.
        ({"meta": [("k", 1)]}, TypeError, "tool 'greet': meta must be a mapping or None,"
         " not list"),
        ({"meta": {1: "x"}}, TypeError, "tool 'greet': meta key 1 must be a string, not int"),
        ({"meta": {"k": {1, 2}}}, ValueError,
         "tool 'greet': meta is not JSON \\(Object of type set is not JSON"),
        ({"meta": {"k": float("nan")}}, ValueError,
         "tool 'greet': meta is not JSON \\(Out of range float values"),
    ],
)
def test_tool_registration_refuses_bad_values_naming_the_tool(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    app = App("srv", "1", codec=codec())
    with pytest.raises(error, match=message):
        app.tool("greet", **kwargs)(_greet)
    assert app.tools == ()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"arguments": [5]}, TypeError,
         "prompt 'greet': an argument must be a name, a mapping or a PromptArgument, not int"),
        ({"arguments": "abc"}, TypeError,
         "prompt 'greet': arguments must be a list of arguments, not str"),
        ({"arguments": [{"description": "who"}]}, ValueError,
         "prompt 'greet': an argument needs a non-empty string name"),
        ({"arguments": [{"name": "who", "required": "no"}]}, TypeError,
         "prompt 'greet': argument 'who' required must be True or False, not str"),
        ({"arguments": [{"name": "who", "description": 3}]}, TypeError,
         "prompt 'greet': argument 'who' description must be a string or None, not int"),
        # A PromptArgument is checked as a mapping is: its fields go on the wire as they are.
        ({"arguments": [PromptArgument(name="")]}, ValueError,
         "prompt 'greet': an argument needs a non-empty string name"),
        ({"arguments": [PromptArgument(name="who", required=1)]}, TypeError,  # type: ignore[arg-type]
         "prompt 'greet': argument 'who' required must be True or False, not int"),
        ({"arguments": [PromptArgument(name="who", description=3)]}, TypeError,  # type: ignore[arg-type]
         "prompt 'greet': argument 'who' description must be a string or None, not int"),
        # Prompt.title and PromptArgument.title (schema.ts BaseMetadata) are strings.
        ({"title": ["Greet"]}, TypeError, "prompt 'greet': title must be a string or None,"
         " not list"),
        ({"arguments": [{"name": "who", "title": 3}]}, TypeError,
         "prompt 'greet': argument 'who' title must be a string or None, not int"),
        ({"arguments": [PromptArgument(name="who", title=b"Who")]}, TypeError,  # type: ignore[arg-type]
         "prompt 'greet': argument 'who' title must be a string or None, not bytes"),
        # A misspelt member would be dropped without a word (a required argument listed as
        # optional), as a misspelt tool annotation or icon member would.
        ({"arguments": [{"name": "who", "requried": True}]}, ValueError,
         "prompt 'greet': argument 'who' member 'requried' is not one of name, title,"
         " description, required"),
        ({"arguments": [{"name": "who", 1: "x"}]}, ValueError,
         "prompt 'greet': argument 'who' member 1 is not one of"),
        ({"description": b"hi"}, TypeError, "prompt 'greet': description must be a string or None"),
        ({"single_use": 1}, TypeError, "prompt 'greet': single_use must be True or False, not int"),
        ({"name": 5}, TypeError, "prompt name must be a string, not int"),
        # Prompt.icons and Prompt._meta (schema.ts) are checked as a tool's are.
        ({"icons": [{"src": b"a.png"}]}, TypeError,
         "prompt 'greet': icons\\[0\\] src must be a URI with a scheme"),
        ({"icons": [{"src": "https://x.example/a.png", "theme": "Dark"}]}, ValueError,
         "prompt 'greet': icons\\[0\\] theme must be 'light' or 'dark', got 'Dark'"),
        ({"meta": "m"}, TypeError, "prompt 'greet': meta must be a mapping or None, not str"),
        ({"meta": {"k": b"x"}}, ValueError,
         "prompt 'greet': meta is not JSON \\(Object of type bytes"),
    ],
)
def test_prompt_registration_refuses_bad_values_naming_the_prompt(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    app = App("srv", "1", codec=codec())
    with pytest.raises(error, match=message):
        app.prompt(**{"name": "greet", **kwargs})(_greet)
    assert app.prompts == ()


_DEEP_SCHEMA: dict[str, Any] = {}
_node = _DEEP_SCHEMA
for _ in range(300):  # JSON writes it; the check against the meta-schema recurses deeper
    _node["not"] = {}
    _node = _node["not"]
_DEEP_ARGUMENTS = {"type": "object", "properties": {"n": _DEEP_SCHEMA}}
_TOO_DEEP = "nested too deeply to write as JSON, or circular"


_SRC = "https://x.example/a.png"


@pytest.mark.parametrize(
    ("error", "message", "register"),
    [
        (ValueError, f"tool 'greet': meta is not JSON \\({_TOO_DEEP}\\)",
         lambda app: app.tool("greet", meta={"k": too_deep()})),
        (ValueError, f"tool 'greet': inputSchema is not JSON \\({_TOO_DEEP}\\)",
         lambda app: app.tool("greet", input_schema={"type": "object", "default": too_deep()})),
        (ValueError, f"tool 'greet': outputSchema is not JSON \\({_TOO_DEEP}\\)",
         lambda app: app.tool("greet", output_schema={"default": too_deep()})),
        (ValueError, "tool 'greet': inputSchema is nested too deeply to check as a JSON Schema",
         lambda app: app.tool("greet", input_schema=_DEEP_ARGUMENTS)),
        (ValueError, "tool 'greet': outputSchema is nested too deeply to check as a JSON Schema",
         lambda app: app.tool("greet", output_schema=_DEEP_SCHEMA)),
        (ValueError, "tool 'greet': icons\\[0\\] sizes must be a list of sizes, .* got \\[\\[\\[",
         lambda app: app.tool("greet", icons=[{"src": _SRC, "sizes": too_deep()}])),
        (ValueError, "tool name \\[\\[\\[.*\\] must be 1-128 characters",
         lambda app: app.tool(too_deep())),
        (TypeError, "tool 'greet': meta key \\(\\(\\(.*\\) must be a string, not tuple",
         lambda app: app.tool("greet", meta={too_deep_key(): 1})),
        (ValueError, "tool 'greet': annotations member \\(\\(\\(.*\\) is not one of",
         lambda app: app.tool("greet", annotations={too_deep_key(): 1})),
        (ValueError, f"prompt 'greet': meta is not JSON \\({_TOO_DEEP}\\)",
         lambda app: app.prompt("greet", meta={"k": too_deep()})),
        (ValueError, "prompt 'greet': icons\\[0\\] sizes must be a list of sizes, .* got",
         lambda app: app.prompt("greet", icons=[{"src": _SRC, "sizes": too_deep()}])),
        (ValueError, "prompt 'greet': an argument needs a non-empty string name, got {'desc",
         lambda app: app.prompt("greet", arguments=[{"description": too_deep()}])),
        (ValueError, "prompt 'greet': argument 'who' member \\(\\(\\(.*\\) is not one of",
         lambda app: app.prompt("greet", arguments=[{"name": "who", too_deep_key(): 1}])),
        (ValueError, f"resource 'file:///a': meta is not JSON \\({_TOO_DEEP}\\)",
         lambda app: app.resource("file:///a", meta={"k": too_deep()})),
        (ValueError, f"resource 'file:///{{day}}': meta is not JSON \\({_TOO_DEEP}\\)",
         lambda app: app.resource("file:///{day}", meta={"k": too_deep()})),
        (ValueError, "resource 'file:///a': icons\\[0\\] sizes must be a list of sizes, .* got",
         lambda app: app.resource("file:///a", icons=[{"src": _SRC, "sizes": too_deep()}])),
        (ValueError, "resource 'file:///a': annotations audience must be a list of 'user' and"
         " 'assistant', got \\[\\[\\[",
         lambda app: app.resource("file:///a", annotations={"audience": too_deep()})),
        (ValueError, "a resource URI must be a non-empty string, not \\[\\[\\[",
         lambda app: app.resource(too_deep())),
    ],
)
def test_a_value_nested_too_deeply_is_refused_as_other_bad_values_are(
    error: type[Exception], message: str, register: Callable[[App], Callable[[Any], Any]]
) -> None:
    # Nested deeper than the interpreter recurses: the error any other value JSON cannot
    # write (or a value out of range, a key that is not a string) gets, naming it, not a
    # RecursionError.
    app = App("srv", "1", codec=codec())
    with pytest.raises(error, match=message):
        register(app)(_read)
    assert app.capabilities() == {}


def _read(ctx: Any, uri: str) -> str:
    return "text"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": 5}, "resource 'file:///a': name must be a string or None, not int"),
        ({"mime_type": 5}, "resource 'file:///a': mime_type must be a string or None, not int"),
        ({"description": b"a"},
         "resource 'file:///a': description must be a string or None, not bytes"),
        ({"title": 5}, "resource 'file:///a': title must be a string or None, not int"),
        ({"single_use": "no"}, "resource 'file:///a': single_use must be True or False, not str"),
    ],
)
def test_resource_registration_refuses_bad_values_naming_the_resource(
    kwargs: dict[str, Any], message: str
) -> None:
    # name and mimeType are strings on the wire (resources/list and every read), and a
    # truthy single_use would make every read need a replay guard.
    app = App("srv", "1", codec=codec())
    with pytest.raises(TypeError, match=message):
        app.resource("file:///a", **kwargs)(_read)
    assert app.capabilities() == {}


def _read_day(ctx: Any, uri: str, day: str) -> str:
    return day


@pytest.mark.parametrize(
    ("uri", "kwargs", "error", "message"),
    [
        # Resource and ResourceTemplate (schema.ts) have icons, _meta and Annotations
        # (audience a list of 'user'/'assistant', priority a number from 0 to 1,
        # lastModified a date-time); only a Resource has a size, an integer.
        ("file:///a", {"icons": ("x.png",)}, TypeError,
         "resource 'file:///a': icons\\[0\\] must be a mapping of Icon members, not str"),
        ("file:///{day}", {"icons": [{"src": "https://x.example/a.png",
                                      "sizes": ["48x48", None]}]}, ValueError,
         "resource 'file:///{day}': icons\\[0\\] sizes must be a list of sizes"),
        ("file:///a", {"meta": {"k": {1, 2}}}, ValueError,
         "resource 'file:///a': meta is not JSON \\(Object of type set"),
        ("file:///{day}", {"meta": 5}, TypeError,
         "resource 'file:///{day}': meta must be a mapping or None, not int"),
        ("file:///a", {"annotations": "high"}, TypeError,
         "resource 'file:///a': annotations must be a mapping of Annotations members or None,"
         " not str"),
        ("file:///a", {"annotations": {"audience": "user"}}, TypeError,
         "resource 'file:///a': annotations audience must be a list of 'user' and"
         " 'assistant', not str"),
        ("file:///{day}", {"annotations": {"audience": ["user", "system"]}}, ValueError,
         "resource 'file:///{day}': annotations audience must be a list of 'user' and"
         " 'assistant', got \\['user', 'system'\\]"),
        ("file:///a", {"annotations": {"priority": 2}}, ValueError,
         "resource 'file:///a': annotations priority must be a number from 0 to 1, got 2"),
        ("file:///a", {"annotations": {"priority": float("nan")}}, ValueError,
         "resource 'file:///a': annotations priority must be a number from 0 to 1, got nan"),
        ("file:///a", {"annotations": {"priority": "1"}}, TypeError,
         "resource 'file:///a': annotations priority must be a number from 0 to 1, not str"),
        ("file:///a", {"annotations": {"priority": True}}, TypeError,
         "resource 'file:///a': annotations priority must be a number from 0 to 1, not bool"),
        ("file:///{day}", {"annotations": {"lastModified": 20250112}}, TypeError,
         "resource 'file:///{day}': annotations lastModified must be an RFC 3339 date-time"
         " with an offset \\(e.g. 2025-01-12T15:00:58Z\\), not int"),
        # Annotations.lastModified is ISO 8601 (schema.ts); official clients take RFC 3339's
        # date-time with an offset only, so that is all a server built on mrtr sends.
        ("file:///a", {"annotations": {"lastModified": "2025-01-12"}}, ValueError,
         "resource 'file:///a': annotations lastModified must be an RFC 3339 date-time"
         " with an offset \\(e.g. 2025-01-12T15:00:58Z\\), got '2025-01-12'"),
        ("file:///a", {"annotations": {"lastModified": "2025-01-12T15:00:58"}}, ValueError,
         "resource 'file:///a': annotations lastModified must be an RFC 3339 date-time"),
        ("file:///a", {"annotations": {"lastModified": "2025-02-30T15:00:58Z"}}, ValueError,
         "resource 'file:///a': annotations lastModified must be an RFC 3339 date-time"),
        ("file:///a", {"annotations": {"Priority": 1}}, ValueError,
         "resource 'file:///a': annotations member 'Priority' is not one of audience,"
         " priority, lastModified"),
        ("file:///a", {"size": "12"}, TypeError,
         "resource 'file:///a': size must be an integer or None, not str"),
        ("file:///a", {"size": 1.5}, TypeError,
         "resource 'file:///a': size must be an integer or None, not float"),
        ("file:///a", {"size": True}, TypeError,
         "resource 'file:///a': size must be an integer or None, not bool"),
        ("file:///{day}", {"size": 12}, ValueError,
         "resource 'file:///{day}': a resource template has no size"),
        # resources/list writes it as JSON: one too long to write would fail every listing.
        ("file:///a", {"size": 10 ** 5000}, ValueError,
         "resource 'file:///a': size is an integer too long to write"),
    ],
)
def test_resource_registration_refuses_bad_icons_meta_annotations_and_size(
    uri: str, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    app = App("srv", "1", codec=codec())
    with pytest.raises(error, match=message):
        app.resource(uri, **kwargs)(_read_day if "{" in uri else _read)
    assert app.capabilities() == {}


def _topic(ctx: Any, topic: str) -> str:
    return topic


def _positional(ctx: Any, topic: str, /) -> str:
    return topic


@pytest.mark.parametrize(
    ("handler", "arguments", "message"),
    [
        (_greet, ["topic"], "got an unexpected keyword argument 'topic'"),
        (_topic, [], "missing a required argument: 'topic'"),
        (_topic, [{"name": "topic", "required": False}], "missing a required argument: 'topic'"),
        # Python 3.11/3.12 and 3.13 word this one differently.
        (_positional, None, r"\(topic\): .*positional"),
    ],
)
def test_prompt_registration_refuses_arguments_its_handler_cannot_take(
    handler: Any, arguments: Any, message: str
) -> None:
    # prompts/get calls handler(ctx, **declared arguments given): a declared argument the
    # handler cannot take, or a parameter a client may leave out that the handler needs,
    # would fail every such request with -32603; it is refused where the prompt is declared.
    app = App("srv", "1", codec=codec())
    with pytest.raises(TypeError, match=f"prompt 'greet': .*{message}"):
        app.prompt("greet", arguments=arguments)(handler)
    assert app.prompts == ()


def test_prompt_registration_keeps_good_arguments() -> None:
    app = App("srv", "1", codec=codec())

    def greet(ctx: Any, who: str, tone: str = "plain", mood: str = "calm") -> str:
        return f"hi {who}, {tone}"

    app.prompt("greet", arguments=["who", {"name": "tone", "description": "how"},
                                    PromptArgument(name="mood", title="Mood")])(greet)
    assert [a.to_wire() for a in app.prompts[0].arguments] == [
        {"name": "who", "required": True},
        {"name": "tone", "description": "how", "required": False},
        {"name": "mood", "title": "Mood", "required": False},
    ]


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((5, "1"), {}, "name must be a string, not int"),
        (("srv", 1.0), {}, "version must be a string, not float"),
        (("srv", "1"), {"instructions": ["be nice"]},
         "instructions must be a string or None, not list"),
        (("srv", "1"), {"server_info": "no"}, "server_info must be True or False, not str"),
    ],
)
def test_app_refuses_bad_identity_values(
    args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        App(*args, codec=codec(), **kwargs)
