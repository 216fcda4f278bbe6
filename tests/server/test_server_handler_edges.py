"""Edges an app writer hits with resumable handlers, driven through the engine and the App.

- A handler that catches the stop ``ctx.ask`` raises (a bare ``except:``) goes on without
  the answer: a ``ctx.once`` step or a ``ctx.memo`` value after that point must not run on a
  made-up answer and be carried as done, and an explicit ``input_required`` it returns then
  is an error naming the unanswered key (sending either set alone would drop a question);
- a question built from something that changes every round (the clock) is never answered:
  the operation runs out of rounds, and that error names the key and says why;
- a key that is not a non-empty string is named in the error;
- what a decorator can check at registration it checks there: generator handlers, resource
  URIs that are not level-1 templates, resource handlers that cannot take the variables.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from deep_values import too_deep
from server_helpers import T0, Runtime, accept, make_codec, make_engine, meta, retry, tool_call

from mrtr_core import jsonrpc
from mrtr_core.app import App, Reply, drive_sync
from mrtr_core.errors import INTERNAL_ERROR, JsonRpcError
from mrtr_core.server import (
    Completed,
    Context,
    HandlerSpec,
    InputRequired,
    NeedsInput,
    ServerLimits,
    accepted,
    content,
    form,
    sample,
)
from mrtr_core.wire import InputRequiredResult

# --- a swallowed stop does not let once/memo run ------------------------------------------------


def test_once_does_not_run_after_a_swallowed_stop(rt: Runtime) -> None:
    deployed: list[int] = []

    def handler(ctx: Context) -> Any:
        try:
            ok = accepted(ctx.ask("confirm", form("Deploy?", ok=bool)))
        except:  # noqa: E722 - the mistake under test
            ok = False
        def deploy() -> str:
            deployed.append(ctx.round)
            return f"r{ctx.round}"

        return [ok, ctx.once("deploy", deploy)]

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("deploy")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput) and r1.keys == ("confirm",)
    assert deployed == []  # not before the confirmation
    r2 = rt.call(engine, retry(first, r1, {"confirm": accept(ok=True)}), spec)
    assert isinstance(r2, Completed) and r2.value == [True, "r2"]
    assert deployed == [2]


def test_memo_is_not_computed_from_a_made_up_answer(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        try:
            name = (content(ctx.ask("name", form("Name?", name=str))) or {})["name"]
        except BaseException:  # the mistake under test
            name = "nobody"
        return ctx.memo("greeting", lambda: f"Hello, {name}!")

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("greet")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput) and r1.keys == ("name",)
    r2 = rt.call(engine, retry(first, r1, {"name": accept(name="Ada")}), spec)
    assert isinstance(r2, Completed) and r2.value == "Hello, Ada!"


def test_once_and_memo_run_when_nothing_is_pending(rt: Runtime) -> None:
    runs: list[str] = []

    def handler(ctx: Context) -> Any:
        def compute() -> int:
            runs.append("memo")
            return 1

        def step() -> int:
            runs.append("once")
            return 2

        value, done = ctx.memo("m", compute), ctx.once("o", step)
        return [value, done, content(ctx.ask("k", form("Q?", ok=bool)))]

    spec = rt.spec(handler)
    engine = make_engine()
    first = tool_call("t")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput) and runs == ["memo", "once"]
    r2 = rt.call(engine, retry(first, r1, {"k": accept(ok=True)}), spec)
    assert isinstance(r2, Completed) and r2.value == [1, 2, {"ok": True}]
    assert runs == ["memo", "once"]  # carried, not run again


def test_async_once_and_memo_do_not_run_after_a_swallowed_stop() -> None:
    runs: list[str] = []
    app = App("t", "1", codec=make_codec())

    @app.tool()
    async def deploy(ctx: Context) -> Any:
        try:
            ok = accepted(ctx.ask("confirm", form("Deploy?", ok=bool)))
        except BaseException:  # the mistake under test
            ok = False

        async def plan() -> str:
            runs.append("amemo")
            return "plan"

        async def step() -> str:
            runs.append("aonce")
            return "done"

        return [ok, await ctx.amemo("plan", plan), await ctx.aonce("deploy", step)]

    reply = drive_sync(app, _call("deploy"), now=T0)
    assert _result(reply)["resultType"] == "input_required"
    assert runs == []
    answered = _call("deploy", {"confirm": accept(ok=True)}, _result(reply)["requestState"])
    assert _result(drive_sync(app, answered, now=T0))["structuredContent"] == [True, "plan", "done"]
    assert runs == ["amemo", "aonce"]


def _ask_swallowing_the_stop(ctx: Context) -> None:
    with contextlib.suppress(BaseException):  # the mistake under test
        ctx.ask("confirm", form("Deploy?", ok=bool))


@pytest.mark.parametrize("explicit", ["ctx.input_required", "InputRequiredResult"])
def test_an_explicit_round_after_a_swallowed_stop_is_an_error_naming_the_pending_key(
    rt: Runtime, explicit: str
) -> None:
    def handler(ctx: Context) -> Any:
        _ask_swallowing_the_stop(ctx)
        ticket = {"ticket": form("Ticket?", id=str)}
        if explicit == "ctx.input_required":
            return ctx.input_required(ticket)
        return InputRequiredResult(input_requests=ticket)

    with pytest.raises(JsonRpcError) as info:
        rt.call(make_engine(), tool_call("deploy"), rt.spec(handler))
    assert info.value.code == INTERNAL_ERROR
    assert info.value.data == {"reason": "mixed_input_modes", "pending": ["confirm"]}
    assert "'confirm' asked with ctx.ask had no answer" in info.value.message


def test_the_app_answers_a_mixed_round_with_an_internal_error_and_asks_nothing() -> None:
    app = App("t", "1", codec=make_codec())

    @app.tool()
    def deploy(ctx: Context) -> Any:
        _ask_swallowing_the_stop(ctx)
        return ctx.input_required({"ticket": form("Ticket?", id=str)})

    reply = drive_sync(app, _call("deploy"), now=T0)
    assert reply.message["error"]["code"] == INTERNAL_ERROR
    assert reply.message["error"]["data"]["pending"] == ["confirm"]
    assert "result" not in reply.message


# --- a question that changes every round -------------------------------------------------------


def test_running_out_of_rounds_names_a_question_that_changed_after_its_answer(
    rt: Runtime,
) -> None:
    clock = itertools.count()

    def handler(ctx: Context) -> Any:
        return content(ctx.ask("confirm", form(f"Confirm at {next(clock)}?", ok=bool)))

    spec = rt.spec(handler)
    engine = make_engine(limits=ServerLimits(max_rounds=2))
    first = tool_call("t")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput) and r1.keys == ("confirm",)
    r2 = rt.call(engine, retry(first, r1, {"confirm": accept(ok=True)}), spec)
    assert isinstance(r2, NeedsInput) and r2.keys == ("confirm",)  # asked again: it changed
    with pytest.raises(JsonRpcError) as info:
        rt.call(engine, retry(first, r2, {"confirm": accept(ok=True)}), spec)
    assert info.value.code == INTERNAL_ERROR
    assert info.value.data == {"limit": "max_rounds", "value": 2, "changed": ["confirm"]}
    assert "'confirm' changed after the client answered it" in info.value.message


def test_running_out_of_rounds_names_no_key_when_no_question_changed(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:  # explicit mode: asks the same question again
        return InputRequired({"again": form("Again?", ok=bool)})

    spec = rt.spec(handler)
    engine = make_engine(limits=ServerLimits(max_rounds=1))
    first = tool_call("t")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    with pytest.raises(JsonRpcError) as info:
        rt.call(engine, retry(first, r1, {"again": accept(ok=True)}), spec)
    assert info.value.data == {"limit": "max_rounds", "value": 1}
    assert "changed" not in info.value.message


# --- keys ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "shown"), [(1, "not 1 (int)"), ("", "not '' (str)"), (None, "not None (NoneType)")]
)
def test_a_bad_key_is_named(rt: Runtime, key: Any, shown: str) -> None:
    def asks(ctx: Context) -> Any:
        return ctx.ask(key, form("Q?", ok=bool))

    def explicit(ctx: Context) -> Any:
        return InputRequired({key: form("Q?", ok=bool)})

    for handler in (asks, explicit):
        with pytest.raises(ValueError, match="input request key must be a non-empty string, "
                           + shown.replace("(", r"\(").replace(")", r"\)")):
            rt.call(make_engine(), tool_call("t"), rt.spec(handler))


@pytest.mark.parametrize("method", ["memo", "once"])
def test_a_memo_or_once_name_that_is_not_a_string_is_refused_before_the_step_runs(
    rt: Runtime, method: str
) -> None:
    # The record travels as a JSON object member: a name 7 would read back as "7", never be
    # found again, and the step would run again on every round.
    ran: list[int] = []

    def handler(ctx: Context) -> Any:
        step = getattr(ctx, method)(7, lambda: ran.append(ctx.round) or "sent")
        ctx.ask("q", form("Q?", ok=bool))
        return step

    with pytest.raises(TypeError, match=r"name must be a string, not 7 \(int\)"):
        rt.call(make_engine(), tool_call("t"), rt.spec(handler))
    assert ran == []


def test_async_memo_and_once_refuse_a_name_that_is_not_a_string() -> None:
    async def value() -> str:
        return "v"

    async def handler(ctx: Context) -> Any:
        with pytest.raises(TypeError, match=r"not \('a',\) \(tuple\)"):
            await ctx.amemo(("a",), value)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"not None \(NoneType\)"):
            await ctx.aonce(None, value)  # type: ignore[arg-type]
        return "checked"

    outcome = Runtime("trio").call(make_engine(), tool_call("t"), HandlerSpec(handler=handler))
    assert isinstance(outcome, Completed) and outcome.value == "checked"


@pytest.mark.parametrize(
    ("question", "problem"),
    [
        (lambda: sample("Hi", 10, temperature=float("nan")), "Out of range float"),
        (lambda: sample("Hi", 10, metadata={"tags": {"a"}}), "Object of type set"),
        (lambda: sample("Hi", 10, model_preferences={"hints": [{"name": float("inf")}]}),
         "Out of range float"),
        (lambda: sample("Hi", 10, metadata={"deep": too_deep()}),
         "nested too deeply to write as JSON"),
        (lambda: sample([{"role": "user", "content": {**_TEXT, "_meta": {"d": too_deep()}}}],
                        10), "nested too deeply to write as JSON"),
        (lambda: form("Hi", {"type": "object", "properties": {}, "x-deep": too_deep()}),
         "nested too deeply to write as JSON"),
    ],
)
@pytest.mark.parametrize("mode", ["ask", "ask_all", "explicit"])
def test_a_question_that_is_not_json_is_never_sent_and_its_key_is_named(
    rt: Runtime, question: Any, problem: str, mode: str
) -> None:
    def handler(ctx: Context) -> Any:
        if mode == "ask":
            return ctx.ask("s", question())
        if mode == "ask_all":
            return ctx.ask_all({"s": question()})
        return ctx.input_required({"s": question()})

    with pytest.raises(JsonRpcError) as info:
        rt.call(make_engine(), tool_call("t"), rt.spec(handler))
    assert info.value.code == INTERNAL_ERROR
    assert info.value.data == {"key": "s", "reason": "invalid_question"}
    assert info.value.message.startswith("The question asked under 's' is not JSON: " + problem)


def test_the_app_answers_a_question_that_is_not_json_with_an_internal_error() -> None:
    app = App("t", "1", codec=make_codec())

    @app.tool()
    def t(ctx: Context) -> Any:
        return ctx.ask("s", sample("Hi", 10, temperature=float("nan")))

    reply = drive_sync(app, _call("t"), now=T0)
    assert reply.message is not None and reply.message["error"]["code"] == INTERNAL_ERROR
    assert reply.message["error"]["data"] == {"key": "s", "reason": "invalid_question"}
    jsonrpc.encode(reply.message)  # what the transport writes


@pytest.mark.parametrize("question", [{"method": "roots/list"}, None, "Deploy?"])
def test_asking_something_that_is_not_an_input_request_names_the_key_and_the_type(
    rt: Runtime, question: Any
) -> None:
    def handler(ctx: Context) -> Any:
        return ctx.ask("q", question)

    shown = type(question).__name__
    with pytest.raises(TypeError, match=f"the question under 'q' must be an input request "
                       rf"\(form, url, sample or roots\), not {shown}$"):
        rt.call(make_engine(), tool_call("t"), rt.spec(handler))


def test_ask_all_takes_a_mapping(rt: Runtime) -> None:
    def handler(ctx: Context) -> Any:
        return ctx.ask_all([("q", form("Q?", ok=bool))])  # type: ignore[arg-type]

    with pytest.raises(TypeError, match="ask_all takes a mapping of key to question, not list"):
        rt.call(make_engine(), tool_call("t"), rt.spec(handler))


@pytest.mark.parametrize("requests", [None, [("q", form("Q?", ok=bool))]])
def test_an_explicit_input_required_takes_a_mapping(rt: Runtime, requests: Any) -> None:
    def handler(ctx: Context) -> Any:
        return InputRequired(requests)

    with pytest.raises(TypeError, match="an explicit input_required takes a mapping of key "
                                        f"to question, not {type(requests).__name__}$"):
        rt.call(make_engine(), tool_call("t"), rt.spec(handler))


# --- results the handler built itself --------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "value"),
    [
        ("tools/call", {"content": [{"type": "text", "text": "x"}],
                        "structuredContent": float("nan")}),
        ("tools/call", {"content": [{"type": "text", "text": "x"}], "structuredContent": {1, 2}}),
        ("tools/call", {"content": [{"type": "text", "text": "x", "_meta": {"raw": b"raw"}}]}),
        ("prompts/get", [{"role": "user", "content": {"type": "text", "text": "x",
                                                      "_meta": {"a": {"a"}}}}]),
        ("prompts/get", {"messages": ["hi"], "_meta": {"n": float("inf")}}),
        ("resources/read", [{"uri": "x://r", "text": "t", "size": float("nan")}]),
        ("resources/read", {"contents": [{"uri": "x://r", "blob": "AAE=",
                                          "_meta": {"raw": {b"raw"}}}]}),
    ],
)
def test_a_result_the_handler_built_that_is_not_json_is_an_internal_error(
    method: str, value: Any
) -> None:
    # Passed through unread, it would reach the transport, which cannot write it (a stdio
    # worker would lose the reply): the app refuses it as the handler's mistake (-32603).
    app = App("t", "1", codec=make_codec())
    app.tool(name="t")(lambda ctx: value)
    app.prompt(name="t")(lambda ctx: value)
    app.resource("x://r")(lambda ctx, uri: value)
    target = {"uri": "x://r"} if method == "resources/read" else {"name": "t"}
    message = {"jsonrpc": "2.0", "id": 1, "method": method,
               "params": {**target, "_meta": meta()}}
    reply = drive_sync(app, message, now=T0)
    assert reply.message is not None and reply.message["error"]["code"] == INTERNAL_ERROR
    assert reply.message["error"]["message"].startswith(
        "handler returned an invalid result: the result is not JSON ("
    )
    jsonrpc.encode(reply.message)


def test_results_the_handler_built_that_are_json_pass_unchanged() -> None:
    app = App("t", "1", codec=make_codec())
    built = {"content": [{"type": "text", "text": "x"}], "structuredContent": {"n": 1.5}}
    app.tool(name="t")(lambda ctx: built)
    result = _result(drive_sync(app, _call("t"), now=T0))
    assert result["structuredContent"] == {"n": 1.5}
    assert result["content"] == built["content"]


def _built_app(value: Any, **kwargs: Any) -> App:
    """An app whose tool ``t``, prompt ``t`` and resource ``x://r`` all return ``value``."""
    app = App("t", "1", codec=make_codec(), **kwargs)
    app.tool(name="t")(lambda ctx: value)
    app.prompt(name="t")(lambda ctx: value)
    app.resource("x://r")(lambda ctx, uri: value)
    return app


