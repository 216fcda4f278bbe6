"""Turning what a handler returned (or raised) into the method's complete result.

Handlers return the natural Python value; these functions build the wire result and check
its shape, so that a handler mistake becomes a clear ``-32603`` instead of a result the
client's schema validation rejects. ``resultType`` and ``_meta`` are added by the app.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any, Final

from referencing.exceptions import Unresolvable

from mrtr_core import jsontext
from mrtr_core._checks import shown
from mrtr_core.app._members import ANNOTATIONS, ICON, LINK, META, Member, failing_member
from mrtr_core.errors import INTERNAL_ERROR, JsonRpcError
from mrtr_core.server.schemas import CompiledSchema
from mrtr_core.wire.formats import FormatProblem, block_problem, contents_problem
from mrtr_core.wire.models import JsonObject

__all__ = [
    "caching_problem",
    "prompt_result",
    "resource_result",
    "text_block",
    "tool_error_result",
    "tool_result",
    "unusable_schema",
]


def text_block(text: str) -> JsonObject:
    """A ``TextContent`` block."""
    return {"type": "text", "text": text}


def _bad(what: str) -> JsonRpcError:
    return JsonRpcError(INTERNAL_ERROR, f"handler returned an invalid result: {what}")


def unusable_schema(member: str) -> JsonRpcError:
    """The -32603 for a call of a tool whose ``member`` (``inputSchema``, ``outputSchema``)
    has a reference that resolved nowhere while the call was checked against it (one naming
    another document included: nothing is retrieved): the server's own fault (registration
    refuses such a schema, so it was changed afterwards or built by hand), not the
    client's."""
    return JsonRpcError(INTERNAL_ERROR,
                        f"the tool's {member} cannot be used (a $ref resolves nowhere)")


# ContentBlock (digest §1.3; schema.ts): the string members each of the five block types
# requires. The union is closed, so a client checking the schema refuses any other type;
# an embedded resource's contents are checked as a read's are (_contents_item).
_BLOCK_STRINGS: Final[Mapping[str, tuple[str, ...]]] = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"),
    "resource": (),
}


def _check_members(obj: JsonObject, where: str, members: Mapping[str, Member]) -> None:
    """Refuse ``obj`` (named ``where``) when one of ``members`` it has fails its test."""
    member = failing_member(obj, members)
    if member is not None:
        raise _bad(f"{where}.{member} must be {members[member].what}")


def _check_optional(block: JsonObject, where: str) -> None:
    """Refuse ``block`` when one of the optional members its type has is of the wrong
    type (schema.ts: every block's ``annotations`` and ``_meta``; a resource link's
    ``Resource`` members, ``icons`` among them)."""
    kind = block["type"]
    _check_members(block, where, LINK if kind == "resource_link" else META)
    if "annotations" in block:
        annotations = block["annotations"]
        if not isinstance(annotations, dict):
            raise _bad(f"{where}.annotations must be an object")
        _check_members(annotations, f"{where}.annotations", ANNOTATIONS)
    if kind == "resource_link" and "icons" in block:
        icons = block["icons"]
        if not isinstance(icons, list):
            raise _bad(f"{where}.icons must be a list of icons")
        for index, icon in enumerate(icons):
            at = f"{where}.icons[{index}]"
            if not isinstance(icon, dict) or not isinstance(icon.get("src"), str):
                raise _bad(f"{at} must be an icon (an object) with a string 'src'")
            _check_members(icon, at, ICON)
    if kind == "resource":
        _check_members(block["resource"], f"{where}.resource", META)


def _check_block(block: Any, where: str) -> None:
    """Refuse ``block`` (named ``where``) unless it is a ``ContentBlock`` with the members
    its type requires, and its optional members, when given, of their types."""
    if not isinstance(block, dict):
        raise _bad(f"{where} must be a content block (an object), not {type(block).__name__}")
    kind = block.get("type")
    members = _BLOCK_STRINGS.get(kind) if isinstance(kind, str) else None
    if members is None:
        raise _bad(f"{where} has type {shown(kind)}: a content block is of type text, image, "
                   "audio, resource_link or resource")
    for member in members:
        if not isinstance(block.get(member), str):
            raise _bad(f"{where} ({kind}) needs a string {member!r}")
    if kind == "resource" and not _contents_item(block.get("resource")):
        raise _bad(f"{where} (resource) needs a resource with a string uri and a string "
                   "text or blob (and mimeType, when given)")
    _check_optional(block, where)
    _check_format(block_problem(block), f"{where} ({kind}) ")


