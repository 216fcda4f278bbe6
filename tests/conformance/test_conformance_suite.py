"""The official MCP conformance suite against our server and our client, offline.

The harness (``@modelcontextprotocol/conformance``, pinned in ``scripts/conformance.sh``,
with the Node 22 it needs) is installed once into ``${MRTR_CACHE:-~/.cache/mrtr}``.

Server: ``examples/conformance_server.py`` is served by each runtime's HTTP adapter
(``serve_app.py`` next to this file) on 127.0.0.1 (a free port, announced on stdout) and the
harness runs the whole
``--requirements 2026-07-28`` server set against it, which includes the 14 MRTR scenarios.
Each scenario is judged by its ``checks.json``: no FAILURE and no WARNING, and no
expected-failures file. Not judged: the ``io.modelcontextprotocol/tasks`` extension scenarios
(the server does not implement that extension, and the harness does not score them) and the
pending ``http-custom-header-server-validation`` (``Mcp-Param-*`` header validation belongs
to the HTTP layer; the harness does not score it for 2026-07-28 either).

Client: the harness's mock server runs ``examples/conformance_client.py`` for
``sep-2322-client-request-state`` once per client runtime, and for every other client scenario
the 2026-07-28 requirement set names, at the 2026-07-28 wire, but the OAuth ones (the client
does no authorization): tools, per-request ``_meta`` and the ``-32022`` version retry,
``Mcp-Method``/``Mcp-Name`` and ``Mcp-Param-*`` headers, tools with invalid ``x-mcp-header``
annotations dropped, a network ``$ref`` never fetched. Same bar: no FAILURE, no WARNING.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from peer_processes import stop, wait_line

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "scripts" / "conformance.sh"
FIXTURE = ROOT / "examples" / "conformance_server.py"
CLIENT = ROOT / "examples" / "conformance_client.py"
LAUNCHER = Path(__file__).resolve().parent / "serve_app.py"
READY_PREFIX = "READY "

RUNTIMES = ("sync", "trio", "asyncio")
BAD = frozenset({"FAILURE", "WARNING"})

# `conformance list --requirements 2026-07-28`, server part (frozen by the pinned harness).
REQUIRED_SERVER = (
    "server-stateless", "completion-complete", "tools-list", "tools-call-simple-text",
    "tools-call-image", "tools-call-audio", "tools-call-embedded-resource",
    "tools-call-mixed-content", "tools-call-error", "tools-call-with-progress",
    "server-sse-multiple-streams", "resources-list", "resources-read-text",
    "resources-read-binary", "resources-templates-read", "sep-2164-resource-not-found",
    "prompts-list", "prompts-get-simple", "prompts-get-with-args",
    "prompts-get-embedded-resource", "prompts-get-with-image", "dns-rebinding-protection",
    "caching",
    "input-required-result-basic-elicitation", "input-required-result-basic-sampling",
    "input-required-result-basic-list-roots", "input-required-result-request-state",
    "input-required-result-multiple-input-requests", "input-required-result-multi-round",
    "input-required-result-missing-input-response", "input-required-result-non-tool-request",
    "input-required-result-result-type", "input-required-result-unsupported-methods",
    "input-required-result-tampered-state", "input-required-result-capability-check",
    "input-required-result-ignore-extra-params", "input-required-result-validate-input",
)
MRTR_SERVER = tuple(s for s in REQUIRED_SERVER if s.startswith("input-required-result-"))
# Run but not scored for 2026-07-28 ("pending"); held to the same bar.
PENDING_SERVER = ("json-schema-2020-12", "http-header-validation")

CLIENT_SCENARIO = "sep-2322-client-request-state"
CLIENT_CHECKS = frozenset({
    "sep-2322-client-request-state-echoed", "sep-2322-client-jsonrpc-id-different",
    "sep-2322-client-no-state-omitted", "sep-2322-client-parallel-isolation",
    "sep-2322-default-result-type-complete",
})

# The other client scenarios of `conformance list --requirements 2026-07-28`, OAuth aside.
OTHER_CLIENT_SCENARIOS = (
    "tools_call", "request-metadata", "http-standard-headers", "http-custom-headers",
    "http-invalid-tool-headers", "json-schema-ref-no-deref",
)

_RESULT_DIR = re.compile(r"^(?:server-)?(?P<name>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")


def test_fourteen_mrtr_server_scenarios_are_listed() -> None:
    assert len(MRTR_SERVER) == 14


@pytest.fixture(scope="session")
def conformance() -> Path:
    """The harness runner, installed on first use (idempotent)."""
    done = subprocess.run(["bash", str(CONFORMANCE), "--install"], capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, f"installing the conformance harness failed:\n{done.stderr}"
    return CONFORMANCE


def harness(
    conformance: Path, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run the harness (through the script, which puts its Node first on PATH)."""
    return subprocess.run(["bash", str(conformance), *args], capture_output=True, text=True,
                          timeout=timeout, check=False, cwd=ROOT)


