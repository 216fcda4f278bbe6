"""ClientFlow: results, responses, retries and rounds (digest §1.1-1.4, §2.3)."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import attrs
import pytest
from client_helpers import (
    ACCEPT,
    META,
    PARAMS,
    Ids,
    answer_all,
    done,
    error,
    form,
    invokes,
    irr,
    last_send,
    make_flow,
    names,
    ok,
    roots,
    sampling,
    to_handlers,
    url_request,
)
from deep_values import nested, too_deep
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_core.client import (
    CancelHandlers,
    CancelRequested,
    ClientFlow,
    Complete,
    Fail,
    FlowState,
    HandlerFailed,
    HandlerReturned,
    InputNeeded,
    InvokeHandler,
    ResponseReceived,
    RoundFulfilled,
    RoundStarted,
    SendRequest,
    TimerFired,
)
from mrtr_core.errors import (
    CodecError,
    FlowCancelledError,
    HandlerFailedError,
    JsonRpcError,
    LocalProtocolError,
    RemoteProtocolError,
    UnsupportedInputError,
)
from mrtr_core.wire import (
    ClientCapabilities,
    CreateMessageResult,
    ElicitationCapability,
    ElicitResult,
    ListRootsResult,
    RequestMeta,
    Root,
    SamplingCapability,
    WireValueError,
    converter,
    unstructure,
)
from mrtr_core.wire.forms import FormField, FormSpec

# --- the first leg ------------------------------------------------------------------------


def test_start_emits_round_started_then_send_request() -> None:
    flow = make_flow()
    commands = flow.start(0.0)
    assert commands == [
        RoundStarted(round=1, request_id=1, state_only=False),
        SendRequest(request_id=1, method="tools/call", message=commands[1].message),  # type: ignore[union-attr]
    ]
    assert flow.state is FlowState.AWAITING_RESPONSE
    assert flow.rounds == 1
    assert flow.outstanding_request == 1


def test_first_leg_carries_params_and_full_meta_and_no_retry_keys() -> None:
    message = last_send(make_flow().start(0.0)).message
    assert message == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {**PARAMS, "_meta": unstructure(META)},
    }
    assert "inputResponses" not in message["params"]
    assert "requestState" not in message["params"]


def test_start_twice_raises() -> None:
    flow = make_flow()
    flow.start(0.0)
    with pytest.raises(LocalProtocolError):
        flow.start(0.0)


# --- results (digest §1.1, C7) --------------------------------------------------------------


def test_result_without_result_type_is_complete_and_kept_whole() -> None:
    flow = make_flow()
    flow.start(0.0)
    result = {"content": [{"type": "text", "text": "hi"}], "vendorField": {"x": [1, 2]}}
    commands = flow.handle(ok(1, result), 0.5)
    assert commands == [Complete(result=result, rounds=1)]
    assert commands[0].result is result  # type: ignore[union-attr]
    assert flow.state is FlowState.COMPLETE and flow.done
    assert flow.result is result
    assert flow.deadline is None
    assert flow.outstanding_request is None


def test_result_type_complete_is_complete() -> None:
    flow = make_flow()
    flow.start(0.0)
    assert flow.handle(ok(1, done()), 0.5) == [Complete(result=done(), rounds=1)]


@pytest.mark.parametrize("result_type", ["task", "Complete", "input-required", ""])
def test_unknown_result_type_is_a_remote_protocol_error(result_type: str) -> None:
    flow = make_flow()
    flow.start(0.0)
    result = {"resultType": result_type, "content": []}
    [fail] = flow.handle(ok(1, result), 0.5)
    assert isinstance(fail, Fail)
    assert type(fail.error) is RemoteProtocolError
    assert fail.error.result is result
    assert flow.state is FlowState.FAILED and flow.error is fail.error


@pytest.mark.parametrize("result_type", [None, 1, ["complete"], {"t": 1}])
def test_non_string_result_type_is_a_remote_protocol_error(result_type: Any) -> None:
    flow = make_flow()
    flow.start(0.0)
    [fail] = flow.handle(ok(1, {"resultType": result_type}), 0.5)
    assert isinstance(fail, Fail) and isinstance(fail.error, RemoteProtocolError)


@pytest.mark.parametrize("result", [[], "complete", 3, None, True])
def test_result_that_is_not_an_object_is_a_codec_error(result: Any) -> None:
    flow = make_flow()
    flow.start(0.0)
    [fail] = flow.handle(ok(1, result), 0.5)
    assert isinstance(fail, Fail) and isinstance(fail.error, CodecError)


@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "resources/read"])
def test_input_required_is_accepted_for_the_three_mrtr_methods(method: str) -> None:
    params = {"uri": "file:///a"} if method == "resources/read" else {"name": "x"}
    flow = make_flow(method, params)
    commands = to_handlers(flow, {"q": form()})
    assert names(commands) == ["InputNeeded", "InvokeHandler"]
    assert flow.state is FlowState.AWAITING_HANDLERS


@pytest.mark.parametrize(
    "method", ["tools/list", "prompts/list", "resources/list", "server/discover", "x/custom"]
)
def test_input_required_for_other_methods_is_a_protocol_error(method: str) -> None:
    flow = make_flow(method, {})
    commands = to_handlers(flow, {"q": form()})
    [fail] = commands
    assert isinstance(fail, Fail)
    assert type(fail.error) is RemoteProtocolError
    assert method in str(fail.error)
    assert flow.state is FlowState.FAILED


def test_other_methods_complete_in_one_leg() -> None:
    flow = make_flow("tools/list", {})
    message = last_send(flow.start(0.0)).message
    assert message["method"] == "tools/list" and message["params"] == {"_meta": unstructure(META)}
    assert flow.handle(ok(1, {"resultType": "complete", "tools": []}), 0.1) == [
        Complete(result={"resultType": "complete", "tools": []}, rounds=1)
    ]


# A complete result of an MRTR method must carry that method's payload (digest §1.3: a
# CallToolResult needs content, a GetPromptResult messages, a ReadResourceResult contents).
_READ = {"uri": "file:///a"}
_PROMPT = {"name": "p"}


@pytest.mark.parametrize(
    ("method", "params", "result", "path"),
    [
        ("tools/call", PARAMS, {"resultType": "complete"}, "result.content"),
        ("tools/call", PARAMS, {}, "result.content"),
        ("tools/call", PARAMS, {"content": "hi"}, "result.content"),
        ("tools/call", PARAMS, {"content": [{"type": "text", "text": "a"}, "b"]},
         "result.content[1]"),
        ("tools/call", PARAMS, {"content": [{"text": "no type"}]}, "result.content[0].type"),
        ("prompts/get", _PROMPT, {"resultType": "complete"}, "result.messages"),
        ("prompts/get", _PROMPT, {"messages": {"role": "user"}}, "result.messages"),
        ("prompts/get", _PROMPT,
         {"messages": [{"role": "system", "content": {"type": "text", "text": "x"}}]},
         "result.messages[0].role"),
        ("prompts/get", _PROMPT, {"messages": [{"role": "user", "content": "x"}]},
         "result.messages[0].content"),
        ("resources/read", _READ, {"resultType": "complete", "ttlMs": 0,
                                   "cacheScope": "private"}, "result.contents"),
        ("resources/read", _READ, {"contents": [None]}, "result.contents[0]"),
        ("resources/read", _READ, {"contents": [{"text": "no uri"}]}, "result.contents[0].uri"),
    ],
    ids=["tool-no-content", "tool-empty-legacy", "tool-content-str", "tool-block-str",
         "tool-block-no-type", "prompt-no-messages", "prompt-messages-object",
         "prompt-bad-role", "prompt-content-str", "read-no-contents", "read-item-null",
         "read-item-no-uri"],
)
def test_complete_result_without_its_methods_payload_is_a_codec_error(
    method: str, params: dict[str, Any], result: dict[str, Any], path: str
) -> None:
    error = _refused_result(method, params, result)
    assert error.path == path and str(error).startswith(f"{path}: ")


def _refused_result(method: str, params: dict[str, Any], result: dict[str, Any]) -> CodecError:
    """The CodecError a flow of ``method`` fails with on the complete ``result``, which is
    left as it came and kept on the error; the flow keeps no result."""
    flow = make_flow(method, params)
    flow.start(0.0)
    sent = copy.deepcopy(result)
    [fail] = flow.handle(ok(1, result), 0.5)
    assert isinstance(fail, Fail) and type(fail.error) is CodecError
    assert fail.error.result is result and result == sent
    assert flow.state is FlowState.FAILED and flow.result is None
    return fail.error


_IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
_BASE64 = "must be a base64 string (RFC 4648 §4)"
_URI = "must be a URI with a scheme (RFC 3986 §3.1) and no whitespace or control character"
_TEXT_BLOCK = {"type": "text", "text": "t"}
_PRIORITY = "must be a number from 0 to 1"
_MODIFIED = "must be an ISO 8601 date or date-time (e.g. 2025-01-12T15:00:58Z)"


@pytest.mark.parametrize(
    ("method", "params", "result", "path", "problem"),
    [
        # schema.json: ImageContent.data, AudioContent.data and BlobResourceContents.blob
        # are base64 (format "byte"), wherever the block or item sits.
        ("tools/call", PARAMS, {"content": [_IMAGE, {**_IMAGE, "data": "iVBORw0KGgo"}]},
         "result.content[1].data", _BASE64),
        ("tools/call", PARAMS, {"content": [{"type": "audio", "mimeType": "audio/wav",
                                             "data": "UklG RgA="}]},
         "result.content[0].data", _BASE64),
        ("tools/call", PARAMS, {"content": [{"type": "image", "mimeType": "image/png"}]},
         "result.content[0].data", _BASE64),
        ("tools/call", PARAMS, {"content": [{"type": "resource", "resource": {
            "uri": "file:///a", "blob": "not base64"}}]},
         "result.content[0].resource.blob", _BASE64),
        ("tools/call", PARAMS, {"content": [{"type": "resource", "resource": "file:///a"}]},
         "result.content[0].resource", "must be a resource contents object"),
        ("prompts/get", _PROMPT, {"messages": [
            {"role": "user", "content": {**_IMAGE, "data": "iVBORw0KGgo=\n"}}]},
         "result.messages[0].content.data", _BASE64),
        ("resources/read", _READ, {"contents": [{"uri": "file:///a", "blob": "AA=="},
                                                {"uri": "file:///a", "blob": "AA-_"}]},
         "result.contents[1].blob", _BASE64),
        # schema.json: a resource's uri (ResourceContents, ResourceLink) has format "uri".
        ("tools/call", PARAMS, {"content": [{"type": "resource_link", "uri": "a.txt",
                                             "name": "a"}]},
         "result.content[0].uri", _URI),
        ("tools/call", PARAMS, {"content": [{"type": "resource", "resource": {
            "uri": "/srv/a", "text": "t"}}]},
         "result.content[0].resource.uri", _URI),
        ("resources/read", _READ, {"contents": [{"uri": "file:///a b", "text": "t"}]},
         "result.contents[0].uri", _URI),
        # Annotations (schema.ts): priority is a number from 0 to 1, lastModified ISO 8601.
        ("tools/call", PARAMS, {"content": [{**_TEXT_BLOCK, "annotations": "high"}]},
         "result.content[0].annotations", "must be an object"),
        ("tools/call", PARAMS, {"content": [{**_TEXT_BLOCK, "annotations": {"priority": 2}}]},
         "result.content[0].annotations.priority", _PRIORITY),
        ("tools/call", PARAMS, {"content": [{**_IMAGE, "annotations": {"priority": "1"}}]},
         "result.content[0].annotations.priority", _PRIORITY),
        ("prompts/get", _PROMPT, {"messages": [{"role": "user", "content": {
            **_TEXT_BLOCK, "annotations": {"lastModified": "last week"}}}]},
         "result.messages[0].content.annotations.lastModified", _MODIFIED),
        ("tools/call", PARAMS, {"content": [{"type": "resource_link", "uri": "file:///a",
                                             "name": "a",
                                             "annotations": {"lastModified": 1736694058}}]},
         "result.content[0].annotations.lastModified", _MODIFIED),
    ],
    ids=["tool-image-unpadded", "tool-audio-space", "tool-image-no-data",
         "tool-embedded-blob", "tool-embedded-not-object", "prompt-image-newline",
         "read-blob-urlsafe", "tool-link-uri", "tool-embedded-uri", "read-uri-space",
         "annotations-str", "priority-2", "priority-str", "modified-words", "modified-int"],
)
def test_complete_result_with_a_member_out_of_its_format_is_a_codec_error(
    method: str, params: dict[str, Any], result: dict[str, Any], path: str, problem: str
) -> None:
    error = _refused_result(method, params, result)
    assert error.path == path and str(error) == f"{path}: {problem}"


@pytest.mark.parametrize(("hints", "path", "problem"), [
    # CacheableResult (schema.json): ttlMs is an integer of at least 0, cacheScope "public"
    # or "private"; both may be absent in a result from an earlier revision.
    ({"ttlMs": -1}, "result.ttlMs", "must be an integer of at least 0, not -1"),
    ({"ttlMs": 1.5}, "result.ttlMs", "must be an integer of at least 0, not 1.5"),
    ({"ttlMs": "60000"}, "result.ttlMs", "must be an integer of at least 0, not '60000'"),
    ({"ttlMs": True, "cacheScope": "private"}, "result.ttlMs",
     "must be an integer of at least 0, not True"),
    ({"ttlMs": 0, "cacheScope": "shared"}, "result.cacheScope",
     "must be 'public' or 'private', not 'shared'"),
    ({"cacheScope": None}, "result.cacheScope", "must be 'public' or 'private', not None"),
])
def test_a_read_result_with_caching_hints_out_of_range_is_a_codec_error(
    hints: dict[str, Any], path: str, problem: str
) -> None:
    result = {"contents": [{"uri": "file:///a", "text": "t"}], **hints}
    error = _refused_result("resources/read", _READ, result)
    assert error.path == path and str(error) == f"{path}: {problem}"


@pytest.mark.parametrize("hints", [{}, {"ttlMs": 0, "cacheScope": "public"},
                                   {"ttlMs": 60000.0, "cacheScope": "private"}])
def test_a_read_result_with_caching_hints_in_range_or_none_is_kept(
    hints: dict[str, Any]
) -> None:
    flow = make_flow("resources/read", _READ)
    flow.start(0.0)
    result = {"contents": [{"uri": "file:///a", "text": "t"}], **hints}
    [complete] = flow.handle(ok(1, result), 0.5)
    assert isinstance(complete, Complete) and complete.result is result


@pytest.mark.parametrize("modified", [
    "2025-01-12T15:00:58Z", "2025-01-12t15:00:58z", "2025-01-12T15:00:58.123456789+01:00",
    "2025-01-12", "2025-01-12T15:00:58",  # ISO 8601 all, though no RFC 3339 date-time
])
def test_annotations_in_range_and_format_are_kept(modified: str) -> None:
    flow = make_flow()
    flow.start(0.0)
    annotated = {**_TEXT_BLOCK, "annotations": {"priority": 0.5, "lastModified": modified,
                                                "audience": ["user"]}}
    result = {"content": [annotated, {**_IMAGE, "annotations": {"priority": 1}}]}
    [complete] = flow.handle(ok(1, result), 0.5)
    assert isinstance(complete, Complete) and complete.result is result


@pytest.mark.parametrize(
    ("method", "params", "result"),
    [
        ("tools/call", PARAMS, {"content": [], "isError": True}),
        ("prompts/get", _PROMPT, {"messages": [
            {"role": "assistant", "content": {"type": "text", "text": "x"}}]}),
        ("resources/read", _READ, {"contents": [{"uri": "file:///a", "blob": "AA=="}]}),
        ("resources/read", _READ, {"resultType": "complete", "contents": [],
                                   "ttlMs": 0, "cacheScope": "private", "x": 1}),
    ],
    ids=["tool-legacy", "prompt-legacy", "read-legacy", "read-complete"],
)
def test_complete_result_with_its_methods_payload_is_kept_whole(
    method: str, params: dict[str, Any], result: dict[str, Any]
) -> None:
    flow = make_flow(method, params)
    flow.start(0.0)
    [complete] = flow.handle(ok(1, result), 0.5)
    assert isinstance(complete, Complete) and complete.result is result


@pytest.mark.parametrize(
    "result",
    [
        irr(),
        irr({}),
        irr({}, None),
        {"resultType": "input_required", "inputRequests": None, "requestState": None},
    ],
    ids=["bare", "empty-requests", "empty-requests-no-state", "nulls"],
)
def test_input_required_with_neither_requests_nor_state_is_a_protocol_error(
    result: dict[str, Any],
) -> None:
    flow = make_flow()
    flow.start(0.0)
    [fail] = flow.handle(ok(1, result), 0.5)
    assert isinstance(fail, Fail) and isinstance(fail.error, RemoteProtocolError)
    assert fail.error.result is result


@pytest.mark.parametrize(
    "result",
    [
        irr([form()], "s"),  # type: ignore[arg-type]
        irr({"q": form()}, 17),  # type: ignore[arg-type]
        irr({"q": "not an object"}),
        irr({"q": {"method": "elicitation/create"}}),
        irr({"q": {"method": "elicitation/create", "params": {"message": "m"}}}),
        irr({"q": {"method": "elicitation/create",
                    "params": {"mode": "url", "message": "m"}}}),
        irr({"q": {"method": "elicitation/create",
                    "params": {"mode": "video", "message": "m"}}}),
        irr({"q": url_request("example.com/consent")}),
        irr({"q": url_request("https://example.com/con sent")}),
        irr({"q": {"method": "sampling/createMessage", "params": {"messages": []}}}),
        irr({"q": {"method": "tasks/get", "params": {}}}),
        irr({"q": form()}, "s", _meta="not an object"),
    ],
    ids=["requests-list", "state-int", "entry-str", "no-params", "form-no-schema",
         "url-no-url", "unknown-mode", "url-no-scheme", "url-space", "sampling-no-max",
         "unknown-kind", "meta-str"],
)
def test_malformed_input_required_is_a_codec_error(result: dict[str, Any]) -> None:
    flow = make_flow()
    flow.start(0.0)
    commands = flow.handle(ok(1, result), 0.5)
    [fail] = commands
    assert isinstance(fail, Fail) and isinstance(fail.error, CodecError)
    assert fail.error.result is result
    assert not invokes(commands)


def test_a_url_elicitation_whose_url_is_no_uri_is_a_codec_error_naming_it() -> None:
    # elicitation.mdx § URL mode: the url MUST contain a valid URL (schema.json: format
    # "uri"); one without a scheme is no link the user could examine.
    result = irr({"q": url_request("example.com/consent")}, "s")
    flow = make_flow()
    flow.start(0.0)
    [fail] = flow.handle(ok(1, result), 0.5)
    assert isinstance(fail, Fail) and type(fail.error) is CodecError
    assert fail.error.path == "result.inputRequests.q.params.url"
    assert str(fail.error).endswith(_URI)


def _form_with(schema: Any) -> dict[str, Any]:
    return {"method": "elicitation/create", "params": {"message": "m", "requestedSchema": schema}}


@pytest.mark.parametrize(
    ("schema", "path"),
    [
        ({"type": "object", "properties": {"x": 5}}, ".properties.x"),
        ({"type": "object", "properties": {"x": {}}}, ".properties.x"),
        ({"type": "object", "properties": {"x": {"type": "object", "properties": {}}}},
         ".properties.x"),
        ({"type": "object", "properties": {"x": {"type": "string", "format": "regex"}}},
         ".properties.x"),
        ({"type": "object", "properties": {"x": {"type": "string", "enum": ["a"] * 300}}},
         ".properties.x"),
        ({"type": "object", "properties": {"x": {"type": "string", "title": "t" * 5000}}},
         ".properties.x"),
        ({"type": "object", "properties": {"a b": {"type": "array", "items": {}}}},
         "['a b']"),
        ({"type": "object", "properties": {f"x{i}": {"type": "string"} for i in range(65)}}, ""),
        ({"type": "object", "properties": {"x": {"type": "string"}}, "required": "x"}, ""),
        ({"type": "object", "properties": {"x": {"type": "string"}}, "required": ["y"]}, ""),
    ],
    ids=["prop-int", "prop-no-type", "nested-object", "unknown-format", "enum-too-long",
         "title-too-long", "multiselect-no-enum", "too-many-fields", "required-str",
         "required-unknown"],
)
def test_a_form_outside_the_flat_primitive_vocabulary_is_a_codec_error_naming_it(
    schema: dict[str, Any], path: str
) -> None:
    # digest §1.5 a: a requestedSchema is a flat object of primitive properties; a server
    # must not send any other, and none reaches a handler (sizes bounded as the CLI shows them).
    result = irr({"q": _form_with(schema)}, "s")
    flow = make_flow()
    flow.start(0.0)
    commands = flow.handle(ok(1, result), 0.5)
    [fail] = commands
    assert isinstance(fail, Fail) and type(fail.error) is CodecError
    where = "result.inputRequests.q.params.requestedSchema"
    if path.startswith("["):
        where += ".properties"
    assert fail.error.path == where + path
    assert fail.error.result is result
    assert flow.last_result is None


def test_reading_forms_does_not_run_a_validator_per_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A default failing its field is dropped, never refused: reading a result does not
    # check one (a 4 MiB result holds thousands of 64-field forms, seconds of jsonschema).
    def boom(field: FormField, value: Any) -> list[str]:
        raise AssertionError("a default was validated")

    monkeypatch.setattr(FormField, "problems", boom)
    fields = {f"x{i}": {"type": "string", "format": "email", "default": "a@example.com"}
              for i in range(64)}
    schema = {"type": "object", "properties": fields}
    result = irr({f"q{i}": _form_with(schema) for i in range(64)}, "s")
    flow = make_flow()
    flow.start(0.0)
    commands = flow.handle(ok(1, result), 0.5)
    assert len(invokes(commands)) == 64
    monkeypatch.undo()
    assert FormSpec.from_schema(schema).fields[0].default == "a@example.com"


_TEXT = {"type": "text", "text": "hi"}
_IMAGE_BAD = {"type": "image", "data": "not base64", "mimeType": "image/png"}


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"messages": [{}]}, "messages[0].role"),
        ({"messages": [{"role": "system", "content": _TEXT}]}, "messages[0].role"),
        ({"messages": [{"role": "user"}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": [_TEXT, {"text": "x"}]}]},
         "messages[0].content[1].type"),
        ({"includeContext": "everything"}, "includeContext"),
        ({"temperature": "hot"}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"stopSequences": "abc"}, "stopSequences"),
        ({"stopSequences": ["a", 1]}, "stopSequences"),
        ({"tools": {"name": "t"}}, "tools"),
        ({"tools": [{"inputSchema": {"type": "object"}}]}, "tools[0].name"),
        ({"tools": [{"name": "t"}]}, "tools[0].inputSchema"),
        ({"toolChoice": "auto"}, "toolChoice"),
        ({"toolChoice": {"mode": "always"}}, "toolChoice.mode"),
        ({"modelPreferences": 5}, "modelPreferences"),
        # ModelPreferences (schema.ts): each priority is a number from 0 to 1.
        ({"modelPreferences": {"costPriority": 2}}, "modelPreferences.costPriority"),
        ({"modelPreferences": {"speedPriority": "fast"}}, "modelPreferences.speedPriority"),
        ({"modelPreferences": {"costPriority": 0, "intelligencePriority": True}},
         "modelPreferences.intelligencePriority"),
        ({"metadata": [1]}, "metadata"),
        # schema.json: an image's or audio's data is base64 (format "byte"), in a message's
        # block, in its array of blocks, and in a tool result's content.
        ({"messages": [{"role": "user", "content": _IMAGE_BAD}]}, "messages[0].content.data"),
        ({"messages": [{"role": "user", "content": [_TEXT, _IMAGE_BAD]}]},
         "messages[0].content[1].data"),
        ({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "toolUseId": "1", "content": [_IMAGE_BAD]}]}]},
         "messages[0].content[0].content[0].data"),
    ],
    ids=["message-empty", "role-system", "no-content", "content-str", "block-no-type",
         "include-context", "temperature-str", "temperature-bool", "stop-str", "stop-int",
         "tools-object", "tool-no-name", "tool-no-schema", "tool-choice-str",
         "tool-choice-mode", "preferences-int", "cost-2", "speed-str", "intelligence-bool",
         "metadata-list", "image-data",
         "image-data-in-array", "image-data-in-tool-result"],
)
def test_a_malformed_sampling_request_is_a_codec_error_naming_the_member(
    params: dict[str, Any], path: str
) -> None:
    # digest §1.5 b: each message is {role: "user"|"assistant", content: block or block[]},
    # and each optional member has its type; none other reaches a sampling handler.
    result = irr({"q": sampling(**params)}, "s")
    flow = make_flow()
    flow.start(0.0)
    commands = flow.handle(ok(1, result), 0.5)
    [fail] = commands
    assert isinstance(fail, Fail) and type(fail.error) is CodecError
    assert fail.error.path == f"result.inputRequests.q.params.{path}"
    assert fail.error.result is result
    assert flow.last_result is None


def test_a_well_formed_sampling_request_with_every_member_reaches_its_handler() -> None:
    request = sampling(
        messages=[{"role": "user", "content": _TEXT},
                  {"role": "assistant", "content": [_TEXT, {"type": "tool_use", "id": "1",
                                                            "name": "t", "input": {}}]},
                  {"role": "user", "content": {**_IMAGE_BAD, "data": "aGk="}}],
        systemPrompt="be brief", includeContext="thisServer", temperature=0.5,
        stopSequences=["\n"], tools=[{"name": "t", "inputSchema": {"type": "object"}}],
        toolChoice={"mode": "auto"},
        modelPreferences={"hints": [{"name": "m"}], "costPriority": 0, "speedPriority": 1,
                          "intelligencePriority": 0.75},
        metadata={"a": 1},
    )
    [_, invoke] = to_handlers(make_flow(), {"q": request})
    assert isinstance(invoke, InvokeHandler)
    assert invoke.request.messages == request["params"]["messages"]


# --- responses --------------------------------------------------------------------------------


def test_response_for_another_id_raises_and_changes_nothing() -> None:
    """The adapter routes by id, so a foreign id is a local mistake (raised, not emitted)."""
    flow = make_flow()
    flow.start(0.0)
    deadline = flow.deadline
    with pytest.raises(LocalProtocolError, match="not the request in flight"):
        flow.handle(ok(99, done()), 0.5)
    assert flow.state is FlowState.AWAITING_RESPONSE and flow.deadline == deadline
    assert flow.handle(ok(1, done()), 0.6)[0] == Complete(result=done(), rounds=1)


@pytest.mark.parametrize("wrong", ["1", 1.0, True, [1]])
def test_response_id_matches_by_type_and_value(wrong: Any) -> None:
    flow = make_flow()
    flow.start(0.0)
    with pytest.raises(LocalProtocolError):
        flow.handle(ok(wrong, done()), 0.5)


def test_string_ids_are_supported() -> None:
    flow = make_flow(ids=Ids(prefix="req-"))
    assert last_send(flow.start(0.0)).request_id == "req-1"
    assert isinstance(flow.handle(ok("req-1", done()), 0.1)[0], Complete)


def test_error_response_with_null_id_is_taken_as_this_legs() -> None:
    """JSON-RPC: the id of an error is null when the server could not read the request's."""
    flow = make_flow()
    flow.start(0.0)
    [fail] = flow.handle(error(None, -32700, "Parse error"), 0.5)
    assert isinstance(fail, Fail) and isinstance(fail.error, JsonRpcError)
    assert fail.error.code == -32700