def _check_format(found: FormatProblem | None, where: str) -> None:
    """Refuse a member out of the format the schema gives it (``found``), named after
    ``where``: a client checking the format refuses the whole result."""
    if found is not None:
        raise _bad(f"{where}{found[0].lstrip('.')} must be {found[1]}")


def _check_blocks(blocks: Any, what: str) -> list[JsonObject]:
    if not isinstance(blocks, list):
        raise _bad(f"{what} must be a list of content blocks")
    for index, block in enumerate(blocks):
        _check_block(block, f"{what}[{index}]")
    return blocks


_TO_JSON_TEXT = jsontext.reusable(json.JSONEncoder(ensure_ascii=False, allow_nan=False))


def _to_json_text(value: Any) -> str:
    try:
        return _TO_JSON_TEXT(value)
    except (TypeError, ValueError) as exc:
        raise _bad(f"value of type {type(value).__name__} is not JSON ({exc})") from exc


def _json_result(out: JsonObject) -> JsonObject:
    """``out`` when its ``_meta``, if any, is an object and it is JSON as a whole (RFC 8259:
    no sets, bytes or NaN anywhere), else the ``-32603`` naming the problem: a result the
    handler built itself passes through unread, and the transport could not write it."""
    if "_meta" in out and not isinstance(out["_meta"], dict):
        # Result._meta is an object (digest §1.1): refused whether or not the app adds
        # serverInfo to it, never sent as it is nor replaced.
        raise _bad("_meta must be an object")
    try:
        _TO_JSON_TEXT(out)
    except (TypeError, ValueError) as exc:
        raise _bad(f"the result is not JSON ({exc})") from exc
    return out


def tool_result(value: Any, *, output_schema: CompiledSchema | None = None) -> JsonObject:
    """A ``CallToolResult`` from a tool handler's value.

    - a mapping with ``content``: taken as the result itself;
    - a string: one text block;
    - ``None``: no content;
    - any other JSON value: its JSON text as one text block, and the value itself as
      ``structuredContent`` (2026-07-28 allows any JSON value there).

    With ``output_schema`` (the tool's ``outputSchema``), a result that is not an error
    (``isError``) must carry ``structuredContent`` that the schema accepts (-32603 when
    it does not, or when the schema itself cannot be used: :func:`unusable_schema`).
    """
    out = _tool_result(value)
    if output_schema is not None and out.get("isError") is not True:
        _check_structured(out, output_schema)
    return out


def _check_structured(out: JsonObject, output_schema: CompiledSchema) -> None:
    """Refuse a result without ``structuredContent`` that ``output_schema`` accepts: a tool
    that declares an output schema MUST return structured results conforming to it
    (server/tools.mdx § Output Schema). What is checked is the value as the client reads
    it (JSON: a tuple is an array, every key a string)."""
    if "structuredContent" not in out:
        raise _bad("the tool declares an outputSchema, so its result needs structuredContent")
    try:
        sent = json.loads(_to_json_text(out["structuredContent"]))
        problem = output_schema.problem(sent)
    except RecursionError:  # a schema that recurses with the value, deeper than Python does
        raise _bad("structuredContent is nested too deeply to check against the tool's "
                   "outputSchema") from None
    except Unresolvable:
        raise unusable_schema("outputSchema") from None
    if problem is not None:
        raise _bad(f"structuredContent does not match the tool's outputSchema: {problem}")


def _tool_result(value: Any) -> JsonObject:
    """:func:`tool_result` before the output schema."""
    if isinstance(value, Mapping) and "content" in value:
        out = dict(value)
        _check_blocks(out["content"], "content")
        if "isError" in out and not isinstance(out["isError"], bool):
            raise _bad("isError must be a boolean")
        return _json_result(out)
    if isinstance(value, str):
        return {"content": [text_block(value)]}
    if value is None:
        return {"content": []}
    return {"content": [text_block(_to_json_text(value))], "structuredContent": value}


