"""The string formats of the 2026-07-28 schema (``mrtr_core.wire.formats``): each check
accepts what its docstring says and refuses the rest, whatever the value's type."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr_core.wire.formats import (
    annotations_problem,
    block_problem,
    content_problem,
    contents_problem,
    is_base64,
    is_iso_date_time,
    is_rfc3339_date_time,
    is_unit_number,
    is_uri,
    is_uri_template,
    preferences_problem,
)

_BASE64 = "a base64 string (RFC 4648 §4)"
_URI = "a URI with a scheme (RFC 3986 §3.1) and no whitespace or control character"
_ISO = "an ISO 8601 date or date-time (e.g. 2025-01-12T15:00:58Z)"


@given(st.binary(max_size=64))
def test_every_standard_base64_encoding_is_base64(raw: bytes) -> None:
    assert is_base64(base64.b64encode(raw).decode("ascii"))


@pytest.mark.parametrize("value", [
    "aGk",  # unpadded
    "aGk==",  # padded past a multiple of four
    "aG k=",  # whitespace
    "aGk=\n",  # a line break (RFC 2045's, not RFC 4648's)
    "aGk=aGk=",  # padding inside
    "a-_b",  # the URL-safe alphabet
    "é===",
    "not base64!",
    None, 5, b"aGk=", ["aGk="],
])
def test_other_values_are_not_base64(value: Any) -> None:
    assert not is_base64(value)


@pytest.mark.parametrize("value", [
    "file:///tmp/a.txt", "test://static-text", "https://example.com/a?b=c#d", "mailto:a@b.c",
    "urn:isbn:0451450523", "data:image/png;base64,iVBORw0KGgo=", "x:", "A+b.c-d:e",
    "file:///tmp/caf\u00e9.txt",  # an IRI's letters (RFC 3987) are not refused
])
def test_uris_with_a_scheme_are_uris(value: str) -> None:
    assert is_uri(value)


@pytest.mark.parametrize("value", [
    "", "a.txt", "/srv/a.txt", "//host/a", "1x://a", "+x:a", ":a", "example.com",
    "https://example.com/a b", "https://example.com/\n", "https://example.com/\x7f",
    "\thttps://example.com", "https://example.com/a\x00",
    None, 5, b"x://a", ["x://a"],
])
def test_other_values_are_not_uris(value: Any) -> None:
    assert not is_uri(value)


@pytest.mark.parametrize("value", [
    "test://items/{item}/detail", "x://{a}{b}", "{+base}/items{?q,lang}", "x://plain",
    "file:///{path*}", "x://{var:3}", "no-scheme/{a}",
])
def test_rfc_6570_templates_are_uri_templates(value: str) -> None:
    assert is_uri_template(value)


@pytest.mark.parametrize("value", [
    "x://{a", "x://a}", "x://{}", "x://{{a}}", "x://{a}}", "x://{a b}", "x://{a}/b c",
    "x://\n{a}", None, 5, ["x://{a}"],
])
def test_other_values_are_not_uri_templates(value: Any) -> None:
    assert not is_uri_template(value)


@pytest.mark.parametrize(("block", "problem"), [
    ({"type": "resource_link", "uri": "r", "name": "r"}, (".uri", _URI)),
    ({"type": "resource", "resource": {"uri": "a b", "text": "t"}}, (".resource.uri", _URI)),
    ({"type": "image", "data": "aGk", "mimeType": "image/png"}, (".data", _BASE64)),
    ({"type": "audio", "mimeType": "audio/wav"}, (".data", _BASE64)),
    ({"type": "audio", "data": 5, "mimeType": "audio/wav"}, (".data", _BASE64)),
    ({"type": "resource", "resource": {"uri": "x://r", "blob": "!"}},
     (".resource.blob", _BASE64)),
    ({"type": "resource", "resource": "x://r"}, (".resource", "a resource contents object")),
    ({"type": "tool_result", "toolUseId": "1",
      "content": [{"type": "text", "text": "t"}, {"type": "image", "data": "?"}]},
     (".content[1].data", _BASE64)),
])
def test_a_block_names_its_first_member_out_of_format(
    block: dict[str, Any], problem: tuple[str, str]
) -> None:
    assert block_problem(block) == problem


@pytest.mark.parametrize("block", [
    {"type": "text", "text": "aGk"},
    {"type": "image", "data": "aGk=", "mimeType": "image/png"},
    {"type": "audio", "data": "", "mimeType": "audio/wav"},
    {"type": "resource", "resource": {"uri": "x://r", "text": "not base64!"}},
    {"type": "resource", "resource": {"uri": "x://r", "blob": "AAE="}},
    {"type": "tool_use", "id": "1", "name": "t", "input": {"data": "!"}},
    {"type": "tool_result", "toolUseId": "1", "content": "left to the caller"},
    {"type": "video", "data": "!"},  # a type of no known format: left to the caller
])
def test_a_block_whose_members_are_of_their_formats_has_no_problem(
    block: dict[str, Any]
) -> None:
    assert block_problem(block) is None


def test_a_nested_tool_result_is_looked_into_once() -> None:
    inner = {"type": "tool_result", "content": [{"type": "image", "data": "?"}]}
    assert block_problem({"type": "tool_result", "content": [inner]}) is None


def test_content_and_contents_problems() -> None:
    image = {"type": "image", "data": "?", "mimeType": "image/png"}
    assert content_problem(image) == (".data", _BASE64)
    assert content_problem([{"type": "text", "text": "t"}, "x", image]) == ("[2].data", _BASE64)
    assert content_problem("left to the caller") is None
    assert contents_problem({"uri": "x://r", "blob": "aGk"}) == (".blob", _BASE64)
    assert contents_problem({"uri": "r", "blob": "aGk"}) == (".uri", _URI)
    assert contents_problem({"uri": "x://r", "text": "aGk"}) is None


_RFC3339 = ["2025-01-12T15:00:58Z", "2025-01-12T15:00:58.5+01:00", "2024-02-29T23:59:59-23:59",
            "2025-01-12T15:00:58.123456789Z"]


@pytest.mark.parametrize("value", [*_RFC3339, "2025-01-12t15:00:58z", "2025-01-12",
                                   "2025-01-12T15:00:58", "2025-01-12T15:00+01:00"])
def test_iso_8601_dates_and_date_times_are_iso_date_times(value: str) -> None:
    assert is_iso_date_time(value)


@pytest.mark.parametrize("value", [
    "yesterday", "2025-02-30", "2025-13-01T00:00:00Z", "2025-01-12T24:00:00Z",
    "2025-01-12T15:00:58Z" + " " * 60, "\u0662025-01-12", "", None, 1736694058, ["2025-01-12"],
])
def test_other_values_are_not_iso_date_times(value: Any) -> None:
    assert not is_iso_date_time(value)


@pytest.mark.parametrize("value", _RFC3339)
def test_rfc_3339_date_times_are_rfc_3339_date_times(value: str) -> None:
    assert is_rfc3339_date_time(value)


@pytest.mark.parametrize("value", [
    "2025-01-12", "2025-01-12T15:00:58", "2025-01-12T15:00Z", "2025-01-12t15:00:58z",
    "2025-01-12 15:00:58Z", "20250112T150058Z", "2025-01-12T15:00:58+0100",
    "2025-01-12T15:00:58+24:00", "2025-02-30T00:00:00Z", "2025-12-31T23:59:60Z", None,
])
def test_other_values_are_not_rfc_3339_date_times(value: Any) -> None:
    assert not is_rfc3339_date_time(value)


def test_unit_numbers_and_annotations() -> None:
    assert [is_unit_number(v) for v in (0, 1, 0.5, 1.5, -0.1, float("nan"), True, "1")] == [
        True, True, True, False, False, False, False, False]
    assert annotations_problem({"priority": 0.2, "lastModified": "2025-01-12",
                                "audience": ["user"]}) is None
    assert annotations_problem([]) == ("", "an object")
    assert annotations_problem({"priority": 2}) == (".priority", "a number from 0 to 1")
    assert annotations_problem({"lastModified": "now"}) == (".lastModified", _ISO)
    assert block_problem({"type": "text", "text": "t", "annotations": {"priority": None}}) == (
        ".annotations.priority", "a number from 0 to 1")


def test_model_preferences_priorities_are_numbers_from_0_to_1() -> None:
    assert preferences_problem({"hints": "left to the caller", "costPriority": 0,
                                "speedPriority": 1, "intelligencePriority": 0.5}) is None
    assert preferences_problem({"speedPriority": 1.01}) == (
        ".speedPriority", "a number from 0 to 1")
    assert preferences_problem({"intelligencePriority": None}) == (
        ".intelligencePriority", "a number from 0 to 1")
