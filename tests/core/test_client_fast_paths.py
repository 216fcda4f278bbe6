"""The shortcuts of the round's hot path give exactly what the general code gives.

- ``structure_input_required`` reads a well-formed form-mode elicitation entry on its own;
  every other entry, and every error, comes from ``structure_input_request``.
- ``LegBuilder`` copies plain JSON params with a plan made once per flow; other values take
  the general copiers. Either way every leg is a fresh deep copy.
- A flow's verdicts on input request kinds are shared by the flows of the same
  capabilities and handled kinds.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from decimal import Decimal
from typing import Any

import pytest
from client_helpers import ALL_KINDS, META, Ids, form, invokes, irr, last_send, make_flow, ok
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_core.client import ClientLimits, Fail, LegBuilder
from mrtr_core.errors import CodecError, UnsupportedInputError
from mrtr_core.wire import (
    ClientCapabilities,
    ElicitationCapability,
    RequestMeta,
    SamplingCapability,
    structure_input_request,
    structure_input_required,
    unstructure,
)

# --- structure_input_required ------------------------------------------------------------


def _general(value: Any) -> Any:
    """What the general reader makes of one entry: the model, or the error's text."""
    try:
        return structure_input_request(value, path="result.inputRequests.k")
    except CodecError as exc:
        return ("error", str(exc), exc.path)


def _via_result(value: Any) -> Any:
    try:
        return structure_input_required({"inputRequests": {"k": value}})
    except CodecError as exc:
        return ("error", str(exc), exc.path)


class _Dict(dict[str, Any]):
    """A dict subclass: valid, but not the exact type the fast path takes."""


class _Str(str):
    pass


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5),
                    st.sampled_from(["form", "url", "object", "elicitation/create"]))
SCHEMAS = st.one_of(
    st.just({"type": "object", "properties": {"x": {"type": "string"}}}),
    st.just({"type": "object", "properties": {}, "required": []}),
    st.builds(_Dict, st.just({"type": "object", "properties": {}})),
    st.just({"type": "object", "properties": _Dict()}),
    st.just({"type": "object"}),
    st.just({"type": "array", "properties": {}}),
    st.just({"properties": {}}),
    SCALARS,
)


@st.composite
def form_like(draw: st.DrawFn) -> Any:
    """An elicitation entry that is well-formed, or broken in one or more ways."""
    params: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        params["message"] = draw(st.one_of(st.just("Proceed?"), st.just(_Str("sub")),
                                           SCALARS))
    if draw(st.integers(0, 9)):
        params["requestedSchema"] = draw(SCHEMAS)
    mode = draw(st.sampled_from(["absent", "form", "url", "other", "none"]))
    if mode != "absent":
        params["mode"] = {"none": None, "other": "dialog"}.get(mode, mode)
    if mode == "url" and draw(st.booleans()):
        params["url"] = "https://example.com"
    for key in draw(st.lists(st.sampled_from(["title", "_meta", "url", "x"]), max_size=2)):
        params[key] = draw(SCALARS)
    entry: Any = {"method": draw(st.sampled_from(["elicitation/create"] * 4 + [
        "roots/list", "sampling/createMessage", "nope", None])), "params": params}
    shape = draw(st.integers(0, 19))
    if shape == 0:
        entry["params"] = draw(SCALARS)
    elif shape == 1:
        entry = _Dict(entry)
    elif shape == 2:
        entry["params"] = _Dict(params)
    elif shape == 3:
        entry = draw(SCALARS)
    return entry


@settings(max_examples=400, deadline=None)
@given(form_like())
def test_an_entry_reads_as_the_general_reader_reads_it(value: Any) -> None:
    before = copy.deepcopy(value)
    got, want = _via_result(value), _general(value)
    if isinstance(want, tuple):
        assert got == want  # the same error, message and path
    else:
        assert not isinstance(got, tuple)
        read = got.input_requests["k"]
        assert type(read) is type(want) and read == want
        if hasattr(want, "requested_schema"):
            assert read.requested_schema is want.requested_schema  # shared, as received
    assert value == before  # nothing is changed in the peer's value


def test_the_fast_path_keeps_unknown_params_in_extra() -> None:
    entry = {"method": "elicitation/create",
             "params": {"mode": "form", "message": "m", "title": "T",
                        "requestedSchema": {"type": "object", "properties": {}}}}
    read = structure_input_required({"inputRequests": {"k": entry}}).input_requests
    assert read is not None and read["k"] == _general(entry)
    assert read["k"].extra == {"title": "T"}


# --- LegBuilder copies -----------------------------------------------------------------------