def read_results(out: Path) -> dict[str, list[dict[str, Any]]]:
    """``{scenario: checks}`` from the harness's output folder."""
    results: dict[str, list[dict[str, Any]]] = {}
    for checks_file in sorted(out.glob("*/checks.json")):
        match = _RESULT_DIR.match(checks_file.parent.name)
        assert match, f"unexpected result folder {checks_file.parent.name}"
        results[match["name"]] = json.loads(checks_file.read_text())
    return results


def bad_checks(checks: list[dict[str, Any]]) -> list[str]:
    """One line per FAILURE/WARNING check: id, status, message."""
    return [f"{c.get('id')} [{c.get('status')}]: {c.get('errorMessage') or c.get('description')}"
            for c in checks if c.get("status") in BAD]


@contextmanager
def serving(runtime: str, log: Path) -> Iterator[str]:
    """Serve the fixture app with ``runtime``'s HTTP adapter; yield its URL."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("MRTR_KEYS", None)
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(LAUNCHER), runtime, "http", str(FIXTURE)],
            stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=ROOT, env=env,
        )
        try:
            yield _wait_ready(proc, log)
        finally:
            stop(proc)


def _wait_ready(proc: subprocess.Popen[str], log: Path) -> str:
    """The URL from the launcher's ``READY <url>`` line; if the server dies first, the
    failure shows its log."""
    try:
        return wait_line(proc, READY_PREFIX)
    except AssertionError as exc:
        raise AssertionError(f"{exc}:\n{log.read_text()}") from None


@pytest.fixture(scope="module", params=RUNTIMES)
def server_results(
    request: pytest.FixtureRequest, conformance: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, list[dict[str, Any]]]:
    """The whole 2026-07-28 server set, run once against the fixture in one runtime."""
    runtime: str = request.param
    work = tmp_path_factory.mktemp(f"conformance-server-{runtime}")
    out = work / "results"
    with serving(runtime, work / "server.log") as url:
        done = harness(conformance, "server", "--url", url, "--requirements", "2026-07-28",
                       "-o", str(out))
    results = read_results(out)
    assert results, f"the harness produced no results:\n{done.stdout[-4000:]}\n{done.stderr}"
    # Counts for the report (shown with pytest -s).
    judged = set(REQUIRED_SERVER + PENDING_SERVER)
    for label, names in (("judged", judged), ("not judged", set(results) - judged)):
        statuses = [str(c.get("status")) for n in names for c in results.get(n, [])]
        print(f"\n[{runtime}] {label}: {len(names)} scenarios, "
              + ", ".join(f"{s}={statuses.count(s)}" for s in sorted(set(statuses))), end="")
    return results


@pytest.mark.parametrize("scenario", REQUIRED_SERVER + PENDING_SERVER)
def test_server_scenario(server_results: dict[str, list[dict[str, Any]]], scenario: str) -> None:
    checks = server_results.get(scenario)
    assert checks is not None, f"{scenario} was not run"
    assert any(c.get("status") == "SUCCESS" for c in checks), f"{scenario}: no passing check"
    bad = bad_checks(checks)
    assert not bad, f"{scenario}:\n  " + "\n  ".join(bad)


def test_all_fourteen_mrtr_scenarios_ran(server_results: dict[str, list[dict[str, Any]]]) -> None:
    missing = [s for s in MRTR_SERVER if s not in server_results]
    assert not missing, f"MRTR scenarios missing from the run: {missing}"


def test_required_set_is_the_harness_set(conformance: Path) -> None:
    listed = harness(conformance, "list", "--requirements", "2026-07-28", timeout=120)
    assert listed.returncode == 0, listed.stderr
    section = listed.stdout.split("Server scenarios", 1)[1].split("Client scenarios", 1)[0]
    names = re.findall(r"^\s+- (\S+)", section, flags=re.MULTILINE)
    assert tuple(names) == REQUIRED_SERVER


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_client_request_state_scenario(conformance: Path, runtime: str, tmp_path: Path) -> None:
    out = tmp_path / "results"
    command = f"{sys.executable} {CLIENT} --runtime {runtime}"
    done = harness(conformance, "client", "--command", command, "--scenario", CLIENT_SCENARIO,
                   "-o", str(out))
    results = read_results(out)
    checks = results.get(CLIENT_SCENARIO)
    assert checks is not None, f"no results:\n{done.stdout[-4000:]}\n{done.stderr}"
    client_out = next(out.glob("*/stdout.txt"), None)
    client_err = next(out.glob("*/stderr.txt"), None)
    bad = bad_checks(checks)
    assert not bad, f"{CLIENT_SCENARIO} [{runtime}]:\n  " + "\n  ".join(bad) + (
        f"\nclient stderr:\n{client_err.read_text()}" if client_err else "")
    assert {c.get("id") for c in checks} >= CLIENT_CHECKS
    # In --scenario mode the harness also fails the run when the client exits non-zero.
    assert done.returncode == 0, (
        f"harness exit {done.returncode}\nclient stdout:\n"
        f"{client_out.read_text() if client_out else ''}"
        f"\nclient stderr:\n{client_err.read_text() if client_err else ''}")


def test_the_other_client_scenarios_are_the_harness_set(conformance: Path) -> None:
    listed = harness(conformance, "list", "--client", "--requirements", "2026-07-28",
                     timeout=120)
    assert listed.returncode == 0, listed.stderr
    section = listed.stdout.split("Client scenarios", 1)[1].split("Run and reported", 1)[0]
    names = re.findall(r"^\s+- (\S+)", section, flags=re.MULTILINE)
    assert set(names) - {CLIENT_SCENARIO} - set(OTHER_CLIENT_SCENARIOS) == {
        name for name in names if name.startswith("auth/")}


@pytest.mark.parametrize("scenario", OTHER_CLIENT_SCENARIOS)
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_other_client_scenario(
    conformance: Path, runtime: str, scenario: str, tmp_path: Path
) -> None:
    out = tmp_path / "results"
    command = f"{sys.executable} {CLIENT} --runtime {runtime}"
    done = harness(conformance, "client", "--command", command, "--scenario", scenario,
                   "--spec-version", "2026-07-28", "-o", str(out))
    checks = read_results(out).get(scenario)
    assert checks is not None, f"no results:\n{done.stdout[-4000:]}\n{done.stderr}"
    assert any(c.get("status") == "SUCCESS" for c in checks), f"{scenario}: no passing check"
    client_err = next(out.glob("*/stderr.txt"), None)
    bad = bad_checks(checks)
    assert not bad, f"{scenario} [{runtime}]:\n  " + "\n  ".join(bad) + (
        f"\nclient stderr:\n{client_err.read_text()}" if client_err else "")
    assert done.returncode == 0, f"harness exit {done.returncode}:\n{done.stderr[-4000:]}"
