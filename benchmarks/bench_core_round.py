"""Core cost of one MRTR round, without I/O.

A round is one ``input_required`` result with two elicitation entries taken in: the
result read and checked, two ``InvokeHandler``, two ``HandlerReturned``, the retry built
with the answers and the echoed state. Two figures:

- ``per round``: what each round of a flow costs, the target's measure. It is the
  difference between a flow of 1 + N rounds and a flow of 1 round, divided by N: the
  flow's construction, its first leg and its completion cancel out.
- ``whole flow``: a whole two-leg flow with one such round in the middle: build the flow,
  ``start`` (leg 1), the round, the complete response. What one short operation costs.

Two references are measured in the same run, for the whole flow:

- ``json``: the same four messages pushed through ``json.dumps`` + ``json.loads``: how the
  core's work compares to merely encoding and decoding the bytes of that round;
- ``floor``: the object work any implementation of the contract does for that round with
  no flow logic at all: the nine frozen command objects and four event objects, the
  converter reading the ``input_required`` result, the two leg copies and the two answers'
  wire forms. The commands are built the way the core builds them (``record_maker``:
  positional, no ``__init__``), the events with their public constructors, as an adapter
  builds them. What the core adds on top of it is the state machine and its checks.

Run: ``python benchmarks/bench_core_round.py [--runs N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable

from mrtr_core.client import (
    ClientFlow,
    ClientLimits,
    Complete,
    HandlerReturned,
    InputNeeded,
    InvokeHandler,
    LegBuilder,
    ResponseReceived,
    RoundFulfilled,
    RoundStarted,
    SendRequest,
    answer_to_wire,
)
from mrtr_core.wire import (
    ClientCapabilities,
    ElicitationCapability,
    ElicitResult,
    RequestMeta,
    structure_input_required,
)
from mrtr_core.wire.records import record_maker

TARGET_US = 20.0

META = RequestMeta(client_capabilities=ClientCapabilities(elicitation=ElicitationCapability()))
PARAMS = {"name": "deploy_production", "arguments": {"version": "1.4.2", "region": "eu-west-1"}}
KINDS = frozenset({"elicitation/create"})
LIMITS = ClientLimits(pacing_jitter=0.0)


def _form(message: str, field: str, kind: str) -> dict[str, object]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {field: {"type": kind}},
                "required": [field],
            },
        },
    }


INPUT_REQUIRED = {
    "resultType": "input_required",
    "inputRequests": {
        "confirm_deploy": _form("Deploy to production?", "confirm", "boolean"),
        "change_ticket": _form("Change ticket number", "ticket", "string"),
    },
    "requestState": "v1.a2V5MQ.c2VhbGVkLXN0YXRlLWJsb2I.bWFj",
}
COMPLETE = {
    "resultType": "complete",
    "content": [{"type": "text", "text": "deployed 1.4.2 to eu-west-1"}],
}
ANSWERS = {
    "confirm_deploy": ElicitResult(action="accept", content={"confirm": True}),
    "change_ticket": ElicitResult(action="accept", content={"ticket": "CHG-1234"}),
}


def one_round() -> list[object]:
    """Drive the core through one round; returns every message that would be sent."""
    counter = iter(range(1, 1_000_000))
    flow = ClientFlow(
        "tools/call", PARAMS, meta=META, handled_kinds=KINDS,
        next_id=counter.__next__, limits=LIMITS,
    )
    sent = [flow.start(0.0)[-1].message]  # type: ignore[union-attr]
    commands = flow.handle(
        ResponseReceived(message={"jsonrpc": "2.0", "id": 1, "result": INPUT_REQUIRED}), 0.001
    )
    assert len(commands) == 3
    flow.handle(HandlerReturned(key="confirm_deploy", answer=ANSWERS["confirm_deploy"]), 0.002)
    commands = flow.handle(
        HandlerReturned(key="change_ticket", answer=ANSWERS["change_ticket"]), 0.003
    )
    sent.append(commands[-1].message)  # type: ignore[union-attr]
    done = flow.handle(
        ResponseReceived(message={"jsonrpc": "2.0", "id": 2, "result": COMPLETE}), 0.004
    )
    assert flow.done and done[-1].result is COMPLETE  # type: ignore[union-attr]
    return sent


EXTRA_ROUNDS = 4
"""Rounds added to the one-round flow to measure what a round costs."""


def one_flow(rounds: int) -> list[object]:
    """Drive the core through a flow of ``rounds`` two-entry rounds; every message sent."""
    counter = iter(range(1, 1_000_000))
    flow = ClientFlow(
        "tools/call", PARAMS, meta=META, handled_kinds=KINDS,
        next_id=counter.__next__, limits=LIMITS,
    )
    sent = [flow.start(0.0)[-1].message]  # type: ignore[union-attr]
    now = 0.0
    for leg in range(1, rounds + 1):
        now += 0.001
        commands = flow.handle(
            ResponseReceived(message={"jsonrpc": "2.0", "id": leg, "result": INPUT_REQUIRED}), now
        )
        assert len(commands) == 3
        flow.handle(HandlerReturned(key="confirm_deploy", answer=ANSWERS["confirm_deploy"]), now)
        commands = flow.handle(
            HandlerReturned(key="change_ticket", answer=ANSWERS["change_ticket"]), now
        )
        sent.append(commands[-1].message)  # type: ignore[union-attr]
    done = flow.handle(
        ResponseReceived(message={"jsonrpc": "2.0", "id": rounds + 1, "result": COMPLETE}), now
    )
    assert flow.done and done[-1].result is COMPLETE  # type: ignore[union-attr]
    return sent


def per_round_us(time_us: Callable[[Callable[[], object]], float], runs: int = 1) -> float:
    """What each further round of a flow costs, in microseconds (see the module doc).

    ``time_us(fn)`` times one run of ``fn``. The two flows are timed in turn, ``runs``
    times each (so both meet the same load), and the fastest run of each is kept: a
    difference of two noisy figures needs each of them at its least disturbed.
    """
    shorter, longer = [], []
    for _ in range(runs):
        shorter.append(time_us(lambda: one_flow(1)))
        longer.append(time_us(lambda: one_flow(1 + EXTRA_ROUNDS)))
    return (min(longer) - min(shorter)) / EXTRA_ROUNDS


_round_started = record_maker(RoundStarted)
_send_request = record_maker(SendRequest)
_input_needed = record_maker(InputNeeded)
_invoke_handler = record_maker(InvokeHandler)
_round_fulfilled = record_maker(RoundFulfilled)
_complete = record_maker(Complete)


def floor_round() -> None:
    """The round's unavoidable object work, with no state machine (see the module doc)."""
    legs = LegBuilder("tools/call", PARAMS, META)
    first = legs.build(1, None, None)
    _round_started(1, 1, False)
    _send_request(1, "tools/call", first)
    ResponseReceived(message={"jsonrpc": "2.0", "id": 1, "result": INPUT_REQUIRED})
    result = structure_input_required(INPUT_REQUIRED)
    _input_needed(1, result)
    assert result.input_requests is not None
    for key, request in result.input_requests.items():
        _invoke_handler(key, request, 300.0)
    wire = {}
    for key, answer in ANSWERS.items():
        HandlerReturned(key=key, answer=answer)
        wire[key] = answer_to_wire("elicitation/create", answer, key=key)
    second = legs.build(2, wire, result.request_state)
    _round_fulfilled(1, tuple(wire))
    _round_started(2, 2, False)
    _send_request(2, "tools/call", second)
    ResponseReceived(message={"jsonrpc": "2.0", "id": 2, "result": COMPLETE})
    _complete(COMPLETE, 2)


