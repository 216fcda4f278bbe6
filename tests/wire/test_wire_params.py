"""x-mcp-header: Mcp-Param-* headers, both sides (streamable-http.mdx § Custom Headers)."""

from __future__ import annotations

from collections import OrderedDict

import pytest
from wire_helpers import RawClient, call_tool, mcp_headers, serve

from mrtr_core.http import (
    HeaderMismatchError,
    HttpClientConnection,
    HttpServerConnection,
    ParamHeaderRegistry,
    param_header_paths,
    param_header_value,
    param_headers,
    parse_url,
    validate_param_headers,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
        "opts": {
            "type": "object",
            "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}},
        },
        "query": {"type": "string"},
    },
}


def test_paths_follow_properties_chains():
    assert param_header_paths(SCHEMA) == {
        "Region": ("region",),
        "Count": ("count",),
        "Dry-Run": ("dry",),
        "Tenant": ("opts", "tenant"),
    }


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"type": "string", "x-mcp-header": ""}, "token"),
        ({"type": "string", "x-mcp-header": "Bad Name"}, "token"),
        ({"type": "string", "x-mcp-header": "A\r\nB"}, "token"),
        ({"type": "number", "x-mcp-header": "N"}, "type"),
        ({"type": "array", "x-mcp-header": "N"}, "type"),
        ({"x-mcp-header": "N"}, "type"),
        ({"type": ["string", "null"], "x-mcp-header": "N"}, "type"),  # JSON, not hashable
        ({"type": {"const": "string"}, "x-mcp-header": "N"}, "type"),
    ],
)
def test_invalid_annotations_are_refused(spec, match):
    with pytest.raises(ValueError, match=match):
        param_header_paths({"type": "object", "properties": {"p": spec}})


def test_duplicate_names_are_refused_case_insensitively():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "x-mcp-header": "Region"},
            "b": {"type": "string", "x-mcp-header": "REGION"},
        },
    }
    with pytest.raises(ValueError, match="twice"):
        param_header_paths(schema)


@pytest.mark.parametrize("where", ["items", "oneOf", "$ref-target"])
def test_annotations_outside_properties_chains_are_refused(where):
    inner = {"type": "string", "x-mcp-header": "X"}
    schema: dict = {"type": "object", "properties": {}}
    if where == "items":
        schema["properties"]["list"] = {"type": "array", "items": inner}
    elif where == "oneOf":
        schema["oneOf"] = [inner]
    else:
        schema["$defs"] = {"thing": inner}
    with pytest.raises(ValueError, match="reachable"):
        param_header_paths(schema)


def test_a_property_named_like_the_keyword_is_not_an_annotation():
    schema = {"type": "object", "properties": {"x-mcp-header": {"type": "string"}}}
    assert param_header_paths(schema) == {}


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("us-west1", "us-west1"),
        (42, "42"),
        (-7, "-7"),
        (True, "true"),
        (False, "false"),
        (3.0, "3"),
        (None, None),
        (1.5, None),
        ([1], None),
        (2**60, None),
    ],
)
def test_value_conversion(value, text):
    assert param_header_value(value) == text


