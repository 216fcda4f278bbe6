"""``campaign``: the one call behind ``mrtr sim --seed S --flows N --faults ...``."""

from __future__ import annotations

from mrtr_core.sim.balancer import BALANCERS
from mrtr_core.sim.faults import Faults
from mrtr_core.sim.mutations import Mutations
from mrtr_core.sim.prng import Prng
from mrtr_core.sim.report import Report
from mrtr_core.sim.simulation import Simulation, Timing
from mrtr_core.sim.workload import Workload

__all__ = ["campaign"]


def campaign(
    seed: int,
    flows: int = 20_000,
    faults: Faults | str | None = None,
    *,
    instances: int = 3,
    balancer: str | None = None,
    clients: int = 8,
    workload: Workload | None = None,
    timing: Timing | None = None,
    mutations: Mutations | None = None,
) -> Report:
    """Run one seeded campaign and return its report (shrunk on a violation).

    Args:
        seed: The campaign's seed (print it with every failure: it reproduces the run).
        flows: How many operations.
        faults: A :class:`Faults`, a text for :meth:`Faults.parse` (``"all"``, ``"none"``,
            ``"drawn:7"``, ``"loss=0.1,crash=0.02"``), or ``None``: every fault on, each at
            a rate drawn from ``seed``.
        instances: Server instances behind the balancer.
        balancer: ``"round_robin"``, ``"random"``, ``"never_same"``, or ``None``: drawn
            from ``seed``.
        clients: Client connections.
        workload: The app under test (default: the reference workload).
        timing: Virtual-time constants and limits.
        mutations: Planted bugs (tests of the simulator only).

    Returns:
        The :class:`Report`; ``report.ok`` is false when an invariant broke, and
        ``report.summary()`` then shows the seed and the shortest transcript.
    """
    if faults is None:
        chosen = Faults.drawn(seed)
    elif isinstance(faults, str):
        chosen = Faults.parse(faults)
    else:
        chosen = faults
    if balancer is None:
        balancer = Prng(seed).fork("campaign-balancer").choice(sorted(BALANCERS))
    return Simulation(
        seed,
        flows=flows,
        faults=chosen,
        instances=instances,
        balancer=balancer,
        clients=clients,
        workload=workload,
        timing=timing,
        mutations=mutations,
    ).run()
