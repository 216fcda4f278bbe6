"""``mrtr sim``: a deterministic simulator campaign from the terminal.

Runs :func:`mrtr_core.sim.campaign` (virtual time, seeded faults, several instances behind a
balancer) and prints its report: outcomes, counters, and on an invariant violation the seed
and the shortest transcript that shows it. The same seed always gives the same report.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Register ``mrtr sim``."""
    p: argparse.ArgumentParser = sub.add_parser(
        "sim", help="run a deterministic simulator campaign (virtual time, seeded faults)")
    p.add_argument("--seed", type=int, default=1, help="the campaign's seed (default 1)")
    p.add_argument("--flows", type=int, default=200, help="MRTR flows to run (default 200)")
    p.add_argument("--faults", default=None,
                   help="none | all | drawn:SEED | name=rate,... (e.g. loss=0.01,crash=0.02); "
                        "default: every fault on, each at a rate drawn from the seed")
    p.add_argument("--instances", type=int, default=3, help="server instances (default 3)")
    p.add_argument("--balancer", choices=("round_robin", "random", "never_same"), default=None,
                   help="how rounds are spread (default: drawn from the seed)")
    p.set_defaults(func=cmd_sim)


def cmd_sim(args: argparse.Namespace, out: Console, ui: Console) -> int:
    """Run the campaign; exit 1 when an invariant was violated."""
    from mrtr_core.sim import Faults, campaign

    if args.flows < 1:
        ui.print("--flows must be at least 1")
        return 2
    if args.instances < 1:
        ui.print("--instances must be at least 1")
        return 2
    faults = None
    if args.faults is not None:
        try:
            faults = Faults.parse(args.faults)
        except ValueError as exc:
            ui.print(f"--faults: {exc}")
            return 2
    with ui.status(f"simulating {args.flows} flows (seed {args.seed})"):
        report = campaign(args.seed, args.flows, faults, instances=args.instances,
                          balancer=args.balancer)
    out.print(report.summary(), markup=False, highlight=False)
    return 0 if report.ok else 1
