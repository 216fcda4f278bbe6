"""The one cattrs converter: camelCase and ``_meta`` keys live here and nowhere else.

Every function that reads a peer's value raises :class:`~mrtr_core.errors.CodecError` (with
the path of the bad field) and nothing else, so callers have one error type to handle.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeGuard, TypeVar, cast, get_origin

import attrs
import cattrs
from cattrs.cols import list_structure_factory
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from mrtr_core._checks import shown
from mrtr_core.errors import CodecError
from mrtr_core.wire.formats import (
    URI_FORMAT,
    FormatProblem,
    block_problem,
    content_problem,
    contents_problem,
    is_uri,
    preferences_problem,
)
from mrtr_core.wire.forms import FormSchemaError, _bare_form, check_requested_schema
from mrtr_core.wire.models import (
    CALL_TOOL,
    ELICITATION_CREATE,
    GET_PROMPT,
    INCLUDE_CONTEXT_VALUES,
    READ_RESOURCE,
    ROOTS_LIST,
    SAMPLING_CREATE_MESSAGE,
    CallToolParams,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageResult,
    ElicitationCapability,
    ElicitFormRequest,
    ElicitResult,
    ElicitUrlRequest,
    GetPromptParams,
    Implementation,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    JsonObject,
    ListRootsRequest,
    ListRootsResult,
    MrtrParams,
    ReadResourceParams,
    RequestMeta,
    Root,
    SamplingCapability,
    WireValueError,
)
from mrtr_core.wire.records import record_maker

__all__ = [
    "check_complete_result",
    "converter",
    "structure_client_capabilities",
    "structure_input_request",
    "structure_input_required",
    "structure_input_response",
    "structure_params",
    "structure_request_meta",
    "unstructure",
    "unstructure_input_request",
    "unstructure_input_required",
    "unstructure_params",
]

T = TypeVar("T")

converter = cattrs.Converter(forbid_extra_keys=False)


def _structure_progress_token(obj: Any, _: type) -> str | int | None:
    if obj is None or (isinstance(obj, str | int) and not isinstance(obj, bool)):
        return obj
    raise CodecError("progressToken must be a string or an integer")


def _is_elicit_value(value: Any) -> bool:
    # ElicitResult.content values: string, number, boolean or string[] (digest §1.6, §5.12).
    if isinstance(value, str | int | float | bool):
        return True
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _structure_elicit_content(
    obj: Any, _: type
) -> dict[str, str | int | float | bool | list[str]] | None:
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise CodecError("content must be an object")
    for key, value in obj.items():
        if not _is_elicit_value(value):
            raise CodecError(f"content[{key!r}] must be a string, number, boolean or string array")
    return obj


converter.register_structure_hook(str | int | None, _structure_progress_token)
converter.register_structure_hook(
    dict[str, str | int | float | bool | list[str]] | None, _structure_elicit_content
)


def _structure_str(obj: Any, _: type) -> str:
    # A wire string is a JSON string: 5 or null is refused, never turned into "5" or
    # "None" (S13: a value of the wrong type is a schema violation, digest §2.5).
    if isinstance(obj, str):
        return obj
    raise CodecError(f"expected a string, got {type(obj).__name__}")


def _is_list_type(type_: Any) -> bool:
    return get_origin(type_) is list


def _strict_list_factory(type_: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """A JSON array and nothing else: an object or a string is refused, never iterated
    (its keys or characters would pass for items)."""
    items = list_structure_factory(type_, conv)

    def structure(obj: Any, t: Any) -> Any:
        if not isinstance(obj, list):
            raise CodecError(f"expected an array, got {type(obj).__name__}")
        return items(obj, t)

    return structure


def _is_block(obj: Any) -> TypeGuard[dict[str, Any]]:
    # Every content block (text, image, audio, tool_use, tool_result) names its `type`.
    return isinstance(obj, dict) and isinstance(obj.get("type"), str)


def _structure_content(obj: Any, _: type) -> dict[str, Any] | list[dict[str, Any]]:
    if _is_block(obj) or (isinstance(obj, list) and all(_is_block(o) for o in obj)):
        found = content_problem(obj)
        if found is not None:
            raise CodecError(f"content{found[0]} must be {found[1]}")
        return cast("dict[str, Any] | list[dict[str, Any]]", obj)
    raise CodecError(
        "content must be a block or an array of blocks, each an object with a string 'type'"
    )


converter.register_structure_hook(str, _structure_str)
converter.register_structure_hook_factory(_is_list_type, _strict_list_factory)
converter.register_structure_hook(dict[str, Any] | list[dict[str, Any]], _structure_content)

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

_SPECIAL_NAMES = {
    "meta": "_meta",
    "protocol_version": META_PROTOCOL_VERSION,
    "client_capabilities": META_CLIENT_CAPABILITIES,
    "client_info": META_CLIENT_INFO,
    "progress_token": "progressToken",
}


def _camel(name: str) -> str:
    if name in _SPECIAL_NAMES:
        return _SPECIAL_NAMES[name]
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _wire_names(cls: type) -> dict[str, str]:
    """Python field name -> wire key, for the fields that travel (init fields, not extra)."""
    return {
        f.name: _camel(f.name)
        for f in attrs.fields(cls)
        if f.init and f.name != "extra"
    }


def _register_open_object(cls: Any) -> None:
    """Hooks for a flat wire object: camelCase keys, ``None`` omitted, unknown keys kept in
    ``extra`` when the class has one (and dropped otherwise)."""
    names = _wire_names(cls)
    known_keys = set(names.values())
    has_extra = "extra" in attrs.fields_dict(cls)
    overrides: dict[str, Any] = {
        name: override(rename=wire, omit_if_default=attrs.fields_dict(cls)[name].default is None)
        for name, wire in names.items()
    }
    if has_extra:
        overrides["extra"] = override(omit=True)
    base_structure = make_dict_structure_fn(cls, converter, **overrides)
    base_unstructure = make_dict_unstructure_fn(cls, converter, **overrides)

    def structure(obj: Any, _: type) -> Any:
        if not isinstance(obj, dict):
            raise CodecError(f"expected an object, got {type(obj).__name__}")
        value = base_structure(obj, cls)
        if has_extra:
            extra = {k: v for k, v in obj.items() if k not in known_keys}
            if extra:
                value = attrs.evolve(value, extra=extra)
        return value

    def unstructure(value: Any) -> JsonObject:
        out: JsonObject = base_unstructure(value)
        if has_extra:
            for key, item in value.extra.items():
                out.setdefault(key, item)
        return out

    converter.register_structure_hook(cls, structure)
    converter.register_unstructure_hook(cls, unstructure)


for _cls in (
    Implementation,
    ElicitationCapability,
    SamplingCapability,
    ClientCapabilities,
    RequestMeta,
    ElicitResult,
    CreateMessageResult,
    Root,
    ListRootsResult,
):
    _register_open_object(_cls)


def _describe(exc: BaseException, type_: type | None) -> str:
    if isinstance(exc, CodecError | WireValueError):
        return str(exc)
    return cattrs.v.format_exception(exc, type_)


def _member(path: str, key: str) -> str:
    """``path`` extended by the wire key ``key`` (bracketed when it is not a plain name)."""
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"


def _problems(exc: BaseException, path: str) -> list[str]:
    """Every failure under ``exc`` as ``problem @ path``, the path spelled in wire keys.

    What ``cattrs.transform_error`` gives, except that a field is named by its key on the
    wire (``clientCapabilities``, not the attribute ``client_capabilities``): the peer
    that sent it knows only that name.
    """
    found: list[tuple[BaseException, str, Any]]
    without: Sequence[BaseException]
    if isinstance(exc, cattrs.IterableValidationError):
        items, without = exc.group_exceptions()
        found = [(inner, f"{path}[{note.index!r}]", note.type) for inner, note in items]
    elif isinstance(exc, cattrs.ClassValidationError):
        fields, without = exc.group_exceptions()
        found = [(inner, _member(path, _camel(note.name)), note.type) for inner, note in fields]
    else:
        return [f"{_describe(exc, None)} @ {path}"]
    problems: list[str] = []
    for inner, where, type_ in found:
        if isinstance(inner, cattrs.BaseValidationError):
            problems += _problems(inner, where)
        else:
            problems.append(f"{_describe(inner, type_)} @ {where}")
    problems += [f"{_describe(inner, None)} @ {path}" for inner in without]
    return problems


def _run(fn: Callable[[], T], path: str) -> T:
    """Run a structuring step, turning every failure into a CodecError naming ``path``."""
    try:
        return fn()
    except CodecError as exc:
        raise CodecError(str(exc), path=path) from exc
    except cattrs.BaseValidationError as exc:
        raise CodecError("; ".join(_problems(exc, path))) from exc
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise CodecError(str(exc) or type(exc).__name__, path=path) from exc


def unstructure(value: Any) -> Any:
    """Turn any wire model (or container of them) into plain JSON-ready data."""
    return converter.unstructure(value)


# --- _meta ----------------------------------------------------------------------------------


def structure_client_capabilities(
    obj: Any, *, path: str = "clientCapabilities"
) -> ClientCapabilities:
    """Read a ``ClientCapabilities`` object."""
    return _run(lambda: converter.structure(obj, ClientCapabilities), path)


def structure_request_meta(obj: Any, *, path: str = "params._meta") -> RequestMeta:
    """Read per-request ``_meta``; the protocol version and capabilities are required."""
    if not isinstance(obj, dict):
        raise CodecError("required _meta is missing or not an object", path=path)
    for key in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES):
        if key not in obj:
            raise CodecError(f"required key {key!r} is missing", path=path)
    if not isinstance(obj[META_PROTOCOL_VERSION], str):
        raise CodecError(
            "protocol version must be a string", path=f"{path}.{META_PROTOCOL_VERSION}"
        )
    return _run(lambda: converter.structure(obj, RequestMeta), path)


# --- input requests ---------------------------------------------------------------------------


def structure_input_request(obj: Any, *, path: str = "inputRequest") -> InputRequest:
    """Read one ``inputRequests`` value (``{method, params}``), dispatching on ``method``.

    Raises:
        CodecError: the value is malformed or names an unknown kind.
    """
    if not isinstance(obj, dict):
        raise CodecError("an input request must be an object", path=path)
    method = obj.get("method")
    params = obj.get("params")
    if method == ROOTS_LIST:
        if params is not None and not isinstance(params, dict):
            raise CodecError("params must be an object", path=f"{path}.params")
        meta = (params or {}).get("_meta")
        if meta is not None and not isinstance(meta, dict):
            raise CodecError("_meta must be an object", path=f"{path}.params._meta")
        return ListRootsRequest(meta=meta)
    if not isinstance(params, dict):
        raise CodecError("params must be an object", path=f"{path}.params")
    if method == ELICITATION_CREATE:
        return _structure_elicit(params, f"{path}.params")
    if method == SAMPLING_CREATE_MESSAGE:
        return _structure_sampling(params, f"{path}.params")
    raise CodecError(f"unknown input request kind {method!r}", path=f"{path}.method")


def _require_str(params: JsonObject, key: str, path: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise CodecError(f"{key!r} must be a string", path=path)
    return value


_FORM_KEYS: Final = frozenset({"mode", "message", "requestedSchema"})
# Built from values checked here: no __init__, no keyword dict (fields in order).
_form_request: Final[Callable[[str, JsonObject, JsonObject], ElicitFormRequest]] = (
    record_maker(ElicitFormRequest)
)
_input_required_result: Final[
    Callable[[dict[str, InputRequest] | None, str | None, JsonObject | None], InputRequiredResult]
] = record_maker(InputRequiredResult)
_URL_KEYS: Final = frozenset({"mode", "message", "url"})


def _structure_elicit(params: JsonObject, path: str) -> ElicitFormRequest | ElicitUrlRequest:
    mode = params.get("mode", "form")  # C9: no mode means form mode.
    message = _require_str(params, "message", path)
    if mode == "url":
        url = _require_str(params, "url", path)
        if not is_uri(url):  # elicitation.mdx § URL mode: it MUST be a valid URL
            raise CodecError(f"must be {URI_FORMAT}", path=f"{path}.url")
        extra = {k: v for k, v in params.items() if k not in _URL_KEYS}
        return ElicitUrlRequest(message=message, url=url, extra=extra)
    if mode != "form":
        raise CodecError(f"unknown elicitation mode {mode!r}", path=f"{path}.mode")
    schema = params.get("requestedSchema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise CodecError("requestedSchema must be an object schema", path=f"{path}.requestedSchema")
    if not isinstance(schema.get("properties"), dict):
        raise CodecError(
            "requestedSchema.properties must be an object", path=f"{path}.requestedSchema"
        )
    try:
        check_requested_schema(schema)
    except FormSchemaError as exc:
        where = f"{path}.requestedSchema"
        if exc.field:
            where = _member(f"{where}.properties", exc.field)
        raise CodecError(exc.problem, path=where) from exc
    extra = {k: v for k, v in params.items() if k not in _FORM_KEYS}
    return ElicitFormRequest(message=message, requested_schema=schema, extra=extra)


def _check_sampling_message(message: Any, path: str) -> None:
    # SamplingMessage: {role: "user" | "assistant", content: block or block[]} (digest §1.5 b)
    if not isinstance(message, dict):
        raise CodecError("a sampling message must be an object", path=path)
    if message.get("role") not in ("user", "assistant"):
        raise CodecError(f"role must be 'user' or 'assistant', not {message.get('role')!r}",
                         path=f"{path}.role")
    content = message.get("content")
    if isinstance(content, list):
        for index, block in enumerate(content):
            _check_block(block, f"{path}.content[{index}]")
    elif _is_block(content):
        _refuse(block_problem(content), f"{path}.content")
    else:
        raise CodecError("content must be a block or an array of blocks",
                         path=f"{path}.content")


_TOOL_CHOICE_MODES: Final = ("auto", "required", "none")


def _check_sampling_options(params: JsonObject, path: str) -> None:
    """The optional members of ``CreateMessageRequestParams``, each of its type (digest
    §1.5 b): a handler reads them as such."""
    context = params.get("includeContext")
    if context is not None and context not in INCLUDE_CONTEXT_VALUES:
        raise CodecError(f"includeContext must be 'none', 'thisServer' or 'allServers', not "
                         f"{context!r}", path=f"{path}.includeContext")
    temperature = params.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, int | float)
    ):
        raise CodecError("temperature must be a number", path=f"{path}.temperature")
    stops = params.get("stopSequences")
    if stops is not None and (
        not isinstance(stops, list) or not all(isinstance(s, str) for s in stops)
    ):
        raise CodecError("stopSequences must be an array of strings",
                         path=f"{path}.stopSequences")
    for key in ("modelPreferences", "metadata", "toolChoice"):
        value = params.get(key)
        if value is not None and not isinstance(value, dict):
            raise CodecError(f"{key} must be an object", path=f"{path}.{key}")
    preferences = params.get("modelPreferences")
    if preferences is not None:
        _refuse(preferences_problem(preferences), f"{path}.modelPreferences")
    choice = params.get("toolChoice")
    if choice is not None and choice.get("mode", "auto") not in _TOOL_CHOICE_MODES:
        raise CodecError(f"mode must be 'auto', 'required' or 'none', not "
                         f"{choice.get('mode')!r}", path=f"{path}.toolChoice.mode")
    tools = params.get("tools")
    if tools is None:
        return
    if not isinstance(tools, list):
        raise CodecError("tools must be an array of tools", path=f"{path}.tools")
    for index, tool in enumerate(tools):
        where = f"{path}.tools[{index}]"
        if not isinstance(tool, dict):
            raise CodecError("a tool must be an object", path=where)
        _require_str(tool, "name", f"{where}.name")
        if not isinstance(tool.get("inputSchema"), dict):
            raise CodecError("a tool needs an inputSchema object", path=f"{where}.inputSchema")


def _structure_sampling(params: JsonObject, path: str) -> CreateMessageRequest:
    messages = params.get("messages")
    if not isinstance(messages, list):
        raise CodecError("messages must be an array of objects", path=f"{path}.messages")
    for index, message in enumerate(messages):
        _check_sampling_message(message, f"{path}.messages[{index}]")
    max_tokens = params.get("maxTokens")
    if (
        isinstance(max_tokens, bool)
        or not isinstance(max_tokens, int | float)
        or (isinstance(max_tokens, float) and not math.isfinite(max_tokens))
    ):
        raise CodecError("maxTokens must be a finite number", path=f"{path}.maxTokens")
    # The JSON Schema types maxTokens as integer (the TS file says number; digest §1.5 b and
    # open question 12), and the client MUST respect it (C12). A fraction is not truncated
    # to some other limit but refused; 64.0 is an integer to JSON Schema, the same value.
    if isinstance(max_tokens, float) and not max_tokens.is_integer():
        raise CodecError(f"maxTokens must be a whole number of tokens, got {max_tokens!r}",
                         path=f"{path}.maxTokens")
    if max_tokens <= 0:  # no budget to respect: nothing can be sampled within it
        raise CodecError(f"maxTokens must be positive, got {max_tokens!r}",
                         path=f"{path}.maxTokens")
    system_prompt = params.get("systemPrompt")
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise CodecError("systemPrompt must be a string", path=f"{path}.systemPrompt")
    _check_sampling_options(params, path)
    extra = {k: v for k, v in params.items() if k not in {"messages", "maxTokens", "systemPrompt"}}
    return CreateMessageRequest(
        messages=messages, max_tokens=int(max_tokens), system_prompt=system_prompt, extra=extra
    )


def unstructure_input_request(request: InputRequest) -> JsonObject:
    """Write one input request as the wire's bare ``{method, params}``."""
    if isinstance(request, ListRootsRequest):
        out: JsonObject = {"method": ROOTS_LIST}
        if request.meta is not None:
            out["params"] = {"_meta": request.meta}
        return out
    params: JsonObject
    if isinstance(request, ElicitFormRequest):
        params = {"mode": "form", "message": request.message,
                  "requestedSchema": request.requested_schema}
    elif isinstance(request, ElicitUrlRequest):
        params = {"mode": "url", "message": request.message, "url": request.url}
    else:
        params = {"messages": request.messages, "maxTokens": request.max_tokens}
        if request.system_prompt is not None:
            params["systemPrompt"] = request.system_prompt
    for key, value in request.extra.items():
        params.setdefault(key, value)
    return {"method": request.method, "params": params}