def _invalid(app: App, method: str) -> str:
    """The message of the -32603 ``method`` gets from ``app`` (which must be one)."""
    target = {"uri": "x://r"} if method == "resources/read" else {"name": "t"}
    message = {"jsonrpc": "2.0", "id": 1, "method": method,
               "params": {**target, "_meta": meta()}}
    reply = drive_sync(app, message, now=T0)
    assert reply.message is not None and "error" in reply.message, reply.message
    assert reply.message["error"]["code"] == INTERNAL_ERROR
    jsonrpc.encode(reply.message)
    text: str = reply.message["error"]["message"]
    return text


_BAD_BLOCKS = [
    ({"type": "text"}, "(text) needs a string 'text'"),
    ({"type": "text", "text": None}, "(text) needs a string 'text'"),
    ({"type": "image", "data": "AAE="}, "(image) needs a string 'mimeType'"),
    ({"type": "image", "data": ["AAE="], "mimeType": "image/png"},
     "(image) needs a string 'data'"),
    ({"type": "audio", "mimeType": "audio/wav"}, "(audio) needs a string 'data'"),
    ({"type": "resource_link", "uri": "x://r"}, "(resource_link) needs a string 'name'"),
    ({"type": "resource_link", "uri": 5, "name": "r"}, "(resource_link) needs a string 'uri'"),
    ({"type": "resource"}, "(resource) needs a resource with a string uri"),
    ({"type": "resource", "resource": {"uri": "x://r"}},
     "(resource) needs a resource with a string uri"),
    ({"type": "resource", "resource": {"uri": "x://r", "text": 5}},
     "(resource) needs a resource with a string uri"),
    # schema.json: ImageContent.data, AudioContent.data, BlobResourceContents.blob are
    # base64 (format "byte"): a client checking the format refuses the result.
    ({"type": "image", "data": "AAE", "mimeType": "image/png"},
     "(image) data must be a base64 string (RFC 4648 §4)"),
    ({"type": "audio", "data": "AA E=", "mimeType": "audio/wav"},
     "(audio) data must be a base64 string (RFC 4648 §4)"),
    ({"type": "resource", "resource": {"uri": "x://r", "blob": "AAE=\n"}},
     "(resource) resource.blob must be a base64 string (RFC 4648 §4)"),
    # schema.json: ResourceLink.uri and ResourceContents.uri have format "uri".
    ({"type": "resource_link", "uri": "r", "name": "r"},
     "(resource_link) uri must be a URI with a scheme"),
    ({"type": "resource", "resource": {"uri": "x://a b", "text": "t"}},
     "(resource) resource.uri must be a URI with a scheme"),
    ({"type": "video", "data": "AAE="}, "has type 'video'"),
    ({"type": ["text"], "text": "x"}, "has type ['text']"),
    ({"type": too_deep(), "text": "x"}, "has type [[[[[[[...]]]]]]]"),  # shown cut short
    ("hello", "must be a content block (an object), not str"),
]


