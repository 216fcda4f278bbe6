"""Answers without a person (answers file, --yes, demo filler) and the input dispatcher."""

from __future__ import annotations

import io
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from mrtr_cli.answers import AnswersFileError, auto_content, load_answers, scripted_result
from mrtr_cli.inputs import Inputs, InputUnavailableError, SamplingConfig, roots_from_paths
from rich.console import Console

from mrtr_core.wire.forms import FormAnswerError, FormSpec
from mrtr_core.wire.models import (
    CreateMessageRequest,
    ElicitFormRequest,
    ElicitUrlRequest,
    ListRootsRequest,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean"},
        "ticket": {"type": "string", "minLength": 3},
        "env": {"type": "string", "enum": ["staging", "prod"]},
        "note": {"type": "string"},
        "level": {"type": "integer", "minimum": 2, "default": 4},
    },
    "required": ["confirm", "ticket", "env"],
}
SPEC = FormSpec.from_schema(SCHEMA)


def quiet() -> Console:
    return Console(file=io.StringIO(), width=120, color_system=None)


def text_of(console: Console) -> str:
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


# --- answers file --------------------------------------------------------------------------


def test_answers_entry_as_content_is_accepted_after_validation() -> None:
    result = scripted_result(SPEC, {"confirm": True, "ticket": "CHG-1", "env": "prod"})
    assert result.action == "accept"
    assert result.content == {"confirm": True, "ticket": "CHG-1", "env": "prod"}


def test_answers_entry_as_elicit_result() -> None:
    assert scripted_result(SPEC, {"action": "decline"}).action == "decline"
    result = scripted_result(SPEC, {"action": "accept", "content": {
        "confirm": False, "ticket": "abc", "env": "staging"}})
    assert result.content == {"confirm": False, "ticket": "abc", "env": "staging"}


def test_answers_accept_without_content_is_an_empty_form() -> None:
    # ElicitResult.content is optional (digest §1.6): an accept without it submits no field,
    # which a form of optional fields takes and a form with required ones refuses by name.
    optional = FormSpec.from_schema({"type": "object", "properties": {"note": {"type": "string"}}})
    result = scripted_result(optional, {"action": "accept"})
    assert (result.action, result.content) == ("accept", {})
    with pytest.raises(FormAnswerError) as info:
        scripted_result(SPEC, {"action": "accept"})
    assert "'ticket' is a required property" in "\n".join(info.value.problems)


def test_answers_entry_that_breaks_the_schema_lists_every_problem() -> None:
    with pytest.raises(FormAnswerError) as info:
        scripted_result(SPEC, {"confirm": "yes", "ticket": "x", "colour": "red"})
    problems = "\n".join(info.value.problems)
    assert "colour: not a field of this form" in problems
    assert "'env' is a required property" in problems
    assert "confirm: 'yes' is not of type 'boolean'" in problems
    assert "ticket: 'x' is too short" in problems


def test_url_answer_carries_no_content() -> None:
    assert scripted_result(None, {"action": "accept"}).content is None
    with pytest.raises(FormAnswerError):
        scripted_result(None, {"action": "accept", "content": {"x": 1}})


def test_load_answers_reads_objects_and_refuses_other_shapes(tmp_path: Path) -> None:
    good = tmp_path / "a.json"
    good.write_text(json.dumps({"k": {"confirm": True}}))
    assert load_answers(good) == {"k": {"confirm": True}}
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps({"k": [1]}))
    with pytest.raises(AnswersFileError, match="mapping keys to objects"):
        load_answers(bad)
    broken = tmp_path / "c.json"
    broken.write_text("{")
    with pytest.raises(AnswersFileError, match="not JSON"):
        load_answers(broken)
    deep = tmp_path / "d.json"
    deep.write_text("[" * 100_000)
    with pytest.raises(AnswersFileError, match="not JSON \\(nested too deeply\\)"):
        load_answers(deep)
    with pytest.raises(AnswersFileError):
        load_answers(tmp_path / "missing.json")


# --- automatic answers -------------------------------------------------------------------------