# --- input responses --------------------------------------------------------------------------

_RESPONSE_TYPES: dict[str, type[InputResponse]] = {
    ELICITATION_CREATE: ElicitResult,
    SAMPLING_CREATE_MESSAGE: CreateMessageResult,
    ROOTS_LIST: ListRootsResult,
}


def structure_input_response(kind: str, obj: Any, *, path: str = "inputResponse") -> InputResponse:
    """Read one ``inputResponses`` value as the response type of the request ``kind``.

    Responses carry no discriminator; the server knows the kind from the key it issued.
    """
    cls = _RESPONSE_TYPES.get(kind)
    if cls is None:
        raise CodecError(f"unknown input request kind {kind!r}", path=path)
    if not isinstance(obj, dict):
        raise CodecError("an input response must be an object", path=path)
    value = _run(lambda: converter.structure(obj, cls), path)
    if isinstance(value, ElicitResult) and value.action not in ("accept", "decline", "cancel"):
        raise CodecError(f"unknown action {value.action!r}", path=f"{path}.action")
    return value


# --- input_required results -------------------------------------------------------------------


def structure_input_required(obj: Any, *, path: str = "result") -> InputRequiredResult:
    """Read a result whose ``resultType`` is ``input_required``.

    Enforces S5: at least one of ``inputRequests`` and ``requestState`` (an empty
    ``inputRequests`` map counts as absent, digest §5.2).
    """
    if not isinstance(obj, dict):
        raise CodecError("result must be an object", path=path)
    raw_requests = obj.get("inputRequests")
    state = obj.get("requestState")
    meta = obj.get("_meta")
    if state is not None and type(state) is not str and not isinstance(state, str):
        raise CodecError("requestState must be a string", path=f"{path}.requestState")
    if meta is not None and type(meta) is not dict and not isinstance(meta, dict):
        raise CodecError("_meta must be an object", path=f"{path}._meta")
    requests: dict[str, InputRequest] | None = None
    if raw_requests is not None:
        if type(raw_requests) is not dict and not isinstance(raw_requests, dict):
            raise CodecError("inputRequests must be an object", path=f"{path}.inputRequests")
        requests = {}
        for key, value in raw_requests.items():
            # Fast path for the commonest entry, a well-formed form-mode elicitation of
            # bare fields: the same checks as _structure_elicit, on exact types, and the
            # same model, built without __init__ (every field is given). Anything it does
            # not accept takes the full path, which gives every error (and its path).
            # (Subscripts, not .get: a missing key raises KeyError, which means "not this
            # shape", and exact dicts have no __missing__.)
            if type(value) is dict:
                try:
                    params = value["params"]
                    if type(params) is dict and value["method"] == ELICITATION_CREATE:
                        message = params["message"]
                        schema = params["requestedSchema"]
                        if (
                            type(message) is str
                            and type(schema) is dict
                            and schema["type"] == "object"
                            and _bare_form(schema)
                        ):
                            size = len(params)
                            if size == 2:  # message and requestedSchema, nothing else
                                requests[key] = _form_request(message, schema, {})
                                continue
                            if params.get("mode", "form") == "form":
                                requests[key] = _form_request(
                                    message,
                                    schema,
                                    {} if size == 3 and "mode" in params else {
                                        k: v for k, v in params.items() if k not in _FORM_KEYS
                                    },
                                )
                                continue
                except KeyError:
                    pass
            requests[key] = structure_input_request(value, path=f"{path}.inputRequests.{key}")
        if not requests:
            requests = None  # an empty map counts as absent (digest §5.2)
    if requests is None and state is None:
        raise CodecError(
            "input_required result carries neither inputRequests nor requestState", path=path
        )
    return _input_required_result(requests, state, meta)


