"""What a run found: outcomes, counters, invariant violations, and the text that shows them."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from mrtr_core._pickling import PicklableError
from mrtr_core.sim.faults import Faults

__all__ = ["Counters", "Report", "SimulationError", "Violation"]


class SimulationError(PicklableError, RuntimeError):
    """The workload's own code raised during a run, where no flow can fail for it: its
    ``operations`` (for a flow, or for a hostile client's swap probe) or its app factory
    (for an instance's start, restart or key ring change). The original exception is
    chained as ``__cause__``; the same seed and arguments raise it again. It pickles with its
    seed and fields (not its cause, which is the workload's own and may not pickle).

    (An answer function that raises fails its flow instead, as a client's input handler
    that raises does, and a check that raises is an invariant violation: both end up in
    the :class:`Report`.)

    Attributes:
        seed: The run's seed.
        flow: The index of the flow whose operation was asked for, or ``None``.
        op: The operation whose probe asked for it, or ``None``.
    """

    def __init__(self, seed: int, what: str, error: BaseException, *,
                 where: str, flow: int | None = None, op: str | None = None) -> None:
        super().__init__(f"the run with seed {seed} stopped: the workload's {what} raised "
                         f"{error!r} for {where} (the same seed replays it)")
        self.seed = seed
        self.flow = flow
        self.op = op


@attrs.frozen(kw_only=True)
class Violation:
    """One broken invariant.

    Attributes:
        invariant: The invariant's short name (see :mod:`mrtr_core.sim.invariants`).
        op: The operation (flow) it concerns, e.g. ``"op-17"``; ``""`` for the whole run.
        detail: What exactly was wrong.
        time: Virtual time at which it was seen.
    """

    invariant: str
    op: str
    detail: str
    time: float

    def __str__(self) -> str:
        where = f" {self.op}" if self.op else ""
        return f"[{self.invariant}]{where} at t={self.time:.6f}: {self.detail}"


@attrs.define(kw_only=True)
class Counters:
    """Tallies kept while a run goes (mutable; frozen into the :class:`Report`)."""

    legs: int = 0
    messages: int = 0
    lost: int = 0
    duplicated: int = 0
    delayed: int = 0
    reordered: int = 0
    stale: int = 0
    crashes: int = 0
    rotations: int = 0
    handled: int = 0
    state_rejections: int = 0
    replays_refused: int = 0
    probes: int = 0
    probes_refused: int = 0
    hostile_flows: int = 0
    effects: int = 0


@attrs.frozen(kw_only=True)
class Report:
    """The result of :meth:`~mrtr_core.sim.Simulation.run`.

    Attributes:
        seed: The run's seed.
        flows: How many flows the run started.
        selected: The flow indexes run when not all of ``range(flows)`` ran (shrinking).
        faults: The fault rates.
        instances: Server instances behind the balancer.
        balancer: The balancer's name.
        outcomes: ``{"completed": n, "failed: LegTimeoutError": m, ...}``.
        counters: Messages, faults hit, probes and so on.
        virtual_time: Virtual seconds the run took.
        events: Events the run took off its queue.
        violations: Every invariant violation seen (empty: all held).
        transcript: The shortest transcript showing the first violation (after shrinking),
            or the run's own transcript when it was recorded.
        reproduce: How to re-run the shrunk failure: a ``Simulation(...)`` line with the
            seed, flows, faults, instances, balancer and clients, and the timing, event
            budget and workload where they are not the defaults (a workload of your own
            appears as ``WORKLOAD``).
    """

    seed: int
    flows: int
    selected: tuple[int, ...] | None
    faults: Faults
    instances: int
    balancer: str
    outcomes: dict[str, int]
    counters: Counters
    virtual_time: float
    events: int
    violations: tuple[Violation, ...]
    transcript: str | None = None
    reproduce: str | None = None

    @property
    def ok(self) -> bool:
        """No invariant was violated."""
        return not self.violations

    @property
    def completed(self) -> int:
        """Flows that ended with a complete result."""
        return sum(n for name, n in self.outcomes.items() if name.startswith("completed"))

    @property
    def failed(self) -> int:
        """Flows that ended with a typed error."""
        return sum(n for name, n in self.outcomes.items() if name.startswith("failed"))

    def summary(self) -> str:
        """A human summary; on a violation, the seed and the shortest transcript."""
        c = self.counters
        ran = len(self.selected) if self.selected is not None else self.flows
        lines = [
            f"mrtr simulation: seed={self.seed} flows={ran} instances={self.instances} "
            f"balancer={self.balancer}",
            f"faults: {self.faults.describe()}",
            f"flows: {self.completed} completed, {self.failed} failed, "
            f"{ran - self.completed - self.failed} unfinished",
        ]
        lines.extend(_table(self.outcomes.items()))
        per_flow = c.legs / ran if ran else 0.0
        lines.append(
            f"rounds: {c.legs} ({per_flow:.2f} per flow); virtual time: {self.virtual_time:.3f} s;"
            f" events: {self.events}"
        )
        lines.append(
            f"network: {c.messages} messages, {c.lost} lost, {c.duplicated} duplicated, "
            f"{c.delayed} delayed, {c.reordered} reordered, {c.stale} stale dropped"
        )
        lines.append(
            f"servers: {c.handled} requests handled, {c.crashes} crashes, {c.rotations} key "
            f"rotations, {c.state_rejections} states refused, {c.replays_refused} replays "
            f"refused, {c.effects} single-use effects"
        )
        lines.append(
            f"hostile: {c.hostile_flows} flows to hostile servers, {c.probes} client probes "
            f"({c.probes_refused} refused)"
        )
        if self.ok:
            lines.append("invariants: all held")
            return "\n".join(lines)
        lines.append(f"INVARIANT VIOLATIONS: {len(self.violations)} (seed {self.seed})")
        lines.extend(f"  {v}" for v in self.violations[:20])
        if len(self.violations) > 20:
            lines.append(f"  ... and {len(self.violations) - 20} more")
        if self.reproduce:
            lines.append(f"reproduce: {self.reproduce}")
        if self.transcript:
            lines.append("shortest transcript:")
            lines.append(self.transcript)
        return "\n".join(lines)


def _table(items: Iterable[tuple[str, int]]) -> list[str]:
    """One line per outcome, the counts in one column however long the longest name."""
    rows = sorted(items)
    width = max([48, *(len(name) for name, _ in rows)])
    return [f"  {name:<{width}} {count:>8}" for name, count in rows]