def reference_round(messages: list[str]) -> None:
    """The same round's messages, only encoded and decoded."""
    for text in messages:
        json.dumps(json.loads(text))


def _run_us(fn: Callable[[], object], rounds: int) -> float:
    """Microseconds per call of ``fn`` over ``rounds`` calls, the collector paused."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for _ in range(rounds):
            fn()
        return (time.perf_counter_ns() - start) / rounds / 1000.0
    finally:
        if gc_was_enabled:
            gc.enable()


def _median_us(fn: Callable[[], object], rounds: int, runs: int) -> float:
    for _ in range(max(rounds // 10, 100)):  # warm-up
        fn()
    return statistics.median(_run_us(fn, rounds) for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=5000)
    args = parser.parse_args()

    sent = one_round()
    wire = [json.dumps(message) for message in sent]
    wire += [
        json.dumps({"jsonrpc": "2.0", "id": 1, "result": INPUT_REQUIRED}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "result": COMPLETE}),
    ]
    for _ in range(max(args.rounds // 10, 100)):  # warm-up
        one_flow(1 + EXTRA_ROUNDS)
    per_round = per_round_us(lambda fn: _run_us(fn, args.rounds), args.runs)
    core = _median_us(one_round, args.rounds, args.runs)
    floor = _median_us(floor_round, args.rounds, args.runs)
    reference = _median_us(lambda: reference_round(wire), args.rounds, args.runs)
    verdict = "ok" if per_round < TARGET_US else "over target"
    rows = [
        ("core per 2-entry round (each round of a flow)",
         f"{per_round:8.2f} us   target < {TARGET_US:.0f} us: {verdict}"),
        ("whole flow: built, first leg, one round, completion", f"{core:8.2f} us"),
        ("floor: the same round's object work, no flow logic", f"{floor:8.2f} us"),
        ("json: dumps + loads of the same 4 messages", f"{reference:8.2f} us"),
        ("ratio whole flow / json", f"{core / reference:8.2f}x"),
        ("ratio whole flow / floor", f"{core / floor:8.2f}x"),
    ]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")


if __name__ == "__main__":
    main()