@pytest.mark.parametrize(("block", "problem"), _BAD_BLOCKS)
def test_a_tool_content_block_without_its_members_is_an_internal_error(
    block: Any, problem: str
) -> None:
    # ContentBlock (digest §1.3): each of the five block types has string members it
    # requires, and the union is closed: a client checking the schema refuses the result.
    app = _built_app({"content": [{"type": "text", "text": "ok"}, block]})
    assert _invalid(app, "tools/call").startswith(
        f"handler returned an invalid result: content[1] {problem}")


@pytest.mark.parametrize(("block", "problem"), _BAD_BLOCKS)
def test_a_prompt_message_block_without_its_members_is_an_internal_error(
    block: Any, problem: str
) -> None:
    # PromptMessage.content is one ContentBlock (digest §1.3).
    app = _built_app(["ok", {"role": "assistant", "content": block}])
    if not isinstance(block, dict):  # not even an object: the message itself is refused
        problem = "each message needs role 'user'|'assistant' and one content block"
        assert _invalid(app, "prompts/get") == f"handler returned an invalid result: {problem}"
        return
    assert _invalid(app, "prompts/get").startswith(
        f"handler returned an invalid result: messages[1].content {problem}")


_TEXT: Any = {"type": "text", "text": "x"}
_LINK: Any = {"type": "resource_link", "uri": "x://r", "name": "r"}
_EMBED: Any = {"type": "resource", "resource": {"uri": "x://r", "text": "t"}}
_AUDIENCE = "annotations.audience must be a list of 'user' and 'assistant'"
_PRIORITY = "annotations.priority must be a number from 0 to 1"
_SIZES = "icons[0].sizes must be a list of sizes, each WxH (48x48) or 'any'"
_MODIFIED = ("annotations.lastModified must be an RFC 3339 date-time with an offset "
             "(e.g. 2025-01-12T15:00:58Z)")