def test_result_response_without_id_is_a_remote_protocol_error() -> None:
    flow = make_flow()
    flow.start(0.0)
    message = {"jsonrpc": "2.0", "result": done()}
    [fail] = flow.handle(ResponseReceived(message=message), 0.5)
    assert isinstance(fail, Fail) and type(fail.error) is RemoteProtocolError


@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "result": {}},
        {"jsonrpc": "1.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}},
    ],
    ids=["no-version", "old-version", "neither", "both"],
)
def test_malformed_response_is_a_remote_protocol_error(message: dict[str, Any]) -> None:
    flow = make_flow()
    flow.start(0.0)
    [fail] = flow.handle(ResponseReceived(message=message), 0.5)
    assert isinstance(fail, Fail) and type(fail.error) is RemoteProtocolError
    assert flow.outstanding_request is None


@pytest.mark.parametrize("message", [[], "text", None, 3])
def test_response_that_is_not_an_object_is_a_remote_protocol_error(message: Any) -> None:
    flow = make_flow()
    flow.start(0.0)
    [fail] = flow.handle(ResponseReceived(message=message), 0.5)
    assert isinstance(fail, Fail) and isinstance(fail.error, RemoteProtocolError)


def test_json_rpc_error_response_fails_with_code_message_and_data() -> None:
    flow = make_flow()
    flow.start(0.0)
    data = {"requiredCapabilities": {"elicitation": {}}}
    [fail] = flow.handle(error(1, -32021, "Missing capability", data), 0.5)
    assert isinstance(fail, Fail) and type(fail.error) is JsonRpcError
    assert (fail.error.code, fail.error.message, fail.error.data) == (
        -32021, "Missing capability", data)


