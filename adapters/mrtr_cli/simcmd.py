"""``mrtr sim``: a deterministic simulator campaign from the terminal.

Runs :func:`mrtr_core.sim.campaign` (virtual time, seeded faults, several instances behind a
balancer) and prints its report: outcomes, counters, and on an invariant violation the seed
and the shortest transcript that shows it. The same seed always gives the same report.

With ``--seeds K`` it runs the campaigns of ``K`` consecutive seeds, from ``--seed`` on,
over ``--jobs`` worker processes (:func:`mrtr_cli.simsweep.run_sweep`), and prints a line
per seed and the full report of every seed that violated an invariant. What it prints
depends on the seeds only, not on the number of workers; the time it took goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console

from mrtr_core._checks import MAX_SIM_FLOWS, MAX_SIM_INSTANCES, MAX_SIM_JOBS, MAX_SIM_SEEDS

__all__ = ["add_parser"]


def _count(most: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer from 1 to ``most`` (a mistyped count would build a
    billion instances or run for days)."""

    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if not 1 <= value <= most:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer from 1 to {most}")
        return value

    return count


def add_parser(sub: Any) -> None:
    """Register ``mrtr sim``."""
    p: argparse.ArgumentParser = sub.add_parser(
        "sim", help="run a deterministic simulator campaign (virtual time, seeded faults)")
    p.add_argument("--seed", type=int, default=1, help="the campaign's seed (default 1)")
    p.add_argument("--flows", type=_count(MAX_SIM_FLOWS), default=200, metavar="N",
                   help=f"MRTR flows to run, 1 to {MAX_SIM_FLOWS} (default 200)")
    p.add_argument("--faults", default=None,
                   help="none | all | drawn:SEED | name=rate,... (e.g. loss=0.01,crash=0.02); "
                        "default: every fault on, each at a rate drawn from the seed")
    p.add_argument("--instances", type=_count(MAX_SIM_INSTANCES), default=3, metavar="N",
                   help=f"server instances, 1 to {MAX_SIM_INSTANCES} (default 3)")
    p.add_argument("--balancer", choices=("round_robin", "random", "never_same"), default=None,
                   help="how rounds are spread (default: drawn from the seed)")
    p.add_argument("--seeds", type=_count(MAX_SIM_SEEDS), default=1, metavar="K",
                   help=f"run this many campaigns, seeds --seed, --seed + 1, ..., 1 to "
                        f"{MAX_SIM_SEEDS} (default 1)")
    p.add_argument("--jobs", type=_count(MAX_SIM_JOBS), default=None, metavar="N",
                   help=f"worker processes for --seeds, 1 to {MAX_SIM_JOBS} (default: one per "
                        f"CPU this process may use, at most {MAX_SIM_JOBS})")
    p.set_defaults(func=cmd_sim)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """While a sweep runs, SIGTERM stops it as Ctrl-C does: its workers are stopped with it
    rather than left to finish their campaigns (only the main thread can take signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def cmd_sim(args: argparse.Namespace, out: Console, ui: Console) -> int:
    """Run the campaign; exit 1 when an invariant was violated."""
    from mrtr_core.sim import Faults, campaign

    faults = None
    if args.faults is not None:
        try:
            faults = Faults.parse(args.faults)
        except ValueError as exc:
            ui.print(f"--faults: {exc}")
            return 2
    if args.seeds > 1:
        return _sweep(args, faults, out, ui)
    with ui.status(f"simulating {args.flows} flows (seed {args.seed})"):
        report = campaign(args.seed, args.flows, faults, instances=args.instances,
                          balancer=args.balancer)
    out.print(report.summary(), markup=False, highlight=False)
    return 0 if report.ok else 1


def _sweep(args: argparse.Namespace, faults: Any, out: Console, ui: Console) -> int:
    from mrtr_cli.simsweep import run_sweep

    seeds = range(args.seed, args.seed + args.seeds)
    jobs = min(args.jobs or min(_cpus(), MAX_SIM_JOBS), args.seeds)
    done = 0
    with ui.status(f"simulating {args.seeds} seeds x {args.flows} flows on {jobs} "
                   f"processes") as status:

        def ended(report: Any) -> None:
            nonlocal done
            done += 1
            status.update(f"simulating: {done} of {args.seeds} seeds done on {jobs} processes")

        start = time.perf_counter()
        with _terminate_as_interrupt():
            sweep = run_sweep(seeds, args.flows, faults, instances=args.instances,
                              balancer=args.balancer, jobs=jobs, on_report=ended)
        elapsed = time.perf_counter() - start
    out.print(sweep.summary(), markup=False, highlight=False)
    ui.print(f"{sweep.flows} flows in {elapsed:.1f} s ({sweep.flows / elapsed:,.0f} flows/s "
             f"on {jobs} processes)", markup=False, highlight=False)
    return 0 if sweep.ok else 1
