"""A pytest plugin: run your own app's handlers under the MRTR simulator.

Enable it in your top-level ``conftest.py``::

    pytest_plugins = ["mrtr_core.sim.pytest_plugin"]

(or run ``pytest -p mrtr_core.sim.pytest_plugin``). Then use the ``mrtr_sim`` fixture::

    def test_deploy_survives_a_hostile_network(mrtr_sim):
        mrtr_sim.run(
            app_factory=make_app,                          # codec -> App
            operations=lambda index, prng: Operation(
                op=f"op-{index}", method="tools/call",
                params={"name": "deploy_production", "arguments": {"version": "1.2"}}),
            flows=300, faults="all")

``run`` returns the :class:`~mrtr_core.sim.Report`; when an invariant breaks it fails the
test with the seed and the shortest transcript that shows the violation. The seed is drawn
from the test's id unless given (``seed=`` or ``--mrtr-sim-seed``), so every run of a test is
the same run; ``--mrtr-sim-flows`` and ``--mrtr-sim-faults`` override the test's own choice.
``--mrtr-sim-seeds=K`` runs each simulation under ``K`` consecutive seeds from that one (a
deeper run, say nightly): ``run`` still returns the first seed's report, every report is kept
in ``mrtr_sim.reports``, and the first seed that breaks an invariant fails the test, named.

This module imports pytest; ``mrtr_core.sim`` never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from mrtr_core._checks import MAX_SIM_FLOWS, MAX_SIM_SEEDS
from mrtr_core.app import App
from mrtr_core.sim.faults import Faults
from mrtr_core.sim.prng import Prng, stream_key
from mrtr_core.sim.report import Report
from mrtr_core.sim.simulation import Simulation
from mrtr_core.sim.workload import AppWorkload, Operation, Workload
from mrtr_core.wire.models import InputRequest, InputResponse, JsonObject

__all__ = [
    "SimRunner",
    "mrtr_sim",
    "pytest_addoption",
    "pytest_configure",
    "pytest_report_header",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--mrtr-sim-seed``, ``--mrtr-sim-seeds``, ``--mrtr-sim-flows``, ``--mrtr-sim-faults``."""
    group = parser.getgroup("mrtr-sim", "MRTR simulator")
    group.addoption("--mrtr-sim-seed", type=int, default=None,
                    help="seed of every mrtr_sim run (default: drawn from the test's id)")
    group.addoption("--mrtr-sim-seeds", type=int, default=1,
                    help="run every mrtr_sim simulation under this many consecutive seeds, "
                         "from its own seed on (default 1)")
    group.addoption("--mrtr-sim-flows", type=int, default=None,
                    help="flows of every mrtr_sim run (default: the test's own)")
    group.addoption("--mrtr-sim-faults", default=None,
                    help="faults of every mrtr_sim run: none | all | drawn:SEED | "
                         "name=rate,... (default: the test's own)")


def pytest_configure(config: pytest.Config) -> None:
    """Refuse a seed count or flow count below one (or above 100,000 seeds or 10,000,000
    flows), and faults that do not parse, before any
    test runs (zero flows would pass every simulation without simulating anything)."""
    seeds = config.getoption("mrtr_sim_seeds", default=1)
    if seeds < 1:
        raise pytest.UsageError(f"--mrtr-sim-seeds must be at least 1, got {seeds}")
    if seeds > MAX_SIM_SEEDS:
        raise pytest.UsageError(f"--mrtr-sim-seeds must be at most {MAX_SIM_SEEDS}, got {seeds}")
    flows = config.getoption("mrtr_sim_flows", default=None)
    if flows is not None and flows < 1:
        raise pytest.UsageError(f"--mrtr-sim-flows must be at least 1, got {flows}")
    if flows is not None and flows > MAX_SIM_FLOWS:
        raise pytest.UsageError(f"--mrtr-sim-flows must be at most {MAX_SIM_FLOWS}, got {flows}")
    faults = config.getoption("mrtr_sim_faults", default=None)
    if faults is not None:
        try:
            Faults.parse(faults)
        except ValueError as exc:
            raise pytest.UsageError(f"--mrtr-sim-faults: {exc}") from None


def pytest_report_header(config: pytest.Config) -> str | None:
    """Name the forced seed and the seed count, if any, in the session header."""
    seed = config.getoption("mrtr_sim_seed")
    seeds = config.getoption("mrtr_sim_seeds")
    parts = ([] if seed is None else [f"seed={seed}"]) + ([] if seeds == 1 else [f"seeds={seeds}"])
    return f"mrtr-sim: {' '.join(parts)}" if parts else None