def tool_error_result(exc: BaseException) -> JsonObject:
    """A ``CallToolResult`` with ``isError`` for a tool that raised: tool failures are
    reported in the result so the model can see them (server/tools.mdx § Error handling).
    The text is the exception's, or its type's name when it has none (or ``str`` of it
    fails: say, of a value nested too deeply to show)."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    return {"content": [text_block(text or type(exc).__name__)], "isError": True}


def prompt_result(value: Any) -> JsonObject:
    """A ``GetPromptResult`` from a prompt handler's value.

    - a mapping with ``messages``: taken as the result itself;
    - a string: one user message with that text;
    - a list: the messages (strings become user text messages).
    """
    if isinstance(value, Mapping) and "messages" in value:
        out = dict(value)
        out["messages"] = _messages(out["messages"])
        if "description" in out and not isinstance(out["description"], str):
            raise _bad("description must be a string")  # optional, a string (digest §1.3)
        return _json_result(out)
    if isinstance(value, str):
        return {"messages": _messages([value])}
    if isinstance(value, list):
        return _json_result({"messages": _messages(value)})
    raise _bad(f"a prompt returns messages, got {type(value).__name__}")


def _messages(items: Any) -> list[JsonObject]:
    if not isinstance(items, list):
        raise _bad("messages must be a list")
    out: list[JsonObject] = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            out.append({"role": "user", "content": text_block(item)})
            continue
        if (
            not isinstance(item, dict)
            or item.get("role") not in ("user", "assistant")
            or not isinstance(item.get("content"), dict)
        ):
            raise _bad("each message needs role 'user'|'assistant' and one content block")
        _check_block(item["content"], f"messages[{index}].content")
        out.append(item)
    return out


def caching_problem(ttl_ms: Any, cache_scope: Any) -> str | None:
    """What is wrong with a pair of caching hints, or ``None``: ``ttlMs`` is an integer of
    at least 0 (a bool is not one) and ``cacheScope`` is ``"public"`` or ``"private"``
    (caching.mdx; digest §3.2)."""
    if type(ttl_ms) is not int or ttl_ms < 0:  # bool and int subclasses are not integers here
        return f"ttlMs must be an integer of at least 0, not {shown(ttl_ms)}"
    if cache_scope not in ("public", "private"):
        return f"cacheScope must be 'public' or 'private', not {shown(cache_scope)}"
    return None


def resource_result(
    value: Any, *, uri: str, mime_type: str | None, ttl_ms: int, cache_scope: str
) -> JsonObject:
    """A ``ReadResourceResult`` from a resource handler's value, caching hints included.

    - a mapping with ``contents``: taken as the result itself;
    - a string: one text item for ``uri``; bytes: one base64 ``blob`` item;
    - a list: the contents items.
    ``ttlMs``/``cacheScope`` are required on a complete read (caching.mdx; digest §3.2) and
    filled from the resource's declaration when the handler did not set them.
    """
    built = True  # the handler built the contents itself: check they are JSON
    if isinstance(value, Mapping) and "contents" in value:
        out = dict(value)
    elif isinstance(value, str):
        built = False
        out = {"contents": [_item(uri, mime_type, text=value)]}
    elif isinstance(value, bytes | bytearray):
        built = False
        out = {"contents": [_item(uri, mime_type,
                                  blob=base64.b64encode(bytes(value)).decode("ascii"))]}
    elif isinstance(value, list):
        out = {"contents": value}
    else:
        raise _bad(f"a resource returns text, bytes or contents, got {type(value).__name__}")
    contents = out["contents"]
    if not isinstance(contents, list) or not contents or not all(map(_contents_item, contents)):
        # sep-2164: a read MUST NOT answer with an empty contents array.
        raise _bad("contents must be a non-empty list of items with a string uri and a "
                   "string text or blob (and mimeType, when given)")
    for index, item in enumerate(contents):
        _check_members(item, f"contents[{index}]", META)
        if built:  # bytes were encoded here: their blob needs no second look
            _check_format(contents_problem(item), f"contents[{index}].")
    out.setdefault("ttlMs", ttl_ms)
    out.setdefault("cacheScope", cache_scope)
    problem = caching_problem(out["ttlMs"], out["cacheScope"])
    if problem is not None:  # a handler's own hints, checked like the rest of its result
        raise _bad(problem)
    return _json_result(out) if built else out


def _contents_item(item: Any) -> bool:
    """Whether ``item`` is a ``TextResourceContents`` or ``BlobResourceContents``: a string
    ``uri`` and a ``text`` or ``blob``, each given a string, as is ``mimeType`` (digest
    §1.3)."""
    if not isinstance(item, dict) or not isinstance(item.get("uri"), str):
        return False
    bodies = [item[key] for key in ("text", "blob") if key in item]
    if not bodies or not all(isinstance(body, str) for body in bodies):
        return False
    return "mimeType" not in item or isinstance(item["mimeType"], str)


def _item(uri: str, mime_type: str | None, **body: str) -> JsonObject:
    out: JsonObject = {"uri": uri}
    if mime_type is not None:
        out["mimeType"] = mime_type
    out.update(body)
    return out
