"""Question builders, answer readers, and the capability arithmetic behind -32021."""

from __future__ import annotations

from typing import Any

import pytest
from server_helpers import Runtime, accept, make_engine, retry, tool_call

from mrtr_core.server import (
    Completed,
    Context,
    NeedsInput,
    accepted,
    cancelled,
    content,
    declined,
    form,
    merge_capabilities,
    root_uris,
    roots,
    sample,
    text,
    url,
)
from mrtr_core.wire import (
    CreateMessageResult,
    ElicitResult,
    ListRootsResult,
    Root,
    unstructure_input_request,
)


def test_form_from_fields() -> None:
    request = form("Deploy?", confirm=bool, ticket=str, count=int, ratio=float, size=["S", "M"])
    assert request.requested_schema == {
        "type": "object",
        "properties": {
            "confirm": {"type": "boolean"},
            "ticket": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "size": {"type": "string", "enum": ["S", "M"]},
        },
        "required": ["confirm", "ticket", "count", "ratio", "size"],
    }
    note = form("Note?", note={"type": "string", "maxLength": 10})
    assert note.requested_schema["properties"]["note"] == {"type": "string", "maxLength": 10}


def test_form_from_schema_and_misuse() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert form("Q", schema).requested_schema == schema
    with pytest.raises(TypeError):
        form("Q", schema, a=str)
    with pytest.raises(ValueError):
        form("Q", {"type": "string"})
    with pytest.raises(TypeError):
        form("Q", a=dict)
    with pytest.raises(TypeError):
        form("Q", a=[])


def test_url_sample_roots_on_the_wire() -> None:
    assert unstructure_input_request(url("Connect", "https://example.com/c")) == {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": "Connect", "url": "https://example.com/c"},
    }
    wire = unstructure_input_request(
        sample(
            ["Hi", {"role": "assistant", "content": {"type": "text", "text": "Hello"}}],
            50,
            system_prompt="Be brief",
            temperature=0.2,
            tool_choice={"mode": "none"},
        )
    )
    assert wire == {
        "method": "sampling/createMessage",
        "params": {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Hi"}},
                {"role": "assistant", "content": {"type": "text", "text": "Hello"}},
            ],
            "maxTokens": 50,
            "systemPrompt": "Be brief",
            "temperature": 0.2,
            "toolChoice": {"mode": "none"},
        },
    }
    assert unstructure_input_request(roots()) == {"method": "roots/list"}


def test_answer_readers() -> None:
    yes = ElicitResult(action="accept", content={"ok": True})
    empty = ElicitResult(action="accept")
    no = ElicitResult(action="decline")
    gone = ElicitResult(action="cancel")
    assert accepted(yes) and not declined(yes) and not cancelled(yes)
    assert declined(no) and cancelled(gone)
    assert content(yes) == {"ok": True} and content(empty) == {} and content(no) is None
    reply = CreateMessageResult(
        role="assistant",
        content=[
            {"type": "text", "text": "a"},
            {"type": "image", "data": ""},
            {"type": "text", "text": "b"},
        ],
        model="m",
    )
    assert text(reply) == "ab" and not accepted(reply)
    assert root_uris(ListRootsResult(roots=[Root(uri="file:///a"), Root(uri="file:///b")])) == [
        "file:///a",
        "file:///b",
    ]


def test_merge_capabilities() -> None:
    merged = merge_capabilities(
        [
            {"elicitation": {}},
            {"elicitation": {"url": {}}},
            {"sampling": {"tools": {}}},
            {"sampling": {}},
        ]
    )
    assert merged == {"elicitation": {"url": {}}, "sampling": {"tools": {}}}


def test_asking_again_after_a_decline_takes_a_new_key(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        attempt = 0
        while True:
            answer = ctx.ask(f"confirm_{attempt}", form("Sure?", ok=bool))
            if accepted(answer):
                return attempt
            attempt += 1

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("again")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput) and r1.keys == ("confirm_0",)
    r2 = rt.call(engine, retry(first, r1, {"confirm_0": {"action": "decline"}}), spec)
    assert isinstance(r2, NeedsInput) and r2.keys == ("confirm_1",)
    r3 = rt.call(engine, retry(first, r2, {"confirm_1": accept(ok=True)}), spec)
    assert isinstance(r3, Completed) and r3.value == 1


