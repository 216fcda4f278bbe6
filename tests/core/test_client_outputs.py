"""Output schemas learned from ``tools/list`` and checked on ``tools/call`` results
(server/tools.mdx § Output Schema: clients SHOULD validate structured results)."""

from __future__ import annotations

import itertools
import random
import threading
from typing import Any

import pytest
from referencing.exceptions import Unresolvable

from mrtr_core.client import ClientFlow, Complete, Fail, ResponseReceived
from mrtr_core.client.driver import ClientBase
from mrtr_core.client.outputs import OutputSchemas
from mrtr_core.errors import LocalProtocolError, StructuredContentError
from mrtr_core.server.schemas import CompiledSchema
from mrtr_core.wire import Implementation, RequestMeta

SCHEMA = {"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]}


def _listing(**schemas: Any) -> dict[str, Any]:
    return {"tools": [{"name": name, "inputSchema": {"type": "object"}, "outputSchema": schema}
                      for name, schema in schemas.items()]}


def _result(structured: Any = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [], **extra}
    if structured is not None:
        out["structuredContent"] = structured
    return out


def _driver(**options: Any) -> ClientBase[Any]:
    return ClientBase(client_info=Implementation(name="t", version="1"), elicitation=None,
                      elicitation_form=True, elicitation_url=False, sampling=None, roots=None,
                      capabilities=None, limits=None, random=random.Random(0).random,
                      on_event=None, auto=True, **options)


def _answer(flow: ClientFlow, result: dict[str, Any]) -> Any:
    """Start ``flow``, answer its first leg with ``result``; the last command."""
    send = flow.start(0.0)[-1]
    message = {"jsonrpc": "2.0", "id": send.request_id, "result": result}  # type: ignore[union-attr]
    return flow.handle(ResponseReceived(message=message), 0.0)[-1]


def test_a_structured_result_is_checked_against_the_listed_schema() -> None:
    schemas = OutputSchemas()
    schemas.learn(_listing(forecast=SCHEMA))
    assert schemas.check("forecast", _result({"temp": 1})) is None
    wrong = schemas.check("forecast", _result({"temp": "warm"}))
    assert isinstance(wrong, StructuredContentError)
    assert str(wrong) == ("tool 'forecast': structuredContent does not match the tool's "
                          "outputSchema: 'warm' is not of type 'number' (at temp)")
    assert wrong.result == wrong.last_result == _result({"temp": "warm"})
    missing = schemas.check("forecast", _result())
    assert isinstance(missing, StructuredContentError) and "no structuredContent" in str(missing)
    assert schemas.check("forecast", _result(isError=True)) is None
    assert schemas.check("other", _result()) is None


def test_nothing_is_checked_before_a_listing() -> None:
    assert OutputSchemas().check("forecast", _result({"temp": "warm"})) is None


def test_a_listing_replaces_the_schemas_and_a_page_adds_to_them() -> None:
    schemas = OutputSchemas()
    schemas.learn(_listing(forecast=SCHEMA))
    compiled = schemas._latest.schemas["forecast"][1]
    schemas.learn(_listing(forecast=dict(SCHEMA), other=SCHEMA))
    assert schemas._latest.schemas["forecast"][1] is compiled  # compiled once per schema
    schemas.learn(_listing(other=SCHEMA))
    assert schemas.schema_for("forecast") is None and len(schemas) == 1
    schemas.learn(_listing(forecast=SCHEMA), cursor="2")
    assert len(schemas) == 2
    schemas.learn({"tools": "none"})
    assert len(schemas) == 0


def test_at_most_max_tools_schemas_are_remembered() -> None:
    schemas = OutputSchemas(max_tools=2)
    schemas.learn(_listing(a=SCHEMA, b=SCHEMA, c=SCHEMA))
    assert [schemas.schema_for(n) is not None for n in "abc"] == [False, True, True]


def test_a_listing_compiles_and_keeps_at_most_max_tools_schemas(monkeypatch: Any) -> None:
    # A hostile listing of many tools (a 4 MiB message holds about 100,000) costs the
    # check of at most max_tools schemas, not one per tool, and rejects at most as many.
    import mrtr_core.client.outputs as outputs

    compiled: list[Any] = []
    compile_one = outputs._compile

    def counting(schema: Any, known: Any) -> Any:
        compiled.append(schema)
        return compile_one(schema, known)

    monkeypatch.setattr(outputs, "_compile", counting)
    schemas = OutputSchemas(max_tools=2)
    many = {f"t{i}": {"type": "object", "minProperties": i} for i in range(50)}
    schemas.learn(_listing(**many))
    assert len(compiled) == 2
    assert [n for n in many if schemas.schema_for(n) is not None] == ["t48", "t49"]
    bad = {f"b{i}": {"type": "nope"} for i in range(50)}
    schemas.learn(_listing(**bad), cursor="2")
    assert len(schemas.rejected) <= 2 and len(compiled) == 4


@pytest.mark.parametrize(
    ("schema", "reason"),
    [({"type": "nope"}, "not a valid JSON Schema 2020-12"),
     ({"properties": {"a": {"pattern": "("}}}, "(at properties/a/pattern)"),
     ([], "outputSchema must be an object, not list")],
)
def test_an_invalid_schema_from_the_server_is_not_remembered(schema: Any, reason: str) -> None:
    schemas = OutputSchemas()
    schemas.learn(_listing(forecast=SCHEMA))
    schemas.learn(_listing(forecast=schema))
    assert schemas.schema_for("forecast") is None
    assert reason in schemas.rejected["forecast"]
    assert schemas.check("forecast", _result()) is None


@pytest.mark.parametrize("schema", [{"$ref": "#"}, {"$ref": "#/$defs/none"}])
def test_a_schema_that_fails_when_used_is_dropped(schema: Any) -> None:
    schemas = OutputSchemas()
    schemas.learn(_listing(forecast=schema))
    assert schemas.check("forecast", _result({"temp": 1})) is None
    assert schemas.schema_for("forecast") is None
    assert "cannot be used" in schemas.rejected["forecast"]


def test_schemas_dropped_when_used_keep_the_refused_to_max_tools(monkeypatch: Any) -> None:
    # A listing keeps max_tools schemas and refuses at most max_tools; each schema found
    # unusable when a call uses it joins the refused ones, which grew to twice max_tools.
    schemas = OutputSchemas(max_tools=2)
    schemas.learn(_page("2", r1={"type": "nope"}, r2={"type": "nope"}))
    schemas.learn(_listing(s1=SCHEMA, s2=SCHEMA), cursor="2")

    def fails(self: CompiledSchema, instance: Any) -> str | None:
        raise ValueError("fails only when used")

    monkeypatch.setattr(CompiledSchema, "problem", fails)
    assert list(schemas.rejected) == ["r1", "r2"] and len(schemas) == 2
    for tool in ("s1", "s2"):
        assert schemas.check(tool, _result({"temp": 1})) is None
    assert list(schemas.rejected) == ["s1", "s2"] and len(schemas) == 0  # the oldest went


@pytest.mark.parametrize("argument", ["max_tools", "max_listings"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True, "8", None])
def test_the_bounds_must_be_positive_integers(argument: str, value: Any) -> None:
    with pytest.raises(ValueError, match=argument):
        OutputSchemas(**{argument: value})


@pytest.mark.parametrize(("schema", "reason"), [
    ({"$ref": "#/$defs/none"},
     "outputSchema cannot be used: $ref '#/$defs/none' (at $ref) resolves to nothing in the"
     " schema"),
    ({"type": "object", "properties": {"a": {"$ref": "#nowhere"}}},
     "outputSchema cannot be used: $ref '#nowhere' (at properties/a/$ref) resolves to nothing"),
    ({"$ref": "#/$defs/a", "$defs": {"a": {"anyOf": [{"$ref": "#"}]}}},
     "outputSchema cannot be used: $ref '#/$defs/a' (at $ref) is in a loop that never goes"
     " into the value"),
    ({"$dynamicAnchor": "n", "not": {"$dynamicRef": "#n"}},
     "outputSchema cannot be used: $dynamicRef '#n' (at not/$dynamicRef) is in a loop"),
])
def test_a_schema_whose_refs_cannot_be_used_is_refused_by_the_listing(
    schema: Any, reason: str
) -> None:
    # As the server refuses to register it: known from the listing, before any call.
    driver = _driver()
    listing = {"tools": [{"name": "bad", "inputSchema": {"type": "object"},
                          "outputSchema": schema},
                         {"name": "good", "inputSchema": {"type": "object"},
                          "outputSchema": SCHEMA}]}
    assert isinstance(_answer(driver.new_flow("tools/list", None), listing), Complete)
    schemas = driver.output_schemas
    assert schemas.schema_for("bad") is None and schemas.rejected["bad"].startswith(reason)
    assert isinstance(_answer(driver.new_flow("tools/call", {"name": "bad"}),
                              _result({"temp": "warm"})), Complete)
    last = _answer(driver.new_flow("tools/call", {"name": "good"}), _result({"temp": "warm"}))
    assert isinstance(last, Fail) and isinstance(last.error, StructuredContentError)


@pytest.mark.parametrize("input_schema", [
    {"type": "object", "$ref": "#/$defs/none"},
    {"type": "object", "$ref": "#"},
    {"type": "object", "$ref": "https://example.com/args.json"},
])
def test_an_input_schema_whose_refs_cannot_be_used_changes_nothing(input_schema: Any) -> None:
    # The client checks no arguments against a tool's inputSchema (the server does): the
    # listing completes, and calling the tool goes on as for any other.
    driver = _driver()
    listing = {"tools": [{"name": "t", "inputSchema": input_schema, "outputSchema": SCHEMA}]}
    assert isinstance(_answer(driver.new_flow("tools/list", None), listing), Complete)
    assert driver.output_schemas.schema_for("t") == SCHEMA
    assert isinstance(_answer(driver.new_flow("tools/call", {"name": "t", "arguments": {}}),
                              _result({"temp": 1})), Complete)


@pytest.mark.parametrize("depth", [1500, 5000])  # past the recursion limit, and marshal's
def test_too_deep_a_schema_is_not_remembered(depth: int) -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(depth):
        node["items"] = {}
        node = node["items"]
    schemas = OutputSchemas()
    schemas.learn(_listing(forecast=deep))
    assert "too deeply" in schemas.rejected["forecast"]


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "object", "properties": {"id": {"type": "string", "pattern": "^(a+)+$"}}},
         "pattern"),
        ({"type": "object", "patternProperties": {"^(a|a)+$": {"type": "number"}},
          "additionalProperties": False}, "patternProperties"),
        ({"type": "object", "properties": {"rows": {"type": "array", "uniqueItems": True}}},
         "uniqueItems"),
        ({"type": "object", "$defs": {"id": {"pattern": "x"}}, "properties": {
            "ids": {"type": "array", "items": {"$ref": "#/$defs/id"}}}}, "pattern"),
        ({"anyOf": [{"type": "object"}, {"type": "string", "pattern": "(x+x+)+y"}]},
         "pattern"),
        # A $ref may lead anywhere in the schema (under a keyword no validator reads, to a
        # map of properties) or, by URI, to a JSON Schema meta-schema (uniqueItems on
        # "required"): wherever it could lead counts.
        ({"$ref": "#/x", "x": {"pattern": "^(a+)+$"}}, "pattern"),
        ({"$ref": "#/properties", "properties": {"uniqueItems": True}}, "uniqueItems"),
        ({"$ref": "#a", "examples": [{"$anchor": "a", "patternProperties": {"(a|a)+$": {}}}]},
         "patternProperties"),
        ({"$dynamicRef": "#/x", "x": {"uniqueItems": True}}, "uniqueItems"),
        ({"$ref": "https://json-schema.org/draft/2020-12/meta/validation"}, "$ref"),
        ({"$defs": {"v": {"$id": "https://json-schema.org/draft/2020-12/meta/validation",
                          "$ref": "#/$defs/stringArray"}}, "$ref": "#/$defs/v"}, "$id"),
    ],
)
def test_a_schema_that_would_run_the_peers_regex_or_a_quadratic_check_is_not_used(
    schema: Any, keyword: str
) -> None:
    # The server chooses both the schema and the structuredContent: a pattern that
    # backtracks (Python's re has no time limit) or uniqueItems over a long array of objects
    # (pairwise comparisons) would hold the client's thread or event loop past every time
    # limit. Such a schema is not used, as an invalid one is not (forms keep no pattern
    # either, mrtr_core.wire.forms).
    schemas = OutputSchemas()
    schemas.learn(_listing(spin=schema))
    assert schemas.schema_for("spin") is None
    assert keyword in schemas.rejected["spin"]
    assert schemas.check("spin", _result({"id": "a" * 40 + "b", "rows": [{}] * 3})) is None


