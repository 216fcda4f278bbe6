"""Hostile client probes: misuses of a ``requestState`` sent next to an honest flow."""

from __future__ import annotations

from typing import Any, Final

from mrtr_core.client.retry import answer_for
from mrtr_core.sim import invariants as inv
from mrtr_core.sim._state import Flow, Leg, RunState, binding_of, is_refusal
from mrtr_core.sim.hostile import PROBES, PROBES_REFUSED, malformed_answers, tamper
from mrtr_core.sim.prng import Prng
from mrtr_core.sim.transcript import describe_message
from mrtr_core.wire.converter import structure_input_required
from mrtr_core.wire.models import CALL_TOOL, GET_PROMPT, JsonObject

_OTHER_METHOD: Final = {CALL_TOOL: GET_PROMPT, GET_PROMPT: CALL_TOOL}

__all__ = ["ProbeSide"]


class ProbeSide(RunState):
    """Sends the probes of :data:`~mrtr_core.sim.hostile.PROBES` and judges the answers."""

    def _probe(self, flow: Flow, leg: Leg, state: str, keys: tuple[str, ...]) -> None:
        """Send one hostile use of ``state`` (just received) next to the honest flow."""
        # A stream of the probe's own: probes never shift the honest flow's draws.
        prng = flow.prng.fork(f"probe-{flow.legs}")
        kind = prng.choice(PROBES)
        base = leg.message
        params = {k: v for k, v in (base.get("params") or {}).items()
                  if k not in ("inputResponses", "requestState")}
        principal = flow.client.principal
        delay = 0.0
        previous = (base.get("params") or {}).get("requestState")
        method = str(base.get("method"))
        if kind in ("replay", "late_replay") and not isinstance(previous, str):
            kind = "tamper"  # the first leg carried no state to replay
        if kind == "cross_method" and method not in _OTHER_METHOD:
            kind = "tamper"  # a resource has no namesake under another method
        stale = self._stale_answers(flow, keys) if kind == "stale_answer" else None
        if kind == "stale_answer" and stale is None:
            kind = "tamper"  # nothing answered earlier, or a single-use target
        if kind == "tamper":
            params["requestState"] = tamper(state, prng)
        elif kind == "swap":
            # Another flow's request, by an index of the run's own: a workload may know only
            # the operations of the flows it was asked to run (a list of ``flows`` of them).
            flows = self.sim.flows
            index = prng.below(max(flows - 1, 1))
            if flows > 1 and index >= flow.index:
                index += 1
            other = self._operation(index, prng.fork("swap"), flow.op)
            params = {k: v for k, v in other.params.items()}
            params["_meta"] = (base.get("params") or {}).get("_meta")
            params["requestState"] = state
            probe_msg = {"method": other.method, "params": params}
            if binding_of(probe_msg, principal) == binding_of(base, principal):
                return  # the workload has no other request to swap in
            self._send_probe(flow, kind, other.method, params, principal, delay)
            return
        elif kind == "foreign":
            params["requestState"] = state
            principal = f"{principal}-intruder"
        elif kind == "expired":
            params["requestState"] = state
            delay = self.timing.state_ttl + 2 * self.timing.state_skew + prng.uniform(0.5, 5.0)
        elif kind == "malformed":
            params["requestState"] = state
            params["inputResponses"] = malformed_answers(list(keys), prng)
        elif kind == "cross_method":
            # The same name and arguments under the other method: S11a binds the method.
            params["requestState"] = state
            self._send_probe(flow, kind, _OTHER_METHOD[method], params, principal, delay)
            return
        elif kind == "stale_answer":
            assert stale is not None
            params["requestState"] = state
            params["inputResponses"], expect = stale
            self._send_probe(flow, kind, method, params, principal, delay, expect)
            return
        else:  # replay / late_replay: the previous leg again, verbatim but for its id
            assert isinstance(previous, str)
            params = dict(base.get("params") or {})
            if kind == "late_replay":
                info = self.issued.get(previous)
                if info is None:
                    return
                edge = info.global_at + self.timing.state_ttl + self.timing.state_skew
                early = prng.uniform(0.0, 2 * self.timing.state_skew)
                delay = max(0.0, edge - self.sched.now - early)
        self._send_probe(flow, kind, method, params, principal, delay)

    def _stale_answers(
        self, flow: Flow, keys: tuple[str, ...]
    ) -> tuple[JsonObject, dict[str, Any]] | None:
        """A ``stale_answer`` probe's ``inputResponses`` (honest answers to ``keys``, and
        another answer under a key an earlier round asked) and the answers a complete
        result must echo (the first answer to that key); ``None`` when the probe does not
        apply: a single-use target (the probe would spend the state the flow needs),
        nothing asked now, nothing answered before, or no other answer to give."""
        if flow.operation.single_use or not keys:
            return None
        earlier = [key for key in flow.answers if key not in keys and key in flow.questions]
        if not earlier:
            return None
        key = earlier[0]
        asked = {k: flow.questions[k] for k in (*keys, key)}
        try:
            requests = structure_input_required(
                {"resultType": "input_required", "inputRequests": asked}).input_requests or {}
            responses: JsonObject = {
                k: answer_for(requests[k], self.workload.answer(flow.operation, k, requests[k]),
                              key=k)
                for k in keys
            }
            # Answered as if the key were another one: an answer that differs from the first.
            again = answer_for(requests[key], self.workload.answer(
                flow.operation, f"{key}-again", requests[key]), key=key)
        except Exception:  # a workload that cannot answer these: no probe of this kind
            return None
        if again == flow.answers[key]:
            return None
        expect = {**flow.answers, **responses}
        responses[key] = again
        return responses, expect

    def _send_probe(self, flow: Flow, kind: str, method: str, params: JsonObject,
                    principal: str, delay: float, expect: dict[str, Any] | None = None) -> None:
        net = flow.prng.fork(f"probe-net-{flow.legs}")
        item = (flow, kind, method, params, principal, net, expect)
        if delay > 0:
            self.sched.after(delay, self._send_probe_now, item)
        else:
            self._send_probe_now(item)

    def _send_probe_now(
        self, item: tuple[Flow, str, str, JsonObject, str, Prng, dict[str, Any] | None]
    ) -> None:
        flow, kind, method, params, principal, net, expect = item
        client = flow.client
        request_id = client.probe_id()
        message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method,
                               "params": params}
        self.counters.probes += 1
        leg = Leg(flow, message, principal, kind, self.sched.now, net)
        leg.expect = expect
        if self.transcript is not None:
            self._note(flow.op, principal, f"probe {kind}: {describe_message(message)}")
        self._transmit(leg, self._at_balancer, leg, "probe")

    def _probe_answered(self, leg: Leg, message: JsonObject) -> None:
        flow = leg.flow
        kind = leg.probe
        refused = is_refusal(message)
        if refused and not leg.refused:  # a duplicated answer is not another probe refused
            leg.refused = True
            self.counters.probes_refused += 1
        if self.transcript is not None:
            self._note(flow.op, leg.principal,
                       f"probe {kind} answered: {describe_message(message)}")
        must_refuse = kind in PROBES_REFUSED or (
            kind in ("replay", "late_replay") and flow.operation.single_use
        )
        if kind == "cross_method":
            # An app without the namesake answers with an error of its own: only a result,
            # served on the other target's state, is wrong.
            must_refuse = "result" in message
        if must_refuse and not refused:
            self._violate(inv.PROBE_REFUSED, flow.op,
                          f"{kind} probe was not refused: {describe_message(message)}")
        result = message.get("result")
        if leg.expect is not None and isinstance(result, dict) and result.get(
                "resultType", "complete") == "complete":
            # S14: the key of an earlier round was ignored, its first answer kept.
            expect, leg.expect = leg.expect, None  # judged once (a duplicate is not another)
            problem = self._judge(flow.operation, result, expect)
            if problem:
                self._violate(inv.ISOLATION, flow.op,
                              f"{kind} probe completed with a result that is wrong: {problem}")