def test_yes_uses_defaults_and_true_but_never_invents_required_values() -> None:
    with pytest.raises(FormAnswerError) as info:
        auto_content(SPEC)
    assert [p.split(":")[0] for p in info.value.problems] == ["ticket", "env"]
    spec = FormSpec.from_schema({"type": "object", "properties": {
        "ok": {"type": "boolean"}, "n": {"type": "integer", "default": 3},
        "free": {"type": "string"}}, "required": ["ok", "n"]})
    assert auto_content(spec) == {"ok": True, "n": 3}


def test_demo_filler_answers_every_required_field_validly() -> None:
    content = auto_content(SPEC, fill=True)
    assert content == {"confirm": True, "ticket": "demo-ticket", "env": "staging", "level": 4}
    assert SPEC.problems(content) == []
    formats = FormSpec.from_schema({"type": "object", "properties": {
        f: {"type": "string", "format": f} for f in ("email", "uri", "date", "date-time")} | {
        "short": {"type": "string", "maxLength": 2}, "n": {"type": "number", "minimum": 1.5},
        "m": {"type": "array", "minItems": 1, "items": {"type": "string", "enum": ["a", "b"]}}},
        "required": ["email", "uri", "date", "date-time", "short", "n", "m"]})
    assert formats.problems(auto_content(formats, fill=True)) == []


@pytest.mark.parametrize(("bounds", "expected"), [
    ({"maximum": -0.5}, -1), ({"minimum": -1.5}, -1), ({"minimum": 2.5}, 3),
    ({"maximum": 7}, 0), ({"minimum": 2.5, "maximum": 3.5}, 3),
])
def test_demo_filler_picks_an_integer_inside_fractional_bounds(bounds, expected) -> None:
    spec = FormSpec.from_schema({"type": "object", "properties": {
        "n": {"type": "integer", **bounds}}, "required": ["n"]})
    assert auto_content(spec, fill=True) == {"n": expected}


# --- the dispatcher ------------------------------------------------------------------------------


def test_capabilities_declare_only_what_is_configured(tmp_path: Path) -> None:
    bare = Inputs(console=quiet())
    caps = bare.capabilities()
    assert caps.elicitation is not None and caps.elicitation.supports_url
    assert caps.sampling is None and caps.roots is None
    assert bare.handled_kinds == {"elicitation/create"}
    full = Inputs(console=quiet(), roots=roots_from_paths([str(tmp_path)]),
                  sampling=SamplingConfig(reply="hi"), url_mode=False)
    caps = full.capabilities()
    assert caps.sampling is not None and caps.roots == {}
    assert caps.elicitation is not None and not caps.elicitation.supports_url
    assert full.handled_kinds == {"elicitation/create", "roots/list", "sampling/createMessage"}


def test_roots_are_absolute_file_uris(tmp_path: Path) -> None:
    inputs = Inputs(console=quiet(), roots=roots_from_paths([str(tmp_path)]))
    answer = inputs.answer("r", ListRootsRequest())
    assert answer.roots[0].uri == tmp_path.resolve().as_uri()
    assert answer.roots[0].uri.startswith("file:///")
    assert answer.roots[0].name == tmp_path.name


def test_unconfigured_sampling_stops_the_flow_with_a_reason() -> None:
    inputs = Inputs(console=quiet())
    request = CreateMessageRequest(messages=[], max_tokens=5)
    with pytest.raises(InputUnavailableError, match="sampling is not configured"):
        inputs.answer("s", request)


def test_sampling_reply_respects_max_tokens() -> None:
    inputs = Inputs(console=quiet(), sampling=SamplingConfig(reply="one two three four"), auto=True)
    answer = inputs.answer("s", CreateMessageRequest(messages=[], max_tokens=2))
    assert answer.content == {"type": "text", "text": "one two"}
    assert answer.stop_reason == "maxTokens"
    full = inputs.answer("s", CreateMessageRequest(messages=[], max_tokens=10))
    assert full.stop_reason == "endTurn"


def test_sampling_with_tools_is_refused() -> None:
    inputs = Inputs(console=quiet(), sampling=SamplingConfig(reply="x"), auto=True)
    with pytest.raises(InputUnavailableError, match="tools"):
        inputs.answer("s", CreateMessageRequest(messages=[], max_tokens=2,
                                                extra={"tools": [{"name": "t"}]}))