_BAD_OPTIONAL_MEMBERS = [
    ({**_TEXT, "annotations": "high"}, "annotations must be an object"),
    ({**_TEXT, "annotations": None}, "annotations must be an object"),
    ({**_TEXT, "annotations": {"audience": "user"}}, _AUDIENCE),
    ({**_TEXT, "annotations": {"audience": ["user", "system"]}}, _AUDIENCE),
    ({**_TEXT, "annotations": {"audience": [["user"]]}}, _AUDIENCE),
    ({**_TEXT, "annotations": {"priority": 2}}, _PRIORITY),
    ({**_TEXT, "annotations": {"priority": -0.5}}, _PRIORITY),
    ({**_TEXT, "annotations": {"priority": "1"}}, _PRIORITY),
    ({**_TEXT, "annotations": {"priority": True}}, _PRIORITY),
    ({**_TEXT, "annotations": {"lastModified": 20250112}}, _MODIFIED),
    # Annotations.lastModified is ISO 8601 (schema.ts); official clients take RFC 3339's
    # date-time with an offset only, so that is all a server built on mrtr sends.
    ({**_TEXT, "annotations": {"lastModified": "yesterday"}}, _MODIFIED),
    ({**_TEXT, "annotations": {"lastModified": "2025-01-12"}}, _MODIFIED),
    ({**_TEXT, "annotations": {"lastModified": "2025-01-12T15:00:58"}}, _MODIFIED),
    ({**_TEXT, "annotations": {"lastModified": "2025-01-12T15:00Z"}}, _MODIFIED),
    ({**_TEXT, "annotations": {"lastModified": "2025-13-12T15:00:58Z"}}, _MODIFIED),
    ({**_TEXT, "_meta": 5}, "_meta must be an object"),
    ({"type": "image", "data": "AAE=", "mimeType": "image/png", "_meta": ["k"]},
     "_meta must be an object"),
    ({"type": "image", "data": "AAE=", "mimeType": "image/png",
      "annotations": {"priority": 1.5}}, _PRIORITY),
    ({"type": "audio", "data": "AAE=", "mimeType": "audio/wav",
      "annotations": {"audience": ["Assistant"]}}, _AUDIENCE),
    ({**_LINK, "title": 5}, "title must be a string"),
    ({**_LINK, "description": None}, "description must be a string"),
    ({**_LINK, "mimeType": ["text/plain"]}, "mimeType must be a string"),
    ({**_LINK, "size": "12"}, "size must be an integer"),
    ({**_LINK, "size": 1.5}, "size must be an integer"),
    ({**_LINK, "size": True}, "size must be an integer"),
    ({**_LINK, "_meta": "m"}, "_meta must be an object"),
    ({**_LINK, "annotations": {"lastModified": None}}, _MODIFIED),
    ({**_LINK, "icons": "x.png"}, "icons must be a list of icons"),
    ({**_LINK, "icons": {"src": "https://x.example/x.png"}}, "icons must be a list of icons"),
    ({**_LINK, "icons": ["x.png"]}, "icons[0] must be an icon (an object) with a string 'src'"),
    ({**_LINK, "icons": [{"mimeType": "image/png"}]},
     "icons[0] must be an icon (an object) with a string 'src'"),
    ({**_LINK, "icons": [{"src": "https://x.example/a.png"}, {"src": 5}]},
     "icons[1] must be an icon (an object) with a string 'src'"),
    ({**_LINK, "icons": [{"src": "https://x.example/a.png", "mimeType": 5}]},
     "icons[0].mimeType must be a string"),
    ({**_LINK, "icons": [{"src": "https://x.example/a.png", "sizes": "48x48"}]}, _SIZES),
    ({**_LINK, "icons": [{"src": "https://x.example/a.png", "sizes": [48]}]}, _SIZES),
    # Icon.src has format "uri" (schema.json), each of Icon.sizes is WxH or "any".
    ({**_LINK, "icons": [{"src": "/static/a.png"}]},
     "icons[0].src must be a URI with a scheme (RFC 3986 §3.1) and no whitespace or control"
     " character"),
    ({**_LINK, "icons": [{"src": "https://x.example/a.png", "sizes": ["48 x 48"]}]}, _SIZES),
    ({**_LINK, "icons": [{"src": "https://x.example/a.png", "theme": "blue"}]},
     "icons[0].theme must be 'light' or 'dark'"),
    ({**_EMBED, "annotations": {"priority": None}}, _PRIORITY),
    ({**_EMBED, "_meta": None}, "_meta must be an object"),
    ({"type": "resource", "resource": {"uri": "x://r", "blob": "AAE=", "_meta": 5}},
     "resource._meta must be an object"),
]


