"""The terminal forms: every field type, validation re-prompts, decline/cancel, URL consent."""

from __future__ import annotations

from typing import Any

import pytest
from mrtr_cli.forms import describe_url
from referencing.exceptions import Unresolvable

from mrtr_core.wire.forms import FormSchemaError, FormSpec
from mrtr_core.wire.models import ElicitFormRequest, ElicitUrlRequest


def form(properties: dict[str, Any], required: list[str] | None = None,
         message: str = "Please answer") -> ElicitFormRequest:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return ElicitFormRequest(message=message, requested_schema=schema)


def ask(terminal: Any, request: ElicitFormRequest, lines: list[str]) -> tuple[Any, Any]:
    term = terminal(lines)
    result = term.prompter.form("key1", request)
    assert term.unread == "", "every scripted line is consumed"
    return result, term


# --- strings and formats ---------------------------------------------------------------------


def test_string_field_is_accepted_after_review(terminal: Any) -> None:
    result, term = ask(terminal, form({"name": {"type": "string", "title": "Your name"}},
                                      ["name"], message="Who deploys?"), ["Ada", "a"])
    assert result.action == "accept"
    assert result.content == {"name": "Ada"}
    assert "test-server" in term.text  # which server asks (C10)
    assert "Who deploys?" in term.text
    assert "Your answers" in term.text  # review before sending (C10)


@pytest.mark.parametrize(
    ("fmt", "bad", "good"),
    [
        ("email", "not-an-email", "ops@example.com"),
        ("uri", "no scheme here", "https://example.com/a"),
        ("date", "2026-13-45", "2026-07-28"),
        ("date-time", "yesterday at noon", "2026-07-28T09:30:00Z"),
    ],
)
def test_string_format_is_checked_and_reprompted(terminal: Any, fmt: str, bad: str,
                                                 good: str) -> None:
    result, term = ask(terminal, form({"v": {"type": "string", "format": fmt}}, ["v"]),
                       [bad, good, "a"])
    assert result.content == {"v": good}
    assert f"is not a '{fmt}'" in term.text


def test_string_length_bounds_reprompt(terminal: Any) -> None:
    result, term = ask(terminal, form({"t": {"type": "string", "minLength": 3, "maxLength": 5}},
                                      ["t"]), ["ab", "abcdef", "abcd", "a"])
    assert result.content == {"t": "abcd"}
    assert "is too short" in term.text
    assert "is too long" in term.text


# --- numbers ---------------------------------------------------------------------------------


def test_number_with_bounds_rejects_text_and_out_of_range(terminal: Any) -> None:
    result, term = ask(terminal, form({"n": {"type": "number", "minimum": 0, "maximum": 100}},
                                      ["n"]), ["abc", "200", "-1", "42.5", "a"])
    assert result.content == {"n": 42.5}
    assert "'abc' is not a number" in term.text
    assert "200 is greater than the maximum of 100" in term.text
    assert "-1 is less than the minimum of 0" in term.text


def test_integer_rejects_fractions(terminal: Any) -> None:
    result, term = ask(terminal, form({"i": {"type": "integer", "minimum": 1}}, ["i"]),
                       ["3.5", "0", "7", "a"])
    assert result.content == {"i": 7}
    assert isinstance(result.content["i"], int)
    assert "'3.5' is not a whole number" in term.text


@pytest.mark.parametrize("kind", ["integer", "number"])
def test_a_number_too_long_to_read_is_reprompted(terminal: Any, kind: str) -> None:
    # Python reads at most sys.get_int_max_str_digits() digits into an int (4300 by default).
    result, term = ask(terminal, form({"i": {"type": kind}}, ["i"]), ["9" * 5000, "7", "a"])
    assert result.content == {"i": 7}
    assert "the number is too long" in term.text


@pytest.mark.parametrize("typed", ["1_000", "\u0661\u0662", "inf", "nan", "0x10", "1e400"])
def test_number_reads_only_plain_decimal_text(terminal: Any, typed: str) -> None:
    # Python's int() and float() take digit separators, digits of other scripts, inf and nan;
    # a form field means a JSON number, written with ASCII digits.
    result, term = ask(terminal, form({"n": {"type": "number"}}, ["n"]), [typed, "+12", "a"])
    assert result.content == {"n": 12}
    assert "✗" in term.text