def test_client_headers_encode_unsafe_values_and_omit_missing_ones():
    headers = param_headers(SCHEMA, {"region": "Hello, 世界", "count": 3, "opts": {}})
    assert headers == [
        ("Mcp-Param-Region", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        ("Mcp-Param-Count", "3"),
    ]


def as_received(pairs):
    out = {}
    for name, value in pairs:
        out.setdefault(name.lower(), []).append(value.encode())
    return out


def test_server_accepts_what_the_client_sends():
    arguments = {"region": " padded ", "count": 42, "dry": False, "opts": {"tenant": "t"}}
    validate_param_headers(SCHEMA, arguments, as_received(param_headers(SCHEMA, arguments)))


@pytest.mark.parametrize("header", ["42", "42.0", "4.2e1", "420E-1", " 42 "])
def test_integers_compare_numerically(header):
    validate_param_headers(SCHEMA, {"count": 42}, as_received([("Mcp-Param-Count", header)]))


@pytest.mark.parametrize("header", ["4_2", "+42", "42.", ".42e2", "0042", "42e", "Infinity"])
def test_a_numeric_header_must_be_a_json_number(header):
    # Python's Decimal also reads digit groups ("4_2"), a sign "+" and bare points; a proxy
    # reading the header as JSON would not, so the header would not say what the body says.
    with pytest.raises(HeaderMismatchError, match="does not match"):
        validate_param_headers(SCHEMA, {"count": 42}, as_received([("Mcp-Param-Count", header)]))


@pytest.mark.parametrize(
    ("arguments", "headers", "match"),
    [
        ({"region": "eu"}, [], "missing"),
        ({"region": "eu"}, [("Mcp-Param-Region", "us")], "does not match"),
        ({}, [("Mcp-Param-Region", "us")], "does not match"),
        ({"count": 1}, [("Mcp-Param-Count", "one")], "does not match"),
        ({"dry": True}, [("Mcp-Param-Dry-Run", "True")], "does not match"),
        ({"region": "eu"}, [("Mcp-Param-Region", "=?base64?***?=")], "Base64"),
        ({"region": "eu"}, [("Mcp-Param-Region", "eu"), ("Mcp-Param-Region", "eu")], "times"),
    ],
)
def test_server_refuses_mismatches(arguments, headers, match):
    with pytest.raises(HeaderMismatchError, match=match) as info:
        validate_param_headers(SCHEMA, arguments, as_received(headers), request_id=9)
    assert info.value.request_id == 9


def test_unknown_param_headers_are_ignored():
    validate_param_headers(SCHEMA, {}, as_received([("Mcp-Param-Other", "x")]))


def test_server_connection_checks_param_headers_with_a_schema_lookup():
    schemas = {"deploy": SCHEMA}
    message = call_tool("deploy", 5, region="eu")
    for headers, status in [
        ([*mcp_headers(name="deploy"), ("Mcp-Param-Region", "eu")], 200),
        (mcp_headers(name="deploy"), 400),
    ]:
        client, server = RawClient(), HttpServerConnection(tool_schema=schemas.get)
        [resp] = client.read(serve(server, client.post(message, headers)).out)
        assert resp.status == status
        if status == 400:
            assert resp.json()["error"]["code"] == -32020
            assert resp.json()["id"] == 5


def listing(*tools):
    return {"jsonrpc": "2.0", "id": 1, "result": {"tools": list(tools), "resultType": "complete"}}


def test_registry_learns_from_tools_list_and_drops_invalid_tools():
    registry = ParamHeaderRegistry()
    good = {"name": "deploy", "inputSchema": SCHEMA}
    bad = {
        "name": "broken",
        "inputSchema": {
            "type": "object",
            "properties": {"n": {"type": "number", "x-mcp-header": "N"}},
        },
    }
    odd = {  # valid JSON Schema, not an annotation the header rules allow
        "name": "odd",
        "inputSchema": {
            "type": "object",
            "properties": {"who": {"type": ["string", "null"], "x-mcp-header": "Who"}},
        },
    }
    plain = {"name": "plain", "inputSchema": {"type": "object"}}
    seen = registry.observe({"method": "tools/list"}, listing(good, bad, odd, plain))
    assert [t["name"] for t in seen["result"]["tools"]] == ["deploy", "plain"]
    assert "broken" in registry.rejected and "odd" in registry.rejected
    assert registry.headers_for(call_tool("deploy", 2, region="eu")) == [("Mcp-Param-Region", "eu")]
    assert registry.headers_for(call_tool("plain", 3, region="eu")) == []
    assert registry.headers_for({"method": "tools/list"}) == []


def test_registry_leaves_other_responses_alone():
    registry = ParamHeaderRegistry()
    response = {"jsonrpc": "2.0", "id": 1, "result": {"tools": "not a list"}}
    assert registry.observe({"method": "tools/list"}, response) is response
    assert registry.observe({"method": "x"}, listing()) == listing()


def test_registry_is_bounded():
    registry = ParamHeaderRegistry(max_tools=2)
    for name in "abc":
        registry.observe({"method": "tools/list"}, listing({"name": name, "inputSchema": SCHEMA}))
    assert registry.headers_for(call_tool("a", 1, region="x")) == []
    assert registry.headers_for(call_tool("c", 1, region="x")) == [("Mcp-Param-Region", "x")]


def _broken(name):
    """A tool whose annotation breaks the header rules (dropped from tools/list)."""
    return {"name": name, "inputSchema": {
        "type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}}


def test_registry_keeps_at_most_max_tools_dropped_tools():
    # A hostile server listing new broken tools on every page grew the table of dropped
    # tools without bound: it keeps the last max_tools, the oldest going first.
    registry = ParamHeaderRegistry(max_tools=2)
    for page in range(3):
        registry.observe({"method": "tools/list", "params": {"cursor": str(page)}},
                         listing(*(_broken(f"t{page}-{i}") for i in range(5))))
    assert list(registry.rejected) == ["t2-3", "t2-4"]
    registry.observe({"method": "tools/list"}, listing(_broken("t2-3")))
    assert list(registry.rejected) == ["t2-4", "t2-3"]  # dropped again: the newest


class _Racing(OrderedDict):
    """A table another thread trims, once, just as this one removes its oldest entry (the
    same entry: both saw the table too long)."""

    def __init__(self, other_thread):
        super().__init__()
        self.other_thread = other_thread

    def _race(self):
        other_thread, self.other_thread = self.other_thread, None
        if other_thread is not None:
            other_thread()

    def __delitem__(self, key):
        self._race()
        super().__delitem__(key)

    def popitem(self, last=True):
        self._race()
        return super().popitem(last)


@pytest.mark.parametrize("table", ["_schemas", "rejected"])
def test_registry_trims_safely_while_another_thread_trims(table):
    # Threads share the registry (one per connection): two that both find a table too long
    # each remove its oldest entry, and the one that comes second must not fail on it.
    tool = {"schemas": {"name": "x", "inputSchema": SCHEMA}, "rejected": _broken("x")}
    kind = "schemas" if table == "_schemas" else "rejected"
    registry = ParamHeaderRegistry(max_tools=2)

    def other_thread():
        getattr(registry, table).popitem(last=False)

    setattr(registry, table, _Racing(other_thread))
    for name in "abc":
        registry.observe({"method": "tools/list"}, listing({**tool[kind], "name": name}))
    assert len(getattr(registry, table)) <= 2 and "c" in getattr(registry, table)


def test_registry_max_tools_must_be_a_positive_integer():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_tools"):
            ParamHeaderRegistry(max_tools=bad)


def test_registry_two_interleaved_paged_listings_keep_each_tools_latest_annotations():
    # Unlike output schemas, the annotations learned are kept tool by tool (a listing adds to
    # them; it never replaces those of tools it does not name), each from the latest page
    # that named the tool: listings running at once cannot leave a tool without its headers
    # or give it another listing's, and pages of a listing never completed count at once.
    zone = {"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}}
    registry = ParamHeaderRegistry()

    def page(cursor, *tools):
        params = {} if cursor is None else {"cursor": cursor}
        response = listing(*tools)
        registry.observe({"method": "tools/list", "params": params}, response)

    page(None, {"name": "deploy", "inputSchema": SCHEMA})  # listing A, page 1
    page(None, {"name": "deploy", "inputSchema": zone})  # listing B, page 1: deploy changed
    page("a2", {"name": "report", "inputSchema": SCHEMA})  # A's last page
    page("b2", {"name": "summary", "inputSchema": zone})  # B's last page
    arguments = {"region": "eu", "zone": "z1"}
    assert registry.headers_for(call_tool("deploy", 1, **arguments)) == [("Mcp-Param-Zone", "z1")]
    assert registry.headers_for(call_tool("report", 2, **arguments)) == [
        ("Mcp-Param-Region", "eu")]
    assert registry.headers_for(call_tool("summary", 3, **arguments)) == [
        ("Mcp-Param-Zone", "z1")]


def test_client_connection_mirrors_arguments_after_tools_list():
    registry = ParamHeaderRegistry()
    client = HttpClientConnection(parse_url("http://h/mcp"), param_headers=registry)
    server = HttpServerConnection(tool_schema={"deploy": SCHEMA}.get)

    def replier(event):
        if event.parsed.method == "tools/list":
            return listing({"name": "deploy", "inputSchema": SCHEMA}) | {
                "id": event.request_id
            }, None
        return {"jsonrpc": "2.0", "id": event.request_id, "result": {}}, None

    client.receive_data(
        serve(
            server,
            client.send_request(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/list",
                    "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
                }
            ),
            replier,
        ).out
    )
    client.next_event()
    client.receive_data(
        serve(server, client.send_request(call_tool("deploy", 2, region="eu")), replier).out
    )
    assert client.next_event().status == 200