def test_json_rpc_error_after_a_round_fails_the_same_way() -> None:
    flow = make_flow()
    commands = to_handlers(flow, {"q": form()})
    retry = last_send(answer_all(flow, commands, 2.0))
    [fail] = flow.handle(error(retry.request_id, -32602, "Invalid or expired requestState"), 3.0)
    assert isinstance(fail, Fail) and isinstance(fail.error, JsonRpcError)
    assert fail.error.code == -32602


@pytest.mark.parametrize(
    "err",
    [
        "boom",
        [],
        {"message": "no code"},
        {"code": "x", "message": "m"},
        {"code": 1.5, "message": "m"},
        {"code": True, "message": "m"},
        {"code": -32600},
        {"code": -32600, "message": 5},
    ],
)
def test_malformed_error_object_is_a_remote_protocol_error(err: Any) -> None:
    flow = make_flow()
    flow.start(0.0)
    message = {"jsonrpc": "2.0", "id": 1, "error": err}
    [fail] = flow.handle(ResponseReceived(message=message), 0.5)
    assert isinstance(fail, Fail) and type(fail.error) is RemoteProtocolError


# --- retries (C2-C6) -----------------------------------------------------------------------------


def _two_rounds(state1: str | None = "s1", state2: str | None = "s2") -> tuple[
    Any, list[SendRequest]
]:
    """A flow through two input rounds; returns it and every leg sent."""
    flow = make_flow()
    legs = [last_send(flow.start(0.0))]
    commands = flow.handle(ok(1, irr({"a": form(), "b": roots()}, state1)), 1.0)
    flow.handle(HandlerReturned(key="b", answer=ListRootsResult(roots=[Root(uri="file:///r")])),
                1.5)
    legs.append(last_send(flow.handle(HandlerReturned(key="a", answer=ACCEPT), 2.0)))
    assert invokes(commands)
    commands = flow.handle(ok(2, irr({"c": form("again")}, state2)), 3.0)
    legs.append(last_send(answer_all(flow, commands, 4.0)))
    flow.handle(ok(3, done()), 5.0)
    assert flow.state is FlowState.COMPLETE
    return flow, legs


