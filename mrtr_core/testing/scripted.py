"""A scripted, in-memory MRTR server for client tests.

:class:`ScriptedServer` maps a JSON-RPC request to a JSON-RPC response by playing the next
:class:`Step` of its script, whatever the request says, and records every request it saw so a
test can check what the client sent (fresh ids, the echoed ``requestState``, ``_meta`` on
every leg). It never validates the client: the tests do, against ``requests``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from mrtr_core.errors import INTERNAL_ERROR
from mrtr_core.wire.models import JsonObject

__all__ = [
    "ScriptedServer",
    "Step",
    "elicit_form",
    "elicit_url",
    "error_response",
    "input_required",
    "list_roots",
    "sample",
    "success_response",
    "tool_result",
]

ResultSource = JsonObject | Callable[[JsonObject], JsonObject]


@attrs.frozen(kw_only=True)
class Step:
    """One scripted answer.

    Attributes:
        result: The result object, or a function of the request's ``params`` returning it.
        error: A JSON-RPC ``error`` object to answer with instead of a result.
        delay: Seconds the transport should hold the response (simulated latency).
        disconnect: Break the connection instead of answering (the transport raises).
    """

    result: ResultSource | None = None
    error: JsonObject | None = None
    delay: float = 0.0
    disconnect: bool = False


class ScriptedServer:
    """Answers each request with the next step of a script.

    A step may be given as a bare result dict. When the script runs out the server answers
    with a JSON-RPC internal error naming the request, so an over-long flow shows up plainly.

    Attributes:
        requests: Deep copies of every request received, in order.
    """

    def __init__(self, steps: Iterable[Step | JsonObject]) -> None:
        self._steps = [s if isinstance(s, Step) else Step(result=s) for s in steps]
        self._delays: dict[Any, float] = {}
        self.requests: list[JsonObject] = []

    @property
    def remaining(self) -> int:
        """How many steps are left."""
        return max(0, len(self._steps) - len(self.requests))

    def __call__(self, message: JsonObject) -> JsonObject:
        """Answer one JSON-RPC request (raises ``ConnectionResetError`` on a disconnect step)."""
        index = len(self.requests)
        self.requests.append(copy.deepcopy(message))
        request_id = message.get("id")
        if index >= len(self._steps):
            return error_response(
                request_id, INTERNAL_ERROR, f"script exhausted at request {index + 1}"
            )
        step = self._steps[index]
        self._delays[request_id] = step.delay
        if step.disconnect:
            raise ConnectionResetError(f"scripted disconnect at request {index + 1}")
        if step.error is not None:
            return {"jsonrpc": "2.0", "id": request_id, "error": copy.deepcopy(step.error)}
        source = step.result
        params = message.get("params") or {}
        result = source(params) if callable(source) else copy.deepcopy(source or {})
        return success_response(request_id, result)

    def latency(self, message: JsonObject) -> float:
        """The delay scripted for the step that answered ``message`` (0 when unknown)."""
        return self._delays.get(message.get("id"), 0.0)

    @property
    def params(self) -> list[JsonObject]:
        """The ``params`` of every request received."""
        return [r.get("params") or {} for r in self.requests]


# --- builders for wire shapes (digest §1.2, §1.5) --------------------------------------------


def success_response(request_id: Any, result: JsonObject) -> JsonObject:
    """A JSON-RPC success response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: Any, code: int, message: str, data: Any = None) -> JsonObject:
    """A JSON-RPC error response."""
    error: JsonObject = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def tool_result(text: str, **extra: Any) -> JsonObject:
    """A complete ``CallToolResult`` with one text block."""
    return {"resultType": "complete", "content": [{"type": "text", "text": text}], **extra}


def input_required(
    requests: dict[str, JsonObject] | None = None, state: str | None = None
) -> JsonObject:
    """An ``input_required`` result (digest §1.2)."""
    out: JsonObject = {"resultType": "input_required"}
    if requests is not None:
        out["inputRequests"] = requests
    if state is not None:
        out["requestState"] = state
    return out


def elicit_form(
    message: str, properties: dict[str, JsonObject], required: list[str] | None = None
) -> JsonObject:
    """An ``elicitation/create`` input request in form mode."""
    schema: JsonObject = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


def elicit_url(message: str, url: str) -> JsonObject:
    """An ``elicitation/create`` input request in URL mode."""
    params = {"mode": "url", "message": message, "url": url}
    return {"method": "elicitation/create", "params": params}


def sample(text: str, max_tokens: int = 100) -> JsonObject:
    """A ``sampling/createMessage`` input request with one user message."""
    return {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens,
        },
    }


def list_roots() -> JsonObject:
    """A ``roots/list`` input request."""
    return {"method": "roots/list"}
