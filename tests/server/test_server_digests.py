"""Question digests come from a memo only when they are exactly the digests computed.

- ``QuestionDigests.digest`` gives ``question_digest(unstructure_input_request(q))`` for any
  question, asked once or many times, before and after the memo holds it;
- asking the same question again is a hit; a question changed in any way (its message, a
  schema member changed in place, ``1`` for ``True`` or ``1.0``, ``maxTokens``, the system
  prompt, ``extra``) gets its own, computed digest;
- questions the memo does not keep (other kinds, ``extra`` members, ``str`` subclasses) are
  still digested right, and a question that is not JSON raises what it always raised;
- the memo is bounded, keeps the questions of many operations in flight, and keeps no large
  question;
- a handler that asks the same questions round after round gets them from the memo, and a
  question changed between rounds is asked again.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from server_helpers import T0, accept, make_engine, retry, tool_call

from mrtr_core.server import Completed, Context, HandlerSpec, NeedsInput, form, sample
from mrtr_core.server import context as context_module
from mrtr_core.server.digests import QuestionDigests, question_digest
from mrtr_core.wire.converter import unstructure_input_request
from mrtr_core.wire.models import (
    CreateMessageRequest,
    ElicitFormRequest,
    ElicitUrlRequest,
    InputRequest,
    ListRootsRequest,
)

SAME = settings(max_examples=300, deadline=None, derandomize=True, database=None)


def computed(question: InputRequest) -> str:
    return question_digest(unstructure_input_request(question))


def memoised(memo: QuestionDigests, question: InputRequest) -> str:
    digest, wire = memo.digest(question)
    if wire is not None:
        assert wire == unstructure_input_request(question)
    return digest


text = st.text(max_size=12)  # any code point: ASCII escapes, surrogates, control characters
scalars = st.none() | st.booleans() | st.integers() | st.floats() | text
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=12,
)
schemas = st.dictionaries(text, values, max_size=4)
messages = st.lists(st.dictionaries(text, values, max_size=3), max_size=3)
extras = st.dictionaries(text, values, max_size=2)


@st.composite
def questions(draw: st.DrawFn) -> InputRequest:
    kind = draw(st.sampled_from(["form", "sample", "url", "roots"]))
    extra = draw(st.just({}) | extras)
    if kind == "form":
        return ElicitFormRequest(message=draw(text), requested_schema=draw(schemas), extra=extra)
    if kind == "sample":
        return CreateMessageRequest(
            messages=draw(messages),
            max_tokens=draw(st.integers()),
            system_prompt=draw(st.none() | text),
            extra=extra,
        )
    if kind == "url":
        return ElicitUrlRequest(message=draw(text), url=draw(text), extra=extra)
    return ListRootsRequest(meta=draw(st.none() | extras))


@SAME
@given(st.lists(questions(), min_size=1, max_size=4))
def test_memoised_digest_equals_the_computed_one(asked: list[InputRequest]) -> None:
    memo = QuestionDigests()
    for _ in range(3):  # first sight, then from the memo
        for question in asked:
            assert memoised(memo, question) == computed(question)


def test_the_same_question_again_is_a_hit() -> None:
    memo = QuestionDigests()
    first = memoised(memo, form("op-1: deploy?", note=str, ok=bool))
    again = memoised(memo, form("op-1: deploy?", note=str, ok=bool))  # built anew
    assert again == first
    assert (memo.hits, memo.misses) == (1, 1)
    assert memoised(memo, sample("summarise", 64)) == memoised(memo, sample("summarise", 64))
    assert memo.hits == 2


def test_questions_that_share_their_scalars_are_remembered_side_by_side() -> None:
    memo = QuestionDigests()
    asked = [sample(f"op-{i}: summarise", 64) for i in range(20)]
    asked += [form("Sure?", ok=bool), form("Sure?", ok=str), form("Sure?", ok=bool, why=str)]
    for question in asked:
        assert memoised(memo, question) == computed(question)
    hits = memo.hits
    for question in reversed(asked):
        assert memoised(memo, question) == computed(question)
    assert memo.hits == hits + len(asked)


def _changed_forms() -> list[ElicitFormRequest]:
    def with_value(value: Any) -> ElicitFormRequest:
        return form("m", {"type": "object", "properties": {"n": {"type": "integer",
                                                                  "minimum": value}}})

    return [
        form("m", ok=bool),
        form("m2", ok=bool),
        form("m", ok=str),
        form("m", ok=bool, note=str),
        with_value(1),
        with_value(True),
        with_value(1.0),
        with_value(2),
        with_value("1"),
        with_value([1]),
        with_value((1,)),  # a tuple writes the same JSON as [1]
        ElicitFormRequest(message="m", requested_schema={"type": "object"}, extra={"x": 1}),
    ]


def test_a_changed_question_gets_its_own_computed_digest() -> None:
    memo = QuestionDigests()
    forms = _changed_forms()
    for _ in range(2):
        for question in forms:
            assert memoised(memo, question) == computed(question)
    digests = {computed(q) for q in forms}
    assert len(digests) == len(forms) - 1  # only [1] and (1,) are the same question
    samples = [sample("s", 64), sample("s", 65), sample("s", 64, system_prompt="p"),
               sample("t", 64), sample(["s", "t"], 64), sample("s", 64, temperature=0.5)]
    for _ in range(2):
        for question in samples:
            assert memoised(memo, question) == computed(question)
    assert len({computed(q) for q in samples}) == len(samples)


def test_a_schema_changed_in_place_is_digested_again() -> None:
    memo = QuestionDigests()
    question = form("m", ok=bool)
    before = memoised(memo, question)
    question.requested_schema["properties"]["ok"]["type"] = "string"
    after = memoised(memo, question)
    assert after != before
    assert after == computed(question)
    question.requested_schema["properties"]["ok"]["default"] = 1
    one = memoised(memo, question)
    question.requested_schema["properties"]["ok"]["default"] = True
    assert memoised(memo, question) == computed(question) != one


def test_values_the_memo_cannot_fingerprint_are_still_digested_right() -> None:
    class Text(str):
        pass

    memo = QuestionDigests()
    question = form("m", {"type": "object", "properties": {Text("a"): {"type": Text("x")}}})
    for _ in range(2):
        assert memoised(memo, question) == computed(question)
    assert len(memo) == 0
    deep: Any = "leaf"
    for _ in range(3000):  # too deep to marshal: digested the usual way
        deep = [deep]
    nested = ElicitFormRequest(message="m", requested_schema={"x": deep})
    # Whether the usual path can encode this deep a value depends on the interpreter's
    # recursion limits (3.11 and 3.12 cannot, 3.13 can): the memo must do exactly what it does.
    try:
        expected = computed(nested)
    except (RecursionError, ValueError) as usual:
        with pytest.raises(type(usual)):
            memo.digest(nested)
    else:
        assert memoised(memo, nested) == expected
    assert len(memo) == 0


def test_a_question_that_is_not_json_raises_as_before() -> None:
    memo = QuestionDigests()
    question = ElicitFormRequest(message="m", requested_schema={"choices": {1, 2}})
    with pytest.raises(TypeError) as usual:
        computed(question)
    with pytest.raises(TypeError) as memo_error:
        memo.digest(question)
    assert str(memo_error.value) == str(usual.value)
    with pytest.raises(TypeError):
        memo.digest(question)  # never remembered
    assert len(memo) == 0


def test_the_memo_is_bounded() -> None:
    memo = QuestionDigests(max_entries=8)
    for i in range(50):
        question = form(f"question {i}", ok=bool)
        assert memoised(memo, question) == computed(question)
    assert len(memo) == 8
    with pytest.raises(ValueError, match="at least 1"):
        QuestionDigests(max_entries=0)


def test_the_shared_memo_keeps_the_questions_of_a_thousand_operations_in_flight() -> None:
    """A question comes back in its operation's next round, after the rounds of every other
    operation in flight: a memo that forgot it by then would digest every round anew."""
    memo = QuestionDigests()
    asked = [
        question
        for op in range(1000)
        for question in (form(f"op-{op}: deploy?", note=str, ok=bool),
                         form(f"op-{op}: change ticket", ticket=str),
                         sample(f"op-{op}: summarise 3 steps", 64))
    ]
    for question in asked:
        memo.digest(question)
    hits = memo.hits
    for question in asked:
        assert memoised(memo, question) == computed(question)
    assert memo.hits == hits + len(asked)


def test_a_question_too_large_to_keep_is_digested_every_time() -> None:
    """The memo's keys stay small: a long message or system prompt, or a large schema or
    sampling conversation, is digested right, and never kept."""
    wide = {"type": "object", "properties": {f"field{i}": {"type": "string"} for i in range(60)}}
    memo = QuestionDigests()
    for question in (
        form("x" * 1100, ok=bool),
        form("wide", wide),
        sample("y" * 1100, 64),
        sample("s", 64, system_prompt="z" * 1100),
    ):
        for _ in range(2):
            assert memoised(memo, question) == computed(question)
    assert len(memo) == 0 and len(memo._parts) == 0 and memo.hits == 0


# --- in the engine ----------------------------------------------------------------------------


def test_rounds_take_repeated_questions_from_the_memo() -> None:
    context_module._DIGESTS.clear()
    engine = make_engine()

    def handler(ctx: Context) -> Any:
        first = ctx.ask("confirm", form("memo test: deploy?", ok=bool))
        got = ctx.ask_all({"ticket": form("memo test: ticket", ticket=str),
                           "summary": sample("memo test: summarise", 64)})
        return [first.content, got["ticket"].content, got["summary"].content]

    spec = HandlerSpec(handler=handler)

    def run(params: Any) -> Any:
        run = engine.begin(params, spec, now=T0)
        try:
            value = spec.invoke(run.context)
        except BaseException as exc:
            return run.finish(T0, raised=exc)
        return run.finish(T0, returned=value)

    hits = context_module._DIGESTS.hits
    params = tool_call("deploy", {})
    one = run(params)
    assert isinstance(one, NeedsInput) and one.keys == ("confirm",)
    two = run(retry(params, one, {"confirm": accept(ok=True)}))
    assert isinstance(two, NeedsInput) and two.keys == ("ticket", "summary")
    assert context_module._DIGESTS.hits == hits + 1  # confirm, asked again
    three = run(retry(params, two, {
        "ticket": accept(ticket="T-1"),
        "summary": {"role": "assistant", "content": {"type": "text", "text": "ok"},
                    "model": "m"},
    }))
    assert isinstance(three, Completed)
    assert three.value == [{"ok": True}, {"ticket": "T-1"}, {"type": "text", "text": "ok"}]
    assert context_module._DIGESTS.hits == hits + 4


def test_a_question_changed_between_rounds_is_asked_again() -> None:
    engine = make_engine()
    wording = ["memo test: sure?"]

    def handler(ctx: Context) -> Any:
        return ctx.ask("confirm", form(wording[0], ok=bool)).content

    spec = HandlerSpec(handler=handler)
    params = tool_call("deploy", {})
    run = engine.begin(params, spec, now=T0)
    try:
        spec.invoke(run.context)
    except BaseException as exc:
        first = run.finish(T0, raised=exc)
    assert isinstance(first, NeedsInput)
    wording[0] = "memo test: really sure?"
    run = engine.begin(retry(params, first, {"confirm": accept(ok=True)}), spec, now=T0)
    try:
        spec.invoke(run.context)
    except BaseException as exc:
        second = run.finish(T0, raised=exc)
    assert isinstance(second, NeedsInput) and second.keys == ("confirm",)
    assert second.result["inputRequests"]["confirm"]["params"]["message"] == wording[0]


# --- the part memo and eviction order ---------------------------------------------------------


def test_a_new_question_with_a_known_schema_reuses_the_schema_text() -> None:
    """Operations ask the same form with their own message: every one is a miss with its
    own, computed digest, while the schema's canonical text is written once."""
    memo = QuestionDigests()
    for i in range(20):
        question = form(f"op-{i}: deploy?", note=str, ok=bool)
        assert memoised(memo, question) == computed(question)
        prompt = sample(f"op-{i}: summarise", 64, system_prompt="be brief")
        assert memoised(memo, prompt) == computed(prompt)
    assert (memo.hits, memo.misses) == (0, 40)
    # The schema's text is kept once; sampling messages (which change) are not kept.
    assert len(memo._parts) == 1


