"""The simulation end to end: real ClientFlow, real App, real StateCodec, one virtual clock."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mrtr_core.app import App
from mrtr_core.server import Context, form
from mrtr_core.sim import (
    BALANCERS,
    FAULT_NAMES,
    HOSTILE_SERVERS,
    PROBES,
    Effects,
    Faults,
    ReferenceWorkload,
    Simulation,
    Timing,
)
from mrtr_core.sim import invariants as inv
from mrtr_core.state import StateCodec
from mrtr_core.wire import ListRootsRequest

ROOT = Path(__file__).resolve().parents[2]


def test_fault_free_run_completes_every_flow_in_three_rounds() -> None:
    report = Simulation(1, flows=120).run()
    assert report.ok, report.summary()
    assert report.outcomes == {"completed": 120}
    assert report.counters.legs == 360
    assert report.counters.lost == report.counters.stale == 0
    assert "invariants: all held" in report.summary()


@pytest.mark.parametrize("balancer", sorted(BALANCERS))
def test_every_balancer_spreads_rounds_over_stateless_instances(balancer: str) -> None:
    report = Simulation(2, flows=90, instances=4, balancer=balancer, record=True).run()
    assert report.ok, report.summary()
    assert report.completed == 90
    assert report.transcript is not None
    served = {line.split()[2] for line in report.transcript.splitlines()
              if line.split()[2].startswith("server-")}
    assert served == {"server-0", "server-1", "server-2", "server-3"}


def test_never_same_moves_every_round_of_a_flow_to_another_instance() -> None:
    report = Simulation(3, flows=40, balancer="never_same", record=True).run()
    assert report.ok, report.summary()
    assert report.transcript is not None
    by_op: dict[str, list[str]] = {}
    for line in report.transcript.splitlines():
        _, op, actor, *_ = line.split()
        if actor.startswith("server-"):
            by_op.setdefault(op, []).append(actor)
    assert len(by_op) == 40
    for servers in by_op.values():
        assert all(a != b for a, b in itertools.pairwise(servers))


def test_same_seed_prints_the_same_transcript_byte_for_byte() -> None:
    def run() -> tuple[str, str]:
        report = Simulation(77, flows=150, faults=Faults.all(), record=True).run()
        assert report.transcript is not None
        return report.summary(), report.transcript

    first, second = run(), run()
    assert first == second
    assert len(first[1].splitlines()) > 1000


def test_another_seed_gives_another_transcript() -> None:
    a = Simulation(1, flows=30, faults=Faults.all(), record=True).run()
    b = Simulation(2, flows=30, faults=Faults.all(), record=True).run()
    assert a.transcript != b.transcript


_SCRIPT = """
from mrtr_core.sim import Faults, Simulation
report = Simulation(5, flows=60, faults=Faults.all(), record=True).run()
print(report.summary())
print(report.transcript)
"""


def test_same_seed_same_transcript_across_processes_and_hash_seeds() -> None:
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, cwd=ROOT,
                              capture_output=True, text=True, check=True, timeout=120)
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert "invariants: all held" in outputs[0]


@pytest.mark.parametrize("fault", FAULT_NAMES)
def test_each_fault_alone_at_a_high_rate_breaks_no_invariant(fault: str) -> None:
    rate = {"skew": 1.0, "rotate": 0.05, "hostile_server": 0.5, "hostile_client": 0.5}.get(
        fault, 0.15)
    report = Simulation(11, flows=250, faults=Faults(**{fault: rate})).run()
    assert report.ok, report.summary()
    assert report.completed + report.failed == 250


def test_loss_and_delay_end_flows_with_leg_timeouts_at_exactly_the_limit() -> None:
    report = Simulation(12, flows=300, faults=Faults(loss=0.1, delay=0.1)).run()
    assert report.ok, report.summary()  # TIME_LIMIT checks each leg timeout to 1e-6 s
    assert report.outcomes["failed: LegTimeoutError"] > 0


def test_duplicated_retries_of_single_use_state_are_refused_not_run_twice() -> None:
    report = Simulation(13, flows=400, faults=Faults(duplicate=0.5)).run()
    assert report.ok, report.summary()
    assert report.counters.duplicated > 0
    assert report.counters.replays_refused > 0
    # A deploy reserves once and charges once; SINGLE_USE (report.ok) checks each per op.
    assert 0 < report.counters.effects <= 2 * report.flows


def test_crashed_instances_restart_empty_and_flows_resume_elsewhere() -> None:
    report = Simulation(14, flows=300, faults=Faults(crash=0.2)).run()
    assert report.ok, report.summary()
    assert report.counters.crashes > 10
    assert report.completed > 200  # rounds resumed on other instances; only lost replies fail


def test_key_rotation_mid_flow_fails_no_flow() -> None:
    # Flows spread over 100 s of virtual time so that several rotations (about 40 s each:
    # distribute, activate, retire after a full TTL) happen while flows are in flight.
    report = Simulation(15, flows=400, faults=Faults(rotate=0.05),
                        timing=Timing(interarrival=0.25)).run()
    assert report.ok, report.summary()  # LIVENESS: untouched flows all complete
    assert report.counters.rotations >= 2
    assert report.outcomes == {"completed": 400}


def test_clock_skew_within_the_allowance_fails_no_flow() -> None:
    report = Simulation(16, flows=300, faults=Faults(skew=1.0)).run()
    assert report.outcomes == {"completed": 300}, report.summary()


def test_state_expiring_in_flight_is_refused() -> None:
    report = Simulation(17, flows=100, faults=Faults(expire=1.0)).run()
    assert report.ok, report.summary()
    assert report.outcomes.get("failed: JsonRpcError -32602", 0) == 100


def test_hostile_servers_end_every_flow_with_its_typed_error() -> None:
    report = Simulation(18, flows=400, faults=Faults(hostile_server=1.0)).run()
    assert report.ok, report.summary()  # PEER_CONTRACT checks the error type per behaviour
    assert report.counters.hostile_flows == 400
    seen = {name.split("hostile server: ")[1].rstrip("]") for name in report.outcomes}
    assert seen == set(HOSTILE_SERVERS)
    assert report.completed == 0


def test_state_only_hot_loop_is_paced_and_stopped_by_the_round_limit() -> None:
    timing = Timing()
    report = Simulation(19, flows=200, faults=Faults(hostile_server=1.0), timing=timing).run()
    assert report.ok, report.summary()  # PACING checks every state-only retry's delay
    assert report.outcomes["failed: RoundLimitError [hostile server: state_loop]"] > 0


def test_a_server_that_keeps_a_person_busy_is_stopped_by_the_flow_budget() -> None:
    report = Simulation(19, flows=200, faults=Faults(hostile_server=1.0)).run()
    assert report.ok, report.summary()  # TIME_LIMIT: no flow outlives flow_timeout
    assert report.outcomes["failed: FlowDeadlineError [hostile server: endless]"] > 0


def test_hostile_client_probes_are_all_refused() -> None:
    report = Simulation(20, flows=300, faults=Faults(hostile_client=1.0), record=True).run()
    assert report.ok, report.summary()
    assert report.transcript is not None
    kinds = {line.split("probe ")[1].split(":")[0] for line in report.transcript.splitlines()
             if " probe " in line and "answered" not in line}
    assert kinds == set(PROBES)
    assert report.counters.probes > 300
    assert report.outcomes == {"completed": 300}  # probes never disturb the honest flows


def test_handler_faults_end_flows_with_typed_errors_or_error_results() -> None:
    report = Simulation(21, flows=300, faults=Faults(handler=0.5)).run()
    assert report.ok, report.summary()
    for name in ("failed: HandlerFailedError", "failed: HandlerTimeoutError",
                 "failed: FlowCancelledError", "completed (isError)"):
        assert report.outcomes.get(name, 0) > 0, name


def test_a_run_that_never_settles_is_reported_as_a_hang() -> None:
    report = Simulation(22, flows=20, max_events=50, shrink=False).run()
    assert not report.ok
    assert {v.invariant for v in report.violations} == {inv.ENDS}
    assert "never ended" in report.summary()


def test_summary_lists_outcomes_counters_and_virtual_time() -> None:
    report = Simulation(23, flows=100, faults=Faults.all()).run()
    text = report.summary()
    for needle in ("mrtr simulation: seed=23 flows=100", "faults: loss=0.01", "rounds:",
                   "virtual time:", "network:", "servers:", "hostile:", "invariants: all held"):
        assert needle in text
    assert report.completed + report.failed == 100


def test_summary_keeps_the_counts_in_one_column_when_an_outcome_name_is_long() -> None:
    report = Simulation(42, flows=400, faults=Faults.all()).run()  # hostile servers: long names
    rows = [line for line in report.summary().splitlines()
            if line.startswith(("  completed", "  failed"))]
    names = [row.rsplit(None, 1)[0].strip() for row in rows]
    assert max(len(name) for name in names) > 48
    assert len({len(row) for row in rows}) == 1  # every count ends in the same column
    assert all(row.rsplit(None, 1)[1].isdigit() for row in rows)


def test_app_factory_runs_another_implementation_of_the_reference_tools() -> None:
    def same_app(codec: StateCodec) -> App:
        return ReferenceWorkload().build_app(codec, Effects())

    report = Simulation(24, flows=120, faults=Faults.all(), app_factory=same_app).run()
    assert report.ok, report.summary()


def test_another_review_prompt_that_leaks_between_operations_is_caught() -> None:
    remembered: dict[str, str] = {}

    def leaky_app(codec: StateCodec) -> App:
        app = App("leaky", "1.0", codec=codec)

        @app.prompt()
        def review(ctx: Context, op: str) -> Any:
            first = remembered.setdefault("op", op)  # a cache shared by every operation
            ctx.ask("roots", ListRootsRequest())
            ctx.ask("approve", form(f"{op}: approve?", note=str))
            return [json.dumps({"op": first, "answers": {}})]

        return app

    workload = ReferenceWorkload(mix=(0.0, 1.0, 0.0), app_factory=leaky_app)
    report = Simulation(25, flows=20, workload=workload).run()
    assert not report.ok
    assert {v.invariant for v in report.violations} == {inv.ISOLATION}
    assert "result is about op-" in report.summary()


def test_late_replays_near_expiry_on_a_slower_clock_are_refused() -> None:
    # Regression: the replay guard once forgot a single-use token at exp + skew on the
    # claiming instance's clock, while an instance whose clock runs behind still accepted it
    # (until exp + skew on *its* clock): a late replay there ran the step again. This seed
    # found it (the engine now claims until exp + 2 * skew).
    report = Simulation(3, flows=800, faults=Faults(skew=1.0, hostile_client=1.0)).run()
    assert report.ok, report.summary()
    assert report.counters.probes_refused > 500


def test_a_fault_that_is_off_spends_its_draws_like_one_that_never_fires() -> None:
    """Draws of a fault at rate 0 are spent without being computed: the run is the one a
    rate too small to ever fire gives (every later draw where it was)."""
    tiny = 1e-12
    off = Faults(skew=0.5)
    on_but_silent = Faults(skew=0.5, loss=tiny, duplicate=tiny, delay=tiny, reorder=tiny,
                           crash=tiny, handler=tiny, expire=tiny)

    def run(faults: Faults) -> tuple[Any, ...]:
        report = Simulation(3, flows=80, faults=faults, record=True).run()
        assert report.ok, report.summary()
        return (report.outcomes, report.counters, report.virtual_time, report.events,
                report.transcript)

    quiet = run(off)
    assert quiet == run(on_but_silent)
    counters = quiet[1]
    assert counters.lost == counters.duplicated == counters.delayed == counters.crashes == 0


def test_a_flow_keeps_one_wake_up_at_a_time() -> None:
    """A deadline that moves later is left to the wake-up already queued (which waits
    again when it comes early), so a three-round flow queues one or two wake-ups, not one
    per deadline change. Counted in events (1 start, 6 deliveries, 3 handlers, timers)."""
    flows = 200
    report = Simulation(1, flows=flows, workload=ReferenceWorkload(mix=(1.0, 0.0, 0.0)),
                        shrink=False).run()
    assert report.ok, report.summary()
    assert report.outcomes == {"completed": flows}
    assert report.events <= 12 * flows  # one wake-up per deadline change took 15


def test_wake_ups_that_come_early_still_time_out_at_exactly_the_deadline() -> None:
    """Handlers too slow for handler_timeout and legs lost on the way: every timeout fires
    at its own deadline (the TIME_LIMIT invariant measures leg timeouts to the microsecond)
    although the wake-ups queued for earlier deadlines come first."""
    report = Simulation(5, flows=150, faults=Faults(handler=0.6, loss=0.3)).run()
    assert report.ok, report.summary()
    labels = " ".join(report.outcomes)
    assert "LegTimeoutError" in labels and "HandlerTimeoutError" in labels
