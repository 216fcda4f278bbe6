"""Hand-written readers for the messages every round carries, exact twins of the converter.

The server reads a request's ``_meta``, its params and its answers on every round. The
cattrs converter (:mod:`mrtr_core.wire.converter`) is the reference; these functions give
the same value for the same input without its generic machinery. Each one accepts only
input whose every field has exactly the expected JSON type (``str`` keys, ``dict``
objects, ``str``/``int`` scalars, ``None`` for absent optional members) and builds the
result directly; anything else (a wrong type, a missing field, a value the converter would
coerce) goes to the converter function itself, so errors, their paths and every coercion
stay the converter's. ``tests/wire/test_wire_fast.py`` checks the two agree.
"""

from __future__ import annotations

from typing import Any, Final

from mrtr_core.wire.converter import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    structure_input_response,
    structure_params,
    structure_request_meta,
    unstructure,
)
from mrtr_core.wire.models import (
    CALL_TOOL,
    ELICITATION_CREATE,
    GET_PROMPT,
    READ_RESOURCE,
    ROOTS_LIST,
    SAMPLING_CREATE_MESSAGE,
    CallToolParams,
    ClientCapabilities,
    CreateMessageResult,
    ElicitationCapability,
    ElicitResult,
    GetPromptParams,
    Implementation,
    InputResponse,
    JsonObject,
    ListRootsResult,
    MrtrParams,
    ReadResourceParams,
    RequestMeta,
    Root,
    SamplingCapability,
)

__all__ = [
    "read_input_response",
    "read_params",
    "read_request_meta",
    "unstructure_input_response",
]

_MISSING: Final = object()
_META_KEYS: Final = frozenset(
    {META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, "progressToken"}
)
_CAPABILITY_KEYS: Final = frozenset(
    {"elicitation", "sampling", "roots", "experimental", "extensions"}
)
_IMPLEMENTATION_KEYS: Final = frozenset({"name", "version", "title"})
_PARAM_KEYS: Final = frozenset({"_meta", "inputResponses", "requestState"})
_NAMED_KEYS: Final = _PARAM_KEYS | {"name", "arguments"}
_URI_KEYS: Final = _PARAM_KEYS | {"uri"}
_ACTIONS: Final = frozenset({"accept", "decline", "cancel"})
_ROLES: Final = frozenset({"user", "assistant"})


class _Slow(Exception):
    """Not for the fast path: let the converter read it."""


def _object(value: Any) -> JsonObject | None:
    """A ``JsonObject | None`` member: the converter copies a dict (string keys)."""
    if value is None:
        return None
    if type(value) is not dict:
        raise _Slow
    for key in value:
        if type(key) is not str:
            raise _Slow
    return dict(value)


def _optional_str(value: Any) -> str | None:
    if value is None or type(value) is str:
        return value
    raise _Slow


def _extra(obj: dict[str, Any], known: frozenset[str]) -> JsonObject:
    if len(obj) <= len(known) and known.issuperset(obj):
        return {}
    return {key: value for key, value in obj.items() if key not in known}


def _capabilities(value: Any) -> ClientCapabilities:
    if type(value) is not dict:
        raise _Slow
    get = value.get
    elicitation = get("elicitation")
    if elicitation is not None:
        if type(elicitation) is not dict:
            raise _Slow
        elicitation = ElicitationCapability(
            form=_object(elicitation.get("form")), url=_object(elicitation.get("url"))
        )
    sampling = get("sampling")
    if sampling is not None:
        if type(sampling) is not dict:
            raise _Slow
        sampling = SamplingCapability(
            context=_object(sampling.get("context")), tools=_object(sampling.get("tools"))
        )
    return ClientCapabilities(
        elicitation=elicitation,
        sampling=sampling,
        roots=_object(get("roots")),
        experimental=_object(get("experimental")),
        extensions=_object(get("extensions")),
        extra=_extra(value, _CAPABILITY_KEYS),
    )


def _implementation(value: Any) -> Implementation | None:
    if value is None:
        return None
    if type(value) is not dict:
        raise _Slow
    name = value.get("name")
    version = value.get("version")
    if type(name) is not str or type(version) is not str:
        raise _Slow
    return Implementation(
        name=name,
        version=version,
        title=_optional_str(value.get("title")),
        extra=_extra(value, _IMPLEMENTATION_KEYS),
    )


def read_request_meta(obj: Any, *, path: str = "params._meta") -> RequestMeta:
    """:func:`~mrtr_core.wire.converter.structure_request_meta`, without cattrs."""
    if type(obj) is dict:
        version = obj.get(META_PROTOCOL_VERSION)
        token = obj.get("progressToken")
        if (
            type(version) is str
            and META_CLIENT_CAPABILITIES in obj
            and (token is None or type(token) is str or type(token) is int)
        ):
            try:
                return RequestMeta(
                    protocol_version=version,
                    client_capabilities=_capabilities(obj[META_CLIENT_CAPABILITIES]),
                    client_info=_implementation(obj.get(META_CLIENT_INFO)),
                    progress_token=token,
                    extra=_extra(obj, _META_KEYS),
                )
            except _Slow:
                pass
    return structure_request_meta(obj, path=path)


