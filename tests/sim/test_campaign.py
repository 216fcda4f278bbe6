"""The big one: a 20,000-flow campaign with every fault on must hold every invariant."""

from __future__ import annotations

import pytest

from mrtr_core.sim import FAULT_NAMES, HOSTILE_SERVERS, Faults, campaign


@pytest.mark.slow
def test_twenty_thousand_flows_with_every_fault_on_hold_every_invariant() -> None:
    faults = Faults.drawn(2026)
    assert faults.active() == FAULT_NAMES
    report = campaign(2026, flows=20_000, faults=faults, balancer="never_same")
    assert report.ok, report.summary()
    assert report.completed + report.failed == 20_000
    counters = report.counters
    # Every fault actually struck.
    assert counters.lost and counters.duplicated and counters.delayed and counters.reordered
    assert counters.crashes and counters.rotations and counters.state_rejections
    assert counters.replays_refused and counters.probes_refused
    assert counters.hostile_flows > 500
    hostile_seen = {name.split("hostile server: ")[1].rstrip("]")
                    for name in report.outcomes if "hostile server" in name}
    assert hostile_seen == set(HOSTILE_SERVERS)
    # Most honest flows still complete: the faults bite, they do not flatten everything.
    assert report.completed > 10_000
