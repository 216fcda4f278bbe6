"""The server side of a run: the balancer, the instances, crashes and key rotation.

Each instance is a driver of the real :class:`~mrtr_core.app.App`: ``receive``, claim a
single-use state on the shared replay guard, run the handler, ``complete``. An ``async def``
handler is stepped to completion inline, as the sync driver does
(:func:`~mrtr_core.app.run_inline`): one that suspends on an event loop fails its request
with a typed error naming that. Before the handler runs, the simulator judges the state the
app accepted against its own register of issued states (S9-S12).
"""

from __future__ import annotations

import inspect
from typing import Any, Final

from mrtr_core.app import Reply, run_inline
from mrtr_core.sim import invariants as inv
from mrtr_core.sim._state import Instance, Issued, Leg, RunState, is_refusal
from mrtr_core.sim.hostile import hostile_reply
from mrtr_core.sim.transcript import describe_message, short_token
from mrtr_core.state.errors import STATE_REJECTED_MESSAGE

__all__ = ["ServerSide"]

_PASS_THROUGH: Final = (KeyboardInterrupt, SystemExit, GeneratorExit)


class ServerSide(RunState):
    """The balancer, the server instances, and the hostile servers."""

    def _at_balancer(self, leg: Leg) -> None:
        flow = leg.flow
        index = self.balancer.pick(self.up, flow.op, flow.previous)
        if index is None:
            self.counters.lost += 1
            if leg.probe is None:
                flow.touched.append("no instance up")
            self._note(flow.op, "balancer", "no instance is up: request dropped")
            return
        if leg.probe is None:
            flow.previous = index
        self._serve(self.instances[index], leg)

    def _at_hostile(self, leg: Leg) -> None:
        flow = leg.flow
        assert flow.hostile is not None
        reply = hostile_reply(flow.hostile, leg.message, flow.legs, flow.prng,
                              self.limits.max_state_bytes)
        if self.transcript is not None:
            self._note(flow.op, "hostile", f"reply {describe_message(reply)}")
        self._transmit(leg, self._at_client, (leg, reply), "response",
                       extra=leg.net.uniform(*self.timing.service))

    def _serve(self, instance: Instance, leg: Leg) -> None:
        flow = leg.flow
        now = self.sched.now + instance.skew
        self.counters.handled += 1
        message = leg.message
        try:
            step = instance.app.receive(message, now=now, principal=leg.principal)
            reply = step if isinstance(step, Reply) else self._run_step(instance, leg, step, now)
        except Exception as exc:
            self._violate(inv.TYPED_OUTCOME, flow.op, f"{instance.name} raised {exc!r}")
            return
        answer = reply.message
        if answer is None:
            return
        result = answer.get("result")
        if isinstance(result, dict):
            token = result.get("requestState")
            if isinstance(token, str):
                self.issued[token] = Issued(
                    leg.binding, now, self.sched.now,
                    instance.active, flow.op,
                )
                if len(self.issued) % 4096 == 0:
                    self._forget_dead_states()
        elif is_refusal(answer) and (answer.get("error") or {}).get(
                "message") == STATE_REJECTED_MESSAGE:
            self.counters.state_rejections += 1
        if self.transcript is not None:
            self._note(flow.op, instance.name, f"reply {describe_message(answer)}")
        net = leg.net
        if self.faults.crash > 0.0:
            crash = net.chance(self.faults.crash)
            lose = net.chance(0.5) and crash
            downtime = net.uniform(*self.timing.downtime)
        else:  # the same three draws, spent: their values could not matter
            net.skip(3)
            crash = lose = False
            downtime = 0.0
        # An instance crashes only while another is up (a rolling restart, not an outage).
        if crash and len(self.up) > 1:
            self._crash(instance, lose, downtime)
        else:
            lose = False
        if lose:
            self.counters.lost += 1
            if leg.probe is None:
                flow.touched.append("reply lost in a crash")
            return
        self._transmit(leg, self._at_client, (leg, answer), "response",
                       extra=net.uniform(*self.timing.service))

    def _run_step(self, instance: Instance, leg: Leg, step: Any, now: float) -> Reply:
        """The driver's part: check the accepted state, claim, invoke, complete."""
        flow = leg.flow
        app = instance.app
        params = leg.message.get("params") or {}
        token = params.get("requestState")
        if isinstance(token, str):
            self._check_accepted(instance, leg, token, now)
        claim = step.run.claim
        if claim is not None:
            if not self.guard.claim(claim[0], claim[1], now):
                self.counters.replays_refused += 1
                return app.replayed(step)
            redeemed = str(token)
            if redeemed in self.redeemed:
                self._violate(inv.SINGLE_USE, flow.op,
                              f"{instance.name} redeemed single-use state {short_token(token)} "
                              f"a second time")
            self.redeemed.add(redeemed)
        elif isinstance(token, str) and (leg.message.get("method"), step.target) in (
                self.single_use_targets):
            self._violate(inv.SINGLE_USE, flow.op,
                          f"{instance.name} ran single-use {step.target} without a replay claim")
        said = step.run.context.round
        if leg.probe is None and said != leg.round:
            # Counted apart from the client: the sealed state's count, as this server read it.
            self._violate(inv.ROUND_NUMBER, flow.op,
                          f"{instance.name} ran {step.target} with ctx.round {said} in round "
                          f"{leg.round}")
        effects_before = len(self.effects.counts)
        self.effects.serving = flow.op
        try:
            value = step.invoke()
            if inspect.iscoroutine(value):
                value = run_inline(value)
        except Exception as exc:
            reply = app.complete(step, now, raised=exc)
        except BaseException as exc:  # the engine's control flow (a pending question)
            if isinstance(exc, _PASS_THROUGH):
                raise
            reply = app.complete(step, now, raised=exc)
        else:
            reply = app.complete(step, now, returned=value)
        finally:
            self.effects.serving = None
        self.counters.effects += len(self.effects.counts) - effects_before
        while self.effects.repeated:
            op, name, times = self.effects.repeated.pop(0)
            self._violate(inv.SINGLE_USE, op,
                          f"{instance.name} ran side effect {name!r} of {op} for the "
                          f"{_ordinal(times)} time")
        return reply

    def _check_accepted(self, instance: Instance, leg: Leg, token: str, now: float) -> None:
        """A server accepted ``token``: judge it against the register (S9-S11)."""
        op = leg.flow.op
        info = self.issued.get(token)
        if info is None:
            self._violate(inv.STATE_VALID, op,
                          f"{instance.name} accepted state {short_token(token)} that no server "
                          f"issued (tampered, forged, or long dead)")
            return
        if info.binding != leg.binding:
            self._violate(inv.STATE_VALID, op,
                          f"{instance.name} accepted state of {info.op} for another request or "
                          f"principal ({leg.principal})")
        ttl, skew = self.timing.state_ttl, self.timing.state_skew
        if not (info.iat <= now + skew and now < info.iat + ttl + skew):
            self._violate(inv.STATE_VALID, op,
                          f"{instance.name} accepted expired state {short_token(token)} "
                          f"(issued {info.iat:.6f}, now {now:.6f}, ttl {ttl}, skew {skew})")
        if info.kid not in instance.kids:
            self._violate(inv.STATE_VALID, op,
                          f"{instance.name} accepted state sealed with retired key {info.kid}")

    def _forget_dead_states(self) -> None:
        """Drop register entries of states far past any instance's acceptance window."""
        horizon = self.sched.now - (self.timing.state_ttl + 4 * self.timing.state_skew + 10.0)
        dead = []
        for token, info in self.issued.items():  # insertion order is issue order
            if info.global_at >= horizon:
                break
            dead.append(token)
        for token in dead:
            del self.issued[token]
            self.redeemed.discard(token)

    def _crash(self, instance: Instance, lose: bool, downtime: float) -> None:
        instance.up = False
        self.up = [i.index for i in self.instances if i.up]
        self.counters.crashes += 1
        self._note("-", instance.name,
                   f"crashes{' before replying' if lose else ''}; back in {downtime:.3f} s")
        self.sched.after(downtime, self._restart, instance)

    def _restart(self, instance: Instance) -> None:
        instance.app = self._build_app(  # a fresh process: no memory
            instance.codec, f"{instance.name} (restart)")
        instance.up = True
        self.up = [i.index for i in self.instances if i.up]
        self._note("-", instance.name, "restarts")

    def _rotate(self) -> None:
        if self.rotating:
            return
        self.rotating = True
        self.keys_made += 1
        kid = f"k{self.keys_made}"
        key = self.key_prng.bytes(32)
        old = self.instances[0].ring.active
        stagger = 0.05
        activate_at = 1.0
        retire_at = activate_at + self.timing.state_ttl + 2 * self.timing.state_skew + 5.0
        self._note("-", "keys", f"rotation to {kid} begins (retiring {old})")
        for index, instance in enumerate(self.instances):
            self.sched.after(index * stagger, self._ring_step, (instance, "add", kid, key))
            self.sched.after(activate_at + index * stagger, self._ring_step,
                             (instance, "activate", kid, key))
            self.sched.after(retire_at + index * stagger, self._ring_step,
                             (instance, "retire", old, key))
        self.sched.after(retire_at + len(self.instances) * stagger, self._rotated, kid)

    def _ring_step(self, item: tuple[Instance, str, str, bytes]) -> None:
        instance, action, kid, key = item
        if action == "add":
            ring = instance.ring.with_key(kid, key)
        elif action == "activate":
            ring = instance.ring.activate(kid)
        else:
            ring = instance.ring.without(kid)
        instance.use_ring(ring)
        instance.codec = self._codec(ring)
        instance.app = self._build_app(instance.codec, f"{instance.name} (key ring {action})")
        self._note("-", instance.name, f"key ring: {action} {kid} -> {sorted(ring.ids)}")

    def _rotated(self, kid: str) -> None:
        self.rotating = False
        self.counters.rotations += 1
        self._note("-", "keys", f"rotation to {kid} done")


def _ordinal(n: int) -> str:
    return {2: "second", 3: "third"}.get(n, f"{n}th")
