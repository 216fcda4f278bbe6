"""Shrinking: the shortest run that still shows a violation, and its transcript.

The run is deterministic and each flow draws from its own streams, so re-running the same
seed with fewer flows keeps the remaining flows as they were. The shrinker tries the
violating flow alone, then growing windows of the flows before it, then removes chunks of
flows while the violation persists (delta debugging, within a budget of re-runs); finally
it turns faults off one by one while the violation persists, until a whole pass turns
none off. The last reproducing run is re-run with a transcript, and the lines about the
violating operation (plus run-wide lines) are kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from mrtr_core.sim.faults import FAULT_NAMES
from mrtr_core.sim.report import Report
from mrtr_core.sim.timing import Timing
from mrtr_core.sim.workload import ReferenceWorkload

if TYPE_CHECKING:
    from mrtr_core.sim.simulation import Simulation

__all__ = ["shrink"]

_MAX_TRANSCRIPT_LINES = 400


def _index(op: str) -> int | None:
    head, _, tail = op.rpartition("-")
    return int(tail) if head == "op" and tail.isdigit() else None


class _Shrinker:
    def __init__(self, sim: Simulation, invariant: str, budget: int) -> None:
        self.invariant = invariant
        self.budget = budget
        self.runs = 0
        self.best = sim.evolve(shrink=False, record=False)
        size = len(sim.select) if sim.select is not None else sim.flows
        # Flows simulated while shrinking: a few times the failing run, at least 5,000.
        self.work_left = max(5_000, 4 * size)

    def reproduces(self, candidate: Simulation) -> bool:
        self.runs += 1
        self.work_left -= len(candidate.select) if candidate.select is not None else (
            candidate.flows)
        report = candidate.run()
        return any(v.invariant == self.invariant for v in report.violations)

    @property
    def spent(self) -> bool:
        return self.runs >= self.budget or self.work_left <= 0

    def flows(self, index: int | None) -> None:
        best = self.best
        everything = list(best.select if best.select is not None else range(best.flows))
        current = everything
        if index is not None and index in everything:
            window = 0
            while not self.spent:
                low = index - window
                candidate = [i for i in everything if low <= i <= index]
                if self.reproduces(best.evolve(select=candidate)):
                    current = candidate
                    break
                if candidate[0] == everything[0]:
                    break
                window = max(1, window * 4)
        # Delta debugging over what is left: drop chunks while the violation persists.
        chunk = len(current) // 2
        while chunk >= 1 and len(current) > 1 and not self.spent:
            removed = False
            start = 0
            while start < len(current) and not self.spent:
                piece = set(current[start : start + chunk]) - {index}
                if not piece:
                    start += chunk
                    continue
                candidate = [i for i in current if i not in piece]
                if self.reproduces(best.evolve(select=candidate)):
                    current = candidate
                    removed = True
                else:
                    start += chunk
            if not removed:
                chunk //= 2
        if current != everything:
            self.best = best.evolve(select=current)

    def faults(self) -> None:
        """Turn faults off one by one while the violation persists, pass after pass: a
        fault kept in one pass (only another fault, turned off later, made the violation
        need it) may go in the next."""
        removed = True
        while removed:
            removed = False
            for name in FAULT_NAMES:
                if self.spent:
                    return
                if getattr(self.best.faults, name) == 0:
                    continue
                candidate = self.best.evolve(faults=self.best.faults.without(name))
                if self.reproduces(candidate):
                    self.best = candidate
                    removed = True


def shrink(sim: Simulation, report: Report, budget: int = 40) -> Report:
    """Shrink the failing run ``sim`` (whose report is ``report``) and attach the transcript.

    Args:
        sim: The simulation that failed.
        report: Its report.
        budget: Most re-runs to spend on shrinking.

    Returns:
        ``report`` with ``transcript`` and ``reproduce`` filled in; its counters and
        violations stay those of the full run.
    """
    first = report.violations[0]
    shrinker = _Shrinker(sim, first.invariant, budget)
    shrinker.flows(_index(first.op))
    shrinker.faults()
    best = shrinker.best
    final = best.evolve(record=True).run()
    shown = [v for v in final.violations if v.invariant == first.invariant]
    focus = shown[0] if shown else first
    ops = {focus.op} if focus.op else set()
    lines = _lines(final.transcript or "", ops)
    if len(lines) > _MAX_TRANSCRIPT_LINES:
        cut = len(lines) - _MAX_TRANSCRIPT_LINES
        lines = [f"... {cut} earlier lines left out ...", *lines[-_MAX_TRANSCRIPT_LINES:]]
    selected = best.select if best.select is not None else tuple(range(best.flows))
    reproduce = (
        f"Simulation(seed={best.seed}, flows={best.flows}, select={_ranges(selected)}, "
        f"faults=Faults.parse({best.faults.spec()!r}), "
        f"instances={best.instances}, balancer={best.balancer!r}, clients={best.clients}"
        + (f", mutations={best.mutations!r}" if best.mutations.active() else "")
        + _setup_arguments(best)
        + f").run()  # {len(selected)} flow(s), {shrinker.runs} shrinking runs"
        + _workload_note(best)
    )
    return attrs.evolve(report, transcript="\n".join(lines), reproduce=reproduce)


_DEFAULT_TIMING = Timing()
_DEFAULT_MIX = ReferenceWorkload().mix


def _setup_arguments(sim: Simulation) -> str:
    """The rest of the run's setup, as arguments of ``Simulation``: the timing fields that
    differ from the defaults, the event budget, and the workload when it is not the
    default one (a workload of the caller's own is named ``WORKLOAD``, an app factory by
    its name: the caller has them, the line cannot rebuild them)."""
    parts = []
    changed = [
        f"{field.name}={getattr(sim.timing, field.name)!r}"
        for field in attrs.fields(Timing)
        if getattr(sim.timing, field.name) != getattr(_DEFAULT_TIMING, field.name)
    ]
    if changed:
        parts.append(f"timing=Timing({', '.join(changed)})")
    if sim.max_events is not None:
        parts.append(f"max_events={sim.max_events}")
    workload = sim.workload
    if type(workload) is not ReferenceWorkload:  # a subclass is the caller's own too
        parts.append("workload=WORKLOAD")
    elif workload.mix != _DEFAULT_MIX:
        inner = [f"mix={workload.mix!r}"]
        if workload.app_factory is not None:
            inner.append(f"app_factory={_name(workload.app_factory)}")
        parts.append(f"workload=ReferenceWorkload({', '.join(inner)})")
    elif workload.app_factory is not None:
        parts.append(f"app_factory={_name(workload.app_factory)}")
    return "".join(f", {part}" for part in parts)


def _name(factory: object) -> str:
    return str(getattr(factory, "__qualname__", repr(factory)))


def _workload_note(sim: Simulation) -> str:
    """Which object ``WORKLOAD`` stands for, when the line names it."""
    if type(sim.workload) is ReferenceWorkload:
        return ""
    return f"; WORKLOAD: your {sim.workload.name!r} workload"


def _lines(transcript: str, ops: set[str]) -> list[str]:
    if not ops:
        return transcript.splitlines()
    out = []
    for line in transcript.splitlines():
        parts = line.split(None, 2)
        if len(parts) < 2 or parts[1] in ops or parts[1] == "-":
            out.append(line)
    return out


def _ranges(indexes: tuple[int, ...]) -> str:
    """Flow indexes as Python, runs of consecutive ones as ``range``s."""
    runs: list[tuple[int, int]] = []
    for i in indexes:
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    if len(runs) == 1:
        low, high = runs[0]
        return f"range({low}, {high})"
    parts = [str(low) if high == low + 1 else f"*range({low}, {high})" for low, high in runs]
    return "[" + ", ".join(parts) + "]"
