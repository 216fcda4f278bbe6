"""mrtr_core is pure: no module in it imports I/O, clock, thread, process or randomness modules.

Time, ids, nonces and jitter are injected (DESIGN.md, "Rules of the house"); this scan keeps
it so. It reads the source with ``ast`` (nothing is imported), so a forbidden import hidden
in a function body or behind ``if TYPE_CHECKING`` is caught too. No exceptions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "mrtr_core"

# A module is forbidden when its dotted name equals one of these or starts with one plus ".".
FORBIDDEN = frozenset({
    # I/O and networking
    "socket", "socketserver", "ssl", "select", "selectors", "asyncore", "asynchat",
    "http.client", "http.server", "urllib.request", "ftplib", "smtplib", "requests", "httpx",
    "redis",
    # event loops and concurrency
    "asyncio", "trio", "anyio", "sniffio", "threading", "_thread", "multiprocessing",
    "concurrent", "sched", "signal",
    # clocks
    "time",
    # randomness and ids
    "random", "secrets", "uuid",
    # processes and the file system
    "os", "subprocess", "pty", "shutil", "tempfile", "pathlib", "glob", "fcntl",
    # loading code at run time (could hide any of the above)
    "importlib",
})
FORBIDDEN_CALLS = frozenset({"open", "input", "print", "__import__", "exec", "eval",
                             "breakpoint"})


def _modules() -> list[Path]:
    return sorted(p for p in CORE.rglob("*.py") if "__pycache__" not in p.parts)


def _forbidden(name: str) -> bool:
    return any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN)


def scan(source: str, filename: str = "<source>") -> list[str]:
    """Every forbidden import or call in ``source``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if _forbidden(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _forbidden(node.module):
                found.append(f"from {node.module} import ...")
            else:
                found += [f"from {node.module} import {a.name}" for a in node.names
                          if _forbidden(f"{node.module}.{a.name}")]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in FORBIDDEN_CALLS):
            found.append(f"call to {node.func.id}()")
    return found


def test_the_scan_covers_the_core() -> None:
    paths = {p.relative_to(CORE).as_posix() for p in _modules()}
    assert {"errors.py", "client/flow.py", "wire/converter.py"} <= paths


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(CORE).as_posix())
def test_core_module_imports_no_io_clock_thread_or_random_module(path: Path) -> None:
    assert scan(path.read_text(encoding="utf-8"), str(path)) == []


@pytest.mark.parametrize(
    "source",
    [
        "import os",
        "import os.path",
        "from os import urandom",
        "from concurrent.futures import ThreadPoolExecutor",
        "import time as clock",
        "def f():\n    import random",
        "from http import client",
        "from urllib.request import urlopen",
        "import asyncio, json",
        "open('x')",
        "__import__('socket')",
    ],
)
def test_the_scan_catches_forbidden_code(source: str) -> None:
    assert scan(source)


def test_the_scan_allows_pure_stdlib_modules() -> None:
    allowed = (
        "import enum\nimport json\nimport marshal\nfrom http import HTTPStatus\n"
        "from collections.abc import Callable\nimport hashlib, hmac, base64, math\n"
        "from . import sibling\nfrom .time_math import add"
    )
    assert scan(allowed) == []