def test_a_property_named_like_a_keyword_is_no_keyword() -> None:
    schema = {"type": "object", "properties": {"pattern": {"type": "string"},
                                               "uniqueItems": {"type": "boolean"}},
              "required": ["pattern"]}
    schemas = OutputSchemas()
    schemas.learn(_listing(search=schema))
    assert schemas.rejected == {}
    assert schemas.check("search", _result({"pattern": "x", "uniqueItems": True})) is None
    assert isinstance(schemas.check("search", _result({"pattern": 5})), StructuredContentError)


def test_the_flow_fails_with_what_its_result_check_returns() -> None:
    meta = RequestMeta()
    ids = itertools.count(1)
    error = StructuredContentError("forecast", "bad")
    flow = ClientFlow("tools/call", {"name": "forecast"}, meta=meta, handled_kinds=(),
                      next_id=lambda: next(ids), random=random.Random(0).random,
                      result_check=lambda result: error)
    last = _answer(flow, _result())
    assert isinstance(last, Fail) and last.error is error and flow.error is error
    with pytest.raises(LocalProtocolError, match="result_check"):
        ClientFlow("tools/call", {"name": "x"}, meta=meta, handled_kinds=(),
                   next_id=lambda: next(ids), random=random.Random(0).random,
                   result_check=1)  # type: ignore[arg-type]


