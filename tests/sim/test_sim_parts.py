"""The simulator's building blocks: PRNG, virtual clock, faults, balancers, transcript."""

from __future__ import annotations

import pytest

from mrtr_core.errors import CodecError
from mrtr_core.sim import (
    FAULT_NAMES,
    EventBudgetExceeded,
    Faults,
    NeverSame,
    Prng,
    RandomBalancer,
    RoundRobin,
    Scheduler,
)
from mrtr_core.sim.balancer import make_balancer
from mrtr_core.sim.hostile import malformed_answers, tamper
from mrtr_core.sim.transcript import Transcript, describe_message, short_token
from mrtr_core.wire import structure_input_response

# --- Prng ------------------------------------------------------------------------------------


def test_prng_same_seed_same_sequence() -> None:
    a, b = Prng(42), Prng(42)
    assert [a.next_u64() for _ in range(50)] == [b.next_u64() for _ in range(50)]


def test_prng_known_first_values_are_stable_across_platforms() -> None:
    # SplitMix64 reference values for seed 0 (Vigna's splitmix64.c).
    prng = Prng(0)
    assert prng.next_u64() == 0xE220A8397B1DCDAF
    assert prng.next_u64() == 0x6E789E6AA1B965F4


def test_prng_random_is_in_unit_interval_and_roughly_uniform() -> None:
    prng = Prng(7)
    draws = [prng.random() for _ in range(20_000)]
    assert all(0.0 <= d < 1.0 for d in draws)
    assert 0.48 < sum(draws) / len(draws) < 0.52


def test_prng_fork_is_independent_of_parent_position_and_of_other_names() -> None:
    parent = Prng(3)
    early = parent.fork("flow-1")
    parent.next_u64()
    late = parent.fork("flow-1")
    assert early.next_u64() == late.next_u64()
    assert Prng(3).fork("flow-1").next_u64() != Prng(3).fork("flow-2").next_u64()
    assert Prng(3).fork("flow-1").next_u64() != Prng(4).fork("flow-1").next_u64()


def test_prng_chance_spends_one_draw_whatever_the_rate() -> None:
    a, b = Prng(9), Prng(9)
    a.chance(0.0)
    b.chance(0.7)
    assert a.next_u64() == b.next_u64()


def test_prng_helpers() -> None:
    prng = Prng(11)
    assert len(prng.bytes(12)) == 12
    assert all(0 <= prng.below(5) < 5 for _ in range(100))
    assert prng.choice(["x"]) == "x"
    assert {prng.weighted([("a", 1.0), ("b", 0.0)]) for _ in range(50)} == {"a"}
    assert 2.0 <= prng.uniform(2.0, 3.0) < 3.0
    with pytest.raises(ValueError):
        prng.below(0)


# --- Scheduler -------------------------------------------------------------------------------


def test_scheduler_runs_events_in_time_order_ties_in_scheduling_order() -> None:
    sched = Scheduler()
    seen: list[tuple[float, str]] = []
    for when, name in [(2.0, "c"), (1.0, "a"), (1.0, "b"), (0.5, "first")]:
        sched.at(when, lambda n: seen.append((sched.now, n)), name)
    sched.run(100)
    assert seen == [(0.5, "first"), (1.0, "a"), (1.0, "b"), (2.0, "c")]
    assert sched.events == 4


def test_scheduler_never_schedules_into_the_past() -> None:
    sched = Scheduler(start=10.0)
    seen: list[float] = []
    sched.at(5.0, lambda _: seen.append(sched.now))
    sched.run(10)
    assert seen == [10.0]


def test_scheduler_event_budget_stops_a_run_that_never_settles() -> None:
    sched = Scheduler()

    def again(_: object) -> None:
        sched.after(1.0, again)

    sched.after(0.0, again)
    with pytest.raises(EventBudgetExceeded):
        sched.run(1000)
    assert sched.events == 1000


# --- Faults ------------------------------------------------------------------------------------


