"""Builders for the questions a handler asks, and readers for the answers it gets.

>>> form("Deploy to production?", confirm=bool)           # doctest: +SKIP
>>> form("Change ticket", {"type": "object", "properties": {...}, "required": [...]})
>>> url("Connect your account", "https://example.com/connect")
>>> sample("Summarise the plan", 200)
>>> roots()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias

from mrtr_core._checks import instance_of, optional_text, positive_int, shown
from mrtr_core.wire.formats import URI_FORMAT, content_problem, is_uri, preferences_problem
from mrtr_core.wire.models import (
    INCLUDE_CONTEXT_VALUES,
    CreateMessageRequest,
    CreateMessageResult,
    ElicitFormRequest,
    ElicitResult,
    ElicitUrlRequest,
    InputResponse,
    JsonObject,
    ListRootsRequest,
    ListRootsResult,
)
from mrtr_core.wire.records import record_maker

__all__ = [
    "FieldSpec",
    "accepted",
    "cancelled",
    "content",
    "declined",
    "form",
    "root_uris",
    "roots",
    "sample",
    "text",
    "url",
]

FieldSpec: TypeAlias = type | Sequence[str] | Mapping[str, Any]
"""A form field: ``bool``/``str``/``int``/``float``, a list of allowed strings (an enum),
or a property schema of the flat elicitation subset (digest §1.5)."""

_PRIMITIVES: dict[type, str] = {bool: "boolean", str: "string", int: "integer", float: "number"}


def _field_schema(name: str, spec: FieldSpec) -> JsonObject:
    if isinstance(spec, type):
        kind = _PRIMITIVES.get(spec)
        if kind is None:
            raise TypeError(f"field {name!r}: unsupported type {spec.__name__}")
        return {"type": kind}
    if isinstance(spec, Mapping):
        return dict(spec)
    if isinstance(spec, Sequence) and not isinstance(spec, str | bytes):
        options = list(spec)
        if not options or not all(isinstance(o, str) for o in options):
            raise TypeError(f"field {name!r}: an enum is a non-empty list of strings")
        return {"type": "string", "enum": options}
    raise TypeError(f"field {name!r}: unsupported field spec {spec!r}")


# A handler builds its questions again on every round: the form is made from the values
# checked above, without __init__ (every field given, in order).
_form_request: Final[Callable[[str, JsonObject, JsonObject], ElicitFormRequest]] = (
    record_maker(ElicitFormRequest)
)


def form(
    message: str, schema: Mapping[str, Any] | None = None, /, **fields: FieldSpec
) -> ElicitFormRequest:
    """A form-mode ``elicitation/create``.

    Either pass a whole ``requestedSchema`` (an object schema) or name the fields as keyword
    arguments; every keyword field is required. Never ask for secrets in form mode (S17).

    Raises:
        TypeError: ``message`` is not a string (digest §1.5 a: clients refuse any other),
            both a schema and fields were given, or a field spec is not one of the above.
        ValueError: ``schema`` is not an object schema with properties.
    """
    instance_of("message", message, str, "a string")
    if schema is not None and fields:
        raise TypeError("pass either a schema or fields, not both")
    if schema is not None:
        requested = dict(schema)
        if requested.get("type") != "object" or not isinstance(requested.get("properties"), dict):
            raise ValueError("requestedSchema must be an object schema with properties")
    else:
        properties: JsonObject = {}
        for name, spec in fields.items():
            kind = _PRIMITIVES.get(spec) if type(spec) is type else None  # the common case
            properties[name] = {"type": kind} if kind is not None else _field_schema(name, spec)
        requested = {"type": "object", "properties": properties, "required": list(fields)}
    return _form_request(message, requested, {})


def url(message: str, url: str) -> ElicitUrlRequest:
    """A URL-mode ``elicitation/create`` (for anything sensitive, S17).

    Raises:
        TypeError: ``message`` or ``url`` is not a string (digest §1.5 a: clients refuse
            any other).
        ValueError: ``url`` is not a URI with a scheme (elicitation.mdx § URL mode: it MUST
            be a valid URL; clients refuse any other).
    """
    instance_of("message", message, str, "a string")
    instance_of("url", url, str, "a string")
    if not is_uri(url):
        raise ValueError(f"url must be {URI_FORMAT}, got {shown(url)}")
    return ElicitUrlRequest(message=message, url=url)


def sample(
    messages: str | Sequence[str | Mapping[str, Any]],
    max_tokens: int,
    *,
    system_prompt: str | None = None,
    temperature: float | None = None,
    stop_sequences: Sequence[str] | None = None,
    model_preferences: Mapping[str, Any] | None = None,
    include_context: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> CreateMessageRequest:
    """A ``sampling/createMessage``. Plain strings become user text messages.

    ``tools``/``tool_choice`` need the client's ``sampling.tools`` (S6b), and an
    ``include_context`` other than ``"none"`` its ``sampling.context`` (S6c).

    Raises:
        ValueError: ``max_tokens`` is not an integer of at least 1 (digest §1.5 b: the
            schema types ``maxTokens`` as an integer, and clients refuse any other),
            ``include_context`` is not ``"none"``, ``"thisServer"`` or ``"allServers"``, a
            ``model_preferences`` priority is not a number from 0 to 1, or a message's
            block has a member out of its format (an image's ``data`` that is not base64:
            :mod:`~mrtr_core.wire.formats`).
        TypeError: ``messages`` is not a string or a list of strings and message mappings,
            ``stop_sequences`` not a list of strings, ``tools`` not a list of mappings,
            ``system_prompt`` not a string, ``temperature`` not a number or
            ``model_preferences`` not a mapping (digest §1.5 b).
            A mapping or a string is refused where a list is wanted: iterated, it would
            send its keys or characters instead.
    """
    positive_int("max_tokens", max_tokens)
    _check_sampling(messages, system_prompt, temperature, stop_sequences, include_context,
                    tools)
    if model_preferences is not None:
        instance_of("model_preferences", model_preferences, Mapping, "a mapping or None")
        found = preferences_problem(model_preferences)
        if found is not None:
            name = found[0].lstrip(".")
            raise ValueError(f"model_preferences {name} must be {found[1]}, got "
                             f"{shown(model_preferences[name])}")
    items = [messages] if isinstance(messages, str) else list(messages)
    wire_messages = [
        {"role": "user", "content": {"type": "text", "text": m}} if isinstance(m, str) else dict(m)
        for m in items
    ]
    extra: JsonObject = {}
    optional = {
        "temperature": temperature,
        "stopSequences": list(stop_sequences) if stop_sequences is not None else None,
        "modelPreferences": dict(model_preferences) if model_preferences is not None else None,
        "includeContext": include_context,
        "tools": [dict(t) for t in tools] if tools is not None else None,
        "toolChoice": dict(tool_choice) if tool_choice is not None else None,
        "metadata": dict(metadata) if metadata is not None else None,
    }
    for key, value in optional.items():
        if value is not None:
            extra[key] = value
    return CreateMessageRequest(
        messages=wire_messages, max_tokens=max_tokens, system_prompt=system_prompt, extra=extra
    )


def _a_list(value: Any) -> bool:
    """Whether ``value`` is a sequence that is neither a string nor bytes (nor a mapping)."""
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _check_sampling(
    messages: Any,
    system_prompt: Any,
    temperature: Any,
    stop_sequences: Any,
    include_context: Any,
    tools: Any,
) -> None:
    """The checks :func:`sample` makes of its arguments' shapes (see its docstring)."""
    if not isinstance(messages, str):
        if not _a_list(messages):
            raise TypeError(
                f"messages must be a string or a list of messages, not {type(messages).__name__}"
            )
        for index, item in enumerate(messages):
            if not isinstance(item, str | Mapping):
                raise TypeError(f"messages[{index}] must be a string or a mapping, not "
                                f"{type(item).__name__}")
            found = None if isinstance(item, str) else content_problem(item.get("content"))
            if found is not None:  # clients refuse the request (schema.json formats)
                raise ValueError(f"messages[{index}].content{found[0]} must be {found[1]}")
    optional_text("system_prompt", system_prompt)
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, int | float)
    ):
        raise TypeError(f"temperature must be a number or None, not {type(temperature).__name__}")
    if stop_sequences is not None and not (
        _a_list(stop_sequences) and all(isinstance(s, str) for s in stop_sequences)
    ):
        raise TypeError(f"stop_sequences must be a list of strings, not {stop_sequences!r}")
    if include_context is not None and include_context not in INCLUDE_CONTEXT_VALUES:
        raise ValueError(
            f"include_context must be 'none', 'thisServer' or 'allServers', not "
            f"{include_context!r}"
        )
    if tools is not None and not (
        _a_list(tools) and all(isinstance(t, Mapping) for t in tools)
    ):
        raise TypeError(f"tools must be a list of tool mappings, not {type(tools).__name__}")


