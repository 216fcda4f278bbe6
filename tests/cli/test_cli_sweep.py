"""``mrtr sim --seeds``: one campaign per seed over worker processes, the same reports as
running each seed alone, whatever the number of workers."""

from __future__ import annotations

import multiprocessing
import os
import signal
from typing import Any

import pytest
from mrtr_cli.main import main
from mrtr_cli.simsweep import SweepError, run_sweep

from mrtr_core.app import App
from mrtr_core.sim import (
    AppWorkload,
    Faults,
    Mutations,
    Operation,
    ReferenceWorkload,
    campaign,
)


def test_workers_give_each_seed_the_report_it_gets_alone() -> None:
    seen: list[int] = []
    sweep = run_sweep([21, 22, 23], 80, Faults.all(), jobs=2,
                      on_report=lambda report: seen.append(report.seed))
    assert sorted(seen) == [21, 22, 23]
    assert sweep.reports == tuple(campaign(seed, 80, Faults.all()) for seed in (21, 22, 23))


def test_one_job_runs_in_this_process_with_the_same_result() -> None:
    alone = run_sweep([4, 5], 50, jobs=1)
    assert alone == run_sweep([4, 5], 50, jobs=2)
    assert alone.reports == (campaign(4, 50), campaign(5, 50))


def test_a_planted_bug_is_caught_under_every_seed_with_its_reproduction() -> None:
    bug = Mutations(reuse_request_id=True)
    sweep = run_sweep([31, 32], 60, Faults.none(), mutations=bug, jobs=2)
    assert not sweep.ok
    assert [report.seed for report in sweep.failing] == [31, 32]
    text = sweep.summary()
    assert "INVARIANT VIOLATIONS under 2 of 2 seeds: 31, 32" in text
    for report in sweep.failing:
        assert report == campaign(report.seed, 60, Faults.none(), mutations=bug)
        assert report.reproduce is not None and report.reproduce in text


class _Broken(ReferenceWorkload):
    """A workload whose app cannot be built: the campaign raises instead of reporting."""

    def build_app(self, codec, effects):  # type: ignore[no-untyped-def]
        raise RuntimeError("no app today")


class _Exiting(ReferenceWorkload):
    """A workload whose app factory ends the process: no ``Exception``, but the campaign
    raised all the same."""

    def build_app(self, codec, effects):  # type: ignore[no-untyped-def]
        raise SystemExit(3)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize(("workload", "raised"), [
    (_Broken(), "SimulationError: the run with seed {seed} stopped: the workload's "
                "app_factory raised RuntimeError('no app today')"),
    # A pool's worker reports only an Exception: one that died of SystemExit lost its seed,
    # and the sweep waited for it forever.
    (_Exiting(), "SystemExit: 3"),
], ids=["exception", "system-exit"])
def test_a_campaign_that_raises_names_its_seed(
    jobs: int, workload: ReferenceWorkload, raised: str
) -> None:
    with pytest.raises(SweepError) as caught:
        run_sweep([8, 9], 10, workload=workload, jobs=jobs)
    seed = caught.value.seed
    assert seed in ((8,) if jobs == 1 else (8, 9))  # the workers race
    assert str(caught.value).startswith(f"the campaign with seed {seed} raised:\nTraceback")
    assert raised.format(seed=seed) in str(caught.value)
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize(
    ("seeds", "flows", "instances", "jobs", "problem"),
    [
        ([], 10, 3, 1, "at least one seed"),
        ([1, 1], 10, 3, 1, "each seed once"),
        ([1], 0, 3, 1, "flows must be at least 1"),
        ([1], 10, 0, 1, "instances must be at least 1"),
        ([1], 10, 3, 0, "jobs must be at least 1"),
        (list(range(100_001)), 10, 3, 1, "at most 100000 seeds, got 100001"),
        ([1], 10_000_001, 3, 1, "flows must be at most 10000000, got 10000001"),
        ([1], 10, 1001, 1, "instances must be at most 1000, got 1001"),
        ([1], 10, 3, 1025, "jobs must be at most 1024, got 1025"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(
    seeds: list[int], flows: int, instances: int, jobs: int, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        run_sweep(seeds, flows, instances=instances, jobs=jobs)


def test_the_command_prints_the_same_text_for_any_number_of_workers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["sim", "--seed", "40", "--seeds", "3", "--flows", "60", "--faults", "all"]
    assert main([*argv, "--jobs", "1"]) == 0
    one = capsys.readouterr()
    assert main([*argv, "--jobs", "2"]) == 0
    two = capsys.readouterr()
    assert one.out == two.out
    assert one.out.startswith("mrtr simulation sweep: 3 seeds (40..42), instances=3\n")
    assert "invariants: all held under every seed (3)" in one.out
    assert "180 flows in " in two.err and "on 2 processes" in two.err


@pytest.mark.parametrize(("option", "value", "bound"), [
    ("--seeds", "0", "1 to 100000"),
    ("--seeds", "100001", "1 to 100000"),
    ("--jobs", "0", "1 to 1024"),
    ("--jobs", "100000", "1 to 1024"),
    ("--flows", "0", "1 to 10000000"),
    ("--flows", "10000001", "1 to 10000000"),
    ("--instances", "0", "1 to 1000"),
    ("--instances", "1000000000", "1 to 1000"),
    ("--instances", "many", "1 to 1000"),
])
def test_the_command_refuses_counts_out_of_bounds(
    option: str, value: str, bound: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # --instances 1000000000 built a billion apps before the first event.
    with pytest.raises(SystemExit) as exited:
        main(["sim", "--seeds", "2", "--flows", "5", option, value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: mrtr sim "), err
    assert f"mrtr sim: error: argument {option}: {value!r} is not an integer from {bound}" in (
        err)


def test_an_interrupt_stops_the_workers_with_the_sweep() -> None:
    def interrupt(report: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C landing as the first campaign ends

    with pytest.raises(KeyboardInterrupt):
        run_sweep([1, 2, 3, 4], 40, jobs=2, on_report=interrupt)
    assert multiprocessing.active_children() == []


def test_sigterm_stops_the_command_and_its_workers_like_ctrl_c(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import mrtr_cli.simsweep as simsweep

    before = signal.getsignal(signal.SIGTERM)
    real = simsweep.run_sweep

    def terminated_once_a_seed_is_done(*args: Any, **options: Any) -> Any:
        options["on_report"] = lambda report: os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **options)

    monkeypatch.setattr(simsweep, "run_sweep", terminated_once_a_seed_is_done)
    assert main(["sim", "--seeds", "4", "--flows", "40", "--jobs", "2"]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert multiprocessing.active_children() == []
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_workload_that_cannot_reach_the_workers_is_refused_up_front() -> None:
    def make_app(codec: Any) -> App:  # a local function: it does not pickle
        app = App("echo", "1.0", codec=codec)

        @app.tool()
        def echo(ctx: Any, text: str) -> str:
            return text

        return app

    workload = AppWorkload(
        app_factory=make_app,
        operations=lambda index, prng: Operation(
            op=f"op-{index}", method="tools/call",
            params={"name": "echo", "arguments": {"text": f"t{index}"}}),
    )
    with pytest.raises(ValueError, match="cannot be sent to worker processes"):
        run_sweep([1, 2], 10, workload=workload, jobs=2)
    assert run_sweep([1], 10, workload=workload, jobs=2).ok  # one seed: no worker needed
    assert run_sweep([1, 2], 10, workload=workload, jobs=1).ok
