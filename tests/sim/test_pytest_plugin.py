"""The pytest plugin, as a user runs it: a project of their own, in a pytest of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = 'pytest_plugins = ["mrtr_core.sim.pytest_plugin"]\n'

USER_TESTS = r'''
import re

from mrtr_core.app import App
from mrtr_core.server import form
from mrtr_core.sim import Operation

PLAN_CACHE = {}


def good_app(codec):
    app = App("deploy", "1.0", codec=codec)

    @app.tool(single_use=True)
    def deploy(ctx, version: str) -> str:
        ticket = ctx.ask("ticket", form(f"Ticket for {version}?", ticket=str))
        if ticket.action != "accept":
            return f"not deployed {version}: {ticket.action}"
        ctx.ask("confirm", form(f"Deploy {version}?", ok=bool))
        return f"deployed {version} under {ticket.content['ticket']}"

    return app


def leaky_app(codec):
    app = App("deploy", "1.0", codec=codec)

    @app.tool()
    def deploy(ctx, version: str) -> str:
        plan = PLAN_CACHE.setdefault("plan", f"plan for {version}")  # shared by every operation
        ctx.ask("confirm", form(f"Deploy {version}?", ok=bool))
        return plan

    return app


def operations(index, prng):
    return Operation(op=f"op-{index}", method="tools/call",
                     params={"name": "deploy", "arguments": {"version": f"1.{index}"}})


def names_its_version(operation, result, answers):
    version = operation.params["arguments"]["version"]
    text = result["content"][0]["text"]
    return "" if re.search(rf"\b{re.escape(version)}\b", text) else f"result is {text!r}"


def test_good_app_survives(mrtr_sim):
    report = mrtr_sim.run(app_factory=good_app, operations=operations,
                          check=names_its_version, flows=150, faults="all")
    assert report.completed > 50


def test_leaky_app_is_caught(mrtr_sim):
    mrtr_sim.run(app_factory=leaky_app, operations=operations, check=names_its_version,
                 flows=20, faults="none")
'''


def _pytest(
    tmp_path: Path, *args: str, tests: tuple[str, str] = ("test_user_app.py", USER_TESTS)
) -> subprocess.CompletedProcess[str]:
    """A pytest of the user's own, in ``tmp_path``, on the test module ``tests`` (name, text)."""
    (tmp_path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (tmp_path / tests[0]).write_text(tests[1], encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rN", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)


def test_plugin_runs_a_users_app_and_fails_a_leak_with_seed_and_transcript(
    tmp_path: Path,
) -> None:
    done = _pytest(tmp_path, "-q")
    assert "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    assert "test_leaky_app_is_caught" in done.stdout
    assert "[isolation]" in done.stdout and "result is 'plan for 1.0'" in done.stdout
    assert "shortest transcript:" in done.stdout
    assert "re-run this test with --mrtr-sim-seed=" in done.stdout


def test_plugin_seed_option_forces_the_seed(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "--mrtr-sim-seed=5", "-k", "leaky")
    assert "mrtr-sim: seed=5" in done.stdout
    assert "mrtr simulation: seed=5 flows=20" in done.stdout
    again = _pytest(tmp_path, "-q", "--mrtr-sim-seed=5", "-k", "leaky")
    def report(out: str) -> str:
        start = out.index("mrtr simulation")
        return out[start : out.index("re-run this test with --mrtr-sim-seed=5", start)]

    assert report(done.stdout) == report(again.stdout)


RARE_BUG_TESTS = r'''
from mrtr_core.app import App
from mrtr_core.server import form
from mrtr_core.sim import Operation


def app(codec):
    app = App("deploy", "1.0", codec=codec)

    @app.tool()
    def deploy(ctx, version: str) -> str:
        ctx.ask("confirm", form(f"Deploy {version}?", ok=bool))
        return f"deployed {version}"

    return app


def operations(index, prng):
    version = "0.0" if prng.random() < 0.05 else f"1.{index}"  # rare: some seeds draw it
    return Operation(op=f"op-{index}", method="tools/call",
                     params={"name": "deploy", "arguments": {"version": version}})


def refuses_version_zero(operation, result, answers):
    text = result["content"][0]["text"]
    return "deployed version 0.0" if text == "deployed 0.0" else ""


def test_rare_bug(mrtr_sim):
    report = mrtr_sim.run(app_factory=app, operations=operations, check=refuses_version_zero,
                          flows=10, faults="none", seed=4)
    assert report.seed == 4
    assert [r.seed for r in mrtr_sim.reports] == list(range(4, 4 + mrtr_sim.seeds))
'''


def _pytest_rare(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _pytest(tmp_path, *args, tests=("test_rare_bug.py", RARE_BUG_TESTS))


def test_plugin_seeds_option_runs_consecutive_seeds_and_names_the_first_that_fails(
    tmp_path: Path,
) -> None:
    # Seeds 4, 5 and 6 never draw version 0.0 in ten flows; seed 7 does.
    passed = _pytest_rare(tmp_path, "-q", "--mrtr-sim-seeds=3")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "1 passed" in passed.stdout
    failed = _pytest_rare(tmp_path, "--mrtr-sim-seeds=4")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "mrtr-sim: seeds=4" in failed.stdout
    assert "mrtr simulation: seed=7 flows=10" in failed.stdout
    assert "deployed version 0.0" in failed.stdout
    assert "re-run this test with --mrtr-sim-seed=7" in failed.stdout
    alone = _pytest_rare(tmp_path, "-q", "--mrtr-sim-seed=7")
    assert alone.returncode == 1 and "mrtr simulation: seed=7 flows=10" in alone.stdout


def test_plugin_refuses_a_seed_count_below_one(tmp_path: Path) -> None:
    done = _pytest_rare(tmp_path, "-q", "--mrtr-sim-seeds=0")
    assert done.returncode == 4  # pytest's usage error
    assert "--mrtr-sim-seeds must be at least 1, got 0" in done.stderr


@pytest.mark.parametrize(("option", "said"), [
    ("--mrtr-sim-flows=0", "--mrtr-sim-flows must be at least 1, got 0"),
    ("--mrtr-sim-flows=-5", "--mrtr-sim-flows must be at least 1, got -5"),
    ("--mrtr-sim-flows=10000001", "--mrtr-sim-flows must be at most 10000000, got 10000001"),
    ("--mrtr-sim-seeds=100001", "--mrtr-sim-seeds must be at most 100000, got 100001"),
    ("--mrtr-sim-faults=lose=0.1", "--mrtr-sim-faults: unknown fault 'lose'"),
    ("--mrtr-sim-faults=loss=lots", "--mrtr-sim-faults: loss needs a rate in [0, 1], got 'lots'"),
])
def test_plugin_refuses_no_flows_and_faults_it_cannot_read(
    tmp_path: Path, option: str, said: str
) -> None:
    # Zero flows would pass the rare bug's test without simulating anything.
    done = _pytest_rare(tmp_path, "-q", "--mrtr-sim-seed=7", option)
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert said in done.stderr


def test_runner_refuses_a_seed_count_below_one() -> None:
    from mrtr_core.sim.pytest_plugin import SimRunner

    with pytest.raises(ValueError, match="seeds must be at least 1, got 0"):
        SimRunner("test_x", None, None, None, seeds=0)


def test_runner_refuses_a_run_of_no_flows() -> None:
    from mrtr_core.sim import ReferenceWorkload
    from mrtr_core.sim.pytest_plugin import SimRunner

    runner = SimRunner("test_x", None, None, None)
    with pytest.raises(ValueError, match="flows must be at least 1, got 0"):
        runner.run(ReferenceWorkload(), flows=0)
    assert runner.reports == []


def test_runner_refuses_a_workload_together_with_parts_of_one() -> None:
    from mrtr_core.sim import ReferenceWorkload
    from mrtr_core.sim.pytest_plugin import SimRunner

    runner = SimRunner("test_x", None, None, None)
    for part in ({"check": lambda operation, result, answers: "wrong"},
                 {"app_factory": lambda codec: None}, {"pass_effects": True}):
        with pytest.raises(TypeError, match="a workload or app_factory and operations"):
            runner.run(ReferenceWorkload(), flows=1, **part)  # type: ignore[arg-type]
    assert runner.reports == []
