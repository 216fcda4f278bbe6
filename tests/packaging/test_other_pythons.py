"""``scripts/other_pythons.sh``, the step of ``scripts/test.sh`` that runs tests under the other
Python versions the classifiers claim, fails on their failures and passes over a version that
is not installed.

The installed version these tests use is the one running them (its ``pythonX.Y`` is put first
on ``PATH``); its virtualenv is the one ``scripts/test.sh`` would keep under
``${MRTR_CACHE:-$HOME/.cache/mrtr}/venvs``, built on first use. The tests it runs there are
small files written by each test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "other_pythons.sh"
# Building a virtualenv from an empty pip cache downloads the test extra; a safety net only a
# hang reaches.
TIMEOUT = 900
OURS = "{}.{}".format(*sys.version_info[:2])
ABSENT = "3.99"
"""A version no machine has: ``python3.99`` is on no PATH and in no pyenv."""

PROBE = f"""
import sys
from pathlib import Path

import mrtr_core


def test_runs_under_the_version_asked_for():
    assert "%d.%d" % sys.version_info[:2] == {OURS!r}


def test_imports_this_checkout():
    assert Path(mrtr_core.__file__).resolve().parent == Path({str(ROOT / "mrtr_core")!r})
"""


def other_pythons(*args: str,
                  env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the script with ``args``, this interpreter's ``pythonX.Y`` first on ``PATH``."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=TIMEOUT, check=False,
                          env={**os.environ, "PATH": path, **(env or {})})


def test_a_version_not_installed_is_reported_and_does_not_fail(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    done = other_pythons(ABSENT, "--", str(tmp_path / "test_probe.py"),
                         env={"MRTR_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"python{ABSENT} not found: not tested" in done.stdout
    assert not (tmp_path / "cache" / "venvs").exists()


def test_an_installed_version_runs_the_tests_on_this_checkout(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    done = other_pythons(OURS, "--", "-q", str(tmp_path / "test_probe.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"== pytest under python{OURS}" in done.stdout
    assert "2 passed" in done.stdout


def test_a_failure_under_an_installed_version_fails_the_run_beside_a_missing_one(
        tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE + "\n\ndef test_fails():\n    assert False\n")
    done = other_pythons(ABSENT, OURS, "--", "-q", str(tmp_path / "test_probe.py"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"python{ABSENT} not found: not tested" in done.stdout
    assert "1 failed, 2 passed" in done.stdout
    assert f"python{OURS}: tests failed (pytest exit status 1)" in done.stderr
    assert done.stderr.rstrip().endswith(f"failed under: python{OURS}")


def test_no_test_collected_under_an_installed_version_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "test_nothing.py").write_text('"""No tests."""\n')
    done = other_pythons(OURS, "--", "-q", str(tmp_path / "test_nothing.py"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"python{OURS}: pytest collected no tests" in done.stderr


def test_a_run_without_versions_or_tests_is_refused() -> None:
    for args in ((), (OURS,), (OURS, "--"), ("--", "tests/core"), ("latest", "--", "tests")):
        done = other_pythons(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "usage:" in done.stderr
