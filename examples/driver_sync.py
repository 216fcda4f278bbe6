"""Embedding mrtr's core in another SDK: a complete blocking MRTR driver.

``run`` is all a driver needs. The core (``ClientFlow``) decides everything that is protocol:
the next request and its id, the echoed ``requestState``, limits, timeouts, pacing, errors.
The driver only moves messages, runs the answer callback, and sleeps until ``flow.deadline``
when a state-only round is paced. ``python examples/driver_sync.py`` runs it against
``examples/deploy.py`` in the same process.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable
from typing import Any

from mrtr_core.client import (
    ClientFlow,
    Complete,
    Fail,
    HandlerFailed,
    HandlerReturned,
    InvokeHandler,
    ResponseReceived,
    SendRequest,
    TimerFired,
)
from mrtr_core.wire import ClientCapabilities, ElicitationCapability, ElicitResult, RequestMeta


def run(send: Callable[[dict[str, Any]], dict[str, Any]],
        answer: Callable[[str, Any], Any],
        method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One MRTR operation. ``send(request) -> response``; ``answer(key, request) -> answer``."""
    ids = itertools.count(1)
    meta = RequestMeta(client_capabilities=ClientCapabilities(
        elicitation=ElicitationCapability(form={})))
    flow = ClientFlow(method, params, meta=meta, next_id=lambda: next(ids),
                      handled_kinds=frozenset({"elicitation/create"}),
                      random=random.Random().random)  # jitter for paced rounds
    commands = flow.start(time.monotonic())
    while True:
        events: list[Any] = []
        for cmd in commands:
            if isinstance(cmd, SendRequest):
                events.append(ResponseReceived(message=send(cmd.message)))
            elif isinstance(cmd, InvokeHandler):
                try:
                    events.append(HandlerReturned(key=cmd.key, answer=answer(cmd.key, cmd.request)))
                except Exception as exc:
                    events.append(HandlerFailed(key=cmd.key, error=exc))
            elif isinstance(cmd, Complete):
                return cmd.result
            elif isinstance(cmd, Fail):
                raise cmd.error
        if not events and flow.deadline is not None:  # a paced state-only round
            time.sleep(max(0.0, flow.deadline - time.monotonic()))
            events.append(TimerFired())
        commands = flow.handle_many(events, time.monotonic())


if __name__ == "__main__":
    from deploy import app  # examples/deploy.py, next to this file
    from mrtr_core.app import drive_sync

    def send(message: dict[str, Any]) -> dict[str, Any]:
        print("->", message["method"], "id", message["id"], sorted(message["params"]))
        reply = drive_sync(app, message, now=time.time())
        assert reply.message is not None
        return reply.message

    def answer(key: str, request: Any) -> ElicitResult:
        print("   asked", key, ":", request.message)
        fields = request.requested_schema["properties"]
        return ElicitResult(action="accept", content={
            name: True if spec["type"] == "boolean" else "CHG-1234"
            for name, spec in fields.items()})

    result = run(send, answer, "tools/call",
                 {"name": "deploy_production", "arguments": {"version": "1.4.2"}})
    print(result["content"][0]["text"])