def unstructure_input_required(result: InputRequiredResult) -> JsonObject:
    """Write an ``input_required`` result, ``resultType`` included."""
    out: JsonObject = {"resultType": "input_required"}
    if result.input_requests is not None:
        out["inputRequests"] = {
            key: unstructure_input_request(req) for key, req in result.input_requests.items()
        }
    if result.request_state is not None:
        out["requestState"] = result.request_state
    if result.meta is not None:
        out["_meta"] = result.meta
    return out


# --- complete results of the MRTR methods ------------------------------------------------------


def _refuse(found: FormatProblem | None, path: str) -> None:
    """Raise the CodecError for a member out of its format (``found``) under ``path``."""
    if found is not None:
        raise CodecError(f"must be {found[1]}", path=path + found[0])


def _check_block(block: Any, path: str) -> None:
    if not isinstance(block, dict):
        raise CodecError("a content block must be an object", path=path)
    if not isinstance(block.get("type"), str):
        raise CodecError("a content block needs a string type", path=f"{path}.type")
    _refuse(block_problem(block), path)


def _check_message(message: Any, path: str) -> None:
    if not isinstance(message, dict):
        raise CodecError("a prompt message must be an object", path=path)
    if message.get("role") not in ("user", "assistant"):
        raise CodecError(
            f"role must be 'user' or 'assistant', not {message.get('role')!r}",
            path=f"{path}.role",
        )
    _check_block(message.get("content"), f"{path}.content")


