"""Hostile client probes: misuses of a ``requestState`` sent next to an honest flow."""

from __future__ import annotations

from typing import Final

from mrtr_core.sim import invariants as inv
from mrtr_core.sim._state import Flow, Leg, RunState, binding_of, is_refusal
from mrtr_core.sim.hostile import PROBES, PROBES_REFUSED, malformed_answers, tamper
from mrtr_core.sim.prng import Prng
from mrtr_core.sim.transcript import describe_message
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
        if kind == "tamper":
            params["requestState"] = tamper(state, prng)
        elif kind == "swap":
            # Another flow's request, by an index of the run's own: a workload may know only
            # the operations of the flows it was asked to run (a list of ``flows`` of them).
            flows = self.sim.flows
            index = prng.below(max(flows - 1, 1))
            if flows > 1 and index >= flow.index:
                index += 1
            other = self.workload.operation(index, prng.fork("swap"))
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

    def _send_probe(self, flow: Flow, kind: str, method: str, params: JsonObject,
                    principal: str, delay: float) -> None:
        net = flow.prng.fork(f"probe-net-{flow.legs}")
        if delay > 0:
            self.sched.after(delay, self._send_probe_now,
                             (flow, kind, method, params, principal, net))
        else:
            self._send_probe_now((flow, kind, method, params, principal, net))

    def _send_probe_now(self, item: tuple[Flow, str, str, JsonObject, str, Prng]) -> None:
        flow, kind, method, params, principal, net = item
        client = flow.client
        request_id = client.probe_id()
        message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method,
                               "params": params}
        self.counters.probes += 1
        leg = Leg(flow, message, principal, kind, self.sched.now, net)
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