def test_every_retry_has_a_new_id_from_next_id() -> None:
    _, legs = _two_rounds()
    assert [leg.request_id for leg in legs] == [1, 2, 3]
    assert [leg.message["id"] for leg in legs] == [1, 2, 3]


def test_next_id_repeating_the_previous_id_raises_and_changes_nothing() -> None:
    flow = make_flow(ids=lambda: 7)  # type: ignore[arg-type]
    flow.start(0.0)
    commands = flow.handle(ok(7, irr({"q": form()}, "s")), 1.0)
    with pytest.raises(LocalProtocolError, match="repeated"):
        answer_all(flow, commands, 2.0)
    assert flow.state is FlowState.AWAITING_HANDLERS
    assert flow.pending_keys == ("q",)
    assert flow.rounds == 1


@pytest.mark.parametrize("bad", [None, 1.5, True, b"id", ("t",)])
def test_next_id_returning_a_non_id_raises(bad: Any) -> None:
    flow = make_flow(ids=lambda: bad)  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        flow.start(0.0)
    assert flow.state is FlowState.IDLE and flow.rounds == 0


def test_every_leg_repeats_the_method_and_the_original_params() -> None:
    _, legs = _two_rounds()
    for leg in legs:
        assert leg.method == "tools/call" and leg.message["method"] == "tools/call"
        params = leg.message["params"]
        assert params["name"] == PARAMS["name"]
        assert params["arguments"] == PARAMS["arguments"]


def test_callers_params_are_never_mutated() -> None:
    params = {"name": "deploy", "arguments": {"nested": {"list": [1, {"x": 2}]}},
              "inputResponses": {"old": {"action": "accept"}}, "requestState": "stale"}
    before = copy.deepcopy(params)
    flow = make_flow(params=params)
    legs = [last_send(flow.start(0.0))]
    commands = flow.handle(ok(1, irr({"q": form()}, "s")), 1.0)
    # Whatever an adapter does to a sent message must not reach the caller or a later leg.
    legs[0].message["params"]["arguments"]["nested"]["list"].append("junk")
    legs[0].message["params"]["_meta"]["junk"] = True
    legs.append(last_send(answer_all(flow, commands, 2.0)))
    assert params == before
    assert legs[1].message["params"]["arguments"] == before["arguments"]
    assert "junk" not in legs[1].message["params"]["_meta"]


def test_stale_retry_keys_in_the_callers_params_are_dropped() -> None:
    params = {"name": "x", "inputResponses": {"old": {"action": "accept"}},
              "requestState": "stale-state"}
    flow = make_flow(params=params)
    first = last_send(flow.start(0.0)).message["params"]
    assert "inputResponses" not in first and "requestState" not in first
    commands = flow.handle(ok(1, irr({"q": form()})), 1.0)  # no requestState this time
    retry = last_send(answer_all(flow, commands, 2.0)).message["params"]
    assert retry["inputResponses"] == {"q": {"action": "accept", "content": {"ok": True}}}
    assert "requestState" not in retry