def test_a_client_learns_its_listings_and_checks_its_calls_and_restored_flows() -> None:
    driver = _driver()
    assert isinstance(_answer(driver.new_flow("tools/list", None), _listing(forecast=SCHEMA)),
                      Complete)
    assert driver.output_schemas.schema_for("forecast") == SCHEMA
    last = _answer(driver.new_flow("tools/call", {"name": "forecast"}), _result())
    assert isinstance(last, Fail) and isinstance(last.error, StructuredContentError)
    data = driver.new_flow("tools/call", {"name": "forecast"}).to_data(0.0)
    last = _answer(driver.restore_flow(data, 0.0), _result({"temp": "warm"}))
    assert isinstance(last, Fail) and isinstance(last.error, StructuredContentError)
    page = driver.new_flow("tools/list", {"cursor": "2"})
    _answer(page, _listing(other=SCHEMA))
    assert len(driver.output_schemas) == 2


def test_a_client_with_validation_off_learns_and_checks_nothing() -> None:
    driver = _driver(validate_output=False)
    _answer(driver.new_flow("tools/list", None), _listing(forecast=SCHEMA))
    assert len(driver.output_schemas) == 0
    assert isinstance(_answer(driver.new_flow("tools/call", {"name": "forecast"}), _result()),
                      Complete)
    with pytest.raises(TypeError, match="validate_output"):
        _driver(validate_output=1)


