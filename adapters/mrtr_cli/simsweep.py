"""Many seeded campaigns at once: one campaign per seed, spread over worker processes.

Each seed's campaign is the one ``mrtr sim --seed S`` runs alone (the simulator is
deterministic and shares nothing between seeds), so the :class:`SweepReport` is the same
whatever the number of workers; the workers only let a machine with more cores run more
seeds in the same time. A worker is a fresh interpreter (``spawn``): nothing of the calling
process, its threads or its locks, is copied into it.
"""

from __future__ import annotations

import gc
import multiprocessing
import pickle
import signal
import traceback
from collections.abc import Callable, Sequence

import attrs

from mrtr_core._checks import MAX_SIM_FLOWS, MAX_SIM_INSTANCES, MAX_SIM_JOBS, MAX_SIM_SEEDS
from mrtr_core._pickling import PicklableError
from mrtr_core.sim import Faults, Mutations, Report, Workload, campaign
from mrtr_core.sim.sweep import SweepReport

__all__ = ["SweepError", "run_sweep"]


class SweepError(PicklableError, RuntimeError):
    """A campaign raised instead of reporting (a bug in the simulator or the code under
    test): its seed and the worker's traceback.

    Attributes:
        seed: The seed whose campaign raised.
    """

    def __init__(self, seed: int, detail: str) -> None:
        super().__init__(f"the campaign with seed {seed} raised:\n{detail}")
        self.seed = seed


@attrs.frozen
class _Settings:
    """Everything a worker needs besides the seed (sent to it by pickling)."""

    flows: int
    faults: Faults | None
    instances: int
    balancer: str | None
    workload: Workload | None
    mutations: Mutations | None


def _campaign(
    settings: _Settings, seed: int, passed: tuple[type[BaseException], ...] = (KeyboardInterrupt,)
) -> tuple[int, Report | None, str | None]:
    """One seed's campaign: ``(seed, report, None)``, or ``(seed, None, traceback)`` when it
    raised anything (a ``SystemExit`` too) but what ``passed`` lets through."""
    try:
        report = campaign(
            seed,
            settings.flows,
            settings.faults,
            instances=settings.instances,
            balancer=settings.balancer,
            workload=settings.workload,
            mutations=settings.mutations,
        )
    except passed:
        raise
    except BaseException:
        return seed, None, traceback.format_exc()
    return seed, report, None


def _worker_init() -> None:
    # Ctrl-C reaches every process of the terminal's group; the parent alone handles it
    # (it stops the workers), so the workers do not each print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _check(seeds: Sequence[int], flows: int, instances: int, jobs: int) -> None:
    if not seeds:
        raise ValueError("a sweep needs at least one seed")
    if len(seeds) > MAX_SIM_SEEDS:
        raise ValueError(f"a sweep runs at most {MAX_SIM_SEEDS} seeds, got {len(seeds)}")
    if len(set(seeds)) != len(seeds):
        raise ValueError("a sweep runs each seed once")
    counts = (("flows", flows, MAX_SIM_FLOWS), ("instances", instances, MAX_SIM_INSTANCES),
              ("jobs", jobs, MAX_SIM_JOBS))
    for name, count, most in counts:
        if count < 1:
            raise ValueError(f"{name} must be at least 1, got {count}")
        if count > most:
            raise ValueError(f"{name} must be at most {most}, got {count}")


def run_sweep(
    seeds: Sequence[int],
    flows: int,
    faults: Faults | None = None,
    *,
    instances: int = 3,
    balancer: str | None = None,
    workload: Workload | None = None,
    mutations: Mutations | None = None,
    jobs: int = 1,
    on_report: Callable[[Report], None] | None = None,
) -> SweepReport:
    """Run ``campaign(seed, flows, faults, ...)`` for every seed of ``seeds``.

    Args:
        seeds: The campaigns' seeds (each once).
        flows: Flows per campaign.
        faults: The same fault rates for every seed, or ``None``: each seed draws its own
            (as ``mrtr sim`` does by default).
        instances: Server instances behind the balancer.
        balancer: The balancer's name, or ``None``: drawn from each seed.
        workload: The app under test (default: the reference workload). With more than
            one job it is sent to the workers, so it must pickle: module-level functions
            and classes, no lambdas or closures.
        mutations: Planted bugs (tests of the simulator only).
        jobs: Worker processes; ``1`` runs the campaigns one after another in this process.
        on_report: Called with each report as its campaign ends (in the order they end).

    The workers are fresh interpreters that import the calling program's main module, so
    a script that calls this at its top level must do so under
    ``if __name__ == "__main__":``, as with any ``multiprocessing`` pool.

    Raises:
        ValueError: No seed, a seed twice, more than 100,000 seeds, a count below 1, more
            than 10,000,000 flows, 1,000 instances or 1,024 jobs, or (with more than one
            job) a workload or mutations that cannot be sent to a worker.
        SweepError: A campaign raised (anything, a ``SystemExit`` too, but a
            ``KeyboardInterrupt`` in this process, which stops the sweep as Ctrl-C does);
            the others are stopped.
    """
    _check(seeds, flows, instances, jobs)
    settings = _Settings(flows, faults, instances, balancer, workload, mutations)
    jobs = min(jobs, len(seeds))
    reports: list[Report] = []

    def take(result: tuple[int, Report | None, str | None]) -> None:
        seed, report, error = result
        if report is None:
            raise SweepError(seed, error or "")
        reports.append(report)
        if on_report is not None:
            on_report(report)

    if jobs == 1:
        for seed in seeds:
            take(_campaign(settings, seed))
        return SweepReport(tuple(reports))
    try:
        pickle.dumps(settings)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise ValueError(
            f"the workload cannot be sent to worker processes ({exc}); define its parts "
            "at module level, or run with jobs=1"
        ) from None
    context = multiprocessing.get_context("spawn")
    pool = context.Pool(jobs, initializer=_worker_init)
    interrupted = False
    try:
        for result in pool.imap_unordered(_run_one, ((settings, seed) for seed in seeds)):
            take(result)
    except KeyboardInterrupt:
        interrupted = True  # raised again below, once the pool is gone
    finally:
        pool.terminate()
        pool.join()
    if interrupted:
        # The interrupt's traceback held the pool's queues; with it gone, collect them now
        # so their semaphores are released even if the process then ends with os._exit.
        del pool
        gc.collect()
        raise KeyboardInterrupt
    return SweepReport(tuple(reports))


def _run_one(job: tuple[_Settings, int]) -> tuple[int, Report | None, str | None]:
    # A worker reports whatever its campaign raises: the pool's worker passes on only an
    # Exception, and dies of anything else with the seed's result never sent, so the sweep
    # would wait for it forever. (Its KeyboardInterrupt is the workload's own: workers
    # ignore Ctrl-C.)
    return _campaign(*job, passed=())
