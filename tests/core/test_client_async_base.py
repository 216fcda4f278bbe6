"""What the trio and asyncio clients share: ``AsyncClientBase``, ``HandlerRuns`` and
``transport_failed`` (mrtr_core.client.driver).

The coroutines here never suspend, so they are run with ``run_inline``: no event loop.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Awaitable
from typing import Any

from client_helpers import ACCEPT, form, irr, make_flow, ok

from mrtr_core.app import run_inline
from mrtr_core.client import ClientFlow, Complete
from mrtr_core.client.commands import ClientCommand, InvokeHandler
from mrtr_core.client.driver import (
    AsyncClientBase,
    HandlerRuns,
    InputRequired,
    transport_failed,
)
from mrtr_core.client.events import HandlerFailed, HandlerReturned
from mrtr_core.errors import TransportError
from mrtr_core.wire import Implementation, structure_input_request

CLOCK = object()


class _Transport:
    def __init__(self) -> None:
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True


class _Client(AsyncClientBase[Any]):
    """Records what it was asked to drive instead of driving it."""

    now = 5.0

    def __init__(self, **handlers: Any) -> None:
        args: dict[str, Any] = {"elicitation": None, "sampling": None, "roots": None}
        args.update(handlers)
        super().__init__(client_info=Implementation(name="t", version="1"),
                         elicitation_form=True, elicitation_url=False, capabilities=None,
                         limits=None, random=random.Random(0).random, on_event=None,
                         auto=True, **args)
        self.transport = _Transport()
        self.driven: list[tuple[ClientFlow, list[ClientCommand]]] = []

    def _now(self) -> float:  # type: ignore[override]
        return self.now

    @staticmethod
    def _clock() -> object:
        return CLOCK

    async def _drive(self, flow: ClientFlow, cmds: list[ClientCommand]) -> dict[str, Any]:
        self.driven.append((flow, cmds))
        return {"driven": len(self.driven)}


def test_call_methods_build_the_flow_of_their_method() -> None:
    client = _Client()
    assert run_inline(client.call_tool("deploy", {"version": "1"})) == {"driven": 1}
    run_inline(client.get_prompt("greet", {"name": "x"}))
    run_inline(client.read_resource("file:///a", max_rounds=3))
    run_inline(client.request("ping"))
    methods = [flow.method for flow, _ in client.driven]
    assert methods == ["tools/call", "prompts/get", "resources/read", "ping"]
    first = client.driven[0][1][-1].message  # type: ignore[union-attr]
    assert first["params"]["name"] == "deploy"
    assert first["params"]["arguments"] == {"version": "1"}
    assert client.driven[2][0].limits.max_rounds == 3


def test_resume_on_the_same_clock_counts_the_wait_against_the_budget() -> None:
    client = _Client(elicitation=lambda request, key: ACCEPT)
    flow = client.new_flow("tools/call", {"name": "x"}, auto=False, timeout=10.0)
    flow.start(1.0)
    cmds = flow.handle(ok(1, irr({"a": form()}, state="s")), 1.0)
    pending = client.input_required(cmds[-1], flow, 1.0, CLOCK)  # type: ignore[arg-type]
    client.now = 4.0
    run_inline(client.resume(pending, {"a": ACCEPT}))
    resumed, sent = client.driven[-1]
    assert resumed.deadline == 11.0  # saved at 1.0 on this clock: the budget ends at 1 + 10
    assert sent[-1].message["params"]["inputResponses"]["a"]["action"] == "accept"  # type: ignore[union-attr]


def test_resume_of_data_from_another_clock_rebases_it_on_now() -> None:
    client = _Client(elicitation=lambda request, key: ACCEPT)
    flow = client.new_flow("tools/call", {"name": "x"}, auto=False, timeout=10.0)
    flow.start(1.0)
    cmds = flow.handle(ok(1, irr({"a": form()}, state="s")), 1.0)
    pending = InputRequired(1, cmds[-1].result, flow.to_data(1.0),  # type: ignore[union-attr]
                            saved_at=1.0, clock=object())
    client.now = 4.0
    run_inline(client.resume(pending, {"a": ACCEPT}))
    assert client.driven[-1][0].deadline == 14.0


def test_the_async_context_closes_the_transport() -> None:
    client = _Client()

    async def use() -> None:
        async with client as entered:
            assert entered is client

    run_inline(use())
    assert client.transport.closed


# --- HandlerRuns ------------------------------------------------------------------------------


class _Runs(HandlerRuns[str]):
    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.launched: list[tuple[Awaitable[Any], str, int]] = []

    def _launch(self, value: Awaitable[Any], cmd: InvokeHandler, token: int) -> None:
        self.launched.append((value, cmd.key, token))
        self.running[cmd.key] = (token, f"task-{cmd.key}")


def _invoke(key: str) -> InvokeHandler:
    return InvokeHandler(key=key, request=structure_input_request(form()), deadline=None)


def test_plain_handlers_answer_at_once_in_order() -> None:
    runs = _Runs(_Client(elicitation=lambda request, key: {"action": "accept", "key": key}))
    runs.start(_invoke("a"))
    runs.start(_invoke("b"))
    first, second = runs.pop_finished(), runs.pop_finished()
    assert isinstance(first, HandlerReturned) and first.key == "a"
    assert isinstance(second, HandlerReturned) and second.key == "b"
    assert runs.pop_finished() is None
    assert runs.running == {}


def test_an_outcome_of_a_handler_invoked_again_is_stale() -> None:
    runs = _Runs(_Client(elicitation=lambda request, key: ACCEPT))
    runs.start(_invoke("a"))
    runs.start(_invoke("a"))  # the flow asked again (a new round): the first answer is stale
    assert runs.pop_finished() is not None
    assert runs.pop_finished() is None
    runs.start(_invoke("b"))
    del runs.running["b"]  # cancelled before its outcome was read
    assert runs.pop_finished() is None


def test_a_handler_that_cannot_run_fails_as_its_outcome() -> None:
    def broken(request: Any, key: str) -> Any:
        raise ValueError("no")

    runs = _Runs(_Client(elicitation=broken))
    runs.start(_invoke("a"))
    event = runs.pop_finished()
    assert isinstance(event, HandlerFailed) and isinstance(event.error, ValueError)
    missing = _Runs(_Client())
    missing.start(_invoke("a"))
    event = missing.pop_finished()
    assert isinstance(event, HandlerFailed) and isinstance(event.error, LookupError)


def test_an_awaitable_answer_is_launched_with_its_token() -> None:
    async def later(request: Any, key: str) -> Any:
        return ACCEPT

    runs = _Runs(_Client(elicitation=later))
    runs.start(_invoke("a"))
    runs.start(_invoke("b"))
    assert [(key, token) for _, key, token in runs.launched] == [("a", 0), ("b", 1)]
    assert runs.running == {"a": (0, "task-a"), "b": (1, "task-b")}
    assert runs.finished == collections.deque()
    assert runs._current(1, HandlerReturned(key="b", answer=ACCEPT))
    assert not runs._current(0, HandlerReturned(key="b", answer=ACCEPT))
    for value, _, _ in runs.launched:
        value.close()  # type: ignore[attr-defined]


# --- transport_failed ---------------------------------------------------------------------


def test_a_transport_failure_ends_the_flow_with_the_last_input_required_result() -> None:
    flow = make_flow()
    flow.start(0.0)
    flow.handle(ok(1, irr({"a": form()}, state="s")), 0.0)
    cause = ConnectionResetError("reset")
    error = transport_failed(flow, cause, 1.0)
    assert isinstance(error, TransportError)
    assert error.cause is cause
    assert error.last_result is not None
    assert error.last_result.request_state == "s"
    assert flow.done


def test_a_transport_failure_on_the_first_leg_has_no_last_result() -> None:
    flow = make_flow()
    flow.start(0.0)
    error = transport_failed(flow, EOFError(), 0.5)
    assert error.last_result is None
    assert flow.done


def test_the_flow_resumed_by_the_base_completes_when_driven() -> None:
    client = _Client(elicitation=lambda request, key: ACCEPT)
    flow = client.new_flow("tools/call", {"name": "x"}, auto=False)
    flow.start(0.0)
    cmds = flow.handle(ok(1, irr({"a": form()}, state="s")), 0.0)
    pending = client.input_required(cmds[-1], flow, 0.0, CLOCK)  # type: ignore[arg-type]
    run_inline(client.resume(pending, {"a": ACCEPT}))
    resumed, sent = client.driven[-1]
    request_id = sent[-1].request_id  # type: ignore[union-attr]
    out = resumed.handle(ok(request_id, {"resultType": "complete", "content": []}), client.now)
    assert any(isinstance(cmd, Complete) for cmd in out)
