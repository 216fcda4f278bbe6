"""``benchmarks/run.py --quick`` runs every benchmark end to end and records sane figures.

No timing is asserted: quick mode uses tiny counts, so its figures only have to exist, be
positive and finite. The run starts its own servers on 127.0.0.1 and stops them by pid.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "benchmarks" / "run.py"
RUNTIMES = ("sync", "trio", "asyncio")
SEQUENTIAL_PAIRS = (
    "sdk->sdk",
    *(f"{rt}->{rt}" for rt in RUNTIMES),
    *(f"sdk->{rt}" for rt in RUNTIMES),
    *(f"{rt}->sdk" for rt in RUNTIMES),
    "floor->floor",
    "ts->ts",
    *(f"ts->{rt}" for rt in RUNTIMES),
    *(f"{rt}->ts" for rt in RUNTIMES),
)
CONCURRENT_PAIRS = ("sdk->sdk", "trio->trio", "asyncio->asyncio")
STATE_CASES = (
    ("per_round", "ours_round"),
    ("per_round", "sdk_round"),
    ("per_round", "sdk_codec_only"),
    ("per_round", "bare_aesgcm"),
    ("per_round", "bare_hmac"),
    ("seal_open_1kib", "ours_aead"),
    ("seal_open_1kib", "ours_hmac"),
    ("seal_open_1kib", "bare_aead"),
    ("seal_open_1kib", "sdk_full"),
)


def _numbers(value: Any) -> list[float]:
    """Every number inside a JSON value."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return []


def _positive_finite(value: Any) -> bool:
    numbers = _numbers(value)
    return bool(numbers) and all(math.isfinite(n) and n > 0 for n in numbers)


def _finite(value: Any) -> bool:
    numbers = _numbers(value)
    return bool(numbers) and all(math.isfinite(n) for n in numbers)


@pytest.fixture(scope="module")
def quick_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc, out


@pytest.fixture(scope="module")
def results(quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> dict[str, Any]:
    proc, out = quick_run
    assert (out / "results.json").exists(), proc.stderr[-4000:]
    data: dict[str, Any] = json.loads((out / "results.json").read_text())
    return data


def test_quick_run_exits_cleanly_with_no_failed_benchmark(
    quick_run: tuple[subprocess.CompletedProcess[str], Path], results: dict[str, Any]
) -> None:
    proc, _ = quick_run
    assert results["errors"] == {}, proc.stderr[-4000:]
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_quick_run_prints_the_markdown_tables(
    quick_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    proc, _ = quick_run
    assert "### Sequential calls over loopback HTTP" in proc.stdout
    assert "### Targets" in proc.stdout
    assert "| SDK -> SDK |" in proc.stdout
    assert "| h11 floor -> h11 floor |" in proc.stdout
    assert "### Against the h11 floor" in proc.stdout
    assert "| TS SDK -> TS SDK |" in proc.stdout
    assert "### Against the official TypeScript SDK v2" in proc.stdout


def test_quick_run_writes_the_growth_plot(
    quick_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = quick_run
    png = out / "growth.png"
    assert png.exists()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("pair", SEQUENTIAL_PAIRS)
def test_every_sequential_pair_has_sane_figures(results: dict[str, Any], pair: str) -> None:
    row = results["sequential"][pair]
    for kind in ("mrtr", "plain"):
        for figure in ("calls_per_s", "p50_ms", "p90_ms", "p99_ms", "mean_ms"):
            assert _positive_finite(row[kind][figure]), (pair, kind, figure, row[kind][figure])
    assert _finite(row["mrtr_overhead"])
    assert all(math.isfinite(v) and v >= 0 for v in row["server_cpu_us_per_round"].values())


@pytest.mark.parametrize("pair", CONCURRENT_PAIRS)
def test_every_concurrent_pair_has_sane_figures(results: dict[str, Any], pair: str) -> None:
    row = results["concurrent"][pair]
    for figure in ("flows_per_s", "p50_ms", "p99_ms"):
        assert _positive_finite(row[figure]), (pair, figure)
    assert math.isfinite(row["server_cpu_us_per_round"]) and row["server_cpu_us_per_round"] >= 0


@pytest.mark.parametrize("server", ("sdk", *RUNTIMES))
def test_parked_memory_is_measured_for_every_server(results: dict[str, Any], server: str) -> None:
    row = results["parked_memory"][server]
    assert _finite(row["bytes_per_parked_op"])
    assert row["parked"] > 0
    assert _positive_finite([r["before"] for r in row["rss"]])


@pytest.mark.parametrize(("group", "case"), STATE_CASES)
def test_state_sealing_has_a_rate_for_every_case(
    results: dict[str, Any], group: str, case: str
) -> None:
    assert _positive_finite(results["state"][group][case])


def test_core_round_and_simulator_are_measured(results: dict[str, Any]) -> None:
    assert _positive_finite(results["core_round"])
    assert _positive_finite(results["sim"])


def test_growth_curves_cover_every_axis(results: dict[str, Any]) -> None:
    core = results["growth"]["core"]
    for axis in ("rounds", "inputs", "state_kib"):
        assert len(core[axis]["x"]) == len(core[axis]["us_per_op"]) >= 2
        assert _positive_finite(core[axis]["us_per_op"])
    loop = results["growth"]["loopback_rounds"]
    for who in ("SDK", "ours-trio"):
        assert len(loop[who]) == len(loop["rounds"])
        assert _positive_finite(loop[who])


def test_every_target_is_computed(results: dict[str, Any]) -> None:
    targets = results["targets"]
    # 3 pairs x 5x, 6 cross pairs, 3 overheads, 2 concurrency, 3 requestState, core round,
    # simulator.
    assert len(targets) == 19
    assert len({t["name"] for t in targets}) == 19
    for target in targets:
        assert target["value"] is not None and math.isfinite(target["value"]), target
        assert target["met"] in (True, False)
