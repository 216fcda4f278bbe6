"""The command loop every benchmark client peer runs, so the harness drives them all alike.

A peer connects once, then reads one JSON command per line on stdin and writes one JSON
line per command on stdout:

- ``{"op": "seq", "tool": T, "arguments": A, "n": N}``: N calls one after the other;
  answers ``{"lat_ns": [...], "wall_ns": W, "cpu_ns": C}`` (per-call latencies, the whole
  run, and the client process's CPU time over the run).
- ``{"op": "conc", "tool": T, "arguments": A, "workers": C, "per_worker": K}``: C tasks,
  each making K calls back to back (C*K calls, C in flight); same answer shape.
- ``{"op": "quit"}``: leave.

A failing call answers ``{"error": "..."}`` and the loop goes on.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Call:
    """One benchmarked call: a tool name and its arguments."""

    tool: str
    arguments: dict[str, Any]


def _read_command(line: str) -> dict[str, Any] | None:
    if not line:
        return None
    command = json.loads(line)
    if command.get("op") == "quit":
        return None
    return command


def _answer(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def serve_commands_sync(call: Callable[[Call], None]) -> None:
    """Run the command loop for a blocking client (``seq`` only)."""
    clock = time.perf_counter_ns
    while (command := _read_command(sys.stdin.readline())) is not None:
        one = Call(command["tool"], command.get("arguments", {}))
        try:
            if command["op"] != "seq":
                raise ValueError(f"unsupported op {command['op']!r} for a blocking client")
            lat: list[int] = []
            cpu = time.process_time_ns()
            start = clock()
            for _ in range(int(command["n"])):
                t0 = clock()
                call(one)
                lat.append(clock() - t0)
            wall = clock() - start
            _answer({"lat_ns": lat, "wall_ns": wall, "cpu_ns": time.process_time_ns() - cpu})
        except Exception as exc:  # reported to the harness, which fails the benchmark
            _answer({"error": f"{type(exc).__name__}: {exc}"})


async def serve_commands_async(
    call: Callable[[Call], Awaitable[None]],
    read_line: Callable[[Callable[[], str]], Awaitable[str]],
    gather: Callable[[Sequence[Callable[[], Awaitable[None]]]], Awaitable[None]],
) -> None:
    """Run the command loop for an async client.

    ``read_line(fn)`` runs the blocking ``fn`` off the event loop (``to_thread``);
    ``gather(fns)`` runs the async callables concurrently and waits for all of them.
    """
    clock = time.perf_counter_ns
    while (command := _read_command(await read_line(sys.stdin.readline))) is not None:
        one = Call(command["tool"], command.get("arguments", {}))
        lat: list[int] = []

        async def timed(lat: list[int] = lat, one: Call = one) -> None:
            t0 = clock()
            await call(one)
            lat.append(clock() - t0)

        try:
            cpu = time.process_time_ns()
            start = clock()
            if command["op"] == "seq":
                for _ in range(int(command["n"])):
                    await timed()
            elif command["op"] == "conc":
                per_worker = int(command["per_worker"])

                async def worker(per_worker: int = per_worker) -> None:
                    for _ in range(per_worker):
                        await timed()

                await gather([worker] * int(command["workers"]))
            else:
                raise ValueError(f"unknown op {command['op']!r}")
            wall = clock() - start
            _answer({"lat_ns": lat, "wall_ns": wall, "cpu_ns": time.process_time_ns() - cpu})
        except Exception as exc:  # reported to the harness, which fails the benchmark
            _answer({"error": f"{type(exc).__name__}: {exc!r}"})


async def anyio_gather(fns: Sequence[Callable[[], Awaitable[None]]]) -> None:
    """``gather`` for anyio-based clients."""
    import anyio

    async with anyio.create_task_group() as tg:
        for fn in fns:
            tg.start_soon(fn)