@pytest.mark.parametrize("ref", ["http://127.0.0.1:9/schema.json", "https://example.com/s"])
def test_a_remote_ref_is_never_fetched(no_retrieval: list[object], ref: str) -> None:
    # The server chooses the URI: fetching it would let it make the client open any URL
    # (with no time limit, on the client's thread or event loop).
    schemas = OutputSchemas()
    schemas.learn(_listing(forecast={"$ref": ref}))
    assert schemas.check("forecast", _result({"temp": 1})) is None
    assert "$ref" in schemas.rejected["forecast"]
    with pytest.raises(Unresolvable):  # nor would a schema of the peer's compiled alone
        CompiledSchema({"$ref": ref}).is_valid({"temp": 1})
    assert no_retrieval == []



def test_a_local_ref_to_a_clean_definition_is_used() -> None:
    schema = {"$id": "https://example.com/out", "$ref": "#/$defs/row", "$defs": {"row": {
        "type": "object", "properties": {"pattern": {"type": "string"}}}}}
    schemas = OutputSchemas()
    schemas.learn(_listing(rows=schema))
    assert schemas.rejected == {}
    assert isinstance(schemas.check("rows", _result({"pattern": 5})), StructuredContentError)


NUMBER = SCHEMA
TEXT = {"type": "object", "properties": {"temp": {"type": "string"}}, "required": ["temp"]}