class SimRunner:
    """What the ``mrtr_sim`` fixture gives a test: :meth:`run` a simulation of your app."""

    def __init__(self, nodeid: str, seed: int | None, flows: int | None,
                 faults: str | None, seeds: int = 1) -> None:
        if seeds < 1:
            raise ValueError(f"seeds must be at least 1, got {seeds}")
        self.default_seed = stream_key(nodeid) % 1_000_000_007 if seed is None else seed
        self.seeds = seeds
        self._forced_seed = seed
        self._forced_flows = flows
        self._forced_faults = faults
        self.reports: list[Report] = []

    def run(
        self,
        workload: Workload | None = None,
        *,
        app_factory: Callable[..., App] | None = None,
        operations: Callable[[int, Prng], Operation] | None = None,
        answer: Callable[[Operation, str, InputRequest], InputResponse] | None = None,
        check: Callable[[Operation, JsonObject, Mapping[str, Any]], str] | None = None,
        flows: int = 200,
        faults: Faults | str = "all",
        seed: int | None = None,
        expect_ok: bool = True,
        pass_effects: bool = False,
        **options: Any,
    ) -> Report:
        """Simulate ``flows`` operations of your app and check every invariant (under
        :attr:`seeds` consecutive seeds; the first one's report is returned, all are kept in
        :attr:`reports`).

        Args:
            workload: A whole :class:`~mrtr_core.sim.Workload`; or give the parts:
            app_factory: ``codec -> App`` (a fresh app per instance, restart and rotation);
                ``(codec, effects) -> App`` with ``pass_effects``.
            operations: ``(index, prng) -> Operation``: what each client asks.
            answer: ``(operation, key, request) -> answer`` (default: valid honest answers).
            check: ``(operation, result, answers) -> problem`` ("" when the result is right).
            flows: How many operations, at least one (``--mrtr-sim-flows`` overrides).
            faults: A :class:`Faults` or its text form (``--mrtr-sim-faults`` overrides).
            seed: The seed (``--mrtr-sim-seed`` overrides; default: from the test's id).
            expect_ok: Fail the test when an invariant breaks (the default).
            pass_effects: Hand the run's :class:`~mrtr_core.sim.Effects` to
                ``app_factory``: a side effect counted with ``effects.ran(step)`` that runs
                twice for one operation breaks the single-use invariant.
            **options: More :class:`~mrtr_core.sim.Simulation` arguments (``instances``,
                ``balancer``, ``clients``, ``timing``, ``mutations``, ...).

        Raises:
            ValueError: ``flows`` is below one.
            TypeError: Neither a workload nor ``app_factory`` and ``operations``, or a
                workload together with any of its parts.
            SimulationError: ``operations`` or ``app_factory`` raised under a seed (named
                in it: re-run the test with ``--mrtr-sim-seed`` set to it).
        """
        parts = (app_factory, operations, answer, check)
        if workload is not None and (pass_effects or any(p is not None for p in parts)):
            # The parts would be ignored: a check or answer the test relies on never run.
            raise TypeError("give a workload or app_factory and operations (with answer, "
                            "check, pass_effects), not both")
        if workload is None:
            if app_factory is None or operations is None:
                raise TypeError("give a workload, or app_factory and operations")
            workload = AppWorkload(app_factory=app_factory, operations=operations,
                                   answer_fn=answer, check_fn=check, pass_effects=pass_effects)
        if self._forced_seed is not None:
            seed = self._forced_seed
        elif seed is None:
            seed = self.default_seed
        if self._forced_flows is not None:
            flows = self._forced_flows
        if flows < 1:
            # Zero flows would pass every invariant without simulating anything.
            raise ValueError(f"flows must be at least 1, got {flows}")
        chosen = self._forced_faults if self._forced_faults is not None else faults
        fault_rates = Faults.parse(chosen) if isinstance(chosen, str) else chosen
        first = len(self.reports)
        for each in range(seed, seed + self.seeds):
            report = Simulation(
                each, flows=flows, faults=fault_rates, workload=workload, **options
            ).run()
            self.reports.append(report)
            if expect_ok and not report.ok:
                pytest.fail(
                    f"{report.summary()}\n\nre-run this test with --mrtr-sim-seed={each}",
                    pytrace=False,
                )
        return self.reports[first]  # the first seed's (seeds >= 1)


@pytest.fixture
def mrtr_sim(request: pytest.FixtureRequest) -> SimRunner:
    """Run your app under the MRTR simulator (see :class:`SimRunner`)."""
    config = request.config
    return SimRunner(
        request.node.nodeid,
        config.getoption("mrtr_sim_seed"),
        config.getoption("mrtr_sim_flows"),
        config.getoption("mrtr_sim_faults"),
        config.getoption("mrtr_sim_seeds"),
    )