@pytest.mark.parametrize(("block", "problem"), _BAD_OPTIONAL_MEMBERS)
def test_a_content_block_with_a_wrongly_typed_optional_member_is_an_internal_error(
    block: Any, problem: str
) -> None:
    # ContentBlock (digest §1.3; schema.ts): each optional member has a type too, and a
    # client checking the schema refuses the whole result when one is wrong, in a tool's
    # content as in a prompt message.
    tool = _built_app({"content": [{"type": "text", "text": "ok"}, block]})
    prompt = _built_app(["ok", {"role": "assistant", "content": block}])
    assert (_invalid(tool, "tools/call"), _invalid(prompt, "prompts/get")) == (
        f"handler returned an invalid result: content[1].{problem}",
        f"handler returned an invalid result: messages[1].content.{problem}",
    )


@pytest.mark.parametrize("value", [
    [{"uri": "x://r", "text": "t"}, {"uri": "x://r", "blob": "AAE=", "_meta": 5}],
    {"contents": [{"uri": "x://r", "text": "t"}, {"uri": "x://r", "text": "", "_meta": None}]},
])
def test_a_read_contents_item_with_a_meta_that_is_not_an_object_is_an_internal_error(
    value: Any
) -> None:
    # TextResourceContents/BlobResourceContents._meta is an object (schema.ts).
    assert _invalid(_built_app(value), "resources/read") == (
        "handler returned an invalid result: contents[1]._meta must be an object")


