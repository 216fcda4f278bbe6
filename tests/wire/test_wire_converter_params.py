"""``structure_params``: the params of the three MRTR methods, read by the one converter."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr_core.errors import CodecError
from mrtr_core.wire import (
    CALL_TOOL,
    GET_PROMPT,
    READ_RESOURCE,
    CallToolParams,
    GetPromptParams,
    ReadResourceParams,
    structure_params,
    structure_request_meta,
)
from mrtr_core.wire.converter import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
)

META = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {"elicitation": {}}}


def test_tools_call_params_keep_every_member() -> None:
    obj = {
        "name": "deploy", "arguments": {"v": 1}, "_meta": META,
        "inputResponses": {"k": {"action": "accept"}}, "requestState": "s", "task": {"x": 1},
    }
    params = structure_params(CALL_TOOL, obj)
    assert params == CallToolParams(
        name="deploy", meta=structure_request_meta(META), arguments={"v": 1},
        input_responses={"k": {"action": "accept"}}, request_state="s", extra={"task": {"x": 1}},
    )


def test_null_input_responses_and_state_count_as_absent() -> None:
    params = structure_params(
        CALL_TOOL, {"name": "t", "_meta": META, "inputResponses": None, "requestState": None}
    )
    assert params.input_responses is None and params.request_state is None
    assert params.extra == {}


def test_an_empty_request_state_is_kept() -> None:
    params = structure_params(CALL_TOOL, {"name": "t", "_meta": META, "requestState": ""})
    assert params.request_state == ""


def test_prompt_and_resource_params() -> None:
    prompt = structure_params(GET_PROMPT, {"name": "p", "_meta": META, "arguments": {"a": "b"}})
    assert isinstance(prompt, GetPromptParams) and prompt.arguments == {"a": "b"}
    resource = structure_params(READ_RESOURCE, {"uri": "test://r", "_meta": META, "x": 1})
    assert isinstance(resource, ReadResourceParams)
    assert (resource.uri, resource.extra) == ("test://r", {"x": 1})


@pytest.mark.parametrize(("method", "obj", "message", "path"), [
    (CALL_TOOL, [], "params must be an object", "params"),
    (CALL_TOOL, {"name": "t"}, "required _meta is missing", "params._meta"),
    (CALL_TOOL, {"name": "t", "_meta": META, "inputResponses": []},
     "inputResponses must be an object", "params.inputResponses"),
    (CALL_TOOL, {"name": "t", "_meta": META, "requestState": 5},
     "requestState must be a string", "params.requestState"),
    (CALL_TOOL, {"_meta": META}, "'name' must be a string", "params"),
    (CALL_TOOL, {"name": "t", "_meta": META, "arguments": "x"},
     "arguments must be an object", "params.arguments"),
    (GET_PROMPT, {"name": "p", "_meta": META, "arguments": {"a": 1}},
     "arguments must map names to strings", "params.arguments"),
    (READ_RESOURCE, {"_meta": META}, "'uri' must be a string", "params"),
    # ReadResourceRequestParams.uri has format "uri" (schema.json).
    (READ_RESOURCE, {"uri": "static-text", "_meta": META}, "must be a URI with a scheme",
     "params.uri"),
    (READ_RESOURCE, {"uri": "test://a b", "_meta": META}, "must be a URI with a scheme",
     "params.uri"),
    ("tools/list", {"_meta": META}, "does not carry MRTR params", "params"),
])
def test_malformed_params_are_refused_with_the_path(
    method: str, obj: Any, message: str, path: str
) -> None:
    with pytest.raises(CodecError, match=message) as caught:
        structure_params(method, obj)
    assert caught.value.path == path


@pytest.mark.parametrize(("meta", "where"), [
    ({META_CLIENT_CAPABILITIES: {"elicitation": 5}},
     "params._meta['io.modelcontextprotocol/clientCapabilities'].elicitation"),
    ({META_CLIENT_CAPABILITIES: {"sampling": {"tools": 5}}},
     "params._meta['io.modelcontextprotocol/clientCapabilities'].sampling.tools"),
    ({META_CLIENT_CAPABILITIES: {}, META_CLIENT_INFO: {"name": 5, "version": "1"}},
     "params._meta['io.modelcontextprotocol/clientInfo'].name"),
])
def test_a_bad_meta_member_is_named_by_its_wire_key(meta: dict[str, Any], where: str) -> None:
    # The client that sent the bad member knows it by its key on the wire only, never by
    # the attribute it is read into (client_capabilities, client_info).
    with pytest.raises(CodecError) as caught:
        structure_request_meta({META_PROTOCOL_VERSION: "2026-07-28", **meta})
    assert str(caught.value).endswith(f" @ {where}")


def test_meta_read_beforehand_is_used_as_given() -> None:
    meta = structure_request_meta(META)
    # The _meta in the params is not read again: a server checked it first.
    params = structure_params(CALL_TOOL, {"name": "t", "_meta": "not read"}, meta=meta)
    assert params.meta is meta


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=2),
                            st.dictionaries(st.text(max_size=2), inner, max_size=2)),
    max_leaves=4,
)
params_objects = st.fixed_dictionaries(
    {"_meta": st.just(META)},
    optional={
        "name": st.one_of(st.sampled_from(["deploy", "p"]), json_values),
        "uri": st.one_of(st.sampled_from(["test://a"]), json_values),
        "arguments": st.one_of(st.dictionaries(st.sampled_from(["a", "b"]), json_values,
                                               max_size=2), json_values),
        "inputResponses": st.one_of(st.dictionaries(st.sampled_from(["k"]), json_values,
                                                    max_size=1), json_values),
        "requestState": st.one_of(st.text(max_size=4), json_values),
        "task": json_values,
    },
)


@given(st.sampled_from([CALL_TOOL, GET_PROMPT, READ_RESOURCE]), params_objects)
def test_meta_read_beforehand_gives_what_reading_it_here_gives(method: str, obj: Any) -> None:
    meta = structure_request_meta(obj["_meta"])
    try:
        expected = structure_params(method, obj)
    except CodecError as exc:
        with pytest.raises(CodecError) as caught:
            structure_params(method, obj, meta=meta)
        assert (str(caught.value), caught.value.path) == (str(exc), exc.path)
    else:
        assert structure_params(method, obj, meta=meta) == expected