def test_params_carrying_meta_are_refused() -> None:
    with pytest.raises(LocalProtocolError, match="_meta"):
        make_flow(params={"name": "x", "_meta": {}})


@pytest.mark.parametrize("params", [None, ["name"], "name"])
def test_params_that_are_not_a_mapping_are_refused(params: Any) -> None:
    with pytest.raises(LocalProtocolError):
        make_flow(params=params if params is not None else 5)


def test_meta_is_rebuilt_in_full_on_every_leg() -> None:
    meta = RequestMeta(
        client_capabilities=ClientCapabilities(elicitation=ElicitationCapability(), roots={}),
        progress_token="tok",
        extra={"traceparent": "00-abc-def-01"},
    )
    flow = make_flow(meta=meta, kinds={"elicitation/create"})
    legs = [last_send(flow.start(0.0))]
    commands = flow.handle(ok(1, irr({"q": form()}, "s")), 1.0)
    legs.append(last_send(answer_all(flow, commands, 2.0)))
    expected = unstructure(meta)
    assert expected["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {},
                                                                     "roots": {}}
    metas = [leg.message["params"]["_meta"] for leg in legs]
    assert metas == [expected, expected]
    assert metas[0] is not metas[1]


def test_input_responses_hold_exactly_this_rounds_answers_under_the_servers_keys() -> None:
    _, legs = _two_rounds()
    assert legs[1].message["params"]["inputResponses"] == {
        "a": {"action": "accept", "content": {"ok": True}},
        "b": {"roots": [{"uri": "file:///r"}]},
    }
    # Round 2 carries round 2's answers only (earlier ones travel in requestState).
    assert legs[2].message["params"]["inputResponses"] == {
        "c": {"action": "accept", "content": {"ok": True}}
    }
    # Keys appear in the server's order, not the order handlers finished in.
    assert list(legs[1].message["params"]["inputResponses"]) == ["a", "b"]


@pytest.mark.parametrize(
    ("request_", "answer"),
    [
        (form(), ElicitResult(action="decline")),
        (url_request(), ElicitResult(action="accept")),
        (sampling(), CreateMessageResult(role="assistant", content={"type": "text", "text": "x"},
                                         model="m1", stop_reason="endTurn")),
        (roots(), ListRootsResult(roots=[Root(uri="file:///a", name="A", meta={"k": 1})])),
    ],
    ids=["elicit-form", "elicit-url", "sampling", "roots"],
)
def test_answers_are_unstructured_with_the_converter(request_: dict[str, Any],
                                                     answer: Any) -> None:
    flow = make_flow()
    commands = to_handlers(flow, {"k": request_})
    retry = last_send(answer_all(flow, commands, 2.0, answer))
    assert retry.message["params"]["inputResponses"] == {"k": converter.unstructure(answer)}


def test_plain_json_answers_are_validated_and_sent() -> None:
    flow = make_flow()
    commands = to_handlers(flow, {"k": sampling()})
    raw = {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m",
           "stopReason": "endTurn", "vendor": 1}
    retry = last_send(answer_all(flow, commands, 2.0, raw))
    sent = retry.message["params"]["inputResponses"]["k"]
    assert sent == {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m",
                    "stopReason": "endTurn"}


_ELICIT_VALUES = st.one_of(
    st.text(max_size=5), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.lists(st.text(max_size=3), max_size=3),
)


@settings(derandomize=True, database=None)
@given(
    action=st.sampled_from(["accept", "decline", "cancel"]),
    content=st.none() | st.dictionaries(st.text(max_size=5), _ELICIT_VALUES, max_size=4),
)
def test_elicit_fast_path_gives_what_the_converter_gives(action: str,
                                                         content: dict[str, Any] | None) -> None:
    from mrtr_core.client import answer_to_wire

    answer = ElicitResult(action=action, content=content)  # type: ignore[arg-type]
    assert answer_to_wire("elicitation/create", answer, key="k") == converter.unstructure(answer)


def test_a_root_answer_must_be_a_file_uri() -> None:
    # digest §1.6: the client never sends a root that is not file://.
    from mrtr_core.client import answer_to_wire

    with pytest.raises(LocalProtocolError, match=r"uri must be a file:// URI, not 'https://x'"):
        answer_to_wire("roots/list", {"roots": [{"uri": "https://x"}]}, key="r")
    with pytest.raises(WireValueError, match="file://"):
        Root(uri="https://x")
    wire = answer_to_wire("roots/list", ListRootsResult(roots=[Root(uri="file:///a")]), key="r")
    assert wire == {"roots": [{"uri": "file:///a"}]}


ODD_STATES = [
    "",
    " ",
    " padded\t\n",
    "ünïcödé-✓-状態-🚀",
    '{"looks": "like", "json": [1, 2]}',
    "{ \"spaced\" :  1 }",
    "back\\slash \"quotes\" \u2028 \u0000 nul",
    "a" * 10_000,
    "\ud800 lone surrogate",
    "=" * 3 + "base64+/=",
]


@pytest.mark.parametrize("state", ODD_STATES, ids=range(len(ODD_STATES)))
def test_request_state_is_echoed_byte_for_byte(state: str) -> None:
    flow = make_flow()
    commands = to_handlers(flow, {"q": form()}, state)
    retry = last_send(answer_all(flow, commands, 2.0))
    echoed = retry.message["params"]["requestState"]
    assert echoed == state and type(echoed) is str
    assert json.dumps(echoed) == json.dumps(state)


@pytest.mark.parametrize("state", ODD_STATES, ids=range(len(ODD_STATES)))
def test_request_state_of_a_state_only_round_is_echoed_byte_for_byte(state: str) -> None:
    flow = make_flow()
    flow.start(0.0)
    flow.handle(ok(1, irr(None, state)), 1.0)
    retry = last_send(flow.handle(TimerFired(), 100.0))
    assert retry.message["params"]["requestState"] == state
    assert "inputResponses" not in retry.message["params"]


def test_request_state_is_absent_when_the_server_sent_none() -> None:
    flow = make_flow()
    commands = to_handlers(flow, {"q": form()}, None)
    retry = last_send(answer_all(flow, commands, 2.0))
    assert "requestState" not in retry.message["params"]


def test_empty_request_state_is_echoed_not_dropped() -> None:
    flow = make_flow()
    commands = to_handlers(flow, {"q": form()}, "")
    retry = last_send(answer_all(flow, commands, 2.0))
    assert retry.message["params"]["requestState"] == ""


def test_request_state_is_not_carried_past_the_round_that_sent_it() -> None:
    _, legs = _two_rounds(state1="first", state2=None)
    assert legs[1].message["params"]["requestState"] == "first"
    assert "requestState" not in legs[2].message["params"]


# --- rounds and handlers ------------------------------------------------------------------------


def test_all_entries_are_invoked_at_once_after_the_input_needed_notice() -> None:
    flow = make_flow()
    commands = to_handlers(flow, {"a": form(), "b": sampling(), "c": roots()}, "s", now=1.0)
    assert names(commands) == ["InputNeeded", "InvokeHandler", "InvokeHandler", "InvokeHandler"]
    notice = commands[0]
    assert isinstance(notice, InputNeeded) and notice.round == 1
    assert notice.result is flow.last_result
    assert [c.key for c in invokes(commands)] == ["a", "b", "c"]
    assert [c.request.method for c in invokes(commands)] == [
        "elicitation/create", "sampling/createMessage", "roots/list"]
    assert flow.pending_keys == ("a", "b", "c")


def test_invoke_handler_carries_the_handler_deadline() -> None:
    from mrtr_core.client import ClientLimits

    flow = make_flow(limits=ClientLimits(pacing_jitter=0.0, handler_timeout=30.0))
    commands = to_handlers(flow, {"a": form()}, now=5.0)
    assert [c.deadline for c in invokes(commands)] == [35.0]
    flow = make_flow(limits=ClientLimits(pacing_jitter=0.0, handler_timeout=None))
    assert [c.deadline for c in invokes(to_handlers(flow, {"a": form()}))] == [None]


