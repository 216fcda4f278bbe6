"""Compiled schema checks answer exactly what ``jsonschema`` answers.

``CompiledSchema.is_valid`` must equal ``Draft202012Validator(schema).is_valid`` for every
schema and instance (its fast predicate only ever says "valid" where jsonschema does), and
the errors it reports are jsonschema's own.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from mrtr_core.server.schemas import CompiledSchema, SchemaCache, compile_predicate

SAME = settings(max_examples=600, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])

NAMES = ["a", "b", "ok", "note"]
TYPES = ["string", "integer", "number", "boolean", "object", "array", "null"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True, width=16),
    st.sampled_from(["", "a", "ok", "xyz", "1.0"]),
)
instances = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(NAMES), inner,
                                                                max_size=4),
    max_leaves=10,
)


def keyword_values(sub: st.SearchStrategy[Any]) -> dict[str, st.SearchStrategy[Any]]:
    """Values for each keyword, mostly well-formed, sometimes not (those go to jsonschema)."""
    count = st.one_of(st.integers(0, 3), st.just(1.5), st.just(True))
    bound = st.one_of(st.integers(-2, 2), st.floats(-2, 2, width=16), st.just("1"))
    subs = st.lists(sub, max_size=3)
    return {
        "type": st.one_of(st.sampled_from(TYPES),
                          st.lists(st.sampled_from(TYPES), max_size=3), st.just("bogus")),
        "properties": st.dictionaries(st.sampled_from(NAMES), sub, max_size=3),
        "required": st.one_of(st.lists(st.sampled_from(NAMES), max_size=3),
                              st.just([1]), st.just("a")),
        "additionalProperties": st.one_of(st.booleans(), sub),
        "enum": st.one_of(st.lists(st.sampled_from(["a", "ok", "1.0", ""]), max_size=3),
                          st.lists(scalars, max_size=3)),
        "const": st.one_of(st.sampled_from(["a", "ok"]), scalars),
        "minLength": count, "maxLength": count, "minItems": count, "maxItems": count,
        "minimum": bound, "maximum": bound, "exclusiveMinimum": bound,
        "exclusiveMaximum": bound,
        "format": st.sampled_from(["email", "uri", "date"]),
        "pattern": st.sampled_from(["^a", "k$", "[0-9]", "("]),
        "items": sub,
        "uniqueItems": st.booleans(),
        "allOf": subs, "anyOf": subs, "oneOf": subs, "not": sub,
        "if": sub, "then": sub, "else": sub,
        # Keywords the predicate leaves to jsonschema, and annotations it ignores.
        "$ref": st.just("#/$defs/s"),
        "minProperties": count,
        "patternProperties": st.dictionaries(st.just("^a"), sub, max_size=1),
        "title": st.just("T"), "description": st.just("D"), "default": scalars,
        "x-mcp-header": st.just("Region"), "$comment": st.just("c"),
    }


def schema_dicts(sub: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    values = keyword_values(sub)

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        keys = draw(st.lists(st.sampled_from(sorted(values)), max_size=4, unique=True))
        out = {key: draw(values[key]) for key in keys}
        if "$ref" in out:
            out["$defs"] = {"s": {"type": "string"}}
        return out

    return build()


schemas = st.recursive(st.booleans() | st.just({}), schema_dicts, max_leaves=6)

# Form-like schemas (the shapes elicitation and derived tool schemas use): mostly
# supported, so the fast predicate is what answers.
property_schemas = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(TYPES)}),
    st.fixed_dictionaries({"type": st.just("string"),
                           "enum": st.lists(st.sampled_from(["a", "ok", "xyz"]), min_size=1,
                                            max_size=3)}),
    st.fixed_dictionaries({"type": st.just("string")},
                          optional={"minLength": st.integers(0, 3),
                                    "maxLength": st.integers(0, 3),
                                    "format": st.just("email")}),
    st.fixed_dictionaries({"type": st.sampled_from(["integer", "number"])},
                          optional={"minimum": st.integers(-2, 2),
                                    "maximum": st.floats(-2, 2, width=16)}),
    st.fixed_dictionaries({"type": st.just("array"),
                           "items": st.fixed_dictionaries({
                               "type": st.just("string"),
                               "enum": st.lists(st.sampled_from(["a", "ok"]), min_size=1)})},
                          optional={"minItems": st.integers(0, 2),
                                    "maxItems": st.integers(0, 2)}),
    st.fixed_dictionaries({"oneOf": st.lists(st.fixed_dictionaries(
        {"const": st.sampled_from(["a", "ok"]), "title": st.just("T")}), min_size=1,
        max_size=2)}),
)
form_schemas = st.fixed_dictionaries(
    {"type": st.just("object"),
     "properties": st.dictionaries(st.sampled_from(NAMES), property_schemas, max_size=3)},
    optional={"required": st.lists(st.sampled_from(NAMES), max_size=3, unique=True),
              "additionalProperties": st.booleans()},
)
form_instances = st.dictionaries(
    st.sampled_from([*NAMES, "zz"]),
    st.one_of(scalars, st.lists(st.sampled_from(["a", "ok", "no"]), max_size=3)),
    max_size=4,
)


def jsonschema_says(schema: Any, instance: Any) -> tuple[str, Any]:
    try:
        return ("valid", Draft202012Validator(schema).is_valid(instance))
    except Exception as exc:  # what jsonschema raises, compared below
        return ("raises", type(exc))


def compiled_says(schema: Any, instance: Any) -> tuple[str, Any]:
    try:
        return ("valid", CompiledSchema(schema).is_valid(instance))
    except Exception as exc:
        return ("raises", type(exc))


@SAME
@given(schemas, instances)
def test_compiled_schema_agrees_with_jsonschema_on_any_schema(schema: Any, instance: Any) -> None:
    assert compiled_says(schema, instance) == jsonschema_says(schema, instance)


leaf_schemas = st.one_of(
    st.booleans(),
    st.fixed_dictionaries({"type": st.sampled_from(TYPES)}),
    st.fixed_dictionaries({"const": st.sampled_from(["a", "ok"])}),
    st.fixed_dictionaries({"minLength": st.integers(0, 2)}),
)
single_keyword = st.sampled_from(sorted(keyword_values(leaf_schemas))).flatmap(
    lambda key: keyword_values(leaf_schemas)[key].map(lambda value: {key: value})
)
conditionals = st.fixed_dictionaries(
    {"if": leaf_schemas}, optional={"then": leaf_schemas, "else": leaf_schemas}
)


@SAME
@given(st.one_of(single_keyword, conditionals), instances)
def test_compiled_schema_agrees_with_jsonschema_keyword_by_keyword(
    schema: Any, instance: Any
) -> None:
    assert compiled_says(schema, instance) == jsonschema_says(schema, instance)


@SAME
@given(form_schemas, form_instances)
def test_compiled_schema_agrees_with_jsonschema_on_form_schemas(
    schema: dict[str, Any], instance: Any
) -> None:
    compiled = CompiledSchema(schema)
    assert compiled.fast  # every form shape is compiled, not left to jsonschema
    assert compiled.is_valid(instance) == Draft202012Validator(schema).is_valid(instance)


@SAME
@given(form_schemas, form_instances)
def test_compiled_schema_errors_are_jsonschemas_own(schema: dict[str, Any], instance: Any) -> None:
    got = [(e.message, list(e.path)) for e in CompiledSchema(schema).iter_errors(instance)]
    expected = [(e.message, list(e.path))
                for e in Draft202012Validator(schema).iter_errors(instance)]
    assert got == expected


@pytest.mark.parametrize(("schema", "instance", "valid"), [
    ({"type": "integer"}, 1.0, True),
    ({"type": "integer"}, 1.5, False),
    ({"type": "integer"}, True, False),
    ({"pattern": "^a"}, "ba", False),
    ({"pattern": "a"}, "ba", True),
    ({"pattern": "^a"}, 5, True),
    ({"type": "number"}, False, False),
    ({"type": "object", "properties": {"a": {"type": "string"}}}, {"a": 1}, False),
    ({"type": "object", "additionalProperties": False, "properties": {"a": {}}}, {"b": 1}, False),
    ({"enum": ["a"]}, "a", True),
    ({"enum": ["1"]}, 1, False),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, 1, False),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, 1.5, True),
    ({"if": {"const": "a"}, "then": {"minLength": 2}}, "a", False),
    ({"format": "email"}, "not an email", True),
    ({"minimum": 1}, float("nan"), True),
    ({"properties": {"a": False}}, {"a": 1}, False),
    ({"items": False}, [], True),
    ({"items": False}, [1], False),
])
def test_compiled_schema_keyword_semantics(schema: dict[str, Any], instance: Any,
                                           valid: bool) -> None:
    assert Draft202012Validator(schema).is_valid(instance) is valid
    assert CompiledSchema(schema).is_valid(instance) is valid


@pytest.mark.parametrize("schema", [
    {"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}},
    {"patternProperties": {"^a": {"type": "string"}}},
    {"uniqueItems": True},
    {"type": "bogus"},
    {"minLength": "1"},
])
def test_keywords_outside_the_compiled_set_are_left_to_jsonschema(schema: dict[str, Any]) -> None:
    assert compile_predicate(schema) is None


def test_schema_cache_finds_a_schema_by_content_and_by_key() -> None:
    cache = SchemaCache(max_entries=2)
    first = cache.get({"type": "string"}, "k1")
    assert cache.get({"type": "string"}) is first  # same content, no key
    assert cache.get({"type": "integer"}, "k1") is first  # the key names the content
    cache.get({"type": "integer"})
    cache.get({"type": "boolean"})
    assert len(cache) == 2  # bounded: the oldest went


def test_schema_cache_tells_values_json_tells_apart() -> None:
    """Content is matched exactly: 1, 1.0 and True are different schemas, a tuple or a
    reordered object may compile again but is never confused with another schema."""
    cache = SchemaCache()
    by_value = [(v, cache.get({"type": "integer", "minimum": v})) for v in (1, 1.0, True)]
    assert len({id(c) for _, c in by_value}) == 3
    for value, compiled in by_value:
        assert compiled.schema["minimum"] is value
        assert cache.get({"type": "integer", "minimum": value}) is compiled
    ordered = cache.get({"type": "array", "items": {"type": "string"}})
    assert cache.get({"items": {"type": "string"}, "type": "array"}).is_valid(["x"])
    assert cache.get({"type": "array", "items": {"type": "string"}}) is ordered


def test_schema_cache_refuses_a_schema_that_is_not_json_as_before() -> None:
    cache = SchemaCache()
    with pytest.raises(TypeError):
        cache.get({"enum": {1, 2}})
    with pytest.raises(TypeError):
        cache.get({"enum": {1, 2}})  # never remembered
    assert len(cache) == 0

    class Text(str):
        pass

    compiled = cache.get({"type": Text("string")})  # not marshallable: found by its JSON text
    assert cache.get({"type": Text("string")}) is compiled
    assert compiled.is_valid("x") and not compiled.is_valid(1)


def test_schema_cache_forgets_its_oldest_entries_first() -> None:
    cache = SchemaCache(max_entries=3)
    compiled = [cache.get({"type": "string", "maxLength": n}, f"k{n}") for n in range(6)]
    for n in (3, 4, 5):  # the newest three are kept, under their keys and by content
        assert cache.get({"type": "integer"}, f"k{n}") is compiled[n]
        assert cache.get({"type": "string", "maxLength": n}) is compiled[n]
    assert cache.get({"type": "string", "maxLength": 0}, "k0") is not compiled[0]  # gone
    assert len(cache) == 3