@pytest.mark.parametrize("typed", [".5", "-2.", "1e3", "-1E-2"])
def test_number_reads_every_decimal_spelling(terminal: Any, typed: str) -> None:
    result, _ = ask(terminal, form({"n": {"type": "number"}}, ["n"]), [typed, "a"])
    assert result.content == {"n": float(typed)}


# --- booleans ----------------------------------------------------------------------------------


def test_boolean_reads_yes_no_and_reprompts(terminal: Any) -> None:
    result, term = ask(terminal, form({"ok": {"type": "boolean"}}, ["ok"]), ["maybe", "y", "a"])
    assert result.content == {"ok": True}
    assert "answer y or n" in term.text


def test_boolean_default_is_used_on_blank(terminal: Any) -> None:
    result, _ = ask(terminal, form({"ok": {"type": "boolean", "default": False}}, ["ok"]),
                    ["", "a"])
    assert result.content == {"ok": False}


# --- single selects ----------------------------------------------------------------------------


def test_select_by_a_digit_of_another_script_reprompts(terminal: Any) -> None:
    # str.isdigit() takes "²", which int() refuses, and int() reads ARABIC-INDIC DIGIT ONE
    # as 1: an option is picked by an ASCII number only, and anything else is re-asked
    # rather than ending the form or picking an option nobody typed.
    request = form({"env": {"type": "string", "enum": ["dev", "staging"]}}, ["env"])
    result, term = ask(terminal, request, ["\u00b2", "\u0661", "2", "a"])
    assert result.content == {"env": "staging"}
    assert "'²' is not one of the options" in term.text


def test_untitled_single_select_by_number_or_value(terminal: Any) -> None:
    request = form({"env": {"type": "string", "enum": ["dev", "staging", "prod"]}}, ["env"])
    result, term = ask(terminal, request, ["4", "2", "a"])
    assert result.content == {"env": "staging"}
    assert "'4' is not one of the options" in term.text
    result, _ = ask(terminal, request, ["prod", "a"])
    assert result.content == {"env": "prod"}


def test_an_option_typed_exactly_wins_over_an_option_number(terminal: Any) -> None:
    # Options that look like numbers: "1" is the option "1", not the first option ("10").
    request = form({"n": {"type": "string", "enum": ["10", "20", "1"]}}, ["n"])
    result, _ = ask(terminal, request, ["1", "a"])
    assert result.content == {"n": "1"}
    result, _ = ask(terminal, request, ["2", "a"])
    assert result.content == {"n": "20"}  # not an option's value: the second option


def test_titled_single_select_shows_titles_and_sends_const(terminal: Any) -> None:
    request = form({"env": {"type": "string", "oneOf": [
        {"const": "stg", "title": "Staging"}, {"const": "prd", "title": "Production"}]}}, ["env"])
    result, term = ask(terminal, request, ["production", "a"])
    assert result.content == {"env": "prd"}
    assert "1) Staging [stg]" in term.text
    assert "2) Production [prd]" in term.text


def test_legacy_enum_names_are_titles(terminal: Any) -> None:
    request = form({"c": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]}},
                   ["c"])
    result, term = ask(terminal, request, ["2", "a"])
    assert result.content == {"c": "g"}
    assert "2) Green [g]" in term.text


# --- multi selects -----------------------------------------------------------------------------


def test_untitled_multi_select_with_item_bounds(terminal: Any) -> None:
    request = form({"tags": {"type": "array", "minItems": 1, "maxItems": 2,
                             "items": {"type": "string", "enum": ["a", "b", "c"]}}}, ["tags"])
    result, term = ask(terminal, request, ["", "1,2,3", "1, c", "a"])
    assert result.content == {"tags": ["a", "c"]}
    assert "should be non-empty" in term.text
    assert "is too long" in term.text


def test_titled_multi_select_by_titles(terminal: Any) -> None:
    request = form({"colours": {"type": "array", "items": {"anyOf": [
        {"const": "#f00", "title": "Red"}, {"const": "#00f", "title": "Blue"}]}}}, ["colours"])
    result, _ = ask(terminal, request, ["blue, Red, blue", "a"])
    assert result.content == {"colours": ["#00f", "#f00"]}