_BASE64_ITEM = "blob must be a base64 string (RFC 4648 §4)"
_URI_ITEM = "uri must be a URI with a scheme (RFC 3986 §3.1) and no whitespace or control character"


@pytest.mark.parametrize(("value", "problem"), [
    ([{"uri": "x://r", "text": "t"}, {"uri": "x://r", "blob": "AAE"}], _BASE64_ITEM),
    ({"contents": [{"uri": "x://r", "blob": "AAE="}, {"uri": "x://r", "blob": "A-E="}]},
     _BASE64_ITEM),
    ([{"uri": "x://r", "text": "t"}, {"uri": "r", "text": "t"}], _URI_ITEM),
    ({"contents": [{"uri": "x://r", "text": "t"}, {"uri": "x://\nr", "blob": "AAE="}]},
     _URI_ITEM),
])
def test_a_read_contents_item_out_of_its_format_is_an_internal_error(
    value: Any, problem: str
) -> None:
    # ResourceContents.uri has format "uri", BlobResourceContents.blob format "byte"
    # (schema.json); bytes a handler returns are encoded by the app, a string it builds
    # itself is checked.
    assert _invalid(_built_app(value), "resources/read") == (
        f"handler returned an invalid result: contents[1].{problem}")


@pytest.mark.parametrize(("value", "problem"), [
    ({"messages": ["hi"], "description": 5}, "description must be a string"),
    ({"messages": ["hi"], "description": None}, "description must be a string"),
    ({"messages": ["hi"], "description": ["d"]}, "description must be a string"),
    ([{"role": "system", "content": {"type": "text", "text": "x"}}],
     "each message needs role 'user'|'assistant' and one content block"),
    ([{"role": None, "content": {"type": "text", "text": "x"}}],
     "each message needs role 'user'|'assistant' and one content block"),
])
def test_a_prompt_result_with_a_bad_description_or_role_is_an_internal_error(
    value: Any, problem: str
) -> None:
    # GetPromptResult (digest §1.3): description is an optional string, and a message's
    # role is "user" or "assistant".
    assert _invalid(_built_app(value), "prompts/get") == (
        f"handler returned an invalid result: {problem}")