def test_sampling_command_gets_the_request_on_stdin() -> None:
    script = "import json,sys; print(len(json.load(sys.stdin)['messages']))"
    command = f'{sys.executable} -c "{script}"'
    inputs = Inputs(console=quiet(), sampling=SamplingConfig(command=command), auto=True)
    answer = inputs.answer("s", CreateMessageRequest(
        messages=[{"role": "user", "content": {"type": "text", "text": "hi"}}], max_tokens=5))
    assert answer.content == {"type": "text", "text": "1"}


def test_a_sampling_command_started_from_a_handler_thread_can_be_interrupted() -> None:
    # Handler threads block SIGINT and SIGTERM (mrtr_sync.threads); the command must not
    # inherit that mask, or it would outlive Ctrl-C and kill.
    script = ("import signal,sys; sys.stdin.read();"
              " print(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))")
    command = f'{sys.executable} -c "{script}"'
    inputs = Inputs(console=quiet(), sampling=SamplingConfig(command=command), auto=True)
    request = CreateMessageRequest(messages=[], max_tokens=5)
    answers: list[Any] = []

    def handler_thread() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        answers.append(inputs.answer("s", request))

    thread = threading.Thread(target=handler_thread)
    thread.start()
    thread.join(30)
    blocked = answers[0].content["text"]
    assert str(int(signal.SIGINT)) not in blocked.strip("[]").split(", ")
    assert str(int(signal.SIGTERM)) not in blocked.strip("[]").split(", ")


def test_sampling_needs_the_persons_approval_when_someone_is_there(terminal: Any) -> None:
    term = terminal(["n"])
    inputs = Inputs(console=term.console, prompter=term.prompter,
                    sampling=SamplingConfig(reply="x"))
    request = CreateMessageRequest(
        messages=[{"role": "user", "content": {"type": "text", "text": "summarise"}}],
        max_tokens=5)
    with pytest.raises(InputUnavailableError, match="you declined"):
        inputs.answer("s", request)
    assert "user: summarise" in term.text


def test_form_without_answers_or_person_is_unavailable() -> None:
    inputs = Inputs(console=quiet())
    with pytest.raises(InputUnavailableError, match="--answers or --yes"):
        inputs.answer("f", ElicitFormRequest(message="m", requested_schema=SCHEMA))


def test_answers_file_takes_precedence_and_is_reported() -> None:
    console = quiet()
    inputs = Inputs(console=console, auto=True, answers={
        "f": {"confirm": False, "ticket": "CHG-9", "env": "prod"}})
    answer = inputs.answer("f", ElicitFormRequest(message="m", requested_schema=SCHEMA))
    assert answer.content == {"confirm": False, "ticket": "CHG-9", "env": "prod"}
    assert "f: answers file → accept" in text_of(console)


def test_url_without_person_is_shown_and_needs_consent_from_somewhere() -> None:
    console = quiet()
    with pytest.raises(InputUnavailableError, match="consent"):
        Inputs(console=console).answer("u", ElicitUrlRequest(message="m",
                                                             url="https://a.example/x"))
    answer = Inputs(console=console, auto=True).answer(
        "u", ElicitUrlRequest(message="m", url="https://a.example/x"))
    assert answer.action == "accept"
    assert "https://a.example/x (not opened by mrtr)" in text_of(console)


def test_input_keys_from_the_server_cannot_send_escape_sequences(terminal: Any) -> None:
    key = "k\x1b[2J\x1b]0;title\x07"
    form_request = ElicitFormRequest(message="m", requested_schema={
        "type": "object", "properties": {"ok": {"type": "boolean"}}})
    url_request = ElicitUrlRequest(message="m", url="https://a.example/x")
    sampling_request = CreateMessageRequest(
        messages=[{"role": "user", "content": {"type": "text", "text": "hi"}}], max_tokens=5)
    term = terminal(["y"])
    automatic = Inputs(console=term.console, auto=True)
    automatic.answer(key, form_request)  # the note about the automatic answer
    automatic.answer(key, url_request)  # the URL shown without a prompt
    Inputs(console=term.console, prompter=term.prompter,
           sampling=SamplingConfig(reply="x")).answer(key, sampling_request)
    assert "\x1b" not in term.text
    assert "\x07" not in term.text
    assert term.text.count("k\\u001b[2J\\u001b]0;title\\u0007") == 4
