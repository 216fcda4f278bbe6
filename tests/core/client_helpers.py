"""Builders for the client flow tests: wire values, flows, and command pickers."""

from __future__ import annotations

import random as random_module
from collections.abc import Iterable, Sequence
from typing import Any

from mrtr_core.client import (
    ClientFlow,
    ClientLimits,
    HandlerReturned,
    InvokeHandler,
    ResponseReceived,
    SendRequest,
)
from mrtr_core.client.commands import ClientCommand
from mrtr_core.wire import (
    INPUT_REQUEST_KINDS,
    ClientCapabilities,
    ElicitationCapability,
    ElicitResult,
    RequestMeta,
    SamplingCapability,
)

ALL_CAPS = ClientCapabilities(
    elicitation=ElicitationCapability(form={}, url={}),
    sampling=SamplingCapability(tools={}, context={}),
    roots={},
)
META = RequestMeta(client_capabilities=ALL_CAPS)
ALL_KINDS = frozenset(INPUT_REQUEST_KINDS)
PARAMS: dict[str, Any] = {"name": "deploy", "arguments": {"version": "1.2", "tags": ["a", "b"]}}
NO_JITTER = ClientLimits(pacing_jitter=0.0)
ACCEPT = ElicitResult(action="accept", content={"ok": True})


class Ids:
    """A counting id source that remembers what it handed out."""

    def __init__(self, start: int = 1, *, prefix: str | None = None) -> None:
        self.next = start
        self.prefix = prefix
        self.issued: list[str | int] = []

    def __call__(self) -> str | int:
        value: str | int = self.next if self.prefix is None else f"{self.prefix}{self.next}"
        self.next += 1
        self.issued.append(value)
        return value


# --- wire values --------------------------------------------------------------------------


def form(message: str = "Proceed?", field: str = "ok") -> dict[str, Any]:
    """An ``elicitation/create`` form request (wire form)."""
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {field: {"type": "boolean"}}},
        },
    }


def url_request(url: str = "https://example.com/consent") -> dict[str, Any]:
    """An ``elicitation/create`` URL-mode request."""
    return {"method": "elicitation/create",
            "params": {"mode": "url", "message": "Open this", "url": url}}


def sampling(**extra: Any) -> dict[str, Any]:
    """A ``sampling/createMessage`` request."""
    return {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            "maxTokens": 50,
            **extra,
        },
    }


def roots() -> dict[str, Any]:
    """A ``roots/list`` request."""
    return {"method": "roots/list"}


def irr(requests: dict[str, Any] | None = None, state: str | None = None,
        **extra: Any) -> dict[str, Any]:
    """An ``input_required`` result (fields left out when ``None``)."""
    out: dict[str, Any] = {"resultType": "input_required"}
    if requests is not None:
        out["inputRequests"] = requests
    if state is not None:
        out["requestState"] = state
    out.update(extra)
    return out


def ok(request_id: Any, result: Any) -> ResponseReceived:
    """A result response event."""
    return ResponseReceived(message={"jsonrpc": "2.0", "id": request_id, "result": result})


def error(request_id: Any, code: int, message: str, data: Any = None) -> ResponseReceived:
    """An error response event."""
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return ResponseReceived(message={"jsonrpc": "2.0", "id": request_id, "error": err})


def done(text: str = "done") -> dict[str, Any]:
    """A complete tools/call result."""
    return {"resultType": "complete", "content": [{"type": "text", "text": text}]}


# --- flows --------------------------------------------------------------------------------


def make_flow(
    method: str = "tools/call",
    params: dict[str, Any] | None = None,
    *,
    meta: RequestMeta = META,
    kinds: Iterable[str] = ALL_KINDS,
    limits: ClientLimits | None = NO_JITTER,
    manual: bool = False,
    ids: Ids | None = None,
    seed: int = 7,
) -> ClientFlow:
    """A flow with sensible test defaults (every kind declared and handled, no jitter)."""
    return ClientFlow(
        method,
        PARAMS if params is None else params,
        meta=meta,
        handled_kinds=kinds,
        next_id=ids or Ids(),
        limits=limits,
        random=random_module.Random(seed).random,
        manual=manual,
    )


def sends(commands: Sequence[ClientCommand]) -> list[SendRequest]:
    """The ``SendRequest`` commands in a batch."""
    return [c for c in commands if isinstance(c, SendRequest)]


def last_send(commands: Sequence[ClientCommand]) -> SendRequest:
    """The one ``SendRequest`` of a batch."""
    found = sends(commands)
    assert len(found) == 1, commands
    return found[0]


def invokes(commands: Sequence[ClientCommand]) -> list[InvokeHandler]:
    """The ``InvokeHandler`` commands in a batch."""
    return [c for c in commands if isinstance(c, InvokeHandler)]


def names(commands: Sequence[ClientCommand]) -> list[str]:
    """The command class names of a batch, in order."""
    return [type(c).__name__ for c in commands]


def answer_all(flow: ClientFlow, commands: Sequence[ClientCommand], now: float,
               answer: Any = ACCEPT) -> list[ClientCommand]:
    """Return ``answer`` for every handler invoked in ``commands``; the last batch."""
    out: list[ClientCommand] = []
    for command in invokes(commands):
        out = flow.handle(HandlerReturned(key=command.key, answer=answer), now)
    return out


def to_handlers(flow: ClientFlow, requests: dict[str, Any], state: str | None = "s1",
                now: float = 1.0) -> list[ClientCommand]:
    """Start the flow and answer leg 1 with ``input_required``; the commands of that."""
    first = last_send(flow.start(0.0))
    return flow.handle(ok(first.request_id, irr(requests, state)), now)