def test_round_events_are_emitted_in_order() -> None:
    flow = make_flow()
    transcript = flow.start(0.0)
    transcript += flow.handle(ok(1, irr({"a": form(), "b": form()}, "s1")), 1.0)
    transcript += flow.handle(HandlerReturned(key="b", answer=ACCEPT), 2.0)
    transcript += flow.handle(HandlerReturned(key="a", answer=ACCEPT), 3.0)
    transcript += flow.handle(ok(2, irr(None, "s2")), 4.0)
    transcript += flow.handle(TimerFired(), 10.0)
    transcript += flow.handle(ok(3, done()), 11.0)
    assert names(transcript) == [
        "RoundStarted", "SendRequest",
        "InputNeeded", "InvokeHandler", "InvokeHandler",
        "RoundFulfilled", "RoundStarted", "SendRequest",
        "InputNeeded",
        "RoundStarted", "SendRequest",
        "Complete",
    ]
    notices = [c for c in transcript if isinstance(c, RoundStarted | InputNeeded | RoundFulfilled)]
    assert [(type(c).__name__, c.round) for c in notices] == [
        ("RoundStarted", 1), ("InputNeeded", 1), ("RoundFulfilled", 1), ("RoundStarted", 2),
        ("InputNeeded", 2), ("RoundStarted", 3),
    ]
    assert [c.state_only for c in notices if isinstance(c, RoundStarted)] == [False, False, True]
    fulfilled = next(c for c in notices if isinstance(c, RoundFulfilled))
    assert fulfilled.keys == ("a", "b")
    assert transcript[-1] == Complete(result=done(), rounds=3)


def test_handlers_may_return_in_any_order() -> None:
    flow = make_flow()
    to_handlers(flow, {"a": form(), "b": form(), "c": form()})
    assert flow.handle(HandlerReturned(key="c", answer=ACCEPT), 2.0) == []
    assert flow.handle(HandlerReturned(key="a", answer=ACCEPT), 2.1) == []
    assert flow.pending_keys == ("b",)
    commands = flow.handle(HandlerReturned(key="b", answer=ACCEPT), 2.2)
    assert names(commands) == ["RoundFulfilled", "RoundStarted", "SendRequest"]


def test_first_handler_failure_cancels_the_rest_and_fails_with_key_and_cause() -> None:
    flow = make_flow()
    to_handlers(flow, {"a": form(), "b": form(), "c": form()})
    flow.handle(HandlerReturned(key="a", answer=ACCEPT), 2.0)
    boom = RuntimeError("user closed the dialog")
    commands = flow.handle(HandlerFailed(key="b", error=boom), 2.5)
    assert commands[0] == CancelHandlers(keys=("c",))
    fail = commands[1]
    assert isinstance(fail, Fail) and type(fail.error) is HandlerFailedError
    assert fail.error.key == "b" and fail.error.cause is boom and fail.error.__cause__ is boom
    assert fail.error.others == ()
    assert fail.error.last_result is flow.last_result
    assert flow.state is FlowState.FAILED and not flow.pending_keys


def test_failures_passed_in_the_same_batch_are_kept_on_others() -> None:
    flow = make_flow()
    to_handlers(flow, {"a": form(), "b": form(), "c": form()})
    first, second = ValueError("one"), KeyError("two")
    commands = flow.handle_many(
        [HandlerFailed(key="a", error=first), HandlerFailed(key="c", error=second),
         HandlerReturned(key="b", answer=ACCEPT)],
        3.0,
    )
    assert names(commands) == ["CancelHandlers", "Fail"]
    error_ = commands[1].error  # type: ignore[union-attr]
    assert isinstance(error_, HandlerFailedError)
    assert error_.key == "a" and error_.cause is first
    assert error_.others == (("c", second),)


def test_late_failure_of_a_cancelled_handler_is_added_to_others() -> None:
    """Adapters feed failures that raced the cancel; the flow keeps them on the error."""
    flow = make_flow()
    to_handlers(flow, {"a": form(), "b": form()})
    [_, fail] = flow.handle(HandlerFailed(key="a", error=ValueError("a")), 2.0)
    late = OSError("b broke while being cancelled")
    assert flow.handle(HandlerFailed(key="b", error=late), 2.5) == []
    assert fail.error.others == (("b", late),)  # type: ignore[union-attr]
    # Each cancelled key is absorbed once; a second outcome for it is an adapter bug.
    with pytest.raises(LocalProtocolError):
        flow.handle(HandlerFailed(key="b", error=late), 2.6)


def test_late_return_of_a_cancelled_handler_is_absorbed() -> None:
    flow = make_flow()
    to_handlers(flow, {"a": form(), "b": form()})
    flow.handle(CancelRequested(reason="user quit"), 2.0)
    assert flow.handle(HandlerReturned(key="a", answer=ACCEPT), 2.1) == []
    assert flow.handle(HandlerFailed(key="b", error=ValueError()), 2.2) == []
    assert isinstance(flow.error, FlowCancelledError)


@pytest.mark.parametrize("event_key", ["nope", "a"])
def test_handler_outcome_for_a_key_not_running_raises(event_key: str) -> None:
    flow = make_flow()
    to_handlers(flow, {"a": form(), "b": form()})
    flow.handle(HandlerReturned(key="a", answer=ACCEPT), 2.0)  # "a" is done now
    for event in (HandlerReturned(key=event_key, answer=ACCEPT),
                  HandlerFailed(key=event_key, error=ValueError())):
        with pytest.raises(LocalProtocolError):
            flow.handle(event, 2.5)
    assert flow.pending_keys == ("b",) and flow.state is FlowState.AWAITING_HANDLERS


@pytest.mark.parametrize(
    "answer",
    [
        "accept",
        CreateMessageResult(role="user", content={}, model="m"),
        ElicitResult(action="maybe"),  # type: ignore[arg-type]
        ElicitResult(action="accept", content={"x": {"nested": 1}}),  # type: ignore[dict-item]
        {"action": "accept", "content": "no"},
        {"nothing": 1},
    ],
    ids=["str", "wrong-model", "bad-action", "bad-content", "bad-dict", "junk-dict"],
)
def test_an_unusable_answer_fails_that_handler(answer: Any) -> None:
    _fails_handler_a(form(), answer)


def _fails_handler_a(request_: dict[str, Any], answer: Any) -> LocalProtocolError:
    """Handler ``a`` of a round with ``request_`` under ``a`` returns ``answer``, which
    fails the flow with a ``HandlerFailedError`` for ``a``: its cause."""
    flow = make_flow()
    to_handlers(flow, {"a": request_, "b": form()})
    commands = flow.handle(HandlerReturned(key="a", answer=answer), 2.0)
    assert commands[0] == CancelHandlers(keys=("b",))
    fail = commands[1]
    assert isinstance(fail, Fail) and isinstance(fail.error, HandlerFailedError)
    assert fail.error.key == "a" and isinstance(fail.error.cause, LocalProtocolError)
    return fail.error.cause


_NOT_JSON_ANSWERS = [
    (form(), ElicitResult(action="accept", content={"n": float("nan")})),
    (form(), {"action": "accept", "content": {"n": float("inf")}}),
    (form(), ElicitResult(action="accept", content={"n": 10**5000})),
    (sampling(), CreateMessageResult(role="assistant", model="m",
                                     content={"type": "text", "text": "x", "n": -float("inf")})),
    (sampling(), CreateMessageResult(role="assistant", model="m",
                                     content=[{"type": "text", "text": {"a", "set"}}])),
    (roots(), ListRootsResult(roots=[Root(uri="file:///a", meta={"n": float("nan")})])),
    (sampling(), CreateMessageResult(role="assistant", model="m",
                                     content={"type": "text", "text": "x", "d": too_deep()})),
    (sampling(), {"role": "assistant", "model": "m", "content": {"type": "text", "text": "x"},
                  "_meta": {"d": too_deep()}}),
    (roots(), {"roots": [{"uri": "file:///a", "_meta": {"d": too_deep()}}]}),
]
_NOT_JSON_IDS = ["elicit-nan", "elicit-dict-inf", "elicit-long-int", "sampling-inf",
                 "sampling-set", "roots-meta-nan", "sampling-too-deep",
                 "sampling-dict-meta-too-deep", "roots-dict-meta-too-deep"]


@pytest.mark.parametrize(("request_", "answer"), _NOT_JSON_ANSWERS, ids=_NOT_JSON_IDS)
def test_an_answer_json_cannot_carry_fails_that_handler(request_: dict[str, Any],
                                                        answer: Any) -> None:
    # An inputResponses value is JSON (digest §1.6): NaN, an infinity, an integer too long
    # to write or a value of another type would make a retry no transport can send.
    cause = _fails_handler_a(request_, answer)
    assert str(cause).startswith("answer for 'a' (") and "not JSON" in str(cause)


@pytest.mark.parametrize(("request_", "answer"), _NOT_JSON_ANSWERS, ids=_NOT_JSON_IDS)
def test_a_manual_answer_json_cannot_carry_is_refused_and_changes_nothing(
    request_: dict[str, Any], answer: Any
) -> None:
    flow = make_flow(manual=True)
    to_handlers(flow, {"a": request_, "b": form()})
    with pytest.raises(LocalProtocolError, match=r"^answer for 'a' \(.*not JSON"):
        flow.answer({"a": answer, "b": ACCEPT}, 2.0)
    assert flow.pending_keys == ("a", "b") and flow.state is FlowState.AWAITING_ANSWERS