@SAME
@given(st.lists(st.tuples(text, schemas), min_size=1, max_size=6))
def test_schema_text_from_the_part_memo_gives_the_computed_digest(
    asked: list[tuple[str, dict[str, Any]]],
) -> None:
    memo = QuestionDigests()
    for message, schema in asked:
        for suffix in ("", " again", " once more"):  # new questions, the same schema
            question = ElicitFormRequest(message=message + suffix, requested_schema=schema)
            assert memoised(memo, question) == computed(question)


def test_the_part_memo_is_bounded_and_cleared_with_the_memo() -> None:
    memo = QuestionDigests(max_entries=4)
    for i in range(30):
        question = form(f"question {i}", **{f"field{i}": bool})
        assert memoised(memo, question) == computed(question)
    assert len(memo) == 4 and len(memo._parts) == 4
    memo.clear()
    assert len(memo) == 0 and len(memo._parts) == 0


def test_the_memo_forgets_its_oldest_entries_first() -> None:
    memo = QuestionDigests(max_entries=3)
    for i in range(6):
        memo.digest(form(f"question {i}", ok=bool))
    hits = memo.hits
    for i in (3, 4, 5):  # the newest three are kept
        memo.digest(form(f"question {i}", ok=bool))
    assert memo.hits == hits + 3
    memo.digest(form("question 0", ok=bool))  # the oldest went
    assert memo.hits == hits + 3
