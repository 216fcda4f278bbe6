"""Every package of the ``mrtr`` distribution is a typed package (PEP 561) for its users.

The wheel is built from a copy of the sources with the virtualenv's own setuptools and no
index (``pip wheel --no-build-isolation --no-index``), so no network is needed. Its files are
then checked for a ``py.typed`` marker in every top-level package, and mypy (the
virtualenv's) is run on a user's file outside the repository, with the unpacked wheel on
``PYTHONPATH`` as an installed package would be: a wrong argument to ``mrtr_sync.Client`` is
reported, and a right use passes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# A safety net for commands that take a few seconds: only a hang waits this long.
TIMEOUT = 120
PACKAGES = {"mrtr_core", "mrtr_sync", "mrtr_trio", "mrtr_asyncio", "mrtr_cli"}
"""The top-level packages of the distribution (``[tool.setuptools.packages.find]``)."""
# PEP 639 ``license = "MIT"`` needs setuptools 77 (the ``[build-system]`` requirement).
MIN_SETUPTOOLS = 77


def _built_wheel(out: Path) -> Path:
    """Build the ``mrtr`` wheel from a copy of the sources into ``out``; its path."""
    setuptools_major = int(version("setuptools").split(".")[0])
    assert setuptools_major >= MIN_SETUPTOOLS, (
        f"the wheel is built with the virtualenv's setuptools, which is {version('setuptools')};"
        f" it needs >= {MIN_SETUPTOOLS} (pip install -e '.[test]')")
    # Built from a copy, so the build leaves no build/ or *.egg-info in the checkout.
    source = out / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("mrtr_core", "adapters"):
        shutil.copytree(ROOT / name, source / name, ignore=skip)
    wheels = out / "wheels"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "-q", "-w", str(wheels)],
        capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout}\n{done.stderr}"
    (wheel,) = wheels.glob("mrtr-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``mrtr`` wheel built from this checkout."""
    return _built_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel unpacked into a directory, as pip would lay it in site-packages."""
    site = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    return site


def test_every_package_in_the_wheel_carries_py_typed(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    top_level = {name.split("/")[0] for name in names if name.count("/") == 1
                 and name.endswith("/__init__.py")}
    assert top_level == PACKAGES
    untyped = sorted(package for package in PACKAGES if f"{package}/py.typed" not in names)
    assert untyped == [], f"packages without a py.typed marker in the wheel: {untyped}"


USER_CODE = """\
from mrtr_sync import Client, MemoryTransport


def answer(request: dict[str, object]) -> dict[str, object]:
    return {{"jsonrpc": "2.0", "id": request["id"], "result": {{}}}}


client = Client(MemoryTransport(answer), max_workers={max_workers})
"""


def _mypy_on_user_file(
    site: Path, project: Path, max_workers: str
) -> subprocess.CompletedProcess[str]:
    """mypy --strict on a user's ``app.py`` in ``project`` that builds a ``mrtr_sync.Client``
    with ``max_workers``; the mrtr packages come only from ``site``."""
    (project / "app.py").write_text(USER_CODE.format(max_workers=max_workers), encoding="utf-8")
    (project / "mypy.ini").write_text("[mypy]\nstrict = True\n", encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key != "MYPYPATH"}
    env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini",
         "--cache-dir", str(project / ".mypy_cache"), "app.py"],
        cwd=project, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def test_mypy_checks_a_users_calls_into_the_installed_adapter(
    installed: Path, tmp_path: Path
) -> None:
    wrong = _mypy_on_user_file(installed, tmp_path, '"x"')
    errors = [line for line in wrong.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, wrong.stdout + wrong.stderr
    assert errors[0].startswith(
        'app.py:8: error: Argument "max_workers" to "Client" has incompatible type "str"')
    assert errors[0].endswith("[arg-type]")
    assert wrong.returncode == 1

    right = _mypy_on_user_file(installed, tmp_path, "2")
    assert right.returncode == 0, right.stdout + right.stderr
    assert right.stdout.startswith("Success: no issues found in 1 source file")
