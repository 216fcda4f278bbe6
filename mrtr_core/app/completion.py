"""``completion/complete``: reading its params and shaping the completer's answer."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from mrtr_core.errors import INTERNAL_ERROR, INVALID_PARAMS, JsonRpcError
from mrtr_core.wire.formats import is_uri_template
from mrtr_core.wire.models import JsonObject

__all__ = ["MAX_COMPLETION_VALUES", "completion_params", "completion_result"]

# At most 100 values per response (server/utilities/completion.mdx).
MAX_COMPLETION_VALUES: Final = 100


def completion_params(
    params: JsonObject | None,
) -> tuple[JsonObject, JsonObject, JsonObject | None]:
    """``(ref, argument, context)`` of a request, checked (-32602 when malformed)."""
    params = params or {}
    ref, argument, context = params.get("ref"), params.get("argument"), params.get("context")
    if not isinstance(ref, dict) or ref.get("type") not in ("ref/prompt", "ref/resource"):
        raise JsonRpcError(INVALID_PARAMS, "ref must be a ref/prompt or ref/resource object")
    # PromptReference.name is a string; ResourceTemplateReference.uri a URI or URI template
    # (schema.json: format "uri-template"). The completer is handed the ref as it came.
    if ref["type"] == "ref/prompt" and not isinstance(ref.get("name"), str):
        raise JsonRpcError(INVALID_PARAMS, "ref.name must be a string")
    if ref["type"] == "ref/resource" and not is_uri_template(ref.get("uri")):
        raise JsonRpcError(INVALID_PARAMS, "ref.uri must be a URI template (RFC 6570 §2: "
                           "braces around non-empty expressions, no whitespace)")
    if not (isinstance(argument, dict) and isinstance(argument.get("name"), str)
            and isinstance(argument.get("value"), str)):
        raise JsonRpcError(INVALID_PARAMS, "argument must be {name: string, value: string}")
    if context is not None and not isinstance(context, dict):
        raise JsonRpcError(INVALID_PARAMS, "context must be an object")
    return ref, argument, context


def completion_result(value: Any) -> JsonObject:
    """The ``completion`` object from what the completer returned (a list of strings, or a
    ``{"values", "total", "hasMore"}`` mapping); values past the limit are cut off and
    announced with ``hasMore``."""
    if isinstance(value, Mapping):
        values = value.get("values")
        total, has_more = value.get("total"), value.get("hasMore")
    else:
        values, total, has_more = value, None, None
    if not isinstance(values, Iterable) or isinstance(values, str | bytes):
        raise JsonRpcError(INTERNAL_ERROR, "completion handler must return a list of strings")
    items = list(values)
    if not all(isinstance(v, str) for v in items):
        raise JsonRpcError(INTERNAL_ERROR, "completion values must be strings")
    out: JsonObject = {"values": items[:MAX_COMPLETION_VALUES]}
    if isinstance(total, int) and not isinstance(total, bool):
        out["total"] = total
    elif len(items) > MAX_COMPLETION_VALUES:
        out["total"] = len(items)
    out["hasMore"] = bool(has_more) or len(items) > MAX_COMPLETION_VALUES
    return out