def _check_contents_item(item: Any, path: str) -> None:
    if not isinstance(item, dict):
        raise CodecError("a resource contents item must be an object", path=path)
    if not isinstance(item.get("uri"), str):
        raise CodecError("a resource contents item needs a string uri", path=f"{path}.uri")
    _refuse(contents_problem(item), path)


# The payload every complete result of each MRTR method carries, in every protocol revision
# (digest §1.3): CallToolResult.content (ContentBlock[]), GetPromptResult.messages
# (PromptMessage[]) and ReadResourceResult.contents (resource contents[]).
_COMPLETE_PAYLOADS: Final[dict[str, tuple[str, Callable[[Any, str], None]]]] = {
    CALL_TOOL: ("content", _check_block),
    GET_PROMPT: ("messages", _check_message),
    READ_RESOURCE: ("contents", _check_contents_item),
}


def check_complete_result(method: str, obj: JsonObject, *, path: str = "result") -> None:
    """Check that a complete result of ``method`` carries the payload its type requires.

    Only the payload array, the fields that say what each entry is, the members whose
    format the schema gives (:mod:`~mrtr_core.wire.formats`) and a read's caching hints,
    when given, are checked, so a result from a server on an earlier revision (no
    ``resultType``, no caching hints) still passes; unknown fields are left alone. Results
    of other methods are not checked.

    Raises:
        CodecError: the payload is missing or malformed (``path`` names where).
    """
    payload = _COMPLETE_PAYLOADS.get(method)
    if payload is None:
        return
    key, check_item = payload
    items = obj.get(key)
    if not isinstance(items, list):
        raise CodecError(f"a complete {method} result needs a {key} array", path=f"{path}.{key}")
    for index, item in enumerate(items):
        check_item(item, f"{path}.{key}[{index}]")
    if method == READ_RESOURCE:
        _check_caching(obj, path)


