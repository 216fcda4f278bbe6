"""A deterministic simulator for MRTR: many clients, many stateless server instances, a
load balancer and a hostile network, all on one virtual clock and reproducible by seed.

>>> report = Simulation(7, flows=200, faults=Faults.all(), instances=3,
...                     balancer="never_same").run()               # doctest: +SKIP
>>> print(report.summary())                                         # doctest: +SKIP
>>> campaign(7, flows=20_000).ok                                    # doctest: +SKIP

Pure like the rest of ``mrtr_core``: no clock, no sleep, no thread, no ``random``; the
seeded :class:`Prng` is the only source of chance. The pytest plugin
(``mrtr_core.sim.pytest_plugin``) is not imported here.
"""

from mrtr_core.sim.balancer import BALANCERS, Balancer, NeverSame, RandomBalancer, RoundRobin
from mrtr_core.sim.campaign import campaign
from mrtr_core.sim.clock import EventBudgetExceeded, Scheduler
from mrtr_core.sim.faults import FAULT_NAMES, Faults
from mrtr_core.sim.hostile import HOSTILE_SERVER_ERRORS, HOSTILE_SERVERS, PROBES, PROBES_REFUSED
from mrtr_core.sim.invariants import INVARIANTS
from mrtr_core.sim.mutations import MUTATION_NAMES, Mutations
from mrtr_core.sim.prng import Prng
from mrtr_core.sim.report import Counters, Report, SimulationError, Violation
from mrtr_core.sim.simulation import Simulation, Timing
from mrtr_core.sim.sweep import SweepReport
from mrtr_core.sim.transcript import Transcript
from mrtr_core.sim.workload import (
    FULL_CAPABILITIES,
    AppWorkload,
    Effects,
    Operation,
    ReferenceWorkload,
    Workload,
    honest_answer,
)

__all__ = [
    "BALANCERS",
    "FAULT_NAMES",
    "FULL_CAPABILITIES",
    "HOSTILE_SERVERS",
    "HOSTILE_SERVER_ERRORS",
    "INVARIANTS",
    "MUTATION_NAMES",
    "PROBES",
    "PROBES_REFUSED",
    "AppWorkload",
    "Balancer",
    "Counters",
    "Effects",
    "EventBudgetExceeded",
    "Faults",
    "Mutations",
    "NeverSame",
    "Operation",
    "Prng",
    "RandomBalancer",
    "ReferenceWorkload",
    "Report",
    "RoundRobin",
    "Scheduler",
    "Simulation",
    "SimulationError",
    "SweepReport",
    "Timing",
    "Transcript",
    "Violation",
    "Workload",
    "campaign",
    "honest_answer",
]