def roots() -> ListRootsRequest:
    """A ``roots/list``."""
    return ListRootsRequest()


# --- reading answers ------------------------------------------------------------------------


def accepted(answer: InputResponse) -> bool:
    """The user accepted an elicitation (in URL mode: only consented to open the URL)."""
    return isinstance(answer, ElicitResult) and answer.action == "accept"


def declined(answer: InputResponse) -> bool:
    """The user declined an elicitation."""
    return isinstance(answer, ElicitResult) and answer.action == "decline"


def cancelled(answer: InputResponse) -> bool:
    """The user dismissed an elicitation without choosing."""
    return isinstance(answer, ElicitResult) and answer.action == "cancel"


def content(answer: InputResponse) -> dict[str, Any] | None:
    """The form content of an accepted elicitation (validated against the requested
    schema by the engine), ``{}`` for an accept without content, ``None`` otherwise."""
    if not accepted(answer):
        return None
    assert isinstance(answer, ElicitResult)
    return dict(answer.content) if answer.content is not None else {}


def text(answer: CreateMessageResult) -> str:
    """The text blocks of a sampling answer, joined."""
    blocks = answer.content if isinstance(answer.content, list) else [answer.content]
    return "".join(
        b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def root_uris(answer: ListRootsResult) -> list[str]:
    """The URIs of a roots answer."""
    return [root.uri for root in answer.roots]
