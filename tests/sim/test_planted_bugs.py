"""Planted bugs (``Mutations``): a campaign must catch each one, name its seed and print the
shortest transcript that shows it; the printed reproduction must reproduce it."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import mrtr_core.sim._clients as client_side
from mrtr_core.client import ClientFlow, ClientLimits
from mrtr_core.server import Context
from mrtr_core.server.carried import Asked, Carried
from mrtr_core.server.engine import ServerEngine
from mrtr_core.sim import (
    Faults,
    Mutations,
    ReferenceWorkload,
    Report,
    Simulation,
    Timing,
    campaign,
)
from mrtr_core.sim import invariants as inv
from mrtr_core.state import Binding

PLANTED = [
    # (bug, the faults that expose it, the invariant that must catch it, what the transcript shows)
    ("accept_replayed", Faults(duplicate=0.2), inv.SINGLE_USE, "request duplicated"),
    ("reuse_request_id", Faults.none(), inv.FRESH_IDS, "was used before"),
    ("ignore_expiry", Faults(expire=0.2), inv.STATE_VALID, "accepted expired state"),
    ("miscount_rounds", Faults.none(), inv.ROUND_NUMBER, "with ctx.round 3 in round 2"),
]


def _reproduce(report: Report) -> Report:
    assert report.reproduce is not None
    code = report.reproduce.split("  #")[0]
    namespace = {"Simulation": Simulation, "Faults": Faults, "Mutations": Mutations}
    rerun = eval(code, namespace)  # the printed line is Python
    assert isinstance(rerun, Report)
    return rerun


@pytest.mark.parametrize(("bug", "faults", "invariant", "shown"), PLANTED,
                         ids=[p[0] for p in PLANTED])
def test_planted_bug_is_caught_with_seed_and_shortest_transcript(
    bug: str, faults: Faults, invariant: str, shown: str
) -> None:
    report = Simulation(31, flows=400, faults=faults, mutations=Mutations(**{bug: True})).run()
    assert not report.ok
    assert invariant in {v.invariant for v in report.violations}
    text = report.summary()
    assert "INVARIANT VIOLATIONS" in text and "(seed 31)" in text
    assert "shortest transcript:" in text
    assert report.transcript is not None
    assert f"VIOLATION [{invariant}]" in report.transcript
    assert shown in report.transcript
    # Shrunk: one operation's story, run-wide lines aside.
    ops = {line.split()[1] for line in report.transcript.splitlines()} - {"-"}
    assert len(ops) == 1
    rerun = _reproduce(report)
    assert invariant in {v.invariant for v in rerun.violations}


def test_the_shrunk_transcript_is_the_same_byte_for_byte_on_every_run() -> None:
    def run() -> str:
        report = Simulation(32, flows=300, faults=Faults(duplicate=0.2),
                            mutations=Mutations(accept_replayed=True)).run()
        return report.summary()

    assert run() == run()


@pytest.mark.parametrize("bug", ["accept_replayed", "reuse_request_id", "ignore_expiry",
                                 "miscount_rounds"])
def test_campaign_with_every_fault_on_catches_the_planted_bug(bug: str) -> None:
    report = campaign(33, flows=1500, mutations=Mutations(**{bug: True}))
    assert not report.ok, report.summary()
    assert "(seed 33)" in report.summary()
    assert report.transcript


def test_without_mutations_the_same_campaign_passes() -> None:
    report = campaign(33, flows=1500)
    assert report.ok, report.summary()


def test_the_printed_reproduction_builds_the_failing_simulation_with_its_exact_rates() -> None:
    # Rates drawn from a seed have many digits: rounded, they would hit other draws.
    faults = Faults.drawn(34)
    report = Simulation(34, flows=300, faults=faults, clients=3,
                        mutations=Mutations(accept_replayed=True)).run()
    assert not report.ok and report.reproduce is not None
    code = report.reproduce.split("  #")[0].removesuffix(".run()")
    rerun = eval(code, {"Simulation": Simulation, "Faults": Faults, "Mutations": Mutations})
    assert isinstance(rerun, Simulation)
    assert rerun.clients == 3
    kept = rerun.faults.active()
    assert kept  # the shrinker turns faults off, never changes a rate it keeps
    assert {name: getattr(rerun.faults, name) for name in kept} == {
        name: getattr(faults, name) for name in kept}
    assert inv.SINGLE_USE in {v.invariant for v in rerun.run().violations}


def test_fault_spec_reads_back_as_the_same_rates() -> None:
    for faults in (Faults.none(), Faults.all(), Faults.drawn(7), Faults(loss=1 / 3)):
        assert Faults.parse(faults.spec()) == faults


def test_the_printed_reproduction_keeps_the_timing_and_workload_it_ran_with() -> None:
    timing = Timing(state_ttl=20.0, interarrival=0.002)
    workload = ReferenceWorkload(mix=(1.0, 0.0, 0.0))
    report = Simulation(35, flows=300, faults=Faults(duplicate=0.2), timing=timing,
                        workload=workload, mutations=Mutations(accept_replayed=True)).run()
    assert not report.ok and report.reproduce is not None
    assert "timing=Timing(interarrival=0.002, state_ttl=20.0)" in report.reproduce
    code = report.reproduce.split("  #")[0].removesuffix(".run()")
    rerun = eval(code, {"Simulation": Simulation, "Faults": Faults, "Mutations": Mutations,
                        "Timing": Timing, "ReferenceWorkload": ReferenceWorkload})
    assert isinstance(rerun, Simulation)
    assert rerun.timing == timing
    assert isinstance(rerun.workload, ReferenceWorkload) and rerun.workload.mix == workload.mix
    assert inv.SINGLE_USE in {v.invariant for v in rerun.run().violations}


def test_the_printed_reproduction_names_a_workload_of_the_callers_own() -> None:
    class Mine(ReferenceWorkload):
        name = "mine"

    report = Simulation(36, flows=300, faults=Faults(duplicate=0.2), workload=Mine(),
                        mutations=Mutations(accept_replayed=True)).run()
    assert not report.ok and report.reproduce is not None
    assert report.reproduce.endswith("; WORKLOAD: your 'mine' workload")
    code = report.reproduce.split("  #")[0]
    rerun = eval(code, {"Simulation": Simulation, "Faults": Faults, "Mutations": Mutations,
                        "WORKLOAD": Mine()})
    assert inv.SINGLE_USE in {v.invariant for v in rerun.violations}


def _client_flow_with(monkeypatch: pytest.MonkeyPatch, **loosened: Any) -> None:
    """Plant a client flow that runs under looser limits than the simulator checks."""

    class Loose(ClientFlow):
        def __init__(self, *args: Any, limits: ClientLimits, **kwargs: Any) -> None:
            super().__init__(*args, limits=attrs.evolve(limits, **loosened), **kwargs)

    monkeypatch.setattr(client_side, "ClientFlow", Loose)


def test_a_client_that_never_times_out_a_handler_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _client_flow_with(monkeypatch, handler_timeout=None)
    report = Simulation(37, flows=300, faults=Faults(handler=0.5)).run()
    assert inv.TIME_LIMIT in {v.invariant for v in report.violations}, report.summary()
    assert report.transcript is not None
    assert ": slow" in report.transcript  # the handler the flow should have given up on
    assert "the flow still took the answer; handler_timeout is 60.0" in report.transcript


def test_a_client_that_never_spends_its_flow_budget_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Only a server that keeps a person busy past the budget can show it: the honest
    # flows end long before flow_timeout.
    _client_flow_with(monkeypatch, flow_timeout=None)
    report = Simulation(38, flows=200, faults=Faults(hostile_server=1.0)).run()
    assert inv.TIME_LIMIT in {v.invariant for v in report.violations}, report.summary()
    assert report.transcript is not None
    assert "to hostile server (endless)" in report.transcript
    assert "budget 240.0" in report.transcript


def test_a_once_step_that_runs_again_in_a_later_round_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ctx.once that forgets what ran: harmless in a handler's last round, a second side
    # effect in any round after it.
    monkeypatch.setattr(Context, "once", lambda self, name, fn: fn())
    report = Simulation(39, flows=100).run()
    assert inv.SINGLE_USE in {v.invariant for v in report.violations}, report.summary()
    assert report.transcript is not None
    assert "ran side effect 'reserve'" in report.transcript


def _caught(seed: int, invariant: str, shown: str, **simulation: Any) -> None:
    """A run of ``seed`` breaks ``invariant``, names the seed, and its shortest transcript
    shows ``shown``."""
    report = Simulation(seed, **simulation).run()
    assert invariant in {v.invariant for v in report.violations}, report.summary()
    assert f"(seed {seed})" in report.summary()
    assert report.transcript is not None
    assert shown in report.transcript


def test_a_client_that_stops_a_round_early_on_the_round_limit_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Off by one the safe-looking way: the flow gives up one round before max_rounds.
    check = ClientFlow._check_input_required

    def early(self: ClientFlow, result: Any, now: float) -> Any:
        self._rounds += 1
        try:
            return check(self, result, now)
        finally:
            self._rounds -= 1

    monkeypatch.setattr(ClientFlow, "_check_input_required", early)
    _caught(40, inv.ROUND_LIMIT, "stopped by the round limit after 7 rounds; max_rounds is 8",
            flows=100, faults=Faults(hostile_server=1.0))


def test_a_client_that_keeps_doubling_the_pacing_after_a_question_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A round with inputRequests must start the pacing over (digest §2.4); only a server
    # that puts a question between state-only rounds shows it.
    take = ClientFlow._take_input_required

    def keep_streak(self: ClientFlow, result: Any, now: float, *, resumed: bool) -> Any:
        streak = self._streak
        commands = take(self, result, now, resumed=resumed)
        if result.input_requests:
            self._streak = streak
        return commands

    monkeypatch.setattr(ClientFlow, "_take_input_required", keep_streak)
    # The third state-only retry follows a question: it must wait retry 1's delay again.
    _caught(41, inv.PACING, "state-only retry 1 after", flows=100,
            faults=Faults(hostile_server=1.0))


def test_a_state_binding_without_the_method_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # S11a: a tool's state must not open a prompt of the same name.
    for_params = Binding.for_params.__func__  # type: ignore[attr-defined]

    def without_method(cls: type[Binding], params: Any, principal: str | None = None) -> Binding:
        bound = for_params(cls, params, principal)
        return cls(method="", target=bound.target, arguments_digest=bound.arguments_digest,
                   principal=bound.principal)

    monkeypatch.setattr(Binding, "for_params", classmethod(without_method))
    _caught(42, inv.PROBE_REFUSED, "cross_method probe was not refused", flows=60,
            faults=Faults(hostile_client=1.0))


def test_a_server_that_takes_an_answer_again_under_a_key_of_an_earlier_round_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # S14: a key the round did not ask is ignored, even one an earlier round asked; this
    # server reads it again and overwrites the answer recorded then.
    read = ServerEngine._read_responses

    def reread(self: ServerEngine, raw: Any, carried: Carried) -> Any:
        fresh, recorded, offered = read(self, raw, carried)
        for key, answer in carried.answers.items():
            if isinstance(raw, dict) and key in raw and key not in carried.asked:
                fresh[key], recorded[key] = self._read_answer(
                    key, Asked(answer.kind, answer.digest, None), raw[key])
        return fresh, recorded, offered

    monkeypatch.setattr(ServerEngine, "_read_responses", reread)
    _caught(43, inv.ISOLATION,
            "stale_answer probe completed with a result that is wrong: answer 'roots'",
            flows=60, faults=Faults(hostile_client=1.0),
            workload=ReferenceWorkload(mix=(0.0, 1.0, 0.0)))