def _shares_a_container(a: Any, b: Any) -> bool:
    seen: set[int] = set()

    def walk(value: Any, into: set[int]) -> None:
        if isinstance(value, dict | list):
            into.add(id(value))
            for item in value.values() if isinstance(value, dict) else value:
                walk(item, into)

    walk(a, seen)
    other: set[int] = set()
    walk(b, other)
    return bool(seen & other)


def _deep(depth: int) -> Any:
    value: Any = {"leaf": [1]}
    for level in range(depth):
        value = {"d": value, "l": [level, {"n": level}]}
    return value


PARAMS_CASES: dict[str, Any] = {
    "plain": {"name": "x", "arguments": {"a": [1, {"b": [True, None, 2.5]}], "s": "t"}},
    "empty": {},
    "lists": {"name": "x", "arguments": {"m": [[1, 2], [], [{"k": []}]]}},
    "tuple-of-scalars": {"name": "x", "arguments": {"t": (1, "a")}},
    "tuple-of-containers": {"name": "x", "arguments": {"t": ({"a": 1}, [2])}},
    "deep": {"name": "x", "arguments": _deep(40)},
    "other-types": {"name": "x", "arguments": {"d": Decimal("1.5"), "o": OrderedDict(a=[1])}},
}


@pytest.mark.parametrize("name", list(PARAMS_CASES))
def test_every_leg_is_a_fresh_deep_copy_of_the_params(name: str) -> None:
    params = PARAMS_CASES[name]
    before = copy.deepcopy(params)
    legs = LegBuilder("tools/call", params, META)
    first = legs.build(1, None, None)
    second = legs.build(2, {"k": {"action": "accept"}}, "s")
    base = legs.base_params
    for message in (first, second):
        sent = {k: v for k, v in message["params"].items()
                if k not in ("_meta", "inputResponses", "requestState")}
        assert sent == before
        assert message["params"]["_meta"] == unstructure(META)
        assert not _shares_a_container(message["params"], params)
        assert not _shares_a_container(message["params"], base)
    assert not _shares_a_container(first, second)
    first["params"]["_meta"]["junk"] = 1
    if name == "plain":
        first["params"]["arguments"]["a"][1]["b"].append("junk")
    third = legs.build(3, None, None)
    assert {k: v for k, v in third["params"].items() if k != "_meta"} == before
    assert "junk" not in third["params"]["_meta"]
    assert params == before


def test_plain_params_are_sent_as_the_json_they_are() -> None:
    params = PARAMS_CASES["plain"]
    message = LegBuilder("tools/call", params, META).build(1, None, None)
    assert json.loads(json.dumps(message))["params"]["arguments"] == params["arguments"]


# --- verdicts ----------------------------------------------------------------------------------


def test_verdicts_are_per_capabilities_and_handled_kinds() -> None:
    caps = ClientCapabilities(elicitation=ElicitationCapability(), roots={})
    meta = RequestMeta(client_capabilities=caps)
    handled = make_flow(meta=meta, kinds={"elicitation/create"})
    commands = handled.handle(ok(last_send(handled.start(0.0)).request_id,
                                 irr({"a": form()}, "s")), 1.0)
    assert [c.key for c in invokes(commands)] == ["a"]
    # Same capabilities, no elicitation handler: a different verdict.
    unhandled = make_flow(meta=meta, kinds={"roots/list"})
    [fail] = unhandled.handle(ok(last_send(unhandled.start(0.0)).request_id,
                                 irr({"a": form()}, "s")), 1.0)
    assert isinstance(fail, Fail) and isinstance(fail.error, UnsupportedInputError)
    assert fail.error.reason == "no handler"
    # And the first verdict still stands for a third flow.
    again = make_flow(meta=meta, kinds={"elicitation/create"})
    commands = again.handle(ok(last_send(again.start(0.0)).request_id,
                               irr({"a": form()}, "s")), 1.0)
    assert [c.key for c in invokes(commands)] == ["a"]


def test_sampling_verdicts_depend_on_each_request() -> None:
    meta = RequestMeta(client_capabilities=ClientCapabilities(sampling=SamplingCapability()))
    sample = {"method": "sampling/createMessage",
              "params": {"messages": [], "maxTokens": 10}}
    with_tools = {"method": "sampling/createMessage",
                  "params": {"messages": [], "maxTokens": 10, "tools": []}}
    for entry, ok_ in ((sample, True), (with_tools, False), (sample, True)):
        flow = make_flow(meta=meta, kinds=ALL_KINDS, limits=ClientLimits(pacing_jitter=0.0),
                         ids=Ids())
        commands = flow.handle(ok(last_send(flow.start(0.0)).request_id,
                                  irr({"s": entry}, "st")), 1.0)
        assert bool(invokes(commands)) is ok_