def test_multi_select_default(terminal: Any) -> None:
    request = form({"tags": {"type": "array", "default": ["b"],
                             "items": {"type": "string", "enum": ["a", "b"]}}})
    result, _ = ask(terminal, request, ["", "a"])
    assert result.content == {"tags": ["b"]}


# --- required, optional, defaults --------------------------------------------------------------


def test_required_blank_reprompts_and_optional_blank_is_left_out(terminal: Any) -> None:
    request = form({"must": {"type": "string"}, "may": {"type": "string"}}, ["must"])
    result, term = ask(terminal, request, ["", ":none", "x", "", "a"])
    assert result.content == {"must": "x"}
    assert term.text.count("this field is required") == 2
    assert "(left out)" in term.text


def test_defaults_fill_blank_answers(terminal: Any) -> None:
    request = form({
        "s": {"type": "string", "default": "hello"},
        "n": {"type": "integer", "default": 3},
        "e": {"type": "string", "enum": ["x", "y"], "default": "y"},
    }, ["s", "n", "e"])
    result, term = ask(terminal, request, ["", "", "", "a"])
    assert result.content == {"s": "hello", "n": 3, "e": "y"}
    assert "(default: hello)" in term.text


def test_optional_field_with_default_can_be_left_out(terminal: Any) -> None:
    result, _ = ask(terminal, form({"s": {"type": "string", "default": "d"}}), [":none", "a"])
    assert result.content == {}


