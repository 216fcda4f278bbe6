"""Which client capabilities an input request needs (S6, S6a, S6b, S6c).

Capabilities are declared per request and must not be inferred from earlier ones (digest
§1.7), so every round is checked against that round's own ``_meta``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mrtr_core.errors import MISSING_REQUIRED_CLIENT_CAPABILITY, JsonRpcError
from mrtr_core.wire.models import (
    ClientCapabilities,
    CreateMessageRequest,
    ElicitFormRequest,
    ElicitUrlRequest,
    InputRequest,
    ListRootsRequest,
)

__all__ = ["MissingCapabilityError", "merge_capabilities", "missing_capabilities"]


def missing_capabilities(caps: ClientCapabilities, request: InputRequest) -> dict[str, Any] | None:
    """The capabilities ``request`` needs that ``caps`` does not declare, as a
    ``ClientCapabilities`` JSON object, or ``None`` when the request may be sent."""
    if isinstance(request, ElicitFormRequest):
        # S6/S6a: `elicitation: {}` means form only; `{url: {}}` alone excludes form.
        if caps.elicitation is None:
            return {"elicitation": {}}
        return None if caps.elicitation.supports_form else {"elicitation": {"form": {}}}
    if isinstance(request, ElicitUrlRequest):
        if caps.elicitation is None or not caps.elicitation.supports_url:
            return {"elicitation": {"url": {}}}
        return None
    if isinstance(request, CreateMessageRequest):
        needed: dict[str, Any] = {}
        sampling = caps.sampling
        # S6b: tools / toolChoice need sampling.tools.
        if ("tools" in request.extra or "toolChoice" in request.extra) and (
            sampling is None or sampling.tools is None
        ):
            needed["tools"] = {}
        # S6c: includeContext other than "none" needs sampling.context.
        if request.extra.get("includeContext", "none") != "none" and (
            sampling is None or sampling.context is None
        ):
            needed["context"] = {}
        if sampling is None or needed:
            return {"sampling": needed}
        return None
    if isinstance(request, ListRootsRequest):
        return None if caps.roots is not None else {"roots": {}}
    raise TypeError(f"not an input request: {type(request).__name__}")


def merge_capabilities(items: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Deep-merge ``ClientCapabilities`` JSON objects."""
    out: dict[str, Any] = {}
    for item in items:
        _merge_into(out, item)
    return out


def _merge_into(target: dict[str, Any], source: dict[str, Any]) -> None:
    for name, value in source.items():
        current = target.get(name)
        if isinstance(value, dict) and isinstance(current, dict):
            _merge_into(current, value)
        elif isinstance(value, dict):
            target[name] = {}
            _merge_into(target[name], value)
        else:
            target[name] = value


class MissingCapabilityError(JsonRpcError):
    """The handler needs input the client did not declare it can give (S7).

    On the wire: ``-32021`` with ``data.requiredCapabilities`` (a ``ClientCapabilities``
    object), HTTP 400.

    Attributes:
        required: The missing capabilities.
    """

    def __init__(self, required: dict[str, Any]) -> None:
        super().__init__(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability",
            {"requiredCapabilities": required},
        )
        self.required = required
