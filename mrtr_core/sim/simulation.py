"""The simulation: many clients, many stateless server instances, a balancer, a hostile net.

Theory of operation
-------------------
Everything happens on one virtual clock (:class:`~mrtr_core.sim.clock.Scheduler`). Each
flow is one MRTR operation run by the real :class:`~mrtr_core.client.ClientFlow` on one of
several client connections; its requests cross a faulty network to a load balancer, which
hands each to one of several server instances, each running the real
:class:`~mrtr_core.app.App` over the real :class:`~mrtr_core.state.StateCodec`. The
instances share a key ring and one :class:`~mrtr_core.state.MemoryReplayGuard`, and hold
nothing else between rounds, so a flow's rounds may land anywhere (digest §2.1).

Every random choice comes from a :class:`~mrtr_core.sim.prng.Prng` stream derived from the
seed and named after what it decides (``flow-17``, ``net-17``, ...), so one flow's draws do
not depend on the others: the shrinker can drop flows and keep the failing one as it was.

The simulator checks the invariants of :mod:`mrtr_core.sim.invariants` as it goes: it keeps
its own register of every ``requestState`` a server issued (for what, to whom, when, under
which key) and judges every state a server accepts against it, independently of the codec.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mrtr_core._checks import (
    MAX_SIM_CLIENTS,
    MAX_SIM_FLOWS,
    MAX_SIM_INSTANCES,
    instance_of,
    positive_int,
)
from mrtr_core.app import App
from mrtr_core.sim._run import Run
from mrtr_core.sim.balancer import make_balancer
from mrtr_core.sim.faults import Faults
from mrtr_core.sim.mutations import Mutations
from mrtr_core.sim.prng import Prng
from mrtr_core.sim.report import Report
from mrtr_core.sim.shrink import shrink
from mrtr_core.sim.timing import Timing
from mrtr_core.sim.workload import ReferenceWorkload, Workload
from mrtr_core.state import StateCodec

__all__ = ["Simulation", "Timing"]


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_arguments(
    seed: Any, flows: Any, instances: Any, clients: Any, faults: Any, timing: Any,
    select: Any, max_events: Any,
) -> None:
    """Refuse a bad :class:`Simulation` argument where it is given, naming it (a seed that
    is no integer would fail inside the first draw, a ``select`` index past ``flows`` would
    run a flow the full run never has, ``max_events=0`` would report every run unsettled)."""
    if not _integer(seed):
        raise TypeError(f"seed must be an integer, not {type(seed).__name__}")
    if not _integer(flows) or not 0 <= flows <= MAX_SIM_FLOWS:
        raise ValueError(f"flows must be an integer from 0 to {MAX_SIM_FLOWS}, got {flows!r}")
    # A mistyped count would build its instances or clients until memory runs out.
    positive_int("instances", instances, MAX_SIM_INSTANCES)
    positive_int("clients", clients, MAX_SIM_CLIENTS)
    instance_of("faults", faults, (Faults, type(None)), "Faults or None")
    instance_of("timing", timing, (Timing, type(None)), "a Timing or None")
    if max_events is not None:
        positive_int("max_events", max_events)
    if select is not None:
        if isinstance(select, str | bytes) or not isinstance(select, Sequence):
            raise TypeError(
                f"select must be a sequence of flow indexes, not {type(select).__name__}"
            )
        for index in select:
            if not _integer(index) or not 0 <= index < flows:
                raise ValueError(f"select holds {index!r}, not a flow index in [0, {flows})")
        if len(set(select)) != len(select):
            raise ValueError("select must not hold a flow index twice")


class Simulation:
    """A seeded, deterministic simulation of many MRTR flows against a cluster.

    Args:
        seed: Every random choice derives from it; the same seed gives the same run and the
            same transcript, byte for byte.
        flows: How many operations to run, at most 10,000,000.
        faults: Fault rates (default: none).
        instances: Server instances behind the balancer, at most 1,000.
        balancer: ``"round_robin"``, ``"random"`` or ``"never_same"``.
        clients: Client connections the flows are spread over, at most 100,000.
        workload: The app and operations under test (default: :class:`ReferenceWorkload`).
        app_factory: ``codec -> App``: another implementation of the reference workload's
            tools (``deploy``, ``review``, ``report``), run under the reference operations,
            answers and checks. For an app with other tools, pass a
            :class:`~mrtr_core.sim.workload.AppWorkload` as ``workload``.
        timing: Virtual-time constants and limits.
        mutations: Planted bugs (tests of the simulator only).
        select: Run only these flow indexes (the shrinker uses it).
        record: Keep a transcript of the run (:attr:`Report.transcript`).
        shrink: On a violation, shrink to the shortest reproducing run and attach its
            transcript.
        max_events: The event budget (default: proportional to ``flows``).
    """

    def __init__(
        self,
        seed: int,
        *,
        flows: int = 1000,
        faults: Faults | None = None,
        instances: int = 3,
        balancer: str = "round_robin",
        clients: int = 8,
        workload: Workload | None = None,
        app_factory: Callable[[StateCodec], App] | None = None,
        timing: Timing | None = None,
        mutations: Mutations | None = None,
        select: Sequence[int] | None = None,
        record: bool = False,
        shrink: bool = True,
        max_events: int | None = None,
    ) -> None:
        _check_arguments(seed, flows, instances, clients, faults, timing, select, max_events)
        if workload is not None and app_factory is not None:
            raise ValueError("pass workload or app_factory, not both")
        if app_factory is not None:
            workload = ReferenceWorkload(app_factory=app_factory)
        self.seed = seed
        self.flows = flows
        self.faults = faults if faults is not None else Faults.none()
        self.instances = instances
        self.balancer = balancer
        self.clients = clients
        self.workload: Workload = workload if workload is not None else ReferenceWorkload()
        self.timing = timing if timing is not None else Timing()
        self.mutations = mutations if mutations is not None else Mutations()
        self.select = tuple(select) if select is not None else None
        self.record = record
        self.shrink = shrink
        self.max_events = max_events
        make_balancer(balancer, instances, Prng(0))  # fail early on a bad name

    def evolve(self, **changes: Any) -> Simulation:
        """A copy with some arguments changed (what the shrinker re-runs)."""
        args: dict[str, Any] = {
            "flows": self.flows, "faults": self.faults, "instances": self.instances,
            "balancer": self.balancer, "clients": self.clients, "workload": self.workload,
            "timing": self.timing, "mutations": self.mutations, "select": self.select,
            "record": self.record, "shrink": self.shrink, "max_events": self.max_events,
        }
        args.update(changes)
        return Simulation(self.seed, **args)

    def run(self) -> Report:
        """Run it; on a violation (and ``shrink``), attach the shortest reproducing run.

        What goes wrong in a flow is reported: an answer function that raises fails its
        flow (as a client's input handler that raises does), a check that raises is a
        violation, and either comes with the seed and the transcript.

        Raises:
            SimulationError: The workload's ``operations`` or app factory raised (or
                returned something else than an ``Operation`` or an ``App``): no flow can
                fail for it, so the run stops, naming its seed, the flow or instance
                concerned, and chaining the original exception.
        """
        report = Run(self).execute()
        if report.violations and self.shrink:
            return shrink(self, report)
        return report
