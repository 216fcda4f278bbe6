"""Compiled schemas are ``jsonschema``'s validators, built once and found again by content."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing.exceptions import Unresolvable

from mrtr_core.server.schemas import (
    ACCEPTED_MAX_BYTES,
    ACCEPTED_MAX_ENTRIES,
    PROBLEM_MAX_CHARS,
    CompiledSchema,
    SchemaCache,
    forget_accepted,
    reference_problem,
)


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


@pytest.mark.parametrize("ref", [
    "http://127.0.0.1:9/schema.json", "https://example.com/s#/$defs/a", "other.json",
])
def test_no_schema_retrieves_what_a_ref_names(no_retrieval: list[object], ref: str) -> None:
    # A schema registration refused for such a $ref may still reach a validator (changed
    # afterwards, or compiled by hand): the check fails as unusable, and opens no connection
    # (one with no time limit, on the server's thread or event loop).
    schema = {"type": "object", "properties": {"x": {"$ref": ref}}}
    for compiled in (CompiledSchema(schema), SchemaCache().get(schema)):
        with pytest.raises(Unresolvable):
            compiled.problem({"x": 1})
    assert no_retrieval == []


def test_the_json_schema_meta_schemas_are_found_without_retrieval(
    no_retrieval: list[object],
) -> None:
    compiled = CompiledSchema({"$ref": "https://json-schema.org/draft/2020-12/schema"})
    assert compiled.is_valid({"type": "object"}) is True
    assert compiled.is_valid({"type": 5}) is False
    assert no_retrieval == []


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


@pytest.mark.parametrize(("instance", "valid"), [
    ("ops@example.com", True),
    ("not an email", False),
    (5, True),  # format applies to strings only
])
def test_compiled_schema_asserts_formats_when_asked(instance: Any, valid: bool) -> None:
    schema = {"format": "email"}
    assert CompiledSchema(schema).is_valid(instance) is True  # annotation by default
    assert CompiledSchema(schema, formats=True).is_valid(instance) is valid


@pytest.mark.parametrize(("fmt", "good", "bad"), [
    ("uri", "https://example.com/a", "not a uri"),
    ("date", "2026-07-28", "2026-13-40"),
    ("date-time", "2026-07-28T10:00:00Z", "2026-07-28 10:00"),
])
def test_every_form_format_is_asserted(fmt: str, good: str, bad: str) -> None:
    # uri and date-time need their validator packages installed (core dependencies):
    # without them jsonschema lets every string pass.
    compiled = CompiledSchema({"type": "string", "format": fmt}, formats=True)
    assert compiled.is_valid(good)
    assert not compiled.is_valid(bad)


def test_schema_cache_checks_each_schema_once_and_keeps_none_that_fail() -> None:
    checked: list[Any] = []

    def check(schema: Any) -> None:
        checked.append(schema)
        if schema.get("bad"):
            raise ValueError("bad schema")

    cache = SchemaCache(check=check)
    good = {"type": "string"}
    assert cache.get(good, "k1") is cache.get(good) is cache.get(dict(good), "k1")
    assert checked == [good]
    for _ in range(2):
        with pytest.raises(ValueError, match="bad schema"):
            cache.get({"bad": True}, "k2")
    assert len(checked) == 3  # a failing schema is checked again, never remembered
    assert len(cache) == 1


class _CountingValidator:
    """Stands between a compiled schema and its ``jsonschema`` validator, counting the
    instances ``jsonschema`` itself was asked about."""

    def __init__(self, compiled: CompiledSchema) -> None:
        self.inner = compiled.validator
        self.asked: list[Any] = []

    def is_valid(self, instance: Any) -> bool:
        self.asked.append(instance)
        return bool(self.inner.is_valid(instance))


def _counted(schema: Any, **options: Any) -> tuple[CompiledSchema, _CountingValidator]:
    compiled = CompiledSchema(schema, **options)
    counter = _CountingValidator(compiled)
    compiled._validator = counter  # type: ignore[assignment]
    return compiled, counter


def test_an_accepted_instance_is_found_again_without_validating() -> None:
    """The arguments every retry repeats cost one lookup after the first round."""
    forget_accepted()
    compiled, counter = _counted({"type": "object", "properties": {"path": {"type": "string"}}})
    for _ in range(3):
        assert compiled.is_valid({"path": "notes.txt"})
    assert compiled.is_valid(dict({"path": "notes.txt"}))  # an equal value, another object
    assert counter.asked == [{"path": "notes.txt"}]


def test_the_memo_never_answers_for_another_value_or_type_or_schema() -> None:
    """Only the very same value of the very same types is found: ``1``, ``1.0`` and
    ``True`` are told apart (``True`` is no integer to JSON Schema), and what one schema
    accepted says nothing about another, even one with the same text."""
    forget_accepted()
    integer, counter = _counted({"type": "integer"})
    assert integer.is_valid(1)
    assert integer.is_valid(1.0)
    assert not integer.is_valid(True)
    assert not integer.is_valid(True)  # a refusal is never remembered: asked again
    assert not integer.is_valid({"a": 1})
    assert counter.asked == [1, 1.0, True, True, {"a": 1}]
    other, other_counter = _counted({"type": "integer"})
    assert other.is_valid(1)
    assert other_counter.asked == [1]
    string = CompiledSchema({"type": "string"})
    assert not string.is_valid(1)


def test_large_or_unusual_instances_are_validated_every_time() -> None:
    forget_accepted()
    compiled, counter = _counted({"type": "object"})

    class Record(dict[str, Any]):
        pass

    big = {"text": "x" * ACCEPTED_MAX_BYTES}
    for instance in (big, big, Record(a=1), Record(a=1)):
        assert compiled.is_valid(instance)
    assert len(counter.asked) == 4


def test_the_memo_is_bounded_and_keeps_what_is_still_asked() -> None:
    forget_accepted()
    compiled, counter = _counted({"type": "integer"})
    assert compiled.is_valid(-1)
    for value in range(ACCEPTED_MAX_ENTRIES - 1):
        assert compiled.is_valid(value)
        assert compiled.is_valid(-1)  # found each time: it stays among the newest
    assert compiled.is_valid(ACCEPTED_MAX_ENTRIES)  # full: the least recently found goes
    assert len(counter.asked) == ACCEPTED_MAX_ENTRIES + 1
    assert compiled.is_valid(-1)
    assert compiled.is_valid(1)
    assert len(counter.asked) == ACCEPTED_MAX_ENTRIES + 1
    assert compiled.is_valid(0)  # the one that went
    assert counter.asked[-1] == 0


def test_a_problem_quotes_at_most_a_bounded_part_of_the_instance() -> None:
    # jsonschema's messages quote the instance whole, and the instance may be a peer's (a
    # tool's arguments; on a client, a server's structuredContent): what is wrong is named
    # in a bounded text, so an error never carries the value it refused.
    schema = CompiledSchema({"type": "object", "properties": {
        "tags": {"type": "object"}, "x" * 1000: {"type": "object", "properties": {
            "y": {"type": "string"}}}}})
    assert schema.problem({"tags": "t" * 100}) == f"{'t' * 100!r} is not of type 'object' (at tags)"
    long = schema.problem({"tags": ["t" * 100_000]})
    assert long is not None and long.startswith("['tttt") and "..." in long
    assert long.endswith("tttt'] is not of type 'object' (at tags)") and len(long) < 500
    deep = schema.problem({"x" * 1000: {"y": 5}})
    assert deep is not None and "..." in deep and len(deep) < 500
    assert deep.startswith("5 is not of type 'string' (at xxxx") and deep.endswith("xxxx/y)")


def test_a_problem_keeps_one_violation_at_a_time() -> None:
    # A peer's array of 20,000 wrong items is 20,000 violations: naming the first keeps one
    # at a time (each is some kilobytes), not all of them (a 4 MiB message held gigabytes).
    schema = CompiledSchema({"type": "object", "properties": {"a": {"items": {"type": "string"}}}})
    instance = {"a": [1] * 20_000}
    tracemalloc.start()
    try:
        problem = schema.problem(instance)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert problem == "1 is not of type 'string' (at a/0)"
    assert peak < 2_000_000


@pytest.mark.parametrize(("ref", "problem"), [
    ("#", None),
    ("#/$defs/gone", "$ref '#/$defs/gone' (at {where}) resolves to nothing in the schema"),
])
def test_references_are_followed_without_recursion(ref: str, problem: str | None) -> None:
    # The schema is walked, and its loops looked for, with a stack of its own: a schema
    # nested deeper than the interpreter recurses gets its answer, not a RecursionError;
    # the path to the reference is cut short as a violation's is.
    schema: dict[str, Any] = {}
    node = schema
    for _ in range(5000):
        node["items"] = {}
        node = node["items"]
    node["$ref"] = ref
    path = "/".join(["items"] * 5000 + ["$ref"])
    where = f"{path[:PROBLEM_MAX_CHARS]}...{path[-PROBLEM_MAX_CHARS:]}"
    assert reference_problem(schema) == (None if problem is None else problem.format(where=where))