def _check_caching(obj: JsonObject, path: str) -> None:
    """A read result's caching hints, when given (a server on an earlier revision sends
    none): ``ttlMs`` an integer of at least 0, ``cacheScope`` ``"public"`` or ``"private"``
    (schema.json ``CacheableResult``; 60000.0 is an integer to JSON Schema)."""
    if "ttlMs" in obj:
        ttl = obj["ttlMs"]
        if (isinstance(ttl, bool) or not isinstance(ttl, int | float)
                or not ttl >= 0 or (isinstance(ttl, float) and not ttl.is_integer())):
            raise CodecError(f"must be an integer of at least 0, not {shown(ttl)}",
                             path=f"{path}.ttlMs")
    if "cacheScope" in obj and obj["cacheScope"] not in ("public", "private"):
        raise CodecError(f"must be 'public' or 'private', not {shown(obj['cacheScope'])}",
                         path=f"{path}.cacheScope")


# --- params -------------------------------------------------------------------------------------

_PARAM_KEYS: Final = frozenset({"_meta", "inputResponses", "requestState"})
_NAMED_KEYS: Final = _PARAM_KEYS | {"name", "arguments"}
_URI_KEYS: Final = _PARAM_KEYS | {"uri"}


def _extra(obj: JsonObject, known: frozenset[str]) -> JsonObject:
    """The members of ``obj`` outside ``known`` (kept on the model, written back as they came)."""
    if len(obj) <= len(known) and known.issuperset(obj):
        return {}
    return {key: value for key, value in obj.items() if key not in known}


