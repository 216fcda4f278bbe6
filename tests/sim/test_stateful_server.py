"""A Hypothesis state machine plays many clients, honest and hostile, against two stateless
instances of the real App (shared key ring and replay guard), in any order and with time
jumping past the state's lifetime, and checks the server rules after every step
(S9-S15, digest §2.2, §2.5)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from mrtr_core.app import App, drive_sync
from mrtr_core.sim import Effects, Operation, Prng, ReferenceWorkload
from mrtr_core.sim.hostile import malformed_answers, tamper
from mrtr_core.state import KeyRing, MemoryReplayGuard, StateCodec
from mrtr_core.wire import structure_input_request
from mrtr_core.wire.converter import unstructure
from mrtr_core.wire.models import PROTOCOL_VERSION

TTL, SKEW = 30.0, 2.0
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {},
                                                   "roots": {}},
}


class _Op:
    """What the machine's client knows about one operation."""

    def __init__(self, operation: Operation, principal: str) -> None:
        self.operation = operation
        self.principal = principal
        self.sent: list[dict[str, Any]] = []  # requests the server answered with a result
        self.pending: dict[str, Any] | None = None  # the last input_required result
        self.pending_at = 0.0
        self.answers: dict[str, Any] = {}
        self.done = False


class ServerMachine(RuleBasedStateMachine):
    """Clients against two instances of the reference app."""

    ops = Bundle("ops")

    def __init__(self) -> None:
        super().__init__()
        prng = Prng(99)
        ring = KeyRing({"k1": prng.bytes(32)}, active="k1")
        self.effects = Effects()
        self.workload = ReferenceWorkload()
        self.apps: list[App] = [
            self.workload.build_app(StateCodec(ring, audience="mrtr-sim", nonce=prng.bytes,
                                               ttl=TTL, skew=SKEW), self.effects)
            for _ in range(2)
        ]
        self.guard = MemoryReplayGuard()
        self.now = 1000.0
        self.count = 0
        self.next_id = 0

    # --- driving --------------------------------------------------------------------------

    def _send(self, op: _Op, params: dict[str, Any], *, principal: str | None = None,
              method: str | None = None) -> dict[str, Any]:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id,
                   "method": method or op.operation.method, "params": params}
        app = self.apps[self.next_id % 2]
        reply = drive_sync(app, message, now=self.now, principal=principal or op.principal,
                           guard=self.guard)
        assert reply.message is not None
        assert reply.message.get("id") == self.next_id
        assert ("result" in reply.message) != ("error" in reply.message)
        return reply.message

    def _params(self, op: _Op, **extra: Any) -> dict[str, Any]:
        return {**copy.deepcopy(op.operation.params), "_meta": META, **extra}

    def _take(self, op: _Op, params: dict[str, Any], answer: dict[str, Any]) -> None:
        """An honest request was answered: remember what the server said."""
        assert "result" in answer, answer
        result = answer["result"]
        op.sent.append(params)
        if result.get("resultType") == "input_required":
            op.pending = result
            op.pending_at = self.now
            return
        op.pending = None
        op.done = True
        problem = self.workload.check(op.operation, result, op.answers)
        assert not problem, problem

    def _expired(self, op: _Op) -> bool:
        return self.now >= op.pending_at + TTL + SKEW

    @staticmethod
    def _refused(answer: dict[str, Any]) -> bool:
        return answer.get("error", {}).get("code") == -32602

    # --- rules ------------------------------------------------------------------------------

    @rule(target=ops, kind=st.sampled_from(ReferenceWorkload.KINDS),
          user=st.sampled_from(["ann", "bob"]))
    def start(self, kind: str, user: str) -> _Op:
        self.count += 1
        operation = self.workload.make(kind, self.count)
        op = _Op(operation, user)
        params = self._params(op)
        self._take(op, params, self._send(op, params))
        return op

    @rule(op=ops)
    def answer_honestly(self, op: _Op) -> None:
        if op.pending is None:
            return
        asks = op.pending.get("inputRequests") or {}
        answers = {
            key: unstructure(self.workload.answer(op.operation, key,
                                                  structure_input_request(wire)))
            for key, wire in asks.items()
        }
        params = self._params(op, requestState=op.pending["requestState"])
        if answers:
            params["inputResponses"] = answers
        expired = self._expired(op)
        answer = self._send(op, params)
        if expired:
            assert self._refused(answer), "S11b: an expired state must be refused"
            op.pending = None
            return
        op.answers.update(answers)
        self._take(op, params, answer)

    @rule(op=ops, data=st.data())
    def replay_an_old_request(self, op: _Op, data: st.DataObject) -> None:
        if not op.sent:
            return
        params = data.draw(st.sampled_from(op.sent))
        answer = self._send(op, copy.deepcopy(params))
        if "requestState" in params and op.operation.single_use:
            assert self._refused(answer), "S12: a single-use state is redeemed once"

    @rule(op=ops, other=ops)
    def swap_state_into_another_operation(self, op: _Op, other: _Op) -> None:
        if other.pending is None or op is other:
            return
        params = self._params(op, requestState=other.pending["requestState"])
        assert self._refused(self._send(op, params)), "S11c: state is bound to its request"

    @rule(op=ops, seed=st.integers(0, 2**32))
    def tamper_with_state(self, op: _Op, seed: int) -> None:
        if op.pending is None:
            return
        bad = tamper(op.pending["requestState"], Prng(seed))
        assert self._refused(self._send(op, self._params(op, requestState=bad))), "S10"

    @rule(op=ops)
    def use_state_as_another_principal(self, op: _Op) -> None:
        if op.pending is None:
            return
        params = self._params(op, requestState=op.pending["requestState"])
        answer = self._send(op, params, principal=f"{op.principal}-intruder")
        assert self._refused(answer), "S11a: state is bound to its principal"

    @rule(op=ops, seed=st.integers(0, 2**32))
    def send_malformed_answers(self, op: _Op, seed: int) -> None:
        if op.pending is None:
            return
        keys = list(op.pending.get("inputRequests") or {})
        params = self._params(op, requestState=op.pending["requestState"],
                              inputResponses=malformed_answers(keys, Prng(seed)))
        assert self._refused(self._send(op, params)), "S13: malformed answers are refused"

    @rule(dt=st.sampled_from([0.5, 5.0, 20.0, TTL + SKEW + 1.0]))
    def time_passes(self, dt: float) -> None:
        self.now += dt

    # --- invariants -------------------------------------------------------------------------

    @invariant()
    def a_single_use_step_never_runs_twice(self) -> None:
        assert all(count == 1 for count in self.effects.counts.values()), self.effects.counts


ServerMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    derandomize=True)
TestServerMachine = ServerMachine.TestCase
