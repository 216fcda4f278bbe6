"""What a sweep found: the reports of one campaign per seed, and the text that shows them.

A sweep runs the same campaign (flows, faults, instances) under many seeds; each seed's
report is exactly the one ``campaign(seed, ...)`` gives alone, whichever process ran it and
in whichever order, so a sweep's text depends only on its seeds and settings. Running the
campaigns is not done here (the core does no I/O): ``mrtr sim --seeds`` spreads them over
worker processes (``mrtr_cli.simsweep``).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from mrtr_core.sim.report import Report

__all__ = ["SweepReport"]


def _by_seed(reports: Sequence[Report]) -> tuple[Report, ...]:
    ordered = tuple(sorted(reports, key=lambda report: report.seed))
    seeds = [report.seed for report in ordered]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"a sweep runs each seed once; got seeds {seeds}")
    return ordered


@attrs.frozen
class SweepReport:
    """The reports of a sweep, in seed order.

    Attributes:
        reports: One :class:`Report` per seed, sorted by seed (each seed once).
    """

    reports: tuple[Report, ...] = attrs.field(converter=_by_seed)

    @property
    def ok(self) -> bool:
        """No invariant was violated under any seed."""
        return all(report.ok for report in self.reports)

    @property
    def failing(self) -> tuple[Report, ...]:
        """The reports of the seeds that violated an invariant."""
        return tuple(report for report in self.reports if not report.ok)

    @property
    def flows(self) -> int:
        """Flows run over all seeds."""
        return sum(_ran(report) for report in self.reports)

    @property
    def completed(self) -> int:
        """Flows that ended with a complete result, over all seeds."""
        return sum(report.completed for report in self.reports)

    @property
    def failed(self) -> int:
        """Flows that ended with a typed error, over all seeds."""
        return sum(report.failed for report in self.reports)

    def summary(self) -> str:
        """A line per seed and the totals; then, for each seed that violated an invariant,
        its own :meth:`Report.summary` (seed, violations, how to reproduce, transcript)."""
        reports = self.reports
        if not reports:
            return "mrtr simulation sweep: no seeds"
        first = reports[0]
        lines = [
            f"mrtr simulation sweep: {len(reports)} seeds ({_seed_span(reports)}), "
            f"instances={first.instances}",
            f"  {'seed':>10}  {'balancer':<12} {'flows':>7} {'completed':>9} {'failed':>7} "
            f"{'unfinished':>10} {'rounds':>8}  invariants",
        ]
        for report in reports:
            ran = _ran(report)
            held = "held" if report.ok else f"VIOLATED ({len(report.violations)})"
            lines.append(
                f"  {report.seed:>10}  {report.balancer:<12} {ran:>7} {report.completed:>9} "
                f"{report.failed:>7} {ran - report.completed - report.failed:>10} "
                f"{report.counters.legs:>8}  {held}"
            )
        rounds = sum(report.counters.legs for report in reports)
        lines.append(
            f"total: {self.flows} flows: {self.completed} completed, {self.failed} failed, "
            f"{self.flows - self.completed - self.failed} unfinished; {rounds} rounds"
        )
        failing = self.failing
        if not failing:
            lines.append(f"invariants: all held under every seed ({len(reports)})")
            return "\n".join(lines)
        seeds = ", ".join(str(report.seed) for report in failing)
        lines.append(f"INVARIANT VIOLATIONS under {len(failing)} of {len(reports)} seeds: {seeds}")
        for report in failing:
            lines.append("")
            lines.append(report.summary())
        return "\n".join(lines)


def _ran(report: Report) -> int:
    return len(report.selected) if report.selected is not None else report.flows


def _seed_span(reports: Sequence[Report]) -> str:
    seeds = [report.seed for report in reports]
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}..{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return ", ".join(str(seed) for seed in seeds)
