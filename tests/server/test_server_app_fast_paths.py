"""The app's per-request shortcuts decide exactly what the general code decides.

- ``CallPlan.problem`` answers what ``inspect.signature(handler).bind(None, **arguments)``
  answers (``None`` or the same ``TypeError`` text), for every kind of signature;
- ``ToolDef.check_arguments`` keeps jsonschema's first error (sorted by path) as the message;
- ``jsontext`` gives ``json.JSONEncoder``'s text and errors (a ``ValueError`` where it would
  recurse too deep), and a binding's tag is the digest of its canonical identity;
- ``App.receive(parsed=...)`` answers like ``App.receive`` alone, and ``RunHandler.may_suspend``
  is ``False`` only for plain functions;
- ``Binding.for_params`` gives a remembered binding only for the very same method, target,
  principal and arguments (the same value of the same types), equal to a fresh one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from deep_values import too_deep
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_core import jsonrpc, jsontext
from mrtr_core.app import App, Reply, RunHandler, drive_sync
from mrtr_core.app.registry import CallPlan, ToolDef
from mrtr_core.server import Context
from mrtr_core.state import KeyRing, StateCodec
from mrtr_core.state.binding import (
    _BINDINGS,
    BINDING_KEY_MAX_SIZE,
    BINDINGS_MAX_ENTRIES,
    Binding,
    canonical_json,
    digest_arguments,
    forget_bindings,
)
from mrtr_core.wire import CallToolParams, GetPromptParams, RequestMeta

SAME = settings(max_examples=300, deadline=None, derandomize=True, database=None)


def h_plain(ctx: Any, a: str, b: int = 1) -> None: ...
def h_kwonly(ctx: Any, *, a: str, b: int = 1) -> None: ...
def h_kwargs(ctx: Any, a: str, **rest: Any) -> None: ...
def h_varargs(ctx: Any, *args: Any, a: str = "x") -> None: ...
def h_posonly(ctx: Any, a: str, /, b: int = 1) -> None: ...
def h_ctx_posonly(ctx: Any, /, a: str = "", **rest: Any) -> None: ...
def h_none(ctx: Any) -> None: ...
def h_no_params() -> None: ...
def h_only_kwargs(**rest: Any) -> None: ...
def h_star(*args: Any, **rest: Any) -> None: ...
def h_star_a(*args: Any, a: str) -> None: ...


class Callable_:
    def __call__(self, ctx: Any, a: str) -> None: ...


HANDLERS: list[Callable[..., Any]] = [
    h_plain, h_kwonly, h_kwargs, h_varargs, h_posonly, h_ctx_posonly, h_none, h_no_params,
    h_only_kwargs, h_star, h_star_a, Callable_(), functools.partial(h_plain, b=2),
]
KEYS = ["a", "b", "ctx", "rest", "args", "zz"]


def bind_problem(handler: Callable[..., Any], arguments: dict[Any, Any]) -> str | None:
    try:
        inspect.signature(handler).bind(None, **arguments)
    except TypeError as exc:
        return str(exc)
    return None


@SAME
@given(st.sampled_from(HANDLERS),
       st.dictionaries(st.sampled_from(KEYS), st.integers(), max_size=4))
def test_call_plan_answers_what_signature_bind_answers(
    handler: Callable[..., Any], arguments: dict[str, Any]
) -> None:
    assert CallPlan.of(handler).problem(arguments) == bind_problem(handler, arguments)


def test_call_plan_refuses_non_string_keys_like_bind() -> None:
    arguments: dict[Any, Any] = {1: "x", "a": "y"}
    assert CallPlan.of(h_kwargs).problem(arguments) == bind_problem(h_kwargs, arguments)
    assert CallPlan.of(h_kwargs).problem(arguments) is not None


def test_check_arguments_reports_jsonschemas_first_error_by_path() -> None:
    def tool(ctx: Context, version: str, count: int) -> str:
        return version

    definition = ToolDef.build(tool, name=None, description=None, input_schema=None,
                               single_use=False)
    assert definition.check_arguments({"version": "1", "count": 2}) is None
    assert definition.check_arguments({"version": 1, "count": "x"}) == (
        "'x' is not of type 'integer' (at count)"
    )
    assert definition.check_arguments({"version": "1"}) == "'count' is a required property"
    assert definition.check_arguments({"version": "1", "count": 1, "zz": 0}) == (
        "Additional properties are not allowed ('zz' was unexpected)"
    )


def test_check_arguments_falls_back_to_the_signature() -> None:
    def tool(ctx: Context, version: str) -> str:
        return version

    definition = ToolDef.build(tool, name=None, description=None,
                               input_schema={"type": "object"}, single_use=False)
    assert definition.check_arguments({"version": "1"}) is None
    assert definition.check_arguments({}) == "missing a required argument: 'version'"
    assert definition.check_arguments({"version": "1", "x": 1}) == (
        "got an unexpected keyword argument 'x'"
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3),
    max_leaves=12,
)


@SAME
@given(json_values)
def test_jsontext_matches_the_json_encoder(value: Any) -> None:
    canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    compact = json.JSONEncoder(separators=(",", ":"))
    assert jsontext.canonical(value) == canonical.encode(value)
    assert jsontext.compact(value) == compact.encode(value)
    strict = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    try:
        expected: Any = strict.encode(value)
    except ValueError as exc:
        expected = str(exc)
    try:
        got: Any = jsontext.reusable(strict)(value)
    except ValueError as exc:
        got = str(exc)
    assert got == expected


def test_jsontext_raises_like_the_json_encoder() -> None:
    circular: list[Any] = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular reference detected"):
        jsontext.canonical(circular)
    with pytest.raises(TypeError, match="Object of type object is not JSON serializable"):
        jsontext.compact({"a": object()})
    # Deeper than the interpreter recurses (a cycle the encoder does not look for is): a
    # ValueError, as for any other value JSON cannot write, not a RecursionError.
    loose = json.JSONEncoder(check_circular=False)
    with pytest.raises(ValueError, match=f"^{re.escape(jsontext.TOO_DEEP)}$"):
        jsontext.reusable(loose)(circular)
    for encode in (jsontext.canonical, jsontext.compact, jsontext.reusable(loose),
                   jsontext.reusable(json.JSONEncoder(indent=2))):
        with pytest.raises(ValueError, match=f"^{re.escape(jsontext.TOO_DEEP)}$"):
            encode({"deep": too_deep()})


def _app() -> App:
    codec = StateCodec(KeyRing({"k": b"k" * 32}, active="k"), audience="t",
                       nonce=lambda n: b"\x01" * n)
    app = App("t", "1", codec=codec)

    @app.tool()
    def plain(ctx: Context, name: str) -> str:
        return f"hi {name}"

    @app.tool()
    async def coroutine(ctx: Context) -> str:
        return "hi"

    return app


META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _call(name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "_meta": META}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def test_receive_with_the_transports_parse_answers_the_same() -> None:
    app = _app()
    for message in (_call("plain", {"name": "x"}), _call("plain", {"name": 1}),
                    _call("nope"), {"jsonrpc": "2.0", "method": "notifications/x"}):
        parsed = jsonrpc.parse_request(message)
        again = app.receive(message, now=0.0, parsed=parsed)
        alone = app.receive(message, now=0.0)
        assert type(again) is type(alone)
        if isinstance(again, Reply):
            assert again == alone


def test_receive_ignores_a_parse_of_another_message() -> None:
    app = _app()
    other = jsonrpc.parse_request(_call("plain", {"name": "x"}))
    step = app.receive({"jsonrpc": "2.0", "id": 2, "method": "nope", "params": {"_meta": META}},
                       now=0.0, parsed=other)
    assert isinstance(step, Reply)
    assert step.message is not None and step.message["error"]["code"] == -32601


def test_may_suspend_is_false_only_for_plain_functions() -> None:
    app = _app()
    plain = app.receive(_call("plain", {"name": "x"}), now=0.0)
    coroutine = app.receive(_call("coroutine"), now=0.0)
    assert isinstance(plain, RunHandler) and plain.may_suspend is False
    assert isinstance(coroutine, RunHandler) and coroutine.may_suspend is True
    reply = drive_sync(app, _call("plain", {"name": "x"}), now=0.0)
    assert reply.message is not None
    assert reply.message["result"]["content"][0]["text"] == "hi x"


@SAME
@given(st.lists(st.one_of(st.none(), st.text(max_size=6)), min_size=4, max_size=4))
def test_binding_tag_is_the_digest_of_the_canonical_identity(identity: list[str | None]) -> None:
    method, target, digest, principal = identity
    binding = Binding(method=method or "tools/call", target=target or "t",
                      arguments_digest=digest or "d", principal=principal)
    expected = [binding.method, binding.target, binding.arguments_digest, binding.principal]
    assert binding.tag == hashlib.sha256(canonical_json(expected).encode("ascii")).digest()[:16]


def _fresh_binding(params: Any, principal: str | None) -> Binding:
    arguments = getattr(params, "arguments", None)
    return Binding(method=params.method, target=params.target,
                   arguments_digest=digest_arguments(arguments), principal=principal)


BINDING_ARGUMENTS: list[Any] = [
    None, {}, {"n": 1}, {"n": 1.0}, {"n": True}, {"n": "1"}, {"n": [1]}, {"n": (1,)},
    {"n": 1, "m": 2}, {"m": 2, "n": 1}, {"n": {"deep": [None, 2.5]}}, {"n": -0.0}, {"n": 0.0},
]


def test_a_remembered_binding_is_the_binding_of_the_very_same_request() -> None:
    forget_bindings()
    for rounds in range(2):
        for arguments in BINDING_ARGUMENTS:
            for principal in (None, "alice", "bob"):
                for params in (
                    CallToolParams(name="t", meta=RequestMeta(), arguments=arguments),
                    CallToolParams(name="u", meta=RequestMeta(), arguments=arguments),
                ):
                    got = Binding.for_params(params, principal)
                    assert got == _fresh_binding(params, principal), (rounds, arguments)
    prompt = GetPromptParams(name="t", meta=RequestMeta(), arguments={"n": "1"})
    assert Binding.for_params(prompt).method == "prompts/get"
    assert Binding.for_params(prompt) == _fresh_binding(prompt, None)


def test_unusual_or_large_bindings_are_not_remembered_and_the_memo_is_bounded() -> None:
    forget_bindings()

    class Name(str):
        pass

    big = {"text": "x" * BINDING_KEY_MAX_SIZE}
    for arguments in ({"n": Name("1")}, big, {"n": {1, 2}}):
        params = CallToolParams(name="t", meta=RequestMeta(), arguments=arguments)
        with contextlib.suppress(TypeError):  # a set is no JSON: refused every time
            Binding.for_params(params, "alice")
    assert len(_BINDINGS) == 0
    Binding.for_params(CallToolParams(name="t", meta=RequestMeta(), arguments={}), Name("a"))
    assert len(_BINDINGS) == 0
    for index in range(BINDINGS_MAX_ENTRIES + 10):
        Binding.for_params(CallToolParams(name="t", meta=RequestMeta(), arguments={"i": index}))
    assert len(_BINDINGS) == BINDINGS_MAX_ENTRIES
    forget_bindings()
    assert len(_BINDINGS) == 0


# --- request _meta read once per distinct text --------------------------------------------------


def _meta_call(meta: Any, request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "plain", "arguments": {"name": "x"}, "_meta": meta}}


def _answer(app: App, message: dict[str, Any]) -> Any:
    reply = drive_sync(app, message, now=0.0)
    return reply.message, reply.status


META_VARIANTS: list[Any] = [
    META,
    {**META, "progressToken": 1},
    {**META, "progressToken": 1.0},
    {**META, "progressToken": True},
    {**META, "progressToken": "1"},
    {**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"},
    {**META, "io.modelcontextprotocol/protocolVersion": 20260728},
    {**META, "io.modelcontextprotocol/clientCapabilities": []},
    {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": 1}},
    {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
    {**META, "x-extension": {"a": [1, 2.5, None]}},
    {**META, "x-extension": {"a": [1, 2.5, False]}},
    [],
    None,
]


def test_a_remembered_meta_answers_what_reading_it_answers() -> None:
    """Every _meta, in any order after any other, answers what a fresh app answers."""
    shared = _app()
    for rounds in range(2):
        for index, meta in enumerate(META_VARIANTS):
            fresh = _answer(_app(), _meta_call(meta, index))
            assert _answer(shared, _meta_call(meta, index)) == fresh, (rounds, meta)


def test_only_accepted_meta_is_remembered_and_the_memo_is_bounded() -> None:
    app = _app()
    for meta in META_VARIANTS:
        _answer(app, _meta_call(meta))
    # Accepted: the plain one, progressToken 1 and "1", and both x-extension variants.
    assert len(app._metas) == 5
    for i in range(600):
        _answer(app, _meta_call({**META, "progressToken": f"token-{i}"}))
    assert len(app._metas) <= 256