def _page(next_cursor: str | None = None, **schemas: Any) -> dict[str, Any]:
    """A tools/list result; ``next_cursor``: more pages follow."""
    page = _listing(**schemas)
    if next_cursor is not None:
        page["nextCursor"] = next_cursor
    return page


def _listed(schemas: OutputSchemas) -> dict[str, Any]:
    """The schemas remembered, by tool (of the tools these tests list)."""
    names = ("forecast", "report", "summary", "a", "b", "c", "d", "e", "x", "x2", "z", "z2")
    return {name: schemas.schema_for(name) for name in names
            if schemas.schema_for(name) is not None}


def test_two_paged_listings_that_interleave_each_keep_their_own_pages() -> None:
    # Two listings in flight at once (two threads or tasks of one client): each page
    # continues its own listing, and a listing is used once its last page is in, whole.
    driver = _driver()
    listings = [driver.new_flow("tools/list", None) for _ in "ab"]
    sent = [flow.start(0.0)[-1] for flow in listings]

    def answer(flow: ClientFlow, send: Any, result: dict[str, Any]) -> None:
        message = {"jsonrpc": "2.0", "id": send.request_id, "result": result}
        assert isinstance(flow.handle(ResponseReceived(message=message), 0.0)[-1], Complete)

    def next_page(cursor: str, result: dict[str, Any]) -> None:
        flow = driver.new_flow("tools/list", {"cursor": cursor})
        answer(flow, flow.start(0.0)[-1], result)

    def call(temp: object) -> Any:
        return _answer(driver.new_flow("tools/call", {"name": "forecast"}),
                       _result({"temp": temp}))

    schemas = driver.output_schemas
    answer(listings[0], sent[0], _page("a2", forecast=NUMBER))
    answer(listings[1], sent[1], _page("b2", forecast=TEXT))  # the tools changed meanwhile
    assert _listed(schemas) == {"forecast": TEXT}  # neither is complete: the newer is used
    next_page("a2", _page(report=SCHEMA))
    assert _listed(schemas) == {"forecast": NUMBER, "report": SCHEMA}
    assert isinstance(call(21.5), Complete)
    next_page("b2", _page(summary=SCHEMA))
    assert _listed(schemas) == {"forecast": TEXT, "summary": SCHEMA}  # the last one wins
    assert isinstance(call(21.5), Fail) and isinstance(call("warm"), Complete)


