"""One execution of a :class:`~mrtr_core.sim.Simulation`: all of its mutable state."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from mrtr_core.sim import invariants as inv
from mrtr_core.sim._clients import ClientSide
from mrtr_core.sim._probes import ProbeSide
from mrtr_core.sim._servers import ServerSide
from mrtr_core.sim._state import Client, Flow, Instance, Issued
from mrtr_core.sim.balancer import Balancer, make_balancer
from mrtr_core.sim.clock import EventBudgetExceeded, Scheduler
from mrtr_core.sim.mutations import codec_class, wrap_guard
from mrtr_core.sim.prng import Prng
from mrtr_core.sim.report import Counters, Report, Violation
from mrtr_core.sim.transcript import Transcript
from mrtr_core.sim.workload import Effects
from mrtr_core.state import KeyRing, MemoryReplayGuard

if TYPE_CHECKING:
    from mrtr_core.sim.simulation import Simulation

__all__ = ["Run"]


class Run(ClientSide, ServerSide, ProbeSide):
    """One execution of a :class:`~mrtr_core.sim.Simulation`."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.workload = sim.workload
        self.faults = sim.faults
        faults = sim.faults
        self.quiet_net = not (faults.loss or faults.duplicate or faults.delay or faults.reorder)
        self.timing = sim.timing
        self.limits = sim.timing.limits
        self.mutations = sim.mutations
        self.root = Prng(sim.seed)
        self.sched = Scheduler()
        self.effects = Effects()
        self.guard: Any = wrap_guard(MemoryReplayGuard(), sim.mutations)
        self.codec_cls = codec_class(sim.mutations)
        self.key_prng = self.root.fork("keys")
        self.nonce = self.root.fork("nonce").bytes
        self.counters = Counters()
        self.outcomes: Counter[str] = Counter()
        self.violations: list[Violation] = []
        self.transcript = Transcript() if sim.record else None
        self.issued: dict[str, Issued] = {}
        self.redeemed: set[str] = set()
        self.live: dict[int, Flow] = {}
        self.live_ops: dict[str, int] = {}
        self.keys_made = 1
        self.rotating = False
        ring = KeyRing({"k1": self.key_prng.bytes(32)}, active="k1")
        skew_prng = self.root.fork("skew")
        self.instances: list[Instance] = []
        for index in range(sim.instances):
            skew = 0.0
            if skew_prng.chance(self.faults.skew):
                # Clocks differ pairwise by less than the codec's allowance.
                skew = skew_prng.uniform(-0.45, 0.45) * self.timing.state_skew
            codec = self._codec(ring)
            self.instances.append(
                Instance(index, skew, ring, codec, self._build_app(codec, f"server-{index}"))
            )
        self.up = [i.index for i in self.instances]
        self.balancer: Balancer = make_balancer(sim.balancer, sim.instances,
                                                self.root.fork("balancer"))
        self.clients = [Client(i) for i in range(sim.clients)]
        self.single_use_targets: set[tuple[str, str]] = set()
        self._starts: Iterator[int] = iter(())

    def _schedule_next_start(self) -> None:
        index = next(self._starts, None)
        if index is not None:
            start_prng = self.root.fork(f"start-{index}")
            at = (index + start_prng.random()) * self.timing.interarrival
            self.sched.at(at, self._start_then_schedule_next, index)

    def _start_then_schedule_next(self, index: int) -> None:
        self._schedule_next_start()
        self._start(index)

    def execute(self) -> Report:
        sim = self.sim
        indexes = sim.select if sim.select is not None else range(sim.flows)
        # One start waits in the queue at a time, each scheduling the next: a campaign's
        # memory does not grow with its flow count. Flow i starts in
        # [i, i + 1) * interarrival, so index order is start order.
        self._starts = iter(sorted(indexes))
        self._schedule_next_start()
        count = len(indexes)
        budget = sim.max_events if sim.max_events is not None else 400 * count + 10_000
        try:
            self.sched.run(budget)
        except EventBudgetExceeded as exc:
            self._violate(inv.ENDS, "", f"the run did not settle: {exc}")
        for flow in list(self.live.values()):
            if not flow.done:
                self._violate(inv.ENDS, flow.op,
                              f"never ended (state {flow.flow.state.name if flow.flow else '?'},"
                              f" {flow.legs} legs sent)")
        return Report(
            seed=sim.seed,
            flows=sim.flows,
            selected=sim.select,
            faults=sim.faults,
            instances=sim.instances,
            balancer=sim.balancer,
            outcomes=dict(sorted(self.outcomes.items())),
            counters=self.counters,
            virtual_time=self.sched.now,
            events=self.sched.events,
            violations=tuple(self.violations),
            transcript=self.transcript.text() if self.transcript is not None else None,
        )