@pytest.mark.parametrize("server_info", [True, False])
@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "resources/read"])
@pytest.mark.parametrize("bad", [None, 5, "m", ["k"]])
def test_a_result_meta_that_is_not_an_object_is_an_internal_error(
    method: str, server_info: bool, bad: Any
) -> None:
    # Result._meta is an object (digest §1.1, §1.7): neither sent as it is (a client
    # checking the schema refuses it) nor silently replaced by the server's own _meta.
    body = {"tools/call": {"content": []}, "prompts/get": {"messages": ["hi"]},
            "resources/read": {"contents": [{"uri": "x://r", "text": "t"}]}}[method]
    app = _built_app({**body, "_meta": bad}, server_info=server_info)
    assert _invalid(app, method) == "handler returned an invalid result: _meta must be an object"


def test_a_result_meta_object_is_kept_with_the_server_info_added() -> None:
    app = _built_app({"content": [], "_meta": {"com.example/k": 1}})
    assert _result(drive_sync(app, _call("t"), now=T0))["_meta"] == {
        "com.example/k": 1, "io.modelcontextprotocol/serverInfo": {"name": "t", "version": "1"}}


_GOOD_BLOCKS = [
    {"type": "text", "text": "", "annotations": {"priority": 1}},
    {"type": "image", "data": "AAE=", "mimeType": "image/png"},
    {"type": "audio", "data": "AAE=", "mimeType": "audio/wav", "_meta": {"k": 1}},
    {"type": "resource_link", "uri": "x://r", "name": "r", "mimeType": "text/plain"},
    {"type": "resource", "resource": {"uri": "x://r", "text": "t"}},
    {"type": "resource", "resource": {"uri": "x://r", "blob": "AAE=", "mimeType": "a/b"}},
    {"type": "text", "text": "x", "_meta": {},
     "annotations": {"audience": ["user", "assistant"], "priority": 0,
                     "lastModified": "2025-01-12T15:00:58Z"}},
    {"type": "image", "data": "AAE=", "mimeType": "image/png",
     "annotations": {"audience": [], "priority": 0.5}},
    {"type": "resource_link", "uri": "x://r", "name": "r", "title": "R", "description": "d",
     "size": 0, "_meta": {"k": 1}, "annotations": {},
     "icons": [{"src": "https://example.com/a.png"},
               {"src": "data:image/png;base64,AAE=", "mimeType": "image/png",
                "sizes": ["48x48", "any"], "theme": "dark"}]},
    {"type": "resource", "annotations": {"priority": 1.0}, "_meta": {},
     "resource": {"uri": "x://r", "text": "t", "_meta": {"k": [1]}}},
]


def test_every_kind_of_content_block_with_its_members_passes_unchanged() -> None:
    app = _built_app({"content": _GOOD_BLOCKS})
    assert _result(drive_sync(app, _call("t"), now=T0))["content"] == _GOOD_BLOCKS
    messages = [{"role": "user", "content": block} for block in _GOOD_BLOCKS]
    app = _built_app(messages)
    request = {"jsonrpc": "2.0", "id": 1, "method": "prompts/get",
               "params": {"name": "t", "_meta": meta()}}
    assert _result(drive_sync(app, request, now=T0))["messages"] == messages


@pytest.mark.parametrize(
    ("method", "value"),
    [
        ("tools/call", too_deep()),  # the value itself is the structuredContent
        ("tools/call", {"content": [], "structuredContent": {"deep": too_deep()}}),
        ("tools/call", {"content": [{**_TEXT, "_meta": {"deep": too_deep()}}]}),
        ("tools/call", {"content": [], "_meta": {"deep": too_deep()}}),
        ("prompts/get", {"messages": ["hi"], "_meta": {"deep": too_deep()}}),
        ("prompts/get", [{"role": "user", "content": {**_TEXT, "_meta": {"d": too_deep()}}}]),
        ("resources/read", [{"uri": "x://r", "text": "t", "_meta": {"deep": too_deep()}}]),
    ],
)
def test_a_result_nested_too_deeply_to_write_is_an_internal_error_and_serving_goes_on(
    method: str, value: Any
) -> None:
    # Deeper than the encoder recurses: no transport could write it. The handler's mistake
    # (-32603), answered like any other result that is not JSON, and the app serves on.
    app = _built_app(value)
    app.tool(name="fine")(lambda ctx: "fine")
    assert _invalid(app, method).startswith("handler returned an invalid result: ")
    assert "nested too deeply to write as JSON" in _invalid(app, method)
    fine = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "fine", "_meta": meta()}}
    assert _result(drive_sync(app, fine, now=T0))["content"] == [_TEXT | {"text": "fine"}]


@pytest.mark.parametrize(("hints", "problem"), [
    ({"ttlMs": too_deep()}, "ttlMs must be an integer of at least 0, not [[[[[[[...]]]]]]]"),
    ({"cacheScope": {"scope": too_deep()}},
     "cacheScope must be 'public' or 'private', not {'scope': [[[[[[...]]]]]]}"),
])
def test_a_bad_value_the_handler_returned_is_shown_cut_short(
    hints: dict[str, Any], problem: str
) -> None:
    # Shown whole, a value nested too deeply to show would fail the reply itself.
    app = _built_app({"contents": [{"uri": "x://r", "text": "t"}], **hints})
    assert _invalid(app, "resources/read") == f"handler returned an invalid result: {problem}"