def test_faults_parse_forms() -> None:
    assert Faults.parse("none") == Faults.none()
    assert Faults.parse("all") == Faults.all()
    assert Faults.parse("drawn:5") == Faults.drawn(5)
    assert Faults.parse("loss=0.1, crash=0.02") == Faults(loss=0.1, crash=0.02)
    assert Faults.parse("hostile-server") == Faults(hostile_server=1.0)


def test_faults_refuse_unknown_names_and_bad_rates() -> None:
    with pytest.raises(ValueError, match="unknown fault 'meteor'"):
        Faults.parse("meteor=1")
    with pytest.raises(ValueError, match="loss"):
        Faults(loss=1.5)


def test_faults_drawn_from_a_seed_turns_every_fault_on_reproducibly() -> None:
    drawn = Faults.drawn(12)
    assert drawn == Faults.drawn(12)
    assert drawn != Faults.drawn(13)
    assert drawn.active() == FAULT_NAMES


def test_faults_without_and_describe() -> None:
    faults = Faults(loss=0.5, crash=0.25)
    assert faults.without("loss") == Faults(crash=0.25)
    assert faults.describe() == "loss=0.5 crash=0.25"
    assert Faults.none().describe() == "none"


# --- balancers ---------------------------------------------------------------------------------


def test_round_robin_cycles_and_skips_instances_that_are_down() -> None:
    rr = RoundRobin(3, Prng(0))
    assert [rr.pick([0, 1, 2], "op", None) for _ in range(4)] == [0, 1, 2, 0]
    assert [rr.pick([0, 2], "op", None) for _ in range(3)] == [2, 0, 2]
    assert rr.pick([], "op", None) is None


def test_never_same_never_repeats_the_previous_instance_when_another_is_up() -> None:
    balancer = NeverSame(3, Prng(5))
    previous = None
    for _ in range(200):
        pick = balancer.pick([0, 1, 2], "op", previous)
        assert pick != previous
        previous = pick
    assert balancer.pick([1], "op", 1) == 1


def test_random_balancer_is_seeded() -> None:
    a, b = RandomBalancer(3, Prng(8)), RandomBalancer(3, Prng(8))
    assert [a.pick([0, 1, 2], "op", None) for _ in range(30)] == [
        b.pick([0, 1, 2], "op", None) for _ in range(30)]


def test_make_balancer_refuses_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown balancer"):
        make_balancer("sticky", 3, Prng(0))


# --- transcript and hostile helpers -------------------------------------------------------------


def test_describe_message_names_the_parts_that_matter() -> None:
    request = {"jsonrpc": "2.0", "id": "c1-2", "method": "tools/call",
               "params": {"name": "deploy", "inputResponses": {"confirm": {}},
                          "requestState": "v1.k1." + "A" * 40}}
    assert describe_message(request) == (
        "request #c1-2 tools/call deploy answers=[confirm] state=v1.k1.AAAA..AAAAAA(46)")
    assert describe_message({"jsonrpc": "2.0", "id": 3, "error": {"code": -32602,
                                                                  "message": "bad"}}) == (
        "error #3 -32602 'bad'")
    assert describe_message({"id": 4, "result": {"resultType": "input_required",
                                                 "requestState": "s"}}) == (
        "result #4 input_required state='s'")
    assert short_token(None) == "<NoneType>"


def test_transcript_lines_and_filter() -> None:
    transcript = Transcript()
    transcript.add(1.5, "op-1", "user-0", "send")
    transcript.add(2.0, "-", "keys", "rotate")
    transcript.add(2.5, "op-2", "user-1", "send")
    assert transcript.for_ops({"op-1"}) == transcript.lines[:2]
    assert transcript.lines[0] == "    1.500000  op-1      user-0      send"


def test_tamper_always_changes_the_token() -> None:
    prng = Prng(1)
    token = "v1.k1.QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo"
    assert all(tamper(token, prng) != token for _ in range(200))


def test_malformed_answers_never_hold_a_readable_answer() -> None:
    prng = Prng(2)
    for _ in range(100):
        assert not isinstance(malformed_answers([], prng), dict)
        bad = malformed_answers(["confirm"], prng)
        if isinstance(bad, dict):
            with pytest.raises(CodecError):
                structure_input_response("elicitation/create", bad["confirm"])
