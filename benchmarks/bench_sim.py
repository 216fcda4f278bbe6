"""Simulated three-round MRTR flows per second, against a reference measured in the same run.

The simulator runs the real ClientFlow, App, ServerEngine and StateCodec; it can never be
faster than those. So next to its own rate (and the 5,000 flows/s target) this prints:

- ``bare``: the same three-round flow (``deploy``: confirm; ticket + summary; complete)
  driven by a plain loop that calls ``ClientFlow`` and ``drive_sync`` back to back: no
  virtual clock, no network, no faults, no invariant checks. That is the core's cost of a
  round times three rounds, so ``sim / bare`` is the share of the core's speed the simulator
  keeps (its own overhead is ``1 - ratio``).
- the same simulation with every fault on (hostile peers, probes, retries cost more rounds).

Run: ``python benchmarks/bench_sim.py [--runs N] [--flows N]``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import statistics
import time
from collections.abc import Callable

from mrtr_core.app import drive_sync
from mrtr_core.client import (
    ClientFlow,
    Complete,
    Fail,
    HandlerReturned,
    InvokeHandler,
    ResponseReceived,
    SendRequest,
)
from mrtr_core.sim import (
    FULL_CAPABILITIES,
    Effects,
    Faults,
    Prng,
    ReferenceWorkload,
    Simulation,
    Timing,
)
from mrtr_core.state import KeyRing, MemoryReplayGuard, StateCodec
from mrtr_core.wire import RequestMeta

TARGET_FLOWS_PER_S = 5000.0
THREE_ROUNDS = ReferenceWorkload(mix=(1.0, 0.0, 0.0))  # every flow is a three-round deploy


def sim_rate(flows: int, faults: Faults | None = None, seed: int = 1) -> float:
    """Simulated three-round flows per second of wall-clock time (invariants checked)."""
    sim = Simulation(seed, flows=flows, faults=faults, workload=THREE_ROUNDS, shrink=False)
    gc.collect()
    start = time.perf_counter()
    report = sim.run()
    elapsed = time.perf_counter() - start
    if not report.ok:
        raise RuntimeError(f"the simulation found a violation:\n{report.summary()}")
    return flows / elapsed


def bare_rate(flows: int) -> float:
    """The same flows driven back to back with no simulator: ClientFlow <-> drive_sync."""
    prng = Prng(1)
    timing = Timing()
    ring = KeyRing({"k1": prng.bytes(32)}, active="k1")
    codec = StateCodec(ring, audience="mrtr-sim", nonce=prng.bytes, ttl=timing.state_ttl,
                       skew=timing.state_skew)
    app = THREE_ROUNDS.build_app(codec, Effects())
    guard = MemoryReplayGuard()
    meta = RequestMeta(client_capabilities=FULL_CAPABILITIES)
    ids = itertools.count(1)
    kinds = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})

    def one(index: int) -> None:
        operation = THREE_ROUNDS.make("deploy", index)
        flow = ClientFlow(operation.method, operation.params, meta=meta, handled_kinds=kinds,
                          next_id=ids.__next__, limits=timing.limits, random=prng)
        now = float(index)
        commands = flow.start(now)
        while commands:
            following = []
            for command in commands:
                if isinstance(command, SendRequest):
                    reply = drive_sync(app, command.message, now=now, principal="user-0",
                                       guard=guard)
                    following += flow.handle(ResponseReceived(message=reply.message), now)
                elif isinstance(command, InvokeHandler):
                    answer = THREE_ROUNDS.answer(operation, command.key, command.request)
                    following += flow.handle(HandlerReturned(key=command.key, answer=answer),
                                             now)
                elif isinstance(command, Fail):
                    raise RuntimeError(f"bare flow failed: {command.error!r}")
                elif isinstance(command, Complete) and command.rounds != 3:
                    raise RuntimeError(f"bare flow took {command.rounds} rounds")
            commands = following

    return _rate(one, flows)


def _rate(fn: Callable[[int], None], count: int) -> float:
    gc.collect()
    start = time.perf_counter()
    for index in range(count):
        fn(index)
    return count / (time.perf_counter() - start)


def measure(quick: bool = False) -> dict[str, float]:
    """One run of every figure (``benchmarks/run.py`` repeats it and takes the median)."""
    flows = 50 if quick else 2000
    sim = sim_rate(flows)
    bare = bare_rate(flows)
    return {
        "flows_per_s_no_faults": sim,
        "flows_per_s_all_faults": sim_rate(flows, Faults.all()),
        "bare_core_flows_per_s": bare,
        "sim_over_bare": sim / bare,
        "sim_over_target": sim / TARGET_FLOWS_PER_S,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (median)")
    parser.add_argument("--flows", type=int, default=2000, help="flows per run")
    args = parser.parse_args(argv)
    sims, faulty, bares = [], [], []
    sim_rate(200)  # warm up imports, caches and the allocator
    bare_rate(200)
    for _ in range(args.runs):
        sims.append(sim_rate(args.flows))
        bares.append(bare_rate(args.flows))
        faulty.append(sim_rate(args.flows, Faults.all()))
    sim, bare, fault = (statistics.median(v) for v in (sims, bares, faulty))
    print(f"simulated three-round flows/s, median of {args.runs} runs of {args.flows} flows")
    print(f"  simulator, no faults      {sim:9.0f} /s   (min {min(sims):.0f}, max {max(sims):.0f})")
    print(f"  simulator, every fault on {fault:9.0f} /s   (min {min(faulty):.0f}, "
          f"max {max(faulty):.0f})")
    print(f"  target                    {TARGET_FLOWS_PER_S:9.0f} /s   "
          f"ratio sim/target = {sim / TARGET_FLOWS_PER_S:.2f}")
    print(f"  reference: bare core      {bare:9.0f} /s   (3 x the core round cost: "
          f"{1e6 / bare / 3:.0f} us per round)")
    print(f"  ratio sim/bare = {sim / bare:.2f}  (simulator overhead "
          f"{(1 - sim / bare) * 100:.0f}% of the time)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