def test_invalid_default_is_not_offered(terminal: Any) -> None:
    spec = FormSpec.from_schema({"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 5, "default": 1}}})
    assert not spec.fields[0].has_default


# --- decline, cancel, review -------------------------------------------------------------------


def test_decline_at_a_field(terminal: Any) -> None:
    result, _ = ask(terminal, form({"a": {"type": "string"}, "b": {"type": "string"}},
                                   ["a", "b"]), ["first", ":d"])
    assert result.action == "decline"
    assert result.content is None


def test_cancel_at_a_field(terminal: Any) -> None:
    result, _ = ask(terminal, form({"a": {"type": "string"}}, ["a"]), [":cancel"])
    assert result.action == "cancel"


def test_decline_and_cancel_at_review(terminal: Any) -> None:
    request = form({"a": {"type": "string"}}, ["a"])
    result, _ = ask(terminal, request, ["x", "d"])
    assert result.action == "decline"
    result, _ = ask(terminal, request, ["x", "c"])
    assert result.action == "cancel"


def test_edit_at_review_keeps_previous_answers_as_defaults(terminal: Any) -> None:
    request = form({"a": {"type": "string"}, "b": {"type": "integer"}}, ["a", "b"])
    result, term = ask(terminal, request, ["one", "1", "e", "", "2", "a"])
    assert result.content == {"a": "one", "b": 2}
    assert "(default: one)" in term.text


def test_end_of_input_cancels(terminal: Any) -> None:
    result, term = ask(terminal, form({"a": {"type": "string"}}, ["a"]), [])
    assert result.action == "cancel"
    assert "end of input" in term.text


def test_review_rejects_unknown_choice(terminal: Any) -> None:
    result, term = ask(terminal, form({"a": {"type": "string"}}, ["a"]), ["x", "z", "a"])
    assert result.action == "accept"
    assert "choose one of" in term.text


# --- terminal safety -----------------------------------------------------------------------------


def test_control_characters_from_the_server_are_shown_escaped(terminal: Any) -> None:
    request = form({"a": {"type": "string", "title": "T\x1b[2J"}}, ["a"],
                   message="hi\x1b[31mred\x07")
    result, term = ask(terminal, request, ["x", "a"])
    assert result.action == "accept"
    assert "\x1b" not in term.text
    assert "\x07" not in term.text
    assert "\\u001b[31m" in term.text


def test_markup_in_server_text_is_not_interpreted(terminal: Any) -> None:
    _, term = ask(terminal, form({"a": {"type": "string"}}, ["a"], message="[bold]x[/bold]"),
                  ["x", "a"])
    assert "[bold]x[/bold]" in term.text


# --- URL mode ------------------------------------------------------------------------------------


def test_url_mode_shows_whole_url_and_waits_for_consent(terminal: Any) -> None:
    url = "https://auth.example.com/connect?flow=abc&state=%2Fx"
    term = terminal(["", "maybe", "a"])
    result = term.prompter.url("login", ElicitUrlRequest(message="Connect your account", url=url))
    assert result.action == "accept"
    assert result.content is None
    assert url in term.text
    assert "does not open or fetch" in term.text
    assert "choose one of" in term.text  # blank or unknown input is not consent


@pytest.mark.parametrize(("answer", "action"), [("d", "decline"), ("cancel", "cancel")])
def test_url_mode_decline_and_cancel(terminal: Any, answer: str, action: str) -> None:
    term = terminal([answer])
    result = term.prompter.url("k", ElicitUrlRequest(message="m", url="https://x.example/"))
    assert result.action == action


def test_url_mode_warns_about_plain_http_and_user_info(terminal: Any) -> None:
    term = terminal(["d"])
    term.prompter.url("k", ElicitUrlRequest(message="m",
                                            url="http://bank.example@evil.example/login"))
    assert "not HTTPS" in term.text
    assert "the domain is evil.example" in term.text


@pytest.mark.parametrize(
    ("url", "host"),
    [
        # The user info lower-cases longer ("İ" becomes two characters): the highlight must
        # not slide onto a look-alike in the path.
        ("https://" + "İ" * 9 + "@evil.com/good.com", "evil.com"),
        # The host's name also appears in the user info: the host is the one after '@'.
        ("https://evil.example.net@evil.example/", "evil.example"),
        ("https://EVIL.Example:8443/x", "EVIL.Example"),
        ("https://[::1]:8443/x", "::1"),
    ],
)
def test_url_mode_highlights_the_host_itself(url: str, host: str) -> None:
    shown, _ = describe_url(url)
    (span,) = [s for s in shown.spans if s.style == "bold reverse"]
    assert shown.plain[span.start:span.end] == host
    assert shown.plain[span.start - 1] in "/@["  # the whole host, where it stands
    assert shown.plain[span.end:span.end + 1] in ("/", ":", "]")


def test_url_mode_warns_about_a_backslash_in_the_address() -> None:
    # urlsplit takes good.example as the host; a browser (WHATWG URL) reads the backslash as
    # '/' and opens evil.example.
    _, notes = describe_url("https://evil.example\\@good.example/")
    assert any("backslash" in note for note in notes)


def test_url_mode_end_of_input_cancels(terminal: Any) -> None:
    term = terminal([])
    result = term.prompter.url("k", ElicitUrlRequest(message="m", url="https://x.example/"))
    assert result.action == "cancel"


# --- schemas the client refuses --------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"type": "array"}, "must be an object schema"),
        ({"type": "object", "properties": {"o": {"type": "object"}}}, "unsupported type"),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
         "not a property"),
        ({"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}},
         "unknown format"),
        ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}},
         "items.enum or items.anyOf"),
        ({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"],
                                                 "enumNames": ["X", "Y"]}}}, "enumNames"),
        ({"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(65)}},
         "at most 64"),
    ],
)
def test_unrenderable_schemas_are_refused(terminal: Any, schema: dict[str, Any],
                                          fragment: str) -> None:
    term = terminal([])
    with pytest.raises(FormSchemaError, match=fragment):
        term.prompter.form("k", ElicitFormRequest(message="m", requested_schema=schema))
    assert term.text == ""  # nothing shown


def test_validation_ignores_keywords_outside_the_form_vocabulary() -> None:
    spec = FormSpec.from_schema({"type": "object", "properties": {
        "a": {"type": "string", "pattern": "^(a+)+$", "$ref": "https://evil.example/s"}}})
    assert spec.schema["properties"]["a"] == {"type": "string"}
    assert spec.problems({"a": "anything"}) == []


def test_a_form_built_by_hand_never_retrieves_a_ref(no_retrieval: list[object]) -> None:
    # Forms read from a server keep only the validation keywords they know; one built by
    # hand may hold any: its $ref resolves inside it, or nowhere, and is never fetched.
    spec = FormSpec(fields=(), schema={"$ref": "https://example.com/form.json"})
    with pytest.raises(Unresolvable):
        spec.problems({})
    assert no_retrieval == []