def structure_params(
    method: str, obj: Any, *, meta: RequestMeta | None = None, path: str = "params"
) -> MrtrParams:
    """Read the params of ``tools/call``, ``prompts/get`` or ``resources/read``.

    ``inputResponses`` values stay raw: only the server knows which kind each key answers.
    An ``inputResponses`` of ``null`` counts as absent.

    Args:
        method: The request's method.
        obj: The request's params.
        meta: ``structure_request_meta(obj["_meta"])``, when the caller has already read it
            (a server checks ``_meta`` before anything else); read here otherwise.
        path: Where ``obj`` sits, for error messages.
    """
    if not isinstance(obj, dict):
        raise CodecError("params must be an object", path=path)
    if meta is None:
        meta = structure_request_meta(obj.get("_meta"), path=f"{path}._meta")
    responses = obj.get("inputResponses")
    if responses is not None and not isinstance(responses, dict):
        raise CodecError("inputResponses must be an object", path=f"{path}.inputResponses")
    state = obj.get("requestState")
    if state is not None and not isinstance(state, str):
        raise CodecError("requestState must be a string", path=f"{path}.requestState")
    if method == CALL_TOOL:
        name = _require_str(obj, "name", path)
        arguments = obj.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise CodecError("arguments must be an object", path=f"{path}.arguments")
        return CallToolParams(name=name, meta=meta, arguments=arguments,
                              input_responses=responses, request_state=state,
                              extra=_extra(obj, _NAMED_KEYS))
    if method == GET_PROMPT:
        name = _require_str(obj, "name", path)
        arguments = obj.get("arguments")
        if arguments is not None and (
            not isinstance(arguments, dict)
            or not all(isinstance(v, str) for v in arguments.values())
        ):
            raise CodecError("arguments must map names to strings", path=f"{path}.arguments")
        return GetPromptParams(name=name, meta=meta, arguments=arguments,
                               input_responses=responses, request_state=state,
                               extra=_extra(obj, _NAMED_KEYS))
    if method == READ_RESOURCE:
        uri = _require_str(obj, "uri", path)
        if not is_uri(uri):  # ReadResourceRequestParams.uri: format "uri" (schema.json)
            raise CodecError(f"must be {URI_FORMAT}", path=f"{path}.uri")
        return ReadResourceParams(uri=uri, meta=meta, input_responses=responses,
                                  request_state=state, extra=_extra(obj, _URI_KEYS))
    raise CodecError(f"method {method!r} does not carry MRTR params", path=path)


def unstructure_params(params: MrtrParams) -> JsonObject:
    """Write MRTR params as a JSON object (``None`` fields omitted)."""
    out: JsonObject = {}
    if isinstance(params, ReadResourceParams):
        out["uri"] = params.uri
    else:
        out["name"] = params.name
        if params.arguments is not None:
            out["arguments"] = params.arguments
    if params.input_responses is not None:
        out["inputResponses"] = params.input_responses
    if params.request_state is not None:
        out["requestState"] = params.request_state
    for key, value in params.extra.items():
        out.setdefault(key, value)
    out["_meta"] = converter.unstructure(params.meta)
    return out
