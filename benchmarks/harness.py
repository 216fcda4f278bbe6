"""Measurement plumbing for ``benchmarks/run.py``: processes, timing loops, statistics.

Everything here is generic: servers and clients are separate processes on 127.0.0.1,
started and stopped by pid; in-process micro-benchmarks are timed with warm-up, several
repeats, and reported as the median with the spread (min, max, interquartile range).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import math
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
PEERS_DIR = BENCH_DIR / "peers"
HOST = "127.0.0.1"
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


# --- statistics ---------------------------------------------------------------------------


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min, max, quartiles and count of ``values`` (the runs of one measurement)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values to summarise")
    if len(ordered) >= 2:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1 = q3 = ordered[0]
    return {
        "median": statistics.median(ordered),
        "min": ordered[0],
        "max": ordered[-1],
        "q1": q1,
        "q3": q3,
        "n": len(ordered),
    }


def percentile(ordered: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) of already sorted values, linear interpolation."""
    if not ordered:
        raise ValueError("no values")
    k = (len(ordered) - 1) * p / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def latency_summary(lat_ns: Sequence[int]) -> dict[str, float]:
    """p50 / p90 / p99 / mean of one run's latencies, in milliseconds."""
    ordered = sorted(x / 1e6 for x in lat_ns)
    return {
        "p50_ms": percentile(ordered, 50),
        "p90_ms": percentile(ordered, 90),
        "p99_ms": percentile(ordered, 99),
        "mean_ms": statistics.fmean(ordered),
    }


# --- in-process timing ---------------------------------------------------------------------


def time_per_op(
    fn: Callable[[], object], *, number: int, repeats: int, warmup: int | None = None
) -> dict[str, float]:
    """Operations per second of ``fn``: warm up, then ``repeats`` runs of ``number`` calls.

    The garbage collector is paused inside each timed run (collected between runs), so a
    run's figure is the cost of the code, not of where a collection happened to land.
    Returns the spread of the per-run ops/s figures.
    """
    for _ in range(warmup if warmup is not None else max(1, number // 5)):
        fn()
    rates: list[float] = []
    clock = time.perf_counter_ns
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            start = clock()
            for _ in range(number):
                fn()
            elapsed = clock() - start
        finally:
            gc.enable()
        rates.append(number / (max(elapsed, 1) / 1e9))
    return spread(rates)


def time_interleaved(
    fns: dict[str, Callable[[], object]], *, number: int, repeats: int
) -> dict[str, dict[str, float]]:
    """Operations per second of each function, the runs of all of them interleaved.

    After a warm-up of each, every repeat times one batch of ``number`` calls of every
    function in turn (garbage collector paused inside a batch), so load from elsewhere on
    the machine falls on all of them alike. Returns the spread of the per-batch rates.
    """
    for fn in fns.values():
        for _ in range(max(1, number // 5)):
            fn()
    rates: dict[str, list[float]] = {name: [] for name in fns}
    clock = time.perf_counter_ns
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            gc.disable()
            try:
                start = clock()
                for _ in range(number):
                    fn()
                elapsed = clock() - start
            finally:
                gc.enable()
            rates[name].append(number / (max(elapsed, 1) / 1e9))
    return {name: spread(values) for name, values in rates.items()}


# --- processes -----------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def python() -> str:
    """The interpreter running the benchmarks (the project's virtualenv)."""
    return sys.executable


_TS_PEERS: dict[str, Path] = {}


def ts_peer(script: str) -> list[str]:
    """The command line of a TypeScript SDK peer (``peers/ts_*.mjs``) under Node 22.

    ``scripts/ts_sdk.sh`` installs Node and the pinned SDK packages (once, into the cache);
    the peers run from a folder of this process whose ``node_modules`` links to them (ES
    modules find packages from where the importing file lies). Raises ``RuntimeError``
    when the install fails.
    """
    if not _TS_PEERS:
        done = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "ts_sdk.sh"), "--install"],
                              capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"installing the TypeScript SDK failed:\n{done.stderr[-2000:]}")
        node, packages = done.stdout.split()
        folder = Path(tempfile.mkdtemp(prefix="mrtr-ts-peers-"))
        atexit.register(shutil.rmtree, folder, True)
        (folder / "node_modules").symlink_to(Path(packages) / "node_modules")
        for peer in PEERS_DIR.glob("ts_*.mjs"):
            shutil.copy(peer, folder / peer.name)
        _TS_PEERS.update(node=Path(node), folder=folder)
    return [str(_TS_PEERS["node"]), str(_TS_PEERS["folder"] / script)]


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(REPO_ROOT), str(REPO_ROOT / "adapters"), str(PEERS_DIR)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("PYTHONHASHSEED", "0")
    return env


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rindex(b")") + 2 :].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def proc_rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid``, from /proc."""
    with open(f"/proc/{pid}/statm", "rb") as f:
        return int(f.read().split()[1]) * _PAGE


@dataclass
class ServerProcess:
    """A server started as a separate process listening on 127.0.0.1:``port``."""

    name: str
    argv: list[str]
    port: int
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def pid(self) -> int:
        """The server's process id."""
        assert self.proc is not None
        return self.proc.pid

    @property
    def url(self) -> str:
        """The MCP endpoint."""
        return f"http://{HOST}:{self.port}/mcp"

    def start(self, log_dir: Path, *, ready_timeout: float = 30.0) -> None:
        """Start the process and wait until the port accepts connections."""
        self.log = log_dir / f"server-{self.name}-{self.port}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, env=_child_env(), cwd=REPO_ROOT
            )
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"server {self.name} exited early:\n{self.log.read_text()[-3000:]}"
                )
            with contextlib.suppress(OSError), socket.create_connection((HOST, self.port), 0.2):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"server {self.name} did not listen on port {self.port}")

    def cpu_seconds(self) -> float:
        """CPU time the server has used so far."""
        return proc_cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        """The server's resident memory now."""
        return proc_rss_bytes(self.pid)

    def stop(self) -> None:
        """Stop the process by its pid: SIGTERM, then SIGKILL after a grace period."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)


@contextlib.contextmanager
def running_server(name: str, argv: list[str], log_dir: Path) -> Iterator[ServerProcess]:
    """Start a server on a free port (``{port}`` in ``argv`` is replaced) and stop it after."""
    port = free_port()
    server = ServerProcess(name, [a.replace("{port}", str(port)) for a in argv], port)
    server.start(log_dir)
    try:
        yield server
    finally:
        server.stop()


@dataclass
class ClientProcess:
    """A benchmark client peer driven over stdin/stdout (see ``peers/loop.py``)."""

    name: str
    argv: list[str]
    proc: subprocess.Popen[str] | None = None
    log: Path | None = None
    _err: Any = field(default=None, repr=False)

    def start(self, log_dir: Path) -> None:
        """Start the client process."""
        self.log = log_dir / f"client-{self.name}-{os.getpid()}-{time.monotonic_ns()}.log"
        self._err = open(self.log, "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env=_child_env(),
            cwd=REPO_ROOT,
        )

    def command(self, payload: dict[str, Any], *, timeout: float = 300.0) -> dict[str, Any]:
        """Send one command and wait for its answer; a failed command raises."""
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(payload) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            os.kill(self.proc.pid, signal.SIGKILL)
            raise RuntimeError(
                f"client {self.name} gave no answer in {timeout:.0f} s:\n{self._tail()}"
            )
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=timeout)
            raise RuntimeError(f"client {self.name} died:\n{self._tail()}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"client {self.name} failed: {answer['error']}\n{self._tail()}")
        return answer

    def _tail(self) -> str:
        if self.log is None:
            return ""
        self._err.flush()
        return self.log.read_text()[-3000:]

    def stop(self) -> None:
        """Ask the client to quit; kill it by pid if it does not."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        if self._err is not None:
            self._err.close()


