"""The string formats and ranges the 2026-07-28 schema gives some members, as cheap checks.

schema.json gives ``format: "byte"`` (base64) to ``ImageContent.data``, ``AudioContent.data``
and ``BlobResourceContents.blob``; ``format: "uri"`` to every resource's ``uri``
(``Resource``, ``ResourceLink``, ``ResourceContents``, ``ReadResourceRequestParams``) and to
``ElicitRequestURLParams.url``; and ``format: "uri-template"`` to
``ResourceTemplate.uriTemplate`` and ``ResourceTemplateReference.uri``. schema.ts asks for
ISO 8601 in ``Annotations.lastModified``, and for a number from 0 to 1 in
``Annotations.priority`` and in the three priorities of ``ModelPreferences``. Each check
here is well-defined, linear in its input and short of a full grammar; its docstring says
what it accepts.

:func:`block_problem` and :func:`contents_problem` apply them to a content block and to a
resource contents item. The converter uses them on what a peer sends, the app on what a
handler returns, so that a server built on mrtr sends nothing its clients refuse.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, TypeAlias

import pybase64

__all__ = [
    "URI_FORMAT",
    "FormatProblem",
    "annotations_problem",
    "block_problem",
    "content_problem",
    "contents_problem",
    "is_base64",
    "is_iso_date_time",
    "is_rfc3339_date_time",
    "is_unit_number",
    "is_uri",
    "is_uri_template",
    "preferences_problem",
]

FormatProblem: TypeAlias = tuple[str, str]
"""Where a member is wrong, as a path suffix (``".data"``, ``".resource.blob"``,
``"[1].data"``) to append to the path of the checked value, and what it must be."""

_BASE64: Final = "a base64 string (RFC 4648 §4)"
URI_FORMAT: Final = "a URI with a scheme (RFC 3986 §3.1) and no whitespace or control character"
"""What :func:`is_uri` accepts, for messages."""

# A scheme and ":" (RFC 3986 §3.1, §4.3), then anything but what no URI or IRI holds: ASCII
# controls, space and DEL (RFC 3986 §2, RFC 3987 §2.2). The rest of the grammar is the
# scheme's own; non-ASCII letters are an IRI's and are let through, as the SDKs do.
_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\x00-\x20\x7f]*")


def is_base64(value: Any) -> bool:
    """Whether ``value`` is a base64 string: RFC 4648 §4's alphabet, padded to a multiple of
    four characters, with no line break or other whitespace (the RFC's §3.1 and §3.3 leave
    both out unless the referring spec allows them, and the schema does not)."""
    if not isinstance(value, str):
        return False
    try:
        pybase64.b64decode(value, validate=True)  # one SIMD pass; the bytes are dropped
    except ValueError:
        return False
    return True


def is_uri(value: Any) -> bool:
    """Whether ``value`` is a string that starts with a scheme and ``:`` (RFC 3986 §3.1)
    and holds no whitespace or control character (which no URI holds, RFC 3986 §2)."""
    return isinstance(value, str) and _URI.fullmatch(value) is not None


# RFC 6570 §2: literals, and expressions in braces; a literal is never a brace, whitespace
# or a control (§2.1), and an expression is never empty (§2.2). The two branches start
# with different characters, so the match is linear.
_URI_TEMPLATE: Final = re.compile(r"(?:[^{}\x00-\x20\x7f]|\{[^{}\x00-\x20\x7f]+\})*")


def is_uri_template(value: Any) -> bool:
    """Whether ``value`` is a string of RFC 6570 §2's shape: literals without whitespace or
    control characters, and ``{...}`` expressions, each closed, non-empty and holding no
    brace. What an expression names (its operator and variables) is not parsed."""
    return isinstance(value, str) and _URI_TEMPLATE.fullmatch(value) is not None


_MAX_DATE_TIME: Final = 64  # far past any ISO 8601 date-time a clock writes
_ISO_DATE_TIME: Final = "an ISO 8601 date or date-time (e.g. 2025-01-12T15:00:58Z)"

# RFC 3339 §5.6 date-time: seconds and an offset required, upper-case T and Z.
_RFC3339: Final = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)",
    re.ASCII,
)


def is_iso_date_time(value: Any) -> bool:
    """Whether ``value`` is an ISO 8601 date or date-time, as ``datetime.fromisoformat``
    reads one (an optional time, fraction and offset) once a lower-case ``t`` or ``z`` is
    raised (RFC 3339 §5.6 allows them): at most 64 ASCII characters naming a real day."""
    if not isinstance(value, str) or len(value) > _MAX_DATE_TIME or not value.isascii():
        return False
    try:
        datetime.fromisoformat(value.upper())
    except ValueError:
        return False
    return True


def is_rfc3339_date_time(value: Any) -> bool:
    """Whether ``value`` is an RFC 3339 §5.6 ``date-time`` naming a real moment: date,
    upper-case ``T``, time with seconds (a fraction allowed), ``Z`` or a ``±hh:mm`` offset.
    The ISO 8601 profile the official SDKs' clients take in ``lastModified`` (leap seconds
    aside), and the only one a server built on mrtr sends there."""
    if not isinstance(value, str) or _RFC3339.fullmatch(value) is None:
        return False
    try:
        datetime.fromisoformat(value)  # 30 February, hour 24 and the like
    except ValueError:
        return False
    return True


def is_unit_number(value: Any) -> bool:
    """Whether ``value`` is a number from 0 to 1 (a bool is not a number here)."""
    # The chained comparison is false for nan as for anything out of range.
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 <= value <= 1


def annotations_problem(annotations: Any) -> FormatProblem | None:
    """The first member of an ``Annotations`` object out of its range or format, or
    ``None``: ``priority`` is a number from 0 to 1, ``lastModified`` ISO 8601 (schema.ts).
    Not an object at all is a problem too (``""``: the value itself)."""
    if not isinstance(annotations, Mapping):
        return "", "an object"
    if "priority" in annotations and not is_unit_number(annotations["priority"]):
        return ".priority", "a number from 0 to 1"
    if "lastModified" in annotations and not is_iso_date_time(annotations["lastModified"]):
        return ".lastModified", _ISO_DATE_TIME
    return None


_PRIORITIES: Final = ("costPriority", "speedPriority", "intelligencePriority")


def preferences_problem(preferences: Mapping[str, Any]) -> FormatProblem | None:
    """The first priority of a sampling request's ``ModelPreferences`` that is not a number
    from 0 to 1 (schema.ts), or ``None``; its ``hints`` are left to the caller."""
    for name in _PRIORITIES:
        if name in preferences and not is_unit_number(preferences[name]):
            return f".{name}", "a number from 0 to 1"
    return None


def contents_problem(item: Mapping[str, Any]) -> FormatProblem | None:
    """The first member of a resource contents item (``TextResourceContents`` or
    ``BlobResourceContents``) that is not of its format, or ``None``: its ``uri`` is a URI
    and its ``blob``, when given, base64. Which other members an item needs is for the
    caller to check."""
    if not is_uri(item.get("uri")):
        return ".uri", URI_FORMAT
    if "blob" in item and not is_base64(item["blob"]):
        return ".blob", _BASE64
    return None


def block_problem(block: Mapping[str, Any], *, nested: bool = True) -> FormatProblem | None:
    """The first member of a content block that is not of its format, or ``None``.

    An ``image`` or ``audio`` block's ``data`` is base64 and a ``resource_link``'s ``uri``
    a URI (given or not: the type requires them); an embedded ``resource`` is a contents
    item (:func:`contents_problem`); a sampling ``tool_result``'s ``content``, when it is
    an array, holds blocks checked the same way (one level: ``nested=False`` for those, as
    a ``ContentBlock`` holds no tool result); any block's ``annotations``, when given, pass
    :func:`annotations_problem`. Other members, and blocks of other types, are left to the
    caller.
    """
    kind = block.get("type")
    if kind in ("image", "audio"):
        if not is_base64(block.get("data")):
            return ".data", _BASE64
    elif kind == "resource_link":
        if not is_uri(block.get("uri")):
            return ".uri", URI_FORMAT
    elif kind == "resource":
        resource = block.get("resource")
        if not isinstance(resource, Mapping):
            return ".resource", "a resource contents object"
        found = contents_problem(resource)
        if found is not None:
            return ".resource" + found[0], found[1]
    elif kind == "tool_result" and nested:
        inner = block.get("content")
        if isinstance(inner, list):
            for index, item in enumerate(inner):
                found = block_problem(item, nested=False) if isinstance(item, Mapping) else None
                if found is not None:
                    return f".content[{index}]{found[0]}", found[1]
    if "annotations" in block:
        found = annotations_problem(block["annotations"])
        if found is not None:
            return ".annotations" + found[0], found[1]
    return None


def content_problem(content: Any) -> FormatProblem | None:
    """:func:`block_problem` of a message's ``content``: one block, or an array of them
    (items that are not objects are left to the caller)."""
    if isinstance(content, Mapping):
        return block_problem(content)
    if isinstance(content, list):
        for index, block in enumerate(content):
            found = block_problem(block) if isinstance(block, Mapping) else None
            if found is not None:
                return f"[{index}]{found[0]}", found[1]
    return None
