"""The optional members of the schema's small shared objects (schema.ts: ``Annotations``,
``Icon``, ``ToolAnnotations``, a ``ResourceLink``'s ``Resource`` members, ``_meta``), checked
alike where a handler's result carries them (:mod:`~mrtr_core.app.results`) and where a
definition declares them (:mod:`~mrtr_core.app.registry`).

Each member, when given, is of its type (and of its format or range, where the schema gives
one), or a client checking the schema refuses the whole result (or list) that carries it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from mrtr_core.wire.formats import URI_FORMAT, is_rfc3339_date_time, is_unit_number, is_uri

__all__ = [
    "ANNOTATIONS", "ICON", "LINK", "META", "TOOL_ANNOTATIONS", "Member", "failing_member",
    "of_kind",
]


class Member(NamedTuple):
    """One optional member: its test, what it must be (for messages), and the Python
    type(s) of its JSON type (a value of another type is a ``TypeError`` where a
    definition is declared; one of that type that fails the test, a ``ValueError``)."""

    test: Callable[[Any], bool]
    what: str
    kind: type | tuple[type, ...]


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


def _is_integer(value: Any) -> bool:
    return type(value) is int  # a bool is not an integer here (as for ttlMs)


def _is_audience(value: Any) -> bool:
    return isinstance(value, list) and all(role in ("user", "assistant") for role in value)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


# Icon.sizes (schema.ts): each "should be in WxH format (e.g. "48x48") or "any"", as in
# HTML's sizes attribute (whose x may be upper-case).
_ICON_SIZE: Final = re.compile(r"any|[1-9][0-9]*[xX][1-9][0-9]*")


def _is_icon_sizes(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, str) and _ICON_SIZE.fullmatch(item) is not None for item in value
    )


def _is_theme(value: Any) -> bool:
    return value in ("light", "dark")


META: Final[Mapping[str, Member]] = {"_meta": Member(_is_object, "an object", dict)}
ANNOTATIONS: Final[Mapping[str, Member]] = {
    "audience": Member(_is_audience, "a list of 'user' and 'assistant'", list),
    "priority": Member(is_unit_number, "a number from 0 to 1", (int, float)),
    # ISO 8601 (schema.ts); official clients take RFC 3339's date-time only, so that is
    # what a server built on mrtr sends (a client built on it takes any ISO 8601).
    "lastModified": Member(is_rfc3339_date_time, "an RFC 3339 date-time with an offset "
                           "(e.g. 2025-01-12T15:00:58Z)", str),
}
ICON: Final[Mapping[str, Member]] = {
    # src is required (its absence is for the caller) and has format "uri" (schema.json):
    # an https or a data: URI, say.
    "src": Member(is_uri, URI_FORMAT, str),
    "mimeType": Member(_is_text, "a string", str),
    "sizes": Member(_is_icon_sizes, "a list of sizes, each WxH (48x48) or 'any'", list),
    "theme": Member(_is_theme, "'light' or 'dark'", str),
}
LINK: Final[Mapping[str, Member]] = {
    **META,
    "title": Member(_is_text, "a string", str),
    "description": Member(_is_text, "a string", str),
    "mimeType": Member(_is_text, "a string", str),
    "size": Member(_is_integer, "an integer", int),
}


# ToolAnnotations (where a tool is declared): title is a string, the hints are booleans.
TOOL_ANNOTATIONS: Final[Mapping[str, Member]] = {
    "title": Member(_is_text, "a string", str),
    **{hint: Member(_is_bool, "True or False", bool) for hint in (
        "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")},
}


def failing_member(obj: Mapping[str, Any], members: Mapping[str, Member]) -> str | None:
    """The first of ``members`` that ``obj`` has and that fails its test, or ``None``."""
    for member, spec in members.items():
        if member in obj and not spec.test(obj[member]):
            return member
    return None


def of_kind(value: Any, spec: Member) -> bool:
    """Whether ``value`` is of the JSON type of ``spec`` (a bool is no number here)."""
    return isinstance(value, spec.kind) and not isinstance(value, bool)