_URL_CONTENT = r"answer for 'a' \(elicitation/create\): a URL-mode answer carries no content"


@pytest.mark.parametrize("answer", [ElicitResult(action="accept", content={"password": "x"}),
                                    {"action": "accept", "content": {"password": "x"}},
                                    ElicitResult(action="decline", content={})])
def test_a_url_mode_answer_with_content_fails_that_handler(answer: Any) -> None:
    # digest §1.6: content only accompanies accept in form mode, never URL mode, whose
    # data travels out of band (S17): what a handler puts there is not sent.
    assert re.fullmatch(_URL_CONTENT, str(_fails_handler_a(url_request(), answer)))


def test_a_manual_url_mode_answer_with_content_is_refused_and_changes_nothing() -> None:
    flow = make_flow(manual=True)
    to_handlers(flow, {"a": url_request(), "b": form()})
    with pytest.raises(LocalProtocolError, match=_URL_CONTENT):
        flow.answer({"a": ElicitResult(action="accept", content={"code": "1234"})}, 2.0)
    assert flow.pending_keys == ("a", "b") and flow.state is FlowState.AWAITING_ANSWERS
    send = last_send(flow.answer({"a": ElicitResult(action="accept"), "b": ACCEPT}, 3.0))
    assert send.message["params"]["inputResponses"] == {
        "a": {"action": "accept"}, "b": {"action": "accept", "content": {"ok": True}}}


@pytest.mark.parametrize(
    ("caps", "request_", "kind"),
    [
        (ClientCapabilities(sampling=SamplingCapability(), roots={}), form(),
         "elicitation/create"),
        (ClientCapabilities(elicitation=ElicitationCapability(), roots={}), sampling(),
         "sampling/createMessage"),
        (ClientCapabilities(elicitation=ElicitationCapability()), roots(), "roots/list"),
        (ClientCapabilities(elicitation=ElicitationCapability()), url_request(),
         "elicitation/create"),
        (ClientCapabilities(elicitation=ElicitationCapability(form={})), url_request(),
         "elicitation/create"),
        (ClientCapabilities(elicitation=ElicitationCapability(url={})), form(),
         "elicitation/create"),
        (ClientCapabilities(sampling=SamplingCapability()),
         sampling(tools=[{"name": "t", "inputSchema": {"type": "object"}}]),
         "sampling/createMessage"),
        (ClientCapabilities(sampling=SamplingCapability()), sampling(toolChoice={"mode": "auto"}),
         "sampling/createMessage"),
    ],
    ids=["no-elicitation", "no-sampling", "no-roots", "url-on-empty-elicitation",
         "url-on-form-only", "form-on-url-only", "sampling-tools", "sampling-tool-choice"],
)
def test_an_undeclared_kind_fails_before_anything_is_sent_or_invoked(
    caps: ClientCapabilities, request_: dict[str, Any], kind: str
) -> None:
    flow = make_flow(meta=RequestMeta(client_capabilities=caps))
    result = irr({"fine": form(), "bad": request_}, "s") if caps.elicitation and (
        caps.elicitation.supports_form) else irr({"bad": request_}, "s")
    flow.start(0.0)
    commands = flow.handle(ok(1, result), 1.0)
    [fail] = commands
    assert isinstance(fail, Fail) and type(fail.error) is UnsupportedInputError
    assert (fail.error.key, fail.error.kind, fail.error.reason) == ("bad", kind, "not declared")
    assert fail.error.last_result is flow.last_result is not None
    assert fail.error.last_result.request_state == "s"


def test_declared_url_and_form_modes_are_accepted() -> None:
    caps = ClientCapabilities(elicitation=ElicitationCapability(form={}, url={}))
    flow = make_flow(meta=RequestMeta(client_capabilities=caps), kinds={"elicitation/create"})
    commands = to_handlers(flow, {"f": form(), "u": url_request()})
    assert len(invokes(commands)) == 2


def test_a_kind_without_a_handler_fails_before_anything_is_invoked() -> None:
    flow = make_flow(kinds={"elicitation/create"})
    commands = to_handlers(flow, {"ok": form(), "r": roots()})
    [fail] = commands
    assert isinstance(fail, Fail) and type(fail.error) is UnsupportedInputError
    assert (fail.error.key, fail.error.kind, fail.error.reason) == ("r", "roots/list",
                                                                    "no handler")


# --- cancellation and terminal states ---------------------------------------------------------


def test_cancel_requested_cancels_running_handlers_and_fails() -> None:
    flow = make_flow()
    to_handlers(flow, {"a": form(), "b": form()})
    flow.handle(HandlerReturned(key="a", answer=ACCEPT), 2.0)
    commands = flow.handle(CancelRequested(reason="user quit"), 2.5)
    assert commands[0] == CancelHandlers(keys=("b",))
    fail = commands[1]
    assert isinstance(fail, Fail) and type(fail.error) is FlowCancelledError
    assert "user quit" in str(fail.error)
    assert fail.error.last_result is flow.last_result is not None


def test_cancel_while_a_leg_is_in_flight_names_the_request_to_cancel() -> None:
    flow = make_flow()
    flow.start(0.0)
    [fail] = flow.handle(CancelRequested(), 1.0)
    assert isinstance(fail, Fail) and isinstance(fail.error, FlowCancelledError)
    assert fail.error.last_result is None
    assert flow.outstanding_request == 1  # the adapter sends notifications/cancelled for it


def test_cancel_before_start_fails_the_flow() -> None:
    flow = make_flow()
    [fail] = flow.handle(CancelRequested(), 0.0)
    assert isinstance(fail, Fail) and flow.state is FlowState.FAILED


@pytest.mark.parametrize(
    "event",
    [ok(1, done()), TimerFired(), CancelRequested(), HandlerReturned(key="a", answer=ACCEPT),
     HandlerFailed(key="a", error=ValueError())],
    ids=["response", "timer", "cancel", "returned", "failed"],
)
@pytest.mark.parametrize("ending", ["complete", "failed"])
def test_every_input_after_the_end_raises(event: Any, ending: str) -> None:
    flow = make_flow()
    flow.start(0.0)
    if ending == "complete":
        flow.handle(ok(1, done()), 1.0)
    else:
        flow.handle(error(1, -32603, "Internal error"), 1.0)
    state, outcome = flow.state, (flow.result, flow.error)
    with pytest.raises(LocalProtocolError):
        flow.handle(event, 2.0)
    with pytest.raises(LocalProtocolError):
        flow.start(2.0)
    assert (flow.state, flow.result, flow.error) == (state, *outcome)


def test_inputs_illegal_in_the_current_state_raise_and_change_nothing() -> None:
    flow = make_flow()
    with pytest.raises(LocalProtocolError):
        flow.handle(ok(1, done()), 0.0)  # not started
    flow.start(0.0)
    with pytest.raises(LocalProtocolError):
        flow.handle(HandlerReturned(key="a", answer=ACCEPT), 0.5)
    with pytest.raises(LocalProtocolError):
        flow.answer({"a": ACCEPT}, 0.5)
    assert flow.state is FlowState.AWAITING_RESPONSE


def test_time_running_backwards_raises() -> None:
    flow = make_flow()
    flow.start(10.0)
    with pytest.raises(LocalProtocolError, match="backwards"):
        flow.handle(TimerFired(), 9.0)
    assert flow.handle(TimerFired(), 10.0) == []


@pytest.mark.parametrize("now", [None, "1", float("nan"), True])
def test_now_must_be_a_number(now: Any) -> None:
    with pytest.raises(LocalProtocolError):
        make_flow().start(now)


def test_an_unknown_event_raises() -> None:
    flow = make_flow()
    flow.start(0.0)
    with pytest.raises(LocalProtocolError, match="unknown event"):
        flow.handle(object(), 1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"method": ""},
        {"method": 5},
        {"meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
        {"limits": {"max_rounds": 3}},
        {"next_id": 5},
        {"handled_kinds": [1]},
    ],
    ids=["empty-method", "int-method", "dict-meta", "dict-limits", "next-id", "kinds"],
)
def test_unusable_constructor_arguments_are_refused(kwargs: dict[str, Any]) -> None:
    from mrtr_core.client import ClientFlow

    args: dict[str, Any] = {"method": "tools/call", "params": {"name": "x"}, "meta": META,
                            "handled_kinds": {"roots/list"}, "next_id": Ids(),
                            "random": lambda: 0.5}
    args.update(kwargs)
    method, params = args.pop("method"), args.pop("params")
    with pytest.raises(LocalProtocolError):
        ClientFlow(method, params, **args)