@pytest.mark.parametrize("max_tokens", [0, -5, 1.5, 64.0, True, "64", None])
def test_sample_refuses_a_max_tokens_the_client_would_refuse(max_tokens: object) -> None:
    # A sampling request's maxTokens is a positive integer (digest §1.5 b, C12): clients
    # refuse any other, so the builder names it where the handler asks, not a round later.
    with pytest.raises(ValueError, match="max_tokens must be an integer >= 1"):
        sample("Summarise", max_tokens)  # type: ignore[arg-type]


@pytest.mark.parametrize("link", ["example.com/connect", "https://example.com/con nect", ""])
def test_url_refuses_a_url_that_is_no_uri(link: str) -> None:
    # elicitation.mdx § URL mode: the url MUST contain a valid URL (schema.json: format
    # "uri"); clients refuse the request, so the builder names it where the handler asks.
    with pytest.raises(ValueError, match="url must be a URI with a scheme"):
        url("Connect", link)


@pytest.mark.parametrize(
    ("build", "named"),
    [
        (lambda: form(5, ok=bool), "message"),
        (lambda: form(None, {"type": "object", "properties": {}}), "message"),
        (lambda: url(b"Connect", "https://example.com/c"), "message"),
        (lambda: url("Connect", 7), "url"),
        (lambda: url("Connect", None), "url"),
    ],
)
def test_form_and_url_refuse_a_message_or_url_that_is_not_a_string(
    build: Any, named: str
) -> None:
    # An elicitation's message (and a URL-mode url) is a string (digest §1.5 a): clients
    # refuse any other, so the builder names it where the handler asks, not a round later.
    with pytest.raises(TypeError, match=f"{named} must be a string"):
        build()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        # A mapping is iterable: its keys would be sent as user messages "role", "content".
        ({"messages": {"role": "user", "content": {"type": "text", "text": "Hi"}}},
         TypeError, "messages must be a string or a list of messages, not dict"),
        ({"messages": ["Hi", 5]}, TypeError, r"messages\[1\] must be a string or a mapping"),
        # A string is a sequence too: "\n\n" would stop on "\n" twice.
        ({"stop_sequences": "\n\n"}, TypeError, "stop_sequences must be a list of strings"),
        ({"stop_sequences": ["END", 3]}, TypeError, "stop_sequences must be a list of strings"),
        ({"tools": {"name": "t", "inputSchema": {"type": "object"}}}, TypeError,
         "tools must be a list of tool mappings, not dict"),
        ({"system_prompt": 5}, TypeError, "system_prompt must be a string or None, not int"),
        ({"temperature": "hot"}, TypeError, "temperature must be a number or None, not str"),
        ({"temperature": True}, TypeError, "temperature must be a number or None, not bool"),
        ({"include_context": "everything"}, ValueError,
         "include_context must be 'none', 'thisServer' or 'allServers'"),
        # ModelPreferences (schema.ts): each priority is a number from 0 to 1.
        ({"model_preferences": {"costPriority": 1.5}}, ValueError,
         "model_preferences costPriority must be a number from 0 to 1, got 1.5"),
        ({"model_preferences": {"hints": [], "speedPriority": "1"}}, ValueError,
         "model_preferences speedPriority must be a number from 0 to 1, got '1'"),
        ({"model_preferences": ["costPriority"]}, TypeError,
         "model_preferences must be a mapping or None, not list"),
        # schema.json: an image's or audio's data is base64 (format "byte").
        ({"messages": ["Hi", {"role": "user", "content": {
            "type": "image", "data": "aGk", "mimeType": "image/png"}}]}, ValueError,
         r"messages\[1\].content.data must be a base64 string"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}, {
            "type": "audio", "data": "a b=", "mimeType": "audio/wav"}]}]}, ValueError,
         r"messages\[0\].content\[1\].data must be a base64 string"),
    ],
)
def test_sample_refuses_arguments_it_would_send_wrong(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    # digest §1.5 b: messages is SamplingMessage[], systemPrompt a string, temperature a
    # number, stopSequences string[], tools Tool[], includeContext one of three values.
    # Each is named where the handler asks instead of going out changed or malformed.
    arguments: dict[str, Any] = {"messages": "Hi", "max_tokens": 50, **kwargs}
    with pytest.raises(error, match=message):
        sample(**arguments)
