"""In-process benchmarks of the sans-IO core: no sockets, no event loop, no threads.

- ``core_round``: the client core's cost of one two-leg round (``bench_core_round.py``'s
  ``one_round``), its JSON encode/decode reference, and a whole operation with both sides
  in process (``ClientFlow`` against the benchmark ``App``, messages passed as decoded JSON).
- ``sim_flows``: simulator flows per second (``bench_sim.py``).
- ``growth``: cost of one whole operation in process as rounds, input requests per round
  and ``requestState`` size grow.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from harness import spread, time_per_op

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

ACCEPT = {"action": "accept", "content": {"confirm": True}}
NOW = 1_800_000_000.0


def in_process_operation(tool: str, arguments: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """One whole MRTR operation, ``ClientFlow`` against the benchmark ``App``, in process."""
    from our_app import MAX_INPUT_REQUESTS, MAX_STATE_BYTES, build_app

    from mrtr_core.app import drive_sync
    from mrtr_core.client import (
        ClientFlow,
        ClientLimits,
        Complete,
        Fail,
        HandlerReturned,
        InvokeHandler,
        ResponseReceived,
        SendRequest,
    )
    from mrtr_core.wire import ClientCapabilities, ElicitationCapability, ElicitResult, RequestMeta

    app = build_app()
    meta = RequestMeta(client_capabilities=ClientCapabilities(elicitation=ElicitationCapability()))
    limits = ClientLimits(
        pacing_jitter=0.0,
        max_rounds=16,
        max_state_bytes=MAX_STATE_BYTES,
        max_input_requests=MAX_INPUT_REQUESTS,
    )
    kinds = frozenset({"elicitation/create"})
    answer = ElicitResult(action="accept", content={"confirm": True})
    params = {"name": tool, "arguments": arguments}
    ids = itertools.count(1)

    def operation() -> dict[str, Any]:
        flow = ClientFlow(
            "tools/call",
            params,
            meta=meta,
            handled_kinds=kinds,
            next_id=ids.__next__,
            limits=limits,
        )
        pending = list(flow.start(NOW))
        while pending:
            cmd = pending.pop(0)
            if isinstance(cmd, SendRequest):
                reply = drive_sync(app, cmd.message, now=NOW)
                pending += flow.handle(ResponseReceived(message=reply.message), NOW)
            elif isinstance(cmd, InvokeHandler):
                pending += flow.handle(HandlerReturned(key=cmd.key, answer=answer), NOW)
            elif isinstance(cmd, Complete):
                return cmd.result
            elif isinstance(cmd, Fail):
                raise cmd.error
        raise RuntimeError("the flow stopped without completing")

    result = operation()
    if result.get("isError"):
        raise RuntimeError(f"{tool} failed in process: {result!r}")
    return operation


def core_round(module: ModuleType, *, quick: bool, repeats: int) -> dict[str, Any]:
    """Client-core cost of each round of a flow and of a whole one-round flow
    (``bench_core_round``), the JSON reference, and a whole two-leg operation with both
    sides in process, in microseconds."""
    number = 20 if quick else 5000
    sent = module.one_round()
    wire = [json.dumps(m) for m in sent]
    wire += [
        json.dumps({"jsonrpc": "2.0", "id": 1, "result": module.INPUT_REQUIRED}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "result": module.COMPLETE}),
    ]

    def us(stat: dict[str, float]) -> dict[str, float]:
        # ops/s -> us/op: the order of min and max flips.
        return {
            **{k: 1e6 / stat[k] for k in ("median", "q1", "q3")},
            "min": 1e6 / stat["max"],
            "max": 1e6 / stat["min"],
            "n": stat["n"],
        }

    client = us(time_per_op(module.one_round, number=number, repeats=repeats))
    # Each round of a flow: a flow of 1 + N rounds against a flow of 1, timed back to back
    # in every run (both meet the same load); the spread is over the runs' differences.
    flows = max(number // 2, 10)
    for _ in range(max(flows // 5, 1)):  # warm-up
        module.one_flow(1 + module.EXTRA_ROUNDS)

    def time_us(fn: Callable[[], object]) -> float:
        return 1e6 / time_per_op(fn, number=flows, repeats=1, warmup=0)["median"]

    per_round = spread([module.per_round_us(time_us) for _ in range(repeats)])
    reference = us(
        time_per_op(lambda: module.reference_round(wire), number=number, repeats=repeats)
    )
    whole = us(
        time_per_op(
            in_process_operation("delete_file", {"path": "notes.txt"}),
            number=max(number // 5, 5),
            repeats=repeats,
        )
    )
    plain = us(
        time_per_op(
            in_process_operation("echo", {"text": "hi"}),
            number=max(number // 5, 5),
            repeats=repeats,
        )
    )
    return {
        "client_core_us_per_round": per_round,
        "client_core_us_per_one_round_flow": client,
        "json_reference_us_per_round": reference,
        "client_core_vs_json": client["median"] / reference["median"],  # whole flow
        "in_process_mrtr_op_us": whole,
        "in_process_plain_op_us": plain,
    }


def sim_flows(module: ModuleType | None, *, quick: bool, repeats: int) -> dict[str, Any]:
    """Simulator flows per second (wall clock), with no faults and with every fault on.

    ``bench_sim.py``'s ``measure(quick=...)`` (a dict of positive figures) is used when it
    has one; otherwise the public ``Simulation`` is timed directly (seed 1 every run, so
    each run does the same work).
    """
    measure = getattr(module, "measure", None) if module is not None else None
    if measure is not None:
        runs: list[dict[str, float]] = [measure(quick=quick) for _ in range(repeats)]
        return {key: spread([r[key] for r in runs]) for key in runs[0]}
    import time

    from mrtr_core.sim import Faults, Simulation

    flows = 20 if quick else 500
    out: dict[str, Any] = {}
    for name, faults in (("flows_per_s_no_faults", None), ("flows_per_s_all_faults", Faults.all())):
        rates = []
        for _ in range(repeats):
            start = time.perf_counter()
            report = Simulation(1, flows=flows, faults=faults, shrink=False).run()
            rates.append(flows / (time.perf_counter() - start))
            if not report.ok:
                raise RuntimeError(f"the simulation found a violation: {report.summary()}")
        out[name] = spread(rates)
    return out


def growth(
    *,
    rounds: tuple[int, ...],
    inputs: tuple[int, ...],
    state_kib: tuple[float, ...],
    number: int,
    repeats: int,
) -> dict[str, Any]:
    """Microseconds per whole operation, in process, along each axis (the others at 1 / 100 B)."""

    def curve(
        points: tuple[Any, ...], arguments: Callable[[Any], dict[str, int]]
    ) -> dict[str, Any]:
        per_op = []
        for x in points:
            op = in_process_operation("multi_round", arguments(x))
            rate = time_per_op(op, number=number, repeats=repeats, warmup=max(number // 10, 1))
            per_op.append(
                {
                    "median": 1e6 / rate["median"],
                    "min": 1e6 / rate["max"],
                    "max": 1e6 / rate["min"],
                    "n": rate["n"],
                }
            )
        return {"x": list(points), "us_per_op": per_op}

    return {
        "rounds": curve(rounds, lambda r: {"rounds": r, "inputs": 1, "state_bytes": 100}),
        "inputs": curve(inputs, lambda n: {"rounds": 1, "inputs": n, "state_bytes": 100}),
        "state_kib": curve(
            state_kib, lambda k: {"rounds": 1, "inputs": 1, "state_bytes": int(k * 1024)}
        ),
    }
