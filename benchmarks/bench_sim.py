"""Simulated three-round MRTR flows per second, against a reference measured in the same run.

The simulator runs the real ClientFlow, App, ServerEngine and StateCodec; it can never be
faster than those. So next to its own rate (and the 5,000 flows/s target) this prints:

- ``bare``: the same three-round flow (``deploy``: confirm; ticket + summary; complete)
  driven by a plain loop that calls ``ClientFlow`` and ``drive_sync`` back to back: no
  virtual clock, no network, no faults, no invariant checks. That is the core's cost of a
  round times three rounds, so ``sim / bare`` is the share of the core's speed the simulator
  keeps (its own overhead is ``1 - ratio``).
- the same simulation with every fault on (hostile peers, probes, retries cost more rounds).
- the share of question digests the core's memo answered in each: part of the gap between
  ``sim`` and ``bare`` is core work that interleaved flows do not share, not the simulator.
- a sweep over worker processes (``mrtr sim --seeds``): two seeds per worker, each a whole
  campaign, wall clock from starting the workers to the last report. This is a campaign
  feature (a machine with more cores runs more seeds at once), not a cheaper flow: the
  single-process figures above are the per-flow cost, and the sweep is only ever shown next
  to them.

Run: ``python benchmarks/bench_sim.py [--runs N] [--flows N] [--jobs N]``.
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
from mrtr_core.server import SHARED_DIGESTS, forget_accepted
from mrtr_core.sim import (
    FULL_CAPABILITIES,
    Effects,
    Faults,
    Prng,
    ReferenceWorkload,
    Simulation,
    Timing,
)
from mrtr_core.state import KeyRing, MemoryReplayGuard, StateCodec, forget_bindings
from mrtr_core.wire import RequestMeta

TARGET_FLOWS_PER_S = 5000.0
THREE_ROUNDS = ReferenceWorkload(mix=(1.0, 0.0, 0.0))  # every flow is a three-round deploy


def sim_rate(
    flows: int, faults: Faults | None = None, seed: int = 1, cpu: list[float] | None = None
) -> float:
    """Simulated three-round flows per second of wall-clock time (invariants checked).
    ``cpu``, when given, gets the same rate per second of this process's CPU time."""
    sim = Simulation(seed, flows=flows, faults=faults, workload=THREE_ROUNDS, shrink=False)
    fresh_caches()
    gc.collect()
    start, start_cpu = time.perf_counter(), time.process_time()
    report = sim.run()
    elapsed, used = time.perf_counter() - start, time.process_time() - start_cpu
    if not report.ok:
        raise RuntimeError(f"the simulation found a violation:\n{report.summary()}")
    if cpu is not None:
        cpu.append(flows / used)
    return flows / elapsed


def parallel_rate(flows: int, jobs: int, faults: Faults | None = None) -> float:
    """Flows per second of wall-clock time of ``mrtr sim --seeds``: ``2 * jobs`` seeds of
    ``flows`` flows each over ``jobs`` worker processes (:func:`mrtr_cli.simsweep.run_sweep`,
    invariants checked), starting the workers included, as a user gets it."""
    from mrtr_cli.simsweep import run_sweep

    seeds = range(1, 2 * jobs + 1)
    gc.collect()
    start = time.perf_counter()
    sweep = run_sweep(seeds, flows, faults or Faults.none(), workload=THREE_ROUNDS,
                      balancer="round_robin", jobs=jobs)
    elapsed = time.perf_counter() - start
    if not sweep.ok:
        raise RuntimeError(f"a sweep's seed found a violation:\n{sweep.summary()}")
    return sweep.flows / elapsed


def bare_rate(flows: int, cpu: list[float] | None = None) -> float:
    """The same flows driven back to back with no simulator: ClientFlow <-> drive_sync
    (``cpu`` as in :func:`sim_rate`)."""
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

    return _rate(one, flows, cpu)


def fresh_caches() -> None:
    """Forget what an earlier run left in process-wide memos. Every run asks the same
    questions and sends the same arguments and answers (``op-0``, ``op-1``, ...): a digest,
    an accepted instance or a binding remembered from the previous run would be a hit no
    real campaign gets."""
    SHARED_DIGESTS.clear()
    forget_accepted()
    forget_bindings()


def digest_hit_rate(rate: Callable[[int], float], flows: int) -> float:
    """The share of question digests the process-wide memo answered during ``rate(flows)``.
    The bare loop runs one flow after another, so a flow's questions are still remembered
    when its next round asks them again; the simulator interleaves hundreds of live flows,
    whose questions a memo too small for them pushes out before their next round: the core
    would do more work per round there than in the bare loop."""
    found, computed = SHARED_DIGESTS.hits, SHARED_DIGESTS.misses
    rate(flows)  # starts with fresh caches
    hits, misses = SHARED_DIGESTS.hits - found, SHARED_DIGESTS.misses - computed
    return hits / (hits + misses) if hits + misses else 0.0


def _rate(fn: Callable[[int], None], count: int, cpu: list[float] | None = None) -> float:
    fresh_caches()
    gc.collect()
    start, start_cpu = time.perf_counter(), time.process_time()
    for index in range(count):
        fn(index)
    elapsed, used = time.perf_counter() - start, time.process_time() - start_cpu
    if cpu is not None:
        cpu.append(count / used)
    return count / elapsed


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
    parser.add_argument("--jobs", type=int, default=2,
                        help="worker processes of the parallel campaign (0: skip it)")
    args = parser.parse_args(argv)
    sims, faulty, bares, parallel = [], [], [], []
    sims_cpu: list[float] = []
    faulty_cpu: list[float] = []
    bares_cpu: list[float] = []
    sim_rate(200)  # warm up imports, caches and the allocator
    bare_rate(200)
    for _ in range(args.runs):
        sims.append(sim_rate(args.flows, cpu=sims_cpu))
        bares.append(bare_rate(args.flows, cpu=bares_cpu))
        faulty.append(sim_rate(args.flows, Faults.all(), cpu=faulty_cpu))
        if args.jobs > 0:
            parallel.append(parallel_rate(args.flows, args.jobs))
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
    # Per second of this process's CPU time, best run: what other load on the machine
    # disturbs least (wall-clock figures above include time the process was not running).
    sim_c, fault_c, bare_c = max(sims_cpu), max(faulty_cpu), max(bares_cpu)
    print(f"  per CPU second, best run: simulator {sim_c:.0f} /s, every fault on "
          f"{fault_c:.0f} /s, bare core {bare_c:.0f} /s; sim/bare = {sim_c / bare_c:.2f}, "
          f"sim/target = {sim_c / TARGET_FLOWS_PER_S:.2f}")
    print(f"  question digests found in the core's memo: simulator "
          f"{digest_hit_rate(sim_rate, args.flows):.0%}, bare core "
          f"{digest_hit_rate(bare_rate, args.flows):.0%}")
    if parallel:
        par = statistics.median(parallel)
        print(f"  sweep of {2 * args.jobs} seeds x {args.flows} flows over {args.jobs} worker "
              f"processes (mrtr sim --seeds, no faults) {par:.0f} /s   "
              f"(min {min(parallel):.0f}, max {max(parallel):.0f}); "
              f"{par / sim:.2f} x one process, ratio to target {par / TARGET_FLOWS_PER_S:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
