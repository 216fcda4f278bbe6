"""A Hypothesis state machine drives the real ClientFlow through any order of legal inputs
(responses good and bad, handler outcomes, timers, cancels) on a virtual clock, and checks
the client rules after every step (digest §2.3, §2.4, §2.6)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mrtr_core.client import (
    CancelHandlers,
    CancelRequested,
    ClientFlow,
    ClientLimits,
    Complete,
    Fail,
    FlowState,
    HandlerFailed,
    HandlerReturned,
    InvokeHandler,
    ResponseReceived,
    RoundStarted,
    SendRequest,
    TimerFired,
)
from mrtr_core.client.commands import ClientCommand
from mrtr_core.errors import LocalProtocolError, MrtrError
from mrtr_core.sim import FULL_CAPABILITIES, Prng, honest_answer
from mrtr_core.wire import RequestMeta

LIMITS = ClientLimits(max_rounds=4, leg_timeout=5.0, flow_timeout=60.0, handler_timeout=10.0,
                      pacing_initial=0.05, pacing_max=0.4, pacing_jitter=0.2,
                      max_state_bytes=512, max_input_requests=3)
KINDS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})


def _form(key: str) -> dict[str, Any]:
    return {"method": "elicitation/create", "params": {
        "message": f"{key}?", "requestedSchema": {
            "type": "object", "properties": {"note": {"type": "string"}}}}}


_QUESTIONS = {
    "form": _form,
    "sample": lambda key: {"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": key}}],
        "maxTokens": 10}},
    "roots": lambda key: {"method": "roots/list"},
    "url": lambda key: {"method": "elicitation/create", "params": {
        "mode": "url", "message": "open", "url": "https://example.com"}},
    "unknown": lambda key: {"method": "weird/kind", "params": {}},
}

COMPLETE = {"jsonrpc": "2.0", "result": {"resultType": "complete", "content": []}}
GARBAGE = [
    {"jsonrpc": "2.0"},
    {"jsonrpc": "2.0", "result": {"resultType": "input_required"}},
    {"jsonrpc": "2.0", "result": {"resultType": "bogus"}},
    {"jsonrpc": "2.0", "result": []},
    {"jsonrpc": "2.0", "result": {"resultType": "input_required", "requestState": 5}},
    {"jsonrpc": "2.0", "result": {"resultType": "input_required",
                                  "inputRequests": {"k": {"method": "elicitation/create"}}}},
    {"jsonrpc": "2.0", "error": {"code": "x", "message": 1}},
    {"jsonrpc": "1.0", "result": {}},
]


class ClientFlowMachine(RuleBasedStateMachine):
    """One ClientFlow, fed by a hostile-or-honest server model and a virtual clock."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.ids_seen: set[Any] = set()  # across every flow: ids come from one connection
        self.next = 0
        self._begin()

    def _begin(self) -> None:
        """Start a new flow on the same connection and clock."""
        self.flow = ClientFlow(
            "tools/call", {"name": "deploy", "arguments": {"op": "op-1"}},
            meta=RequestMeta(client_capabilities=FULL_CAPABILITIES), handled_kinds=KINDS,
            next_id=self._next_id, limits=LIMITS, random=Prng(1))
        self.outstanding: Any = None
        self.last_state: str | None = None
        self.asked: tuple[str, ...] = ()
        self.requests: dict[str, Any] = {}
        self.running: set[str] = set()
        self.legs = 0
        self.ended: Complete | Fail | None = None
        self.started_at = self.now
        self.deadline_seen = False
        self._take(self.flow.start(self.now))

    def _next_id(self) -> int:
        self.next += 1
        return self.next

    def _take(self, commands: list[ClientCommand]) -> None:
        for command in commands:
            assert self.ended is None, f"{command!r} after the end"
            if isinstance(command, SendRequest):
                assert command.request_id not in self.ids_seen, "C4: a fresh id per leg"
                self.ids_seen.add(command.request_id)
                params = command.message["params"]
                # C2/C3: echo the state byte for byte, or none.
                assert params.get("requestState") == self.last_state
                if self.legs:
                    assert tuple(params.get("inputResponses") or ()) == self.asked
                assert "_meta" in params
                self.legs += 1
                self.outstanding = command.request_id
                self.running.clear()
            elif isinstance(command, InvokeHandler):
                self.running.add(command.key)
                self.requests[command.key] = command.request
            elif isinstance(command, CancelHandlers):
                self.running.difference_update(command.keys)
            elif isinstance(command, Complete | Fail):
                self.ended = command
                self.running.clear()
            elif isinstance(command, RoundStarted):
                assert command.round == self.legs + 1

    def _respond(self, result: Any = None, *, message: dict[str, Any] | None = None) -> None:
        body = dict(message) if message is not None else {"jsonrpc": "2.0", "result": result}
        body.setdefault("id", self.outstanding)
        body["id"] = self.outstanding
        self.outstanding = None
        self._take(self.flow.handle(ResponseReceived(message=body), self.now))

    # --- rules ------------------------------------------------------------------------------

    @rule(dt=st.floats(min_value=0.0, max_value=3.0))
    def time_passes(self, dt: float) -> None:
        deadline = self.flow.deadline
        step = dt if deadline is None else min(dt, max(0.0, deadline - self.now))
        self.now += step

    @precondition(lambda self: self.flow.state is FlowState.AWAITING_RESPONSE)
    @rule(keys=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4,
                        unique=True),
          kind=st.sampled_from(["form", "form", "form", "sample", "roots", "url", "unknown"]),
          size=st.integers(min_value=0, max_value=9))
    def server_asks(self, keys: list[str], kind: str, size: int) -> None:
        # One state in ten is over the client's max_state_bytes (512).
        state = "s" * 600 if size == 0 else f"state-{self.legs}-{len(keys)}"
        asks = {key: _QUESTIONS["form" if i else kind](key) for i, key in enumerate(keys)}
        self.last_state = state
        self.asked = tuple(keys)
        self._respond({"resultType": "input_required", "inputRequests": asks,
                       "requestState": state})

    @precondition(lambda self: self.flow.state is FlowState.AWAITING_RESPONSE)
    @rule()
    def server_sheds_load(self) -> None:
        self.last_state = f"shed-{self.legs}"
        self.asked = ()
        self._respond({"resultType": "input_required", "requestState": self.last_state})

    # One rule for every answer that ends the flow, so most steps carry a flow further
    # (rules are drawn alike) and retries, pacing and round limits are reached.
    @precondition(lambda self: self.flow.state is FlowState.AWAITING_RESPONSE)
    @rule(answer=st.sampled_from([COMPLETE, *GARBAGE]))
    def server_completes_or_sends_garbage(self, answer: dict[str, Any]) -> None:
        self._respond(message=answer)

    @precondition(lambda self: bool(self.running))
    @rule(data=st.data())
    def handler_returns(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.running)))
        self.running.discard(key)
        answer = honest_answer("op-1", key, self.requests[key])
        self._take(self.flow.handle(HandlerReturned(key=key, answer=answer), self.now))

    @precondition(lambda self: bool(self.running))
    @rule(data=st.data())
    def handler_fails(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.running)))
        self.running.discard(key)
        self._take(self.flow.handle(HandlerFailed(key=key, error=RuntimeError("no")), self.now))

    @precondition(lambda self: not self.flow.done and self.flow.deadline is not None)
    @rule()
    def timer_fires(self) -> None:
        deadline = self.flow.deadline
        assert deadline is not None
        self.now = max(self.now, deadline)
        self._take(self.flow.handle(TimerFired(), self.now))

    @precondition(lambda self: not self.flow.done)
    @rule()
    def caller_cancels(self) -> None:
        self._take(self.flow.handle(CancelRequested(), self.now))

    @precondition(lambda self: self.flow.done)
    @rule()
    def start_another_flow(self) -> None:
        self._begin()

    @precondition(lambda self: self.flow.done)
    @rule()
    def nothing_moves_a_finished_flow(self) -> None:
        for event in (TimerFired(), CancelRequested(),
                      ResponseReceived(message={"jsonrpc": "2.0", "id": 1, "result": {}})):
            try:
                self.flow.handle(event, self.now)
            except LocalProtocolError:
                continue
            raise AssertionError(f"{event!r} was accepted after the end")

    # --- invariants -------------------------------------------------------------------------

    @invariant()
    def ends_are_typed_and_sticky(self) -> None:
        if self.ended is not None:
            assert self.flow.done
            if isinstance(self.ended, Fail):
                assert isinstance(self.ended.error, MrtrError)
        else:
            assert not self.flow.done

    @invariant()
    def rounds_and_time_stay_within_limits(self) -> None:
        assert self.flow.rounds == self.legs <= LIMITS.max_rounds
        if not self.flow.done:
            deadline = self.flow.deadline
            assert deadline is not None  # a live flow always has a timer: it cannot hang
            assert deadline <= self.started_at + (LIMITS.flow_timeout or 0) + 1e-9


ClientFlowMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow], derandomize=True)
TestClientFlowMachine = ClientFlowMachine.TestCase
