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
        self.issued: dict[str, float] = {}  # requestState -> when the server sealed it

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
            if "requestState" in result:
                self.issued[result["requestState"]] = self.now
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

    # Honest answers are sent at once, or after a wait that lands just inside the state's
    # lifetime or exactly on its end (exp + skew, from which on it is refused).
    @rule(op=ops, wait=st.sampled_from([None, None, TTL + SKEW - 0.5, TTL + SKEW]))
    def answer_honestly(self, op: _Op, wait: float | None) -> None:
        if op.pending is None:
            return
        if wait is not None:
            self.now = max(self.now, op.pending_at + wait)
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

    @rule(op=ops, data=st.data(), late=st.booleans())
    def replay_an_old_request(self, op: _Op, data: st.DataObject, late: bool) -> None:
        """Send a request already answered again; ``late``: once its state is past expiry
        but still within the skew, when the codec still opens it (and another instance's
        clock may lag by skew), so a single-use token must still be remembered (S12)."""
        # Requests that carried a state (the ones S12 is about) when there are any.
        sent = [params for params in op.sent if "requestState" in params and (
            not late or self.now <= self.issued[params["requestState"]] + TTL + SKEW / 2
        )] or ([] if late else op.sent)
        if not sent:
            return
        params = data.draw(st.sampled_from(sent))
        if late:
            self.now = max(self.now, self.issued[params["requestState"]] + TTL + SKEW / 2)
        answer = self._send(op, copy.deepcopy(params))
        if "requestState" in params and op.operation.single_use:
            assert self._refused(answer), "S12: a single-use state is redeemed once"

    # The hostile requests are one rule, so honest steps are drawn as often as any attack
    # and operations get deep enough for the attacks to matter.
    @rule(op=ops, other=ops, seed=st.integers(0, 2**32),
          how=st.sampled_from(["swap", "tamper", "principal", "malformed"]))
    def send_a_hostile_request(self, op: _Op, other: _Op, seed: int, how: str) -> None:
        if op.pending is None:
            return
        state = op.pending["requestState"]
        principal = None
        if how == "swap":
            if other.pending is None or op is other:
                return
            params, rule = self._params(op, requestState=other.pending["requestState"]), "S11c"
        elif how == "tamper":
            params, rule = self._params(op, requestState=tamper(state, Prng(seed))), "S10"
        elif how == "principal":
            params, rule = self._params(op, requestState=state), "S11a"
            principal = f"{op.principal}-intruder"
        else:
            keys = list(op.pending.get("inputRequests") or {})
            params = self._params(op, requestState=state,
                                  inputResponses=malformed_answers(keys, Prng(seed)))
            rule = "S13"
        answer = self._send(op, params, principal=principal)
        assert self._refused(answer), f"{rule}: {how} must be refused"

    # Steps that land a state just inside its lifetime (accepted until exp + skew), exactly
    # on its edge (refused from exp + skew on) and past it; between exp and exp + skew the
    # replay guard must still remember a single-use token.
    @rule(dt=st.sampled_from([0.5, 5.0, TTL + SKEW - 0.5, TTL + SKEW, TTL + SKEW + 1.0]))
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
