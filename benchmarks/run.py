"""Benchmarks of mrtr side by side with the official Python SDK, in one run.

    .venv/bin/python benchmarks/run.py [--quick] [--out DIR] [--only NAME ...]

Prints markdown tables of medians (with the spread over runs) and ratios against the SDK
measured in the same run, and writes ``DIR/results.json`` (every raw figure) and
``DIR/growth.png`` (the growth curves). ``--quick`` runs every benchmark with tiny counts:
it checks that each one works, its figures mean nothing. ``--only NAME`` (repeatable) runs
just the named benchmarks (``--help`` lists them).

What is measured (servers and clients are separate processes on 127.0.0.1):

- sequential two-round MRTR ``tools/call`` and one-round plain calls over loopback HTTP,
  for every client -> server pair: ours (sync, trio, asyncio) -> ours in the same runtime,
  SDK -> SDK, SDK client -> our servers, our clients -> SDK server, and the h11 floor pair
  (``peers/floor_*.py``: h11, a socket and JSON, no MCP logic: what any server and client
  on h11 pay before the protocol's own work), and the official TypeScript SDK v2 on Node 22
  (``peers/ts_*.mjs``, installed by ``scripts/ts_sdk.sh``) with itself and across to ours.
  Calls/s, latency
  percentiles, MRTR overhead ``(t_mrtr - t_plain) / t_plain`` (1.0 = exactly one more plain
  round trip), server CPU per round (process CPU time / rounds served);
- 100 concurrent two-round flows against one server process (ours trio, asyncio; SDK);
- server memory held per operation parked between rounds (RSS growth / parked operations);
- ``requestState`` state work per round, in process (ours, SDK, bare AES-GCM and HMAC);
- core cost per round without I/O and simulator flows per second (``bench_core_round.py``,
  ``bench_sim.py``);
- growth: rounds 1..10 per operation, input requests 1..32 per round, state 0.1..64 KiB
  (in process, core level), and rounds 1..10 over loopback (ours and SDK).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import operator
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (
    PEERS_DIR,
    REPO_ROOT,
    ClientProcess,
    RawMcpClient,
    ServerProcess,
    latency_summary,
    python,
    running_client,
    running_server,
    spread,
    time_interleaved,
    ts_peer,
)

RUNTIMES = ("sync", "trio", "asyncio")
ASYNC_RUNTIMES = ("trio", "asyncio")
MRTR_CALL = {"tool": "delete_file", "arguments": {"path": "notes.txt"}}
PLAIN_CALL = {"tool": "echo", "arguments": {"text": "hi"}}


@dataclass(frozen=True)
class Config:
    """Counts for one run of the benchmarks."""

    runs: int  # repeated measurements per figure (median and spread over these)
    warmup: int  # calls before measuring, per client process and kind
    seq_n: int  # calls per sequential run
    conc_workers: int  # flows in flight at once
    conc_per_worker: int  # flows each worker runs back to back
    park_n: int  # operations parked between rounds
    state_number: int  # in-process operations per state run
    core_number: int  # in-process operations per core-growth point
    loop_growth_n: int  # loopback operations per rounds-growth point
    rounds: tuple[int, ...]
    inputs: tuple[int, ...]
    state_kib: tuple[float, ...]


FULL = Config(
    runs=5,
    warmup=40,
    seq_n=300,
    conc_workers=100,
    conc_per_worker=5,
    park_n=1000,
    state_number=1000,
    core_number=100,
    loop_growth_n=10,
    rounds=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
    inputs=(1, 2, 4, 8, 16, 32),
    state_kib=(0.1, 0.5, 1, 4, 16, 32, 64),
)
QUICK = Config(
    runs=2,
    warmup=2,
    seq_n=4,
    conc_workers=4,
    conc_per_worker=1,
    park_n=10,
    state_number=20,
    core_number=2,
    loop_growth_n=1,
    rounds=(1, 2, 3),
    inputs=(1, 2),
    state_kib=(0.1, 1),
)


# --- peers -----------------------------------------------------------------------------------


def server_argv(kind: str) -> list[str]:
    """Command line of a benchmark server: ``sdk``, ``ts``, ``floor`` or one of our runtimes."""
    if kind == "ts":
        return [*ts_peer("ts_server.mjs"), "--port", "{port}"]
    if kind in ("sdk", "floor"):
        return [python(), str(PEERS_DIR / f"{kind}_server.py"), "--port", "{port}"]
    return [python(), str(PEERS_DIR / "our_server.py"), "--runtime", kind, "--port", "{port}"]


def client_argv(kind: str, url: str) -> list[str]:
    """Command line of a benchmark client: ``sdk``, ``ts``, ``floor`` or one of our runtimes."""
    if kind == "ts":
        return [*ts_peer("ts_client.mjs"), url]
    if kind in ("sdk", "floor"):
        return [python(), str(PEERS_DIR / f"{kind}_client.py"), url]
    return [python(), str(PEERS_DIR / "our_client.py"), "--runtime", kind, url]


def label(kind: str) -> str:
    """How a peer is named in the tables."""
    return {"sdk": "SDK", "ts": "TS SDK", "floor": "h11 floor"}.get(kind, f"ours-{kind}")


def pair_name(client: str, server: str) -> str:
    """``client->server``."""
    return f"{client}->{server}"


# --- recording ---------------------------------------------------------------------------------


class Recorder:
    """Collects results; a benchmark that fails is recorded with its error, the others go on."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.results: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        print(f"# {name} ...", file=sys.stderr, flush=True)
        try:
            yield
        except Exception as exc:
            self.errors[name] = f"{type(exc).__name__}: {exc}"
            print(f"  FAILED: {self.errors[name]}", file=sys.stderr, flush=True)
            traceback.print_exc(file=sys.stderr)
        elapsed = time.monotonic() - start
        self.results.setdefault("meta", {}).setdefault("section_s", {})[name] = elapsed
        print(f"  ({elapsed:.1f} s)", file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def item(self, section: str, key: str) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            self.errors[f"{section}/{key}"] = f"{type(exc).__name__}: {exc}"
            print(f"  {section}/{key} FAILED: {exc}", file=sys.stderr, flush=True)


def _seq(call: dict[str, Any], n: int) -> dict[str, Any]:
    return {"op": "seq", **call, "n": n}


def _run_figures(answer: dict[str, Any]) -> dict[str, float]:
    lat = answer["lat_ns"]
    return {
        "calls_per_s": len(lat) / (answer["wall_ns"] / 1e9),
        **latency_summary(lat),
        "client_cpu_us_per_call": answer["cpu_ns"] / len(lat) / 1e3,
    }


def _summarise(runs: list[dict[str, float]]) -> dict[str, Any]:
    return {key: spread([r[key] for r in runs]) for key in runs[0]}


# --- loopback: sequential -------------------------------------------------------------------


@dataclass
class Pair:
    """A running client peer connected to a running server peer."""

    client_kind: str
    server: ServerProcess
    client: ClientProcess

    @property
    def name(self) -> str:
        return pair_name(self.client_kind, self.server.name)


@contextlib.contextmanager
def started_pairs(
    rec: Recorder, section: str, pairs: list[tuple[str, str]]
) -> Iterator[list[Pair]]:
    """Start every server and client of ``pairs`` at once (one server process per kind).

    All peers live for the whole section, so the runs of different pairs can be interleaved:
    load from elsewhere on the machine then hits every pair alike. A peer that fails to start
    is recorded as an error and its pairs are left out.
    """
    with contextlib.ExitStack() as stack:
        servers: dict[str, ServerProcess] = {}
        for kind in dict.fromkeys(server for _, server in pairs):
            with rec.item(section, f"server {kind}"):
                servers[kind] = stack.enter_context(
                    running_server(kind, server_argv(kind), rec.log_dir)
                )
        live: list[Pair] = []
        for client_kind, server_kind in pairs:
            if server_kind not in servers:
                continue
            server = servers[server_kind]
            with rec.item(section, pair_name(client_kind, server_kind)):
                client = stack.enter_context(
                    running_client(client_kind, client_argv(client_kind, server.url), rec.log_dir)
                )
                live.append(Pair(client_kind, server, client))
        yield live


def interleaved(
    rec: Recorder, section: str, pairs: list[Pair], runs: int, measure: Callable[[Pair, int], None]
) -> None:
    """``measure(pair, run)`` for every run and pair, pairs in a rotating order each run.

    A pair whose measurement fails is recorded as an error and measured no more.
    """
    alive = list(pairs)
    for run in range(runs):
        shift = run % max(len(alive), 1)
        for pair in alive[shift:] + alive[:shift]:
            try:
                measure(pair, run)
            except Exception as exc:
                rec.errors[f"{section}/{pair.name}"] = f"{type(exc).__name__}: {exc}"
                print(f"  {section}/{pair.name} FAILED: {exc}", file=sys.stderr, flush=True)
                alive.remove(pair)


def bench_sequential(rec: Recorder, cfg: Config) -> None:
    """Every client -> server pair: warm-up, then ``cfg.runs`` x (N MRTR calls, N plain calls)
    per pair, interleaved across pairs, with the server's CPU time read around each batch."""
    out: dict[str, Any] = rec.results.setdefault("sequential", {})
    plan = [
        ("sdk", "sdk"),
        *((rt, rt) for rt in RUNTIMES),
        *(("sdk", rt) for rt in RUNTIMES),
        *((rt, "sdk") for rt in RUNTIMES),
        ("floor", "floor"),  # h11 and a socket with no MCP logic (peers/floor_*.py)
        # The official TypeScript SDK v2 on Node 22 (peers/ts_*.mjs), and across to ours.
        ("ts", "ts"),
        *(("ts", rt) for rt in RUNTIMES),
        *((rt, "ts") for rt in RUNTIMES),
    ]
    with started_pairs(rec, "sequential", plan) as pairs:
        runs: dict[str, dict[str, list[dict[str, float]]]] = {}
        cpu: dict[str, dict[str, float]] = {}
        legs_served: dict[str, dict[str, int]] = {}
        for pair in list(pairs):
            with rec.item("sequential", pair.name):
                pair.client.command(_seq(MRTR_CALL, cfg.warmup))
                pair.client.command(_seq(PLAIN_CALL, cfg.warmup))
                runs[pair.name] = {"mrtr": [], "plain": []}
                cpu[pair.name] = {"mrtr": 0.0, "plain": 0.0}
                legs_served[pair.name] = {"mrtr": 0, "plain": 0}
        pairs = [p for p in pairs if p.name in runs]

        def measure(pair: Pair, run: int) -> None:
            for kind, call, legs in (("mrtr", MRTR_CALL, 2), ("plain", PLAIN_CALL, 1)):
                before = pair.server.cpu_seconds()
                answer = pair.client.command(_seq(call, cfg.seq_n))
                cpu[pair.name][kind] += pair.server.cpu_seconds() - before
                legs_served[pair.name][kind] += legs * cfg.seq_n
                runs[pair.name][kind].append(_run_figures(answer))

        print(f"  {len(pairs)} pairs x {cfg.runs} runs", file=sys.stderr, flush=True)
        interleaved(rec, "sequential", pairs, cfg.runs, measure)
        for pair in pairs:
            got = runs[pair.name]
            if f"sequential/{pair.name}" in rec.errors or not got["plain"]:
                continue
            overheads = [
                (1 / m["calls_per_s"] - 1 / p["calls_per_s"]) / (1 / p["calls_per_s"])
                for m, p in zip(got["mrtr"], got["plain"])
            ]
            out[pair.name] = {
                "client": pair.client_kind,
                "server": pair.server.name,
                "mrtr": _summarise(got["mrtr"]),
                "plain": _summarise(got["plain"]),
                "mrtr_overhead": spread(overheads),
                "server_cpu_us_per_round": {
                    k: cpu[pair.name][k] / legs_served[pair.name][k] * 1e6
                    for k in ("mrtr", "plain")
                },
                "raw_runs": got,
            }


# --- loopback: concurrent --------------------------------------------------------------------


def bench_concurrent(rec: Recorder, cfg: Config) -> None:
    """``conc_workers`` two-round flows in flight against one server process, per runtime;
    runs interleaved across pairs."""
    out: dict[str, Any] = rec.results.setdefault("concurrent", {})
    command = {
        "op": "conc",
        **MRTR_CALL,
        "workers": cfg.conc_workers,
        "per_worker": cfg.conc_per_worker,
    }
    plan = [(kind, kind) for kind in ("sdk", *ASYNC_RUNTIMES)]
    with started_pairs(rec, "concurrent", plan) as pairs:
        runs: dict[str, list[dict[str, float]]] = {}
        cpu: dict[str, float] = {}
        for pair in list(pairs):
            with rec.item("concurrent", pair.name):
                pair.client.command({**command, "per_worker": 1})  # warm-up, opens connections
                runs[pair.name], cpu[pair.name] = [], 0.0
        pairs = [p for p in pairs if p.name in runs]

        def measure(pair: Pair, run: int) -> None:
            before = pair.server.cpu_seconds()
            answer = pair.client.command(command)
            cpu[pair.name] += pair.server.cpu_seconds() - before
            figures = _run_figures(answer)
            figures["flows_per_s"] = figures.pop("calls_per_s")
            runs[pair.name].append(figures)

        interleaved(rec, "concurrent", pairs, cfg.runs, measure)
        for pair in pairs:
            got = runs[pair.name]
            if f"concurrent/{pair.name}" in rec.errors or not got:
                continue
            flows = len(got) * cfg.conc_workers * cfg.conc_per_worker
            out[pair.name] = {
                "client": pair.client_kind,
                "server": pair.server.name,
                "in_flight": cfg.conc_workers,
                "flows_per_run": cfg.conc_workers * cfg.conc_per_worker,
                **_summarise(got),
                "server_cpu_us_per_round": cpu[pair.name] / (2 * flows) * 1e6,
                "raw_runs": got,
            }


# --- loopback: memory held between rounds -------------------------------------------------------


def _finish(raw: RawMcpClient, path: str, first: dict[str, Any]) -> dict[str, Any]:
    if first.get("resultType") != "input_required" or "confirm" not in first.get(
        "inputRequests", {}
    ):
        raise RuntimeError(f"round 1 of delete_file did not ask to confirm: {first!r}")
    second = raw.call_tool(
        "delete_file",
        {"path": path},
        inputResponses={"confirm": {"action": "accept", "content": {"confirm": True}}},
        requestState=first["requestState"],
    )
    if second.get("resultType", "complete") != "complete" or second.get("isError"):
        raise RuntimeError(f"round 2 of delete_file did not complete: {second!r}")
    return second


def bench_parked_memory(rec: Recorder, cfg: Config) -> None:
    """Server RSS growth per operation left waiting between round 1 and round 2."""
    out: dict[str, Any] = rec.results.setdefault("parked_memory", {})
    for kind in ("sdk", *RUNTIMES):
        print(f"  {kind}", file=sys.stderr, flush=True)
        with (
            rec.item("parked_memory", kind),
            running_server(kind, server_argv(kind), rec.log_dir) as server,
        ):
            raw = RawMcpClient(server.port)
            try:
                # Warm-up: whole flows, so per-request pools and caches have grown already.
                for i in range(max(cfg.park_n // 2, 1)):
                    path = f"warm-{i}.txt"
                    _finish(raw, path, raw.call_tool("delete_file", {"path": path}))
                per_op = []
                rss = []
                for run in range(min(cfg.runs, 3)):  # RSS is coarse: 3 runs are plenty
                    before = server.rss_bytes()
                    parked = []
                    for i in range(cfg.park_n):
                        path = f"park-{run}-{i}.txt"
                        parked.append((path, raw.call_tool("delete_file", {"path": path})))
                    after = server.rss_bytes()
                    for path, first in parked:  # every parked operation still completes
                        _finish(raw, path, first)
                    per_op.append((after - before) / cfg.park_n)
                    rss.append({"before": before, "parked": after, "finished": server.rss_bytes()})
            finally:
                raw.close()
            out[kind] = {"bytes_per_parked_op": spread(per_op), "parked": cfg.park_n, "rss": rss}


# --- in process ----------------------------------------------------------------------------------


def bench_state(rec: Recorder, cfg: Config) -> None:
    """``requestState``: the state work of one round (``micro_state``: ours, the SDK's public
    boundary middleware, the SDK codec, primitives), and seal+open of a 1 KiB state with
    ``bench_state.py``'s candidates (ours AEAD/HMAC, floors, primitives, the SDK's paths)."""
    import micro_state

    out: dict[str, Any] = rec.results.setdefault("state", {})
    # Many short interleaved batches: the median shrugs off load from elsewhere.
    with rec.item("state", "per_round"):
        out["per_round"] = micro_state.run(number=cfg.state_number, repeats=5 * cfg.runs)
    with rec.item("state", "seal_open_1kib"):
        bench_state = _optional_module("bench_state")
        fns = bench_state.candidates(os.urandom(32), bench_state.state_of_size(1024))
        out["seal_open_1kib"] = time_interleaved(fns, number=cfg.state_number, repeats=5 * cfg.runs)


def _optional_module(name: str) -> Any:
    path = Path(__file__).resolve().parent / f"{name}.py"
    if not path.exists():
        raise RuntimeError(f"benchmarks/{name}.py is not there")
    return importlib.import_module(name)


def bench_core_round(rec: Recorder, cfg: Config) -> None:
    """The core's cost per round without I/O (from ``bench_core_round.py``)."""
    import micro_core

    rec.results["core_round"] = micro_core.core_round(
        _optional_module("bench_core_round"), quick=cfg is QUICK, repeats=cfg.runs
    )


def bench_sim(rec: Recorder, cfg: Config) -> None:
    """Simulator flows per second (``bench_sim.py`` when it offers ``measure``)."""
    import micro_core

    path = Path(__file__).resolve().parent / "bench_sim.py"
    module = importlib.import_module("bench_sim") if path.exists() else None
    rec.results["sim"] = micro_core.sim_flows(module, quick=cfg is QUICK, repeats=min(cfg.runs, 3))


def bench_growth(rec: Recorder, cfg: Config) -> None:
    """Cost per operation as rounds, input requests and state grow."""
    import micro_core

    out: dict[str, Any] = rec.results.setdefault("growth", {})
    with rec.item("growth", "core"):
        out["core"] = micro_core.growth(
            rounds=cfg.rounds,
            inputs=cfg.inputs,
            state_kib=cfg.state_kib,
            number=cfg.core_number,
            repeats=min(cfg.runs, 3),
        )
    loop: dict[str, Any] = out.setdefault("loopback_rounds", {"rounds": list(cfg.rounds)})
    plan = [("sdk", "sdk"), ("trio", "trio")]
    with started_pairs(rec, "growth", plan) as pairs:
        warm = {"tool": "multi_round", "arguments": {"rounds": 2, "inputs": 1, "state_bytes": 100}}
        points: dict[str, list[list[float]]] = {}
        for pair in list(pairs):
            with rec.item("growth", f"loopback {pair.name}"):
                pair.client.command(_seq(warm, cfg.warmup))
                points[pair.name] = [[] for _ in cfg.rounds]
        pairs = [p for p in pairs if p.name in points]

        def measure(pair: Pair, run: int) -> None:
            for index, rounds in enumerate(cfg.rounds):
                args = {"rounds": rounds, "inputs": 1, "state_bytes": 100}
                call = {"tool": "multi_round", "arguments": args}
                answer = pair.client.command(_seq(call, cfg.loop_growth_n))
                points[pair.name][index].append(answer["wall_ns"] / cfg.loop_growth_n / 1e6)

        interleaved(rec, "growth", pairs, min(cfg.runs, 3), measure)
        for pair in pairs:
            if f"growth/{pair.name}" not in rec.errors:
                loop[label(pair.client_kind)] = [spread(ms) for ms in points[pair.name]]


# --- report ---------------------------------------------------------------------------------------


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _med(data: Any, *path: str) -> float | None:
    value = _get(data, *path)
    if isinstance(value, dict) and "median" in value:
        return float(value["median"])
    return float(value) if isinstance(value, int | float) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "<": operator.lt,
}


def compute_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issues' targets: ratios against references measured in this run, and the
    absolute goals the issues name (core us per round, simulated flows per second)."""
    seq = results.get("sequential", {})
    sdk_pair = _med(seq, "sdk->sdk", "mrtr", "calls_per_s")
    targets: list[dict[str, Any]] = []

    def add(name: str, value: float | None, op: str, goal: float) -> None:
        met = None if value is None else _COMPARE[op](value, goal)
        targets.append({"name": name, "value": value, "target": f"{op} {goal:g}", "met": met})

    for rt in RUNTIMES:
        add(
            f"MRTR calls/s, ours-{rt} pair / SDK pair",
            _ratio(_med(seq, f"{rt}->{rt}", "mrtr", "calls_per_s"), sdk_pair),
            ">=",
            5,
        )
    for rt in RUNTIMES:
        add(
            f"MRTR calls/s, SDK client -> ours-{rt} server / SDK pair",
            _ratio(_med(seq, f"sdk->{rt}", "mrtr", "calls_per_s"), sdk_pair),
            ">=",
            1,
        )
    for rt in RUNTIMES:
        add(
            f"MRTR calls/s, ours-{rt} client -> SDK server / SDK pair",
            _ratio(_med(seq, f"{rt}->sdk", "mrtr", "calls_per_s"), sdk_pair),
            ">=",
            1,
        )
    for rt in RUNTIMES:
        add(
            f"MRTR overhead (t_mrtr - t_plain) / t_plain, ours-{rt}",
            _med(seq, f"{rt}->{rt}", "mrtr_overhead"),
            "<=",
            1.1,
        )
    conc = results.get("concurrent", {})
    for rt in ASYNC_RUNTIMES:
        add(
            f"concurrent flows/s, ours-{rt} / SDK",
            _ratio(_med(conc, f"{rt}->{rt}", "flows_per_s"), _med(conc, "sdk->sdk", "flows_per_s")),
            ">=",
            1,
        )
    state = results.get("state", {})
    add(
        "requestState seal+open 1 KiB (bench_state), ours AEAD / SDK boundary path",
        _ratio(
            _med(state, "seal_open_1kib", "ours_aead"), _med(state, "seal_open_1kib", "sdk_full")
        ),
        ">=",
        2,
    )
    add(
        "requestState work per round incl. binding, ours / SDK boundary middleware",
        _ratio(_med(state, "per_round", "ours_round"), _med(state, "per_round", "sdk_round")),
        ">=",
        2,
    )
    add(
        "requestState seal+open 1 KiB, ours AEAD / bare AES-GCM encrypt+decrypt",
        _ratio(
            _med(state, "seal_open_1kib", "ours_aead"), _med(state, "seal_open_1kib", "bare_aead")
        ),
        ">=",
        0.5,
    )
    add(
        "client core us per 2-entry round, each round of a flow (bench_core_round)",
        _med(results.get("core_round", {}), "client_core_us_per_round"),
        "<",
        20,
    )
    add(
        "simulated three-round flows/s (bench_sim, no faults)",
        _med(results.get("sim", {}), "flows_per_s_no_faults"),
        ">=",
        5000,
    )
    return targets


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:,.{digits}f}"


def _fmt_spread(stat: Any, digits: int = 0) -> str:
    if not isinstance(stat, dict):
        return "n/a"
    return (
        f"{_fmt(stat['median'], digits)} [{_fmt(stat['min'], digits)}-{_fmt(stat['max'], digits)}]"
    )


def _cpu_per_mrtr_call(row: dict[str, Any] | None) -> float | None:
    """Client CPU per MRTR call plus the server's CPU for its two rounds, in microseconds."""
    if not row:
        return None
    client_us = float(row["mrtr"]["client_cpu_us_per_call"]["median"])
    return client_us + 2 * float(row["server_cpu_us_per_round"]["mrtr"])


def render_tables(results: dict[str, Any]) -> str:
    """The markdown report."""
    lines: list[str] = []
    meta = results.get("meta", {})
    lines.append(
        f"## mrtr vs the official Python SDK (mcp {meta.get('mcp_version')}), "
        f"{meta.get('cpus')} CPUs, {meta.get('mode')} run"
    )
    lines.append("")
    lines.append(
        "Medians over runs, [min-max] across runs. Ratios are against the SDK client + "
        "SDK server measured in the same run."
    )
    load = [meta.get("loadavg_at_start"), meta.get("loadavg_at_end")]
    if all(isinstance(x, list | tuple) and x for x in load):
        lines.append(
            f"Load average (1 min) at start / end: {load[0][0]:.2f} / {load[1][0]:.2f} "
            f"on {meta.get('cpus')} CPUs; anything well above 0 means other work shared the "
            "machine, so trust the ratios and CPU times more than absolute rates."
        )
    seq = results.get("sequential", {})
    sdk_pair = _med(seq, "sdk->sdk", "mrtr", "calls_per_s")
    lines += [
        "",
        "### Sequential calls over loopback HTTP (one client, one server process)",
        "",
        "| client -> server | MRTR calls/s | p50 / p90 / p99 ms | plain calls/s | "
        "plain p50 ms | MRTR overhead | server CPU us/round (MRTR, plain) "
        "| client CPU us/call (MRTR, plain) | MRTR vs SDK pair |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in seq.values():
        mrtr, plain = row["mrtr"], row["plain"]
        cpu = row["server_cpu_us_per_round"]
        lines.append(
            f"| {label(row['client'])} -> {label(row['server'])} "
            f"| {_fmt_spread(mrtr['calls_per_s'])} "
            f"| {_fmt(mrtr['p50_ms']['median'], 2)} / {_fmt(mrtr['p90_ms']['median'], 2)} / "
            f"{_fmt(mrtr['p99_ms']['median'], 2)} "
            f"| {_fmt_spread(plain['calls_per_s'])} | {_fmt(plain['p50_ms']['median'], 2)} "
            f"| {_fmt_spread(row['mrtr_overhead'], 2)} "
            f"| {_fmt(cpu['mrtr'], 0)}, {_fmt(cpu['plain'], 0)} "
            f"| {_fmt(mrtr['client_cpu_us_per_call']['median'])}, "
            f"{_fmt(plain['client_cpu_us_per_call']['median'])} "
            f"| {_fmt(_ratio(mrtr['calls_per_s']['median'], sdk_pair), 2)}x |"
        )
    if seq:
        sdk_cpu = _cpu_per_mrtr_call(seq.get("sdk->sdk"))
        lines += [
            "",
            "### CPU time per two-round MRTR call (client process + server process)",
            "",
            "CPU time is less sensitive than wall time to other load on the machine.",
            "",
            "| client -> server | client CPU us/call | server CPU us/call (2 rounds) | total us "
            "| SDK pair / this |",
            "|---|---|---|---|---|",
        ]
        for row in seq.values():
            total = _cpu_per_mrtr_call(row)
            client_us = row["mrtr"]["client_cpu_us_per_call"]["median"]
            server_us = 2 * row["server_cpu_us_per_round"]["mrtr"]
            lines.append(
                f"| {label(row['client'])} -> {label(row['server'])} | {_fmt(client_us)} "
                f"| {_fmt(server_us)} | {_fmt(total)} | {_fmt(_ratio(sdk_cpu, total), 2)}x |"
            )
    floor = _med(seq, "floor->floor", "mrtr", "calls_per_s")
    if floor is not None and sdk_pair:
        lines += [
            "",
            "### Against the h11 floor (h11, a socket and JSON; no MCP logic)",
            "",
            f"The floor pair makes {_fmt(floor)} two-round calls/s, "
            f"{_fmt(_ratio(floor, sdk_pair), 2)}x the SDK pair: a 5x target asks for "
            f"{_fmt(_ratio(5 * sdk_pair, floor), 2)} of the floor's rate.",
            "",
            "| pair | MRTR calls/s share of the floor |",
            "|---|---|",
        ]
        for rt in RUNTIMES:
            lines.append(
                f"| ours-{rt} | "
                f"{_fmt(_ratio(_med(seq, f'{rt}->{rt}', 'mrtr', 'calls_per_s'), floor), 2)} |"
            )
    ts_pair = _med(seq, "ts->ts", "mrtr", "calls_per_s")
    if ts_pair is not None:
        ts_cpu = _cpu_per_mrtr_call(seq.get("ts->ts"))
        lines += [
            "",
            "### Against the official TypeScript SDK v2 (Node 22)",
            "",
            f"The TS SDK pair makes {_fmt(ts_pair)} two-round calls/s, "
            f"{_fmt(_ratio(ts_pair, sdk_pair), 2)}x the Python SDK pair.",
            "",
            "| pair | MRTR calls/s vs the TS SDK pair | CPU per call, TS SDK pair / this |",
            "|---|---|---|",
        ]
        for rt in RUNTIMES:
            pair = f"{rt}->{rt}"
            rate = _ratio(_med(seq, pair, "mrtr", "calls_per_s"), ts_pair)
            cpu = _ratio(ts_cpu, _cpu_per_mrtr_call(seq.get(pair)))
            lines.append(f"| ours-{rt} | {_fmt(rate, 2)}x | {_fmt(cpu, 2)}x |")
    conc = results.get("concurrent", {})
    if conc:
        sdk_conc = _med(conc, "sdk->sdk", "flows_per_s")
        lines += [
            "",
            "### Concurrent two-round flows against one server process",
            "",
            "| client -> server | in flight | flows/s | p50 ms | p99 ms "
            "| server CPU us/round | vs SDK |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in conc.values():
            lines.append(
                f"| {label(row['client'])} -> {label(row['server'])} | {row['in_flight']} "
                f"| {_fmt_spread(row['flows_per_s'])} | {_fmt(row['p50_ms']['median'], 1)} "
                f"| {_fmt_spread(row['p99_ms'], 1)} | {_fmt(row['server_cpu_us_per_round'])} "
                f"| {_fmt(_ratio(row['flows_per_s']['median'], sdk_conc), 2)}x |"
            )
    parked = results.get("parked_memory", {})
    if parked:
        lines += [
            "",
            "### Server memory held per operation parked between rounds",
            "",
            "| server | parked operations | RSS growth per parked op (bytes) | RSS before (MiB) |",
            "|---|---|---|---|",
        ]
        for kind, row in parked.items():
            lines.append(
                f"| {label(kind)} | {row['parked']} | {_fmt_spread(row['bytes_per_parked_op'])} "
                f"| {_fmt(row['rss'][0]['before'] / 2**20, 1)} |"
            )
    state = results.get("state", {})
    for key, title, anchor in (
        (
            "per_round",
            "requestState work of one round, in process (binding + open + seal)",
            "sdk_round",
        ),
        (
            "seal_open_1kib",
            "requestState seal+open of a 1 KiB state (bench_state.py candidates)",
            "sdk_full",
        ),
    ):
        cases = state.get(key)
        if not cases:
            continue
        base = _med(cases, anchor)
        lines += [
            "",
            f"### {title}",
            "",
            f"| case | ops/s | us/op | vs {anchor} |",
            "|---|---|---|---|",
        ]
        for name, stat in cases.items():
            lines.append(
                f"| {name} | {_fmt_spread(stat)} | {_fmt(1e6 / stat['median'], 2)} "
                f"| {_fmt(_ratio(stat['median'], base), 2)}x |"
            )
    for key, title in (("core_round", "Core cost per round without I/O"), ("sim", "Simulator")):
        data = results.get(key)
        if data:
            lines += ["", f"### {title}", "", "| measure | value [min-max] |", "|---|---|"]
            for name, stat in data.items():
                if isinstance(stat, dict) and "median" in stat:
                    digits = 3 if abs(stat["median"]) < 10 else 1
                    lines.append(f"| {name} | {_fmt_spread(stat, digits)} |")
    growth = results.get("growth", {})
    core = growth.get("core")
    if core:
        lines += ["", "### Growth, in process (us per operation, median)", ""]
        for axis, unit in (
            ("rounds", "rounds"),
            ("inputs", "input requests/round"),
            ("state_kib", "state KiB"),
        ):
            points = core.get(axis)
            if points:
                lines.append(
                    f"- {unit}: "
                    + ", ".join(
                        f"{x:g}: {_fmt(stat['median'], 0)}"
                        for x, stat in zip(points["x"], points["us_per_op"])
                    )
                )
    loop = growth.get("loopback_rounds")
    if loop:
        lines.append(
            "- loopback ms per operation by rounds: "
            + "; ".join(
                f"{who}: "
                + ", ".join(f"{x}: {_fmt(s['median'], 2)}" for x, s in zip(loop["rounds"], pts))
                for who, pts in loop.items()
                if who != "rounds"
            )
        )
    targets = results.get("targets", [])
    lines += ["", "### Targets", "", "| target | value | goal | met |", "|---|---|---|---|"]
    for t in targets:
        met = {True: "yes", False: "**no**", None: "n/a"}[t["met"]]
        lines.append(f"| {t['name']} | {_fmt(t['value'], 2)} | {t['target']} | {met} |")
    errors = results.get("errors", {})
    if errors:
        lines += ["", "### Failed benchmarks", ""]
        lines += [f"- {name}: {err.splitlines()[0] if err else ''}" for name, err in errors.items()]
    return "\n".join(lines) + "\n"


def plot_growth(results: dict[str, Any], path: Path) -> None:
    """The growth curves as one PNG (Agg backend, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    growth = results.get("growth", {})
    core = growth.get("core", {})
    loop = growth.get("loopback_rounds", {})
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    panels = [
        (axes[0][0], "rounds", "rounds per operation", "in process: us per operation"),
        (axes[0][1], "inputs", "input requests per round", "in process: us per operation"),
        (axes[1][0], "state_kib", "requestState payload (KiB)", "in process: us per operation"),
    ]
    for ax, key, xlabel, ylabel in panels:
        points = core.get(key)
        if points:
            med = [s["median"] for s in points["us_per_op"]]
            lo = [s["median"] - s["min"] for s in points["us_per_op"]]
            hi = [s["max"] - s["median"] for s in points["us_per_op"]]
            ax.errorbar(points["x"], med, yerr=[lo, hi], marker="o", capsize=3, label="mrtr core")
            if key == "state_kib":
                ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left")
    ax = axes[1][1]
    for who, pts in loop.items():
        if who == "rounds":
            continue
        ax.errorbar(
            loop["rounds"],
            [s["median"] for s in pts],
            yerr=[[s["median"] - s["min"] for s in pts], [s["max"] - s["median"] for s in pts]],
            marker="o",
            capsize=3,
            label=who,
        )
    ax.set_xlabel("rounds per operation")
    ax.set_ylabel("loopback HTTP: ms per operation")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left")
    meta = results.get("meta", {})
    fig.suptitle(f"mrtr growth curves ({meta.get('mode')} run, {meta.get('cpus')} CPUs)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _meta(cfg: Config, quick: bool) -> dict[str, Any]:
    from importlib.metadata import version

    commit = None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                cwd=REPO_ROOT,
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
            or None
        )
    return {
        "mode": "quick" if quick else "full",
        "config": asdict(cfg),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "mcp_version": version("mcp"),
        "commit": commit,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "loadavg_at_start": os.getloadavg(),
    }


BENCHMARKS: dict[str, Callable[[Recorder, Config], None]] = {
    "state": bench_state,
    "core_round": bench_core_round,
    "sim": bench_sim,
    "growth": bench_growth,
    "sequential": bench_sequential,
    "concurrent": bench_concurrent,
    "parked_memory": bench_parked_memory,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny counts: check every benchmark runs"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO_ROOT / "benchmarks" / "results",
        help="directory for results.json, growth.png and the peers' logs",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(BENCHMARKS),
        help="run only this benchmark (repeatable)",
    )
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    out: Path = args.out
    log_dir = out / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    rec = Recorder(log_dir)
    rec.results["meta"] = _meta(cfg, args.quick)
    started = time.monotonic()
    for name, bench in BENCHMARKS.items():
        if args.only and name not in args.only:
            continue
        with rec.section(name):
            bench(rec, cfg)
    rec.results["meta"]["elapsed_s"] = time.monotonic() - started
    rec.results["meta"]["loadavg_at_end"] = os.getloadavg()
    rec.results["targets"] = compute_targets(rec.results)
    rec.results["errors"] = rec.errors
    (out / "results.json").write_text(json.dumps(rec.results, indent=1, sort_keys=False) + "\n")
    with rec.section("plot"):
        plot_growth(rec.results, out / "growth.png")
    print(render_tables(rec.results))
    print(
        f"raw figures: {out / 'results.json'}; plot: {out / 'growth.png'}; "
        f"{rec.results['meta']['elapsed_s']:.0f} s",
        file=sys.stderr,
    )
    return 1 if rec.errors else 0


if __name__ == "__main__":
    sys.exit(main())
