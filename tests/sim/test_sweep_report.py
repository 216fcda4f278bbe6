"""SweepReport: one campaign's report per seed, in seed order, and the text that shows them."""

from __future__ import annotations

import pytest

from mrtr_core.sim import Faults, Mutations, SweepReport, campaign


def test_reports_are_kept_in_seed_order_and_totalled() -> None:
    reports = [campaign(seed, 40, "all") for seed in (9, 7, 8)]
    sweep = SweepReport(tuple(reports))
    assert [report.seed for report in sweep.reports] == [7, 8, 9]
    assert sweep.ok and sweep.failing == ()
    assert sweep.flows == 120
    assert sweep.completed == sum(report.completed for report in reports)
    assert sweep.failed == sum(report.failed for report in reports)
    text = sweep.summary()
    assert text.splitlines()[0] == "mrtr simulation sweep: 3 seeds (7..9), instances=3"
    rows = [line.split() for line in text.splitlines()[2:5]]
    assert [row[0] for row in rows] == ["7", "8", "9"]
    for row, report in zip(rows, sorted(reports, key=lambda r: r.seed), strict=True):
        assert row[1:] == [report.balancer, "40", str(report.completed), str(report.failed),
                           str(40 - report.completed - report.failed),
                           str(report.counters.legs), "held"]
    assert f"total: 120 flows: {sweep.completed} completed, {sweep.failed} failed" in text
    assert text.endswith("invariants: all held under every seed (3)")


def test_the_text_depends_on_the_seeds_not_on_the_order_reports_came_in() -> None:
    reports = tuple(campaign(seed, 30) for seed in (3, 4))
    assert SweepReport(reports).summary() == SweepReport(reports[::-1]).summary()


def test_seeds_that_are_not_consecutive_are_listed() -> None:
    reports = tuple(campaign(seed, 20) for seed in (2, 5))
    assert "2 seeds (2, 5)" in SweepReport(reports).summary()


def test_a_failing_seed_is_named_and_its_own_report_follows() -> None:
    bug = Mutations(reuse_request_id=True)
    failing = campaign(31, 60, Faults.none(), mutations=bug)
    passing = campaign(32, 60, Faults.none())
    assert not failing.ok and passing.ok
    sweep = SweepReport((passing, failing))
    assert not sweep.ok
    assert sweep.failing == (failing,)
    text = sweep.summary()
    assert f"VIOLATED ({len(failing.violations)})" in text
    assert "INVARIANT VIOLATIONS under 1 of 2 seeds: 31" in text
    assert text.endswith("\n\n" + failing.summary())  # seed, reproduction, transcript


def test_a_seed_twice_is_refused() -> None:
    report = campaign(1, 10)
    with pytest.raises(ValueError, match="each seed once"):
        SweepReport((report, report))


def test_an_empty_sweep_says_so() -> None:
    assert SweepReport(()).summary() == "mrtr simulation sweep: no seeds"
    assert SweepReport(()).ok
