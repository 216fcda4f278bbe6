"""The hand-written readers of ``mrtr_core.wire.fast`` give exactly what the converter gives.

For every input (hand-picked shapes and hypothesis-generated ones, well-formed and not) the
fast function and its converter twin either return equal values or both raise
``CodecError`` with the same message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrtr_core.errors import CodecError
from mrtr_core.wire.converter import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    converter,
    structure_input_response,
    structure_params,
    structure_request_meta,
)
from mrtr_core.wire.fast import (
    read_input_response,
    read_params,
    read_request_meta,
    unstructure_input_response,
)
from mrtr_core.wire.models import (
    CALL_TOOL,
    ELICITATION_CREATE,
    GET_PROMPT,
    INPUT_REQUEST_KINDS,
    READ_RESOURCE,
    ROOTS_LIST,
    SAMPLING_CREATE_MESSAGE,
)

SAME = settings(max_examples=500, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])

# --- strategies ------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, width=16),
    st.sampled_from(["", "x", "accept", "user", "file:///a", "2026-07-28"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "b", "type", "text", "uri"]), inner, max_size=3),
    max_leaves=8,
)
BAD = st.one_of(json_values, st.integers(), st.just(1.5), st.just([]), st.just(True))


# Mostly the right type, sometimes anything: whole messages often take the fast path, and
# each member is sometimes what only the converter handles.
def maybe(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.integers(0, 7).flatmap(lambda pick: BAD if pick == 0 else good)


def optional_members(members: dict[str, st.SearchStrategy[Any]],
                     extra: st.SearchStrategy[Any] | None = None) -> st.SearchStrategy[Any]:
    """Dicts holding any subset of ``members`` (values from their strategies), plus maybe
    unknown keys."""
    keys = list(members)

    @st.composite
    def build(draw: st.DrawFn) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key in keys:
            if draw(st.integers(0, 5)):
                out[key] = draw(members[key])
        if extra is not None and not draw(st.integers(0, 3)):
            out.update(draw(st.dictionaries(st.sampled_from(["zz", "extra", "_x"]), extra,
                                            max_size=2)))
        return out

    return build()


json_object = st.dictionaries(st.sampled_from(["listChanged", "a", "b"]), json_values,
                              max_size=3)
capabilities = optional_members({
    "elicitation": maybe(optional_members({"form": maybe(json_object),
                                           "url": maybe(json_object)}, json_values)),
    "sampling": maybe(optional_members({"context": maybe(json_object),
                                        "tools": maybe(json_object)}, json_values)),
    "roots": maybe(json_object),
    "experimental": maybe(json_object),
    "extensions": maybe(json_object),
}, json_values)
implementation = optional_members({
    "name": maybe(st.text(max_size=5)),
    "version": maybe(st.text(max_size=5)),
    "title": maybe(st.text(max_size=5)),
}, json_values)
metas = optional_members({
    META_PROTOCOL_VERSION: maybe(st.sampled_from(["2026-07-28", "2025-06-18"])),
    META_CLIENT_CAPABILITIES: maybe(capabilities),
    META_CLIENT_INFO: maybe(implementation),
    "progressToken": maybe(st.one_of(st.text(max_size=3), st.integers(), st.booleans())),
}, json_values)


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("value", fn())
    except CodecError as exc:
        return ("error", str(exc))


def same(fast: Callable[[], Any], reference: Callable[[], Any]) -> None:
    got, expected = outcome(fast), outcome(reference)
    assert got == expected
    if got[0] == "value":
        # Equal, and equal in every member's type too (True == 1, 1.0 == 1).
        assert repr(got[1]) == repr(expected[1])


GOOD_META = {
    META_PROTOCOL_VERSION: "2026-07-28",
    META_CLIENT_CAPABILITIES: {"elicitation": {"form": {}}, "sampling": {}, "roots": {}},
    META_CLIENT_INFO: {"name": "c", "version": "1"},
}

# --- _meta -----------------------------------------------------------------------------------


@pytest.mark.parametrize("meta", [
    GOOD_META,
    {**GOOD_META, "progressToken": 7, "other": [1]},
    {**GOOD_META, "progressToken": True},
    {**GOOD_META, META_CLIENT_INFO: None},
    {**GOOD_META, META_CLIENT_INFO: {"name": 5, "version": "1"}},
    {**GOOD_META, META_CLIENT_CAPABILITIES: {"elicitation": None, "roots": {"a": 1}, "x": 2}},
    {**GOOD_META, META_CLIENT_CAPABILITIES: {"roots": {1: 2}}},
    {**GOOD_META, META_CLIENT_CAPABILITIES: None},
    {META_PROTOCOL_VERSION: "2026-07-28"},
    {META_PROTOCOL_VERSION: 5, META_CLIENT_CAPABILITIES: {}},
    None,
    [],
])
def test_fast_request_meta_matches_the_converter_on_known_shapes(meta: Any) -> None:
    same(lambda: read_request_meta(meta), lambda: structure_request_meta(meta))


@SAME
@given(metas)
def test_fast_request_meta_matches_the_converter_on_generated_input(meta: Any) -> None:
    same(lambda: read_request_meta(meta), lambda: structure_request_meta(meta))


# --- params ----------------------------------------------------------------------------------

params = optional_members({
    "_meta": st.one_of(st.just(GOOD_META), metas),
    "name": maybe(st.sampled_from(["deploy", "p"])),
    "uri": maybe(st.sampled_from(["test://a", "file:///x"])),
    "arguments": maybe(st.dictionaries(st.sampled_from(["a", "b"]),
                                       st.one_of(st.text(max_size=3), json_values), max_size=2)),
    "inputResponses": maybe(st.dictionaries(st.sampled_from(["k", "q"]), json_values,
                                            max_size=2)),
    "requestState": maybe(st.text(max_size=5)),
}, json_values)


@SAME
@given(st.sampled_from([CALL_TOOL, GET_PROMPT, READ_RESOURCE, "tools/list"]), params)
def test_fast_params_match_the_converter(method: str, obj: Any) -> None:
    same(lambda: read_params(method, obj), lambda: structure_params(method, obj))


@SAME
@given(st.sampled_from([CALL_TOOL, GET_PROMPT, READ_RESOURCE]), params)
def test_fast_params_with_meta_read_beforehand_match_the_converter(method: str, obj: Any) -> None:
    try:
        meta = structure_request_meta(obj.get("_meta"))
    except CodecError:
        return  # the app answers -32602 for _meta before it reads params
    same(lambda: read_params(method, obj, meta=meta), lambda: structure_params(method, obj))


def test_fast_params_keep_unknown_keys_as_extra() -> None:
    obj = {"name": "t", "_meta": GOOD_META, "arguments": {"a": 1}, "task": {"x": 1}}
    assert read_params(CALL_TOOL, obj) == structure_params(CALL_TOOL, obj)
    assert read_params(CALL_TOOL, obj).extra == {"task": {"x": 1}}


# --- input responses -------------------------------------------------------------------------

elicit_results = optional_members({
    "action": maybe(st.sampled_from(["accept", "decline", "cancel", "maybe"])),
    "content": maybe(st.dictionaries(
        st.sampled_from(["confirm", "ticket", "n"]),
        st.one_of(st.booleans(), st.text(max_size=3), st.integers(), st.floats(width=16),
                  st.lists(st.text(max_size=2), max_size=2), json_values),
        max_size=3)),
}, json_values)
blocks = st.dictionaries(st.sampled_from(["type", "text"]), json_values, max_size=2)
sampling_results = optional_members({
    "role": maybe(st.sampled_from(["user", "assistant", "system"])),
    "content": maybe(st.one_of(blocks, st.lists(blocks, max_size=2))),
    "model": maybe(st.text(max_size=3)),
    "stopReason": maybe(st.text(max_size=3)),
    "_meta": maybe(json_object),
}, json_values)
roots = optional_members({
    "roots": maybe(st.lists(maybe(optional_members({
        "uri": maybe(st.sampled_from(["file:///a", "file:///b"])),
        "name": maybe(st.text(max_size=3)),
        "_meta": maybe(json_object),
    }, json_values)), max_size=3)),
}, json_values)
answers = st.one_of(elicit_results, sampling_results, roots, json_values)


@SAME
@given(st.sampled_from([*sorted(INPUT_REQUEST_KINDS), "bogus"]), answers)
def test_fast_input_responses_match_the_converter(kind: str, obj: Any) -> None:
    same(lambda: read_input_response(kind, obj, path="inputResponses.k"),
         lambda: structure_input_response(kind, obj, path="inputResponses.k"))


@SAME
@given(st.sampled_from(sorted(INPUT_REQUEST_KINDS)), answers)
def test_fast_unstructure_matches_the_converter(kind: str, obj: Any) -> None:
    try:
        answer = structure_input_response(kind, obj)
    except CodecError:
        return
    got = unstructure_input_response(answer)
    expected = converter.unstructure(answer)
    assert got == expected
    # The same JSON text (key order included): sealed states are byte-for-byte alike.
    assert json.dumps(got) == json.dumps(expected)


content_values = st.one_of(
    st.booleans(), st.text(max_size=2), st.integers(), st.floats(width=16), st.none(),
    st.lists(st.one_of(st.text(max_size=2), st.integers(), st.booleans()), max_size=2),
    st.dictionaries(st.just("a"), st.integers(), max_size=1),
)


@SAME
@given(st.sampled_from(["accept", "decline", "cancel", 1, None]),
       st.one_of(st.none(), st.dictionaries(st.one_of(st.text(max_size=2), st.integers()),
                                            content_values, max_size=3)))
def test_fast_elicit_results_match_the_converter(action: Any, content: Any) -> None:
    obj = {"action": action, "content": content}
    same(lambda: read_input_response(ELICITATION_CREATE, obj),
         lambda: structure_input_response(ELICITATION_CREATE, obj))


@pytest.mark.parametrize(("kind", "obj"), [
    (ELICITATION_CREATE, {"action": "accept", "content": {"confirm": True, "n": 1.5}}),
    (ELICITATION_CREATE, {"action": "decline"}),
    (ELICITATION_CREATE, {"action": "accept", "content": {"tags": ["a", "b"]}, "x": 1}),
    (SAMPLING_CREATE_MESSAGE, {"role": "assistant", "content": {"type": "text", "text": "hi"},
                               "model": "m", "stopReason": "endTurn", "_meta": {"a": 1}}),
    (SAMPLING_CREATE_MESSAGE, {"role": "assistant", "content": [{"type": "text"}],
                               "model": "m"}),
    (ROOTS_LIST, {"roots": [{"uri": "file:///a", "name": "a"}, {"uri": "file:///b"}]}),
    (ROOTS_LIST, {"roots": []}),
])
def test_fast_readers_round_trip_like_the_converter(kind: str, obj: Any) -> None:
    answer = read_input_response(kind, obj)
    assert answer == structure_input_response(kind, obj)
    assert unstructure_input_response(answer) == converter.unstructure(answer)