def test_listings_given_the_same_cursors_each_continue_one() -> None:
    # A server's cursors may be the same for every listing ("page 2"): a page continues the
    # listing that has waited longest for its cursor.
    schemas = OutputSchemas()
    schemas.learn(_page("2", a=NUMBER))
    schemas.learn(_page("2", a=TEXT))
    schemas.learn(_page("3", b=NUMBER), cursor="2")
    schemas.learn(_page(c=NUMBER), cursor="2")
    assert _listed(schemas) == {"a": TEXT, "c": NUMBER}
    schemas.learn(_page(d=NUMBER), cursor="3")
    assert _listed(schemas) == {"a": NUMBER, "b": NUMBER, "d": NUMBER}
    schemas.learn(_page(e=NUMBER), cursor="3")  # no listing waits for it: it adds
    assert _listed(schemas) == {"a": NUMBER, "b": NUMBER, "d": NUMBER, "e": NUMBER}


def test_at_most_max_listings_wait_for_their_next_page() -> None:
    # Listings whose next page is never fetched (the caller wanted the first page only) are
    # forgotten, the oldest first: a page of a forgotten listing adds to the latest one.
    schemas = OutputSchemas(max_listings=2)
    for name in "xyz":
        schemas.learn(_page(name, **{name: NUMBER}))
    assert len(schemas._listings) == len(schemas._partial) == 2
    assert _listed(schemas) == {"z": NUMBER}  # x is forgotten (y is no name _listed knows)
    schemas.learn(_page(x2=NUMBER), cursor="x")
    assert _listed(schemas) == {"x2": NUMBER}
    schemas.learn(_page(z2=TEXT), cursor="z")
    assert _listed(schemas) == {"z": NUMBER, "z2": TEXT}