def read_params(
    method: str, obj: Any, *, meta: RequestMeta | None = None, path: str = "params"
) -> MrtrParams:
    """:func:`~mrtr_core.wire.converter.structure_params`, without cattrs.

    Args:
        method: ``tools/call``, ``prompts/get`` or ``resources/read``.
        obj: The request's params.
        meta: ``read_request_meta(obj["_meta"])`` when the caller already has it (read once
            per request); read here otherwise.
        path: Where ``obj`` sits, for error messages.
    """
    if type(obj) is dict:
        responses = obj.get("inputResponses")
        state = obj.get("requestState")
        if (responses is None or type(responses) is dict) and (
            state is None or type(state) is str
        ):
            if meta is None:
                meta = read_request_meta(obj.get("_meta"), path=f"{path}._meta")
            if method in (CALL_TOOL, GET_PROMPT):
                name = obj.get("name")
                arguments = obj.get("arguments")
                if type(name) is str and (arguments is None or type(arguments) is dict):
                    if method == CALL_TOOL:
                        return CallToolParams(
                            name=name, meta=meta, arguments=arguments,
                            input_responses=responses, request_state=state,
                            extra=_extra(obj, _NAMED_KEYS),
                        )
                    if arguments is None or all(type(v) is str for v in arguments.values()):
                        return GetPromptParams(
                            name=name, meta=meta, arguments=arguments,
                            input_responses=responses, request_state=state,
                            extra=_extra(obj, _NAMED_KEYS),
                        )
            elif method == READ_RESOURCE:
                uri = obj.get("uri")
                if type(uri) is str:
                    return ReadResourceParams(
                        uri=uri, meta=meta, input_responses=responses, request_state=state,
                        extra=_extra(obj, _URI_KEYS),
                    )
    return structure_params(method, obj, path=path)


def _elicit_value(value: Any) -> bool:
    cls = type(value)
    if cls is str or cls is bool or cls is int or cls is float:
        return True
    return cls is list and all(type(item) is str for item in value)


def _root(value: Any) -> Root:
    if type(value) is not dict or type(value.get("uri")) is not str:
        raise _Slow
    return Root(uri=value["uri"], name=_optional_str(value.get("name")),
                meta=_object(value.get("_meta")))


def read_input_response(kind: str, obj: Any, *, path: str = "inputResponse") -> InputResponse:
    """:func:`~mrtr_core.wire.converter.structure_input_response`, without cattrs."""
    if type(obj) is dict:
        try:
            if kind == ELICITATION_CREATE:
                action = obj.get("action")
                content = obj.get("content")
                if type(action) is str and action in _ACTIONS and (
                    content is None
                    or (type(content) is dict and all(
                        type(key) is str and _elicit_value(item) for key, item in content.items()
                    ))
                ):
                    # The converter keeps the content object itself (no copy).
                    return ElicitResult(action=action, content=content)  # type: ignore[arg-type]
            elif kind == SAMPLING_CREATE_MESSAGE:
                role = obj.get("role")
                content = obj.get("content")
                model = obj.get("model")
                if (
                    type(role) is str
                    and role in _ROLES
                    and type(model) is str
                    and (type(content) is dict or (
                        type(content) is list and all(type(b) is dict for b in content)
                    ))
                ):
                    return CreateMessageResult(
                        role=role,  # type: ignore[arg-type]
                        content=content,
                        model=model,
                        stop_reason=_optional_str(obj.get("stopReason")),
                        meta=_object(obj.get("_meta")),
                    )
            elif kind == ROOTS_LIST:
                roots = obj.get("roots")
                if type(roots) is list:
                    return ListRootsResult(roots=[_root(item) for item in roots])
        except _Slow:
            pass
    return structure_input_response(kind, obj, path=path)


def unstructure_input_response(answer: InputResponse) -> JsonObject:
    """``converter.unstructure(answer)`` for the three answer types (others: the
    converter)."""
    cls = type(answer)
    if cls is ElicitResult:
        assert isinstance(answer, ElicitResult)
        out: JsonObject = {"action": answer.action}
        if answer.content is not None:
            out["content"] = dict(answer.content)
        return out
    if cls is CreateMessageResult:
        assert isinstance(answer, CreateMessageResult)
        out = {"role": answer.role, "content": _copy_blocks(answer.content),
               "model": answer.model}
        if answer.stop_reason is not None:
            out["stopReason"] = answer.stop_reason
        if answer.meta is not None:
            out["_meta"] = dict(answer.meta)
        return out
    if cls is ListRootsResult:
        assert isinstance(answer, ListRootsResult)
        roots: list[JsonObject] = []
        for root in answer.roots:
            if type(root) is not Root:
                return unstructure(answer)  # type: ignore[no-any-return]
            item: JsonObject = {"uri": root.uri}
            if root.name is not None:
                item["name"] = root.name
            if root.meta is not None:
                item["_meta"] = dict(root.meta)
            roots.append(item)
        return {"roots": roots}
    return unstructure(answer)  # type: ignore[no-any-return]


def _copy_blocks(content: Any) -> Any:
    if type(content) is dict:
        return dict(content)
    if type(content) is list:
        return [dict(block) if type(block) is dict else block for block in content]
    return unstructure(content)