@pytest.mark.parametrize("where", ["params", "meta"])
def test_arguments_nested_too_deeply_to_copy_are_refused(where: str) -> None:
    # Every leg is a fresh copy of the params and the _meta: a value nested deeper than any
    # copy recurses is refused as any other unusable argument is, naming it, where it is
    # given (the meta's copy would have raised RecursionError out of start).
    deep = {"deep": too_deep()}
    params = {"name": "x", "arguments": deep} if where == "params" else None
    meta = attrs.evolve(META, extra=deep) if where == "meta" else META
    with pytest.raises(LocalProtocolError,
                       match=f"^{where}: not JSON: nested too deeply to write as JSON"):
        make_flow(params=params, meta=meta)


class _Thing:
    pass


class _BigInt(int):
    """An int subclass (its value is what the encoder writes)."""


def test_long_integers_that_can_still_be_written_are_taken() -> None:
    # Past 4,000 bits (about 1,200 digits) an integer is checked, and written as any other.
    arguments = {"n": 2**4001, "m": [-(10**4299)], "o": {"p": _BigInt(10**4000)}}
    message = last_send(make_flow(params={"name": "x", "arguments": arguments}).start(0.0)).message
    assert message["params"]["arguments"] == arguments


def test_a_top_level_param_too_long_to_write_is_refused() -> None:
    with pytest.raises(LocalProtocolError, match=r"^params.n: not JSON: an integer too long"):
        make_flow(params={"name": "x", "n": 10**5000})


def _inside(levels: int, value: Any) -> Any:
    """``value`` inside ``levels`` nested lists (deeper than a copy plan follows)."""
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(("arguments", "message"), [
    ({"tags": {"a"}}, "params.arguments.tags: not JSON: a set"),
    ({"tags": frozenset()}, "params.arguments.tags: not JSON: a frozenset"),
    ({"raw": b"x"}, "params.arguments.raw: not JSON: a bytes"),
    ({"x": _Thing()}, "params.arguments.x: not JSON: a _Thing"),
    ({"x": 1j}, "params.arguments.x: not JSON: a complex"),
    ({"n": float("nan")}, r"params.arguments.n: not JSON: nan \(RFC 8259 §6"),
    ({"n": [1.5, float("inf")]}, r"params.arguments.n\[1\]: not JSON: inf \(RFC 8259"),
    ({"n": {"m": -float("inf")}}, r"params.arguments.n.m: not JSON: -inf \(RFC 8259"),
    ({"n": (1, float("nan"))}, r"params.arguments.n\[1\]: not JSON: nan"),
    ({"n": ({"s": {1}},)}, r"params.arguments.n\[0\].s: not JSON: a set"),
    ({"d": {1: "a"}}, r"params.arguments.d: not JSON: the key 1 \(int\) is not a string"),
    ({"d": {"a": 1, None: 2}}, r"params.arguments.d: not JSON: the key None \(NoneType\)"),
    ({"deep": [[[{"no way": {2.5}}]]]},
     r"params.arguments.deep\[0\]\[0\]\[0\]\['no way'\]: not JSON: a set"),
    ({"deep": _inside(40, [{"s"}])}, r"params.arguments.deep(\[0\]){40}\[0\]: not JSON: a set"),
    # More digits than int's str() writes (sys.get_int_max_str_digits(), 4300 by default):
    # no encoder could write the leg.
    ({"big": 10**5000}, r"params.arguments.big: not JSON: an integer too long to write"),
    ({"n": [1, -(10**4400)]}, r"params.arguments.n\[1\]: not JSON: an integer too long to write"),
    ({"n": {"m": [{"k": 10**4400}]}},
     r"params.arguments.n.m\[0\].k: not JSON: an integer too long to write"),
    ({"b": _BigInt(10**5000)}, r"params.arguments.b: not JSON: an integer too long to write"),
])
def test_params_that_are_not_json_are_refused_naming_where(
    arguments: dict[str, Any], message: str
) -> None:
    # No transport could send them (or it would send NaN, which is no JSON): refused where
    # they are given, as any other unusable argument is, and not at the first leg.
    with pytest.raises(LocalProtocolError, match=f"^{message}"):
        make_flow(params={"name": "x", "arguments": arguments})


def test_params_that_hold_themselves_are_refused_as_too_deep() -> None:
    params: dict[str, Any] = {"name": "x", "arguments": {"a": []}}
    params["arguments"]["a"].append(params)
    with pytest.raises(LocalProtocolError, match=r"^params: not JSON: nested too deeply to"
                                                 r" write as JSON, or circular$"):
        make_flow(params=params)


def test_a_place_deep_inside_is_named_by_its_two_ends() -> None:
    deep = _inside(1500, {"n": float("nan")})
    with pytest.raises(LocalProtocolError) as caught:
        make_flow(params={"name": "x", "arguments": {"deep": deep}})
    message = str(caught.value)
    assert message.startswith("params.arguments.deep[0][0]")
    assert message.endswith("[0][0].n: not JSON: nan (RFC 8259 §6 has no NaN or infinity)")
    assert len(message) < 300


@pytest.mark.parametrize(("params", "message"), [
    ({"name": "x", 1: 2}, r"params: not JSON: the key 1 \(int\) is not a string"),
    ({"name": "x", "n": float("nan")}, r"params.n: not JSON: nan"),
    ({"name": "x", "s": {"a"}}, "params.s: not JSON: a set"),
])
def test_top_level_params_that_are_not_json_are_refused(
    params: dict[Any, Any], message: str
) -> None:
    with pytest.raises(LocalProtocolError, match=f"^{message}"):
        make_flow(params=params)


@pytest.mark.parametrize(("extra", "message"), [
    ({"com.example/k": {"a": {1}}}, r"meta\['com.example/k'\].a: not JSON: a set"),
    ({"com.example/k": [float("nan")]}, r"meta\['com.example/k'\]\[0\]: not JSON: nan"),
])
def test_a_meta_that_is_not_json_is_refused(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(LocalProtocolError, match=f"^{message}"):
        make_flow(meta=attrs.evolve(META, extra=extra))


def test_a_saved_flow_whose_params_are_not_json_is_refused() -> None:
    data = make_flow().to_data(0.0)
    data["params"]["arguments"] = {"n": float("nan")}  # what json.loads reads from NaN
    with pytest.raises(LocalProtocolError, match=r"^saved flow: params.arguments.n: not JSON"):
        ClientFlow.from_data(data, now=0.0, next_id=Ids())


@pytest.mark.parametrize("arguments", [
    {"t": (1, "a", 2.5)},
    {"t": ({"a": (1, 2)}, [3, (4,)])},
    {"t": (), "m": [()]},
    {"t": _inside(40, (1,))},
])
def test_a_tuple_is_sent_as_the_list_json_reads_it_as(arguments: dict[str, Any]) -> None:
    # JSON has arrays only: every leg carries lists, as the text a transport writes reads
    # back, so a peer in memory sees what one over the wire would (a schema's "array").
    flow = make_flow(params={"name": "x", "arguments": arguments})
    sent = last_send(flow.start(0.0)).message["params"]["arguments"]
    assert sent == json.loads(json.dumps(arguments))
    assert "tuple" not in repr(sent)


def test_a_meta_too_deep_for_a_copy_plan_is_copied_for_every_leg() -> None:
    meta = attrs.evolve(META, extra={"deep": nested(600)})
    flow = make_flow(meta=meta)
    sent = last_send(flow.start(0.0)).message["params"]["_meta"]["deep"]
    assert isinstance(sent, list) and sent is not meta.extra["deep"]


def test_invoke_handler_requests_are_the_structured_models() -> None:
    flow = make_flow()
    commands = to_handlers(flow, {"a": form("Really?")})
    [invoke] = invokes(commands)
    assert isinstance(invoke, InvokeHandler)
    assert invoke.request.message == "Really?"  # type: ignore[union-attr]


@pytest.mark.parametrize("refused", [
    ok("not-the-id", done()),
    HandlerReturned(key="never-asked", answer={}),
])
def test_a_refused_input_leaves_the_flow_and_its_clock_as_they_were(refused: Any) -> None:
    # A refused input changes nothing: a later input at an earlier time than the refused
    # one's is still taken (the refusal used to move the flow's clock to 1000).
    flow = make_flow()
    request = last_send(flow.start(0.0)).message
    with pytest.raises(LocalProtocolError):
        flow.handle(refused, 1000.0)
    assert flow.state is FlowState.AWAITING_RESPONSE
    [complete] = flow.handle(ok(request["id"], done()), 1.0)
    assert isinstance(complete, Complete) and complete.rounds == 1