def test_a_tool_error_whose_text_cannot_be_shown_is_named_by_its_type() -> None:
    app = App("t", "1", codec=make_codec())

    @app.tool()
    def t(ctx: Context) -> Any:
        raise LookupError(too_deep())  # str() of it recurses too deep

    result = _result(drive_sync(app, _call("t"), now=T0))
    assert (result["isError"], result["content"]) == (True, [_TEXT | {"text": "LookupError"}])


# --- registration --------------------------------------------------------------------------------


def _gen(ctx: Context) -> Iterator[str]:
    yield "never read"


async def _agen(ctx: Context) -> AsyncIterator[str]:
    yield "never read"


def _gen_resource(ctx: Context, uri: str) -> Iterator[str]:
    yield "never read"


@pytest.mark.parametrize("handler", [_gen, _agen])
def test_generator_tools_and_prompts_are_refused_at_registration(handler: Any) -> None:
    app = App("t", "1", codec=make_codec())
    with pytest.raises(TypeError, match="is a generator function"):
        app.tool(name="g")(handler)
    with pytest.raises(TypeError, match="is a generator function"):
        app.prompt(name="g")(handler)
    assert app.tools == () and app.prompts == ()


def test_generator_resources_are_refused_at_registration() -> None:
    app = App("t", "1", codec=make_codec())
    with pytest.raises(TypeError, match="is a generator function"):
        app.resource("x://fixed")(_gen_resource)
    assert app.capabilities() == {}


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("x://{+path}", "only {name} template variables"),
        ("x://a{?q}", "only {name} template variables"),
        ("x://{1x}", "only {name} template variables"),
        ("x://{open", "only {name} template variables"),
        ("x://close}", "only {name} template variables"),
        ("x://{a}/{a}", "names a more than once"),
        ("", "must be a non-empty string"),
        # Resource.uri has format "uri" (schema.json): a read of it would be refused.
        ("fixed", "is not a URI with a scheme"),
        ("x://a b", "is not a URI with a scheme"),
        # ResourceTemplate.uriTemplate has format "uri-template" (schema.json), and each
        # URI it expands to is a resource's uri: one with a scheme, written out.
        ("items/{item}", "does not expand to a URI with a scheme"),
        ("{scheme}://items/{item}", "does not expand to a URI with a scheme"),
        ("x{s}://items", "does not expand to a URI with a scheme"),
        ("x://items/{item} detail", "does not expand to a URI with a scheme"),
    ],
)
def test_resource_uris_that_no_read_can_name_are_refused(uri: str, problem: str) -> None:
    app = App("t", "1", codec=make_codec())
    with pytest.raises(ValueError, match=problem.replace("{", r"\{").replace("}", r"\}")):
        app.resource(uri)(lambda ctx, uri, **variables: "t")
    assert app.capabilities() == {}


@pytest.mark.parametrize(
    ("uri", "handler", "wanted"),
    [
        ("x://fixed", lambda: "t", "(ctx, uri)"),
        ("x://fixed", lambda ctx: "t", "(ctx, uri)"),
        ("x://{name}", lambda ctx, uri: "t", "(ctx, uri, name)"),
        ("x://{name}/{ver}", lambda ctx, uri, name: "t", "(ctx, uri, name, ver)"),
        ("x://{uri}", lambda ctx, uri, **variables: "t", "(ctx, uri, uri)"),
    ],
)
def test_resource_handlers_that_cannot_take_the_read_are_refused(
    uri: str, handler: Any, wanted: str
) -> None:
    app = App("t", "1", codec=make_codec())
    with pytest.raises(TypeError, match=f"for {uri!r} must take " + wanted.replace("(", r"\(")
                       .replace(")", r"\)")):
        app.resource(uri)(handler)


def test_resource_handlers_that_take_the_read_are_accepted() -> None:
    app = App("t", "1", codec=make_codec())
    app.resource("x://fixed")(lambda ctx, uri: "fixed")
    app.resource("x://{name}/{ver}")(lambda ctx, uri, name, ver: f"{name}@{ver}")
    app.resource("y://{name}")(lambda ctx, uri, **variables: variables["name"])
    app.resource("z://{name}")(lambda ctx, address, name="": name)
    for uri, text in [("x://fixed", "fixed"), ("x://n/1", "n@1"), ("y://q", "q"), ("z://w", "w")]:
        message = {"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                   "params": {"uri": uri, "_meta": meta()}}
        assert _result(drive_sync(app, message, now=T0))["contents"][0]["text"] == text


# --- helpers -------------------------------------------------------------------------------------


def _call(name: str, responses: Any = None, state: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "_meta": meta()}
    if responses is not None:
        params["inputResponses"] = responses
    if state is not None:
        params["requestState"] = state
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def _result(reply: Reply) -> dict[str, Any]:
    assert reply.message is not None and "result" in reply.message, reply.message
    out: dict[str, Any] = reply.message["result"]
    return out