@contextlib.contextmanager
def running_client(name: str, argv: list[str], log_dir: Path) -> Iterator[ClientProcess]:
    """Start a client peer and stop it after."""
    client = ClientProcess(name, argv)
    client.start(log_dir)
    try:
        yield client
    finally:
        client.stop()


# --- a raw wire client (for parking operations between rounds) -----------------------------


class RawMcpClient:
    """A minimal blocking 2026-07-28 JSON-RPC client over one keep-alive HTTP connection.

    Used where the harness itself must control each round (parking operations after
    round 1); it speaks exactly the wire shapes both servers accept.
    """

    CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}}

    def __init__(self, port: int) -> None:
        import http.client

        self._conn = http.client.HTTPConnection(HOST, port, timeout=30)
        self._next = 0

    def call_tool(self, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """One ``tools/call`` leg; returns the JSON-RPC ``result`` (raises on an error)."""
        self._next += 1
        params = {
            "name": name,
            "arguments": arguments,
            **extra,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "mrtr-bench", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": self.CAPABILITIES,
            },
        }
        body = json.dumps(
            {"jsonrpc": "2.0", "id": self._next, "method": "tools/call", "params": params}
        ).encode()
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": name,
        }
        self._conn.request("POST", "/mcp", body=body, headers=headers)
        response = self._conn.getresponse()
        data = response.read()
        message = json.loads(data)
        if "result" not in message:
            raise RuntimeError(f"tools/call {name} failed: HTTP {response.status} {data[:500]!r}")
        result: dict[str, Any] = message["result"]
        return result

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()