def _compile_held_in_threads(monkeypatch: Any) -> tuple[threading.Event, threading.Event]:
    """Make a thread other than the main one that compiles a schema set the first event and
    wait for the second."""
    import mrtr_core.client.outputs as outputs

    compile_one = outputs._compile
    inside, go_on = threading.Event(), threading.Event()

    def held(schema: Any, known: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            inside.set()
            assert go_on.wait(30)
        return compile_one(schema, known)

    monkeypatch.setattr(outputs, "_compile", held)
    return inside, go_on


def test_a_listing_checked_in_one_thread_holds_no_other_up(monkeypatch: Any) -> None:
    # The sync client shares the table across threads: a listing whose schemas are being
    # checked does not stop another from completing, and the one completed last is used
    # whole, not mixed with the other's pages.
    inside, go_on = _compile_held_in_threads(monkeypatch)
    schemas = OutputSchemas()
    schemas.learn(_page("a2", forecast=NUMBER))
    schemas.learn(_page("b2", forecast=TEXT))
    other = threading.Thread(target=schemas.learn, args=(_page(report=SCHEMA),),
                             kwargs={"cursor": "a2"})
    other.start()
    assert inside.wait(30)
    schemas.learn(_page(summary=SCHEMA), cursor="b2")
    assert _listed(schemas) == {"forecast": TEXT, "summary": SCHEMA}
    go_on.set()
    other.join(30)
    assert _listed(schemas) == {"forecast": NUMBER, "report": SCHEMA}


def test_a_schema_dropped_as_another_listing_completes_leaves_that_listing_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A call finds its schema unusable as another thread's listing completes: the schema is
    # dropped from the tables that gave it; the new listing's own schema for the tool stays
    # in use, and that listing refuses nothing.
    schemas = OutputSchemas()
    schemas.learn(_listing(forecast={"type": "object"}))

    def meanwhile(self: CompiledSchema, instance: Any) -> Any:
        monkeypatch.undo()
        schemas.learn(_listing(forecast=SCHEMA))
        raise ValueError("fails only when used")

    monkeypatch.setattr(CompiledSchema, "problem", meanwhile)
    assert schemas.check("forecast", _result({"temp": 1})) is None
    assert schemas.schema_for("forecast") == SCHEMA
    assert "forecast" not in schemas.rejected


def test_the_pages_of_a_listing_never_completed_are_checked() -> None:
    # A caller may fetch only the first page(s) of a paged listing: a tool those pages list
    # is checked against the schema they gave (the listing begun last that lists it decides),
    # while no completed listing gives that tool a schema; a completed listing decides for
    # its own tools, and listings begun before it are not used for the others.
    schemas = OutputSchemas()

    def refused(tool: str, temp: object) -> bool:
        return isinstance(schemas.check(tool, _result({"temp": temp})), StructuredContentError)

    schemas.learn(_page("a2", forecast=NUMBER))
    assert refused("forecast", "warm") and not refused("forecast", 21.5)
    assert schemas.schema_for("forecast") == NUMBER
    schemas.learn(_page("a3", report=NUMBER, bad={"type": "nope"}), cursor="a2")
    assert refused("forecast", "warm") and refused("report", "warm")
    assert schemas.check("bad", _result({"temp": "warm"})) is None
    schemas.learn(_page("b2", forecast=TEXT))  # a listing begun later: the tools changed
    assert refused("forecast", 21.5) and not refused("forecast", "warm")
    assert refused("report", "warm")  # only the older listing lists it
    schemas.learn(_page(summary=TEXT), cursor="b2")  # that listing completes
    schemas.learn(_page("c2", forecast=NUMBER, summary=NUMBER, extra=NUMBER))
    assert refused("forecast", 21.5) and refused("summary", 21.5)  # the completed one decides
    assert refused("extra", "warm")  # a listing begun after it lists the tool
    assert not refused("report", "warm")  # the listing that lists it began before
    assert _listed(schemas) == {"forecast": TEXT, "summary": TEXT}


def test_a_listing_stays_in_use_while_another_thread_learns_its_next_page(
    monkeypatch: Any,
) -> None:
    # The pages learned so far are what checks use until the next page is in: a thread
    # checking a call while another learns that page finds them still in use.
    inside, go_on = _compile_held_in_threads(monkeypatch)
    schemas = OutputSchemas()
    schemas.learn(_page("a2", forecast=NUMBER))
    other = threading.Thread(target=schemas.learn, args=(_page("a3", report=SCHEMA),),
                             kwargs={"cursor": "a2"})
    other.start()
    try:
        assert inside.wait(30)
        meanwhile = schemas.check("forecast", _result({"temp": "warm"}))
    finally:
        go_on.set()
        other.join(30)
    assert isinstance(meanwhile, StructuredContentError)
    assert _listed(schemas) == {"forecast": NUMBER, "report": SCHEMA}


def test_a_result_too_deep_to_check_is_refused_and_the_schema_kept() -> None:
    # A recursive outputSchema walks as deep as the result goes: a server's result nested past
    # what the check recurses through is the result's fault (the next call may be fine), so
    # it fails that call, where it dropped the schema and every later result went unchecked.
    node = {"type": "object", "properties": {"a": {"$ref": "#/$defs/node"}}}
    recursive = {"$ref": "#/$defs/node", "$defs": {"node": node}}
    schemas = OutputSchemas()
    schemas.learn(_listing(tree=recursive))
    error = schemas.check("tree", _result(_objects(5000)))
    assert isinstance(error, StructuredContentError)
    assert "nested too deeply to check" in str(error)
    assert schemas.schema_for("tree") == recursive and "tree" not in schemas.rejected
    assert schemas.check("tree", _result({"a": {"a": {}}})) is None
    refused = schemas.check("tree", _result({"a": 1}))
    assert isinstance(refused, StructuredContentError)


def _objects(levels: int) -> dict[str, Any]:
    """``{}`` inside ``levels`` objects, each under the member ``a``."""
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value
