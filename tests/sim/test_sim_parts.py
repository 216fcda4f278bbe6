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
    Simulation,
)
from mrtr_core.sim.balancer import make_balancer
from mrtr_core.sim.hostile import malformed_answers, tamper
from mrtr_core.sim.prng import stream_key
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


def test_prng_chance_at_the_edges_answers_like_random_and_spends_one_draw() -> None:
    for rate in (0.0, 1.0, -0.5, 1.5, 0.25):
        a, b = Prng(5), Prng(5)
        for _ in range(200):
            assert a.chance(rate) == (b.random() < rate)
        assert a.next_u64() == b.next_u64()


def test_prng_skip_leaves_the_stream_where_drawing_would() -> None:
    for draws in (0, 1, 2, 3, 17):
        a, b = Prng(21), Prng(21)
        for _ in range(draws):
            a.next_u64()
        b.skip(draws)
        assert [a.random() for _ in range(5)] == [b.random() for _ in range(5)]
    a, b = Prng(21), Prng(21)
    a.skip()
    b.uniform(0.0, 9.0)
    assert a.next_u64() == b.next_u64()


def test_prng_bytes_are_the_little_endian_words_cut_to_length() -> None:
    for n in (0, 1, 7, 8, 9, 12, 32, 33):
        a, b = Prng(4), Prng(4)
        words = b"".join(b.next_u64().to_bytes(8, "little") for _ in range((n + 7) // 8))
        assert a.bytes(n) == words[:n]
        assert a.next_u64() == b.next_u64()


def test_stream_keys_are_fnv1a_of_the_whole_name() -> None:
    def fnv1a(name: str) -> int:
        h = 0xCBF29CE484222325
        for byte in name.encode("utf-8"):
            h = ((h ^ byte) * 0x100000001B3) % (1 << 64)
        return h

    names = ["flow-1", "flow-12", "net-12", "jitter-7", "start-0", "flow-", "-", "", "keys",
             "probe-net-3", "a-b-c", "é-ü-1", "flow-x-1"]
    for _ in range(2):  # the second time the prefixes come from the cache
        for name in names:
            assert stream_key(name) == fnv1a(name), name
    assert stream_key(5) == stream_key(5) != stream_key(6)


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


def test_faults_parse_names_the_fault_whose_rate_is_not_a_number() -> None:
    with pytest.raises(ValueError, match=r"^crash needs a rate in \[0, 1\], got 'often'$"):
        Faults.parse("loss=0.1, crash=often")
    with pytest.raises(ValueError, match=r"^drawn: needs an integer seed, got 'x'$"):
        Faults.parse("drawn:x")


def test_faults_parse_refuses_a_fault_named_twice() -> None:
    # Which of the two rates would count is anyone's guess: say so rather than pick one.
    with pytest.raises(ValueError, match=r"^loss is named twice$"):
        Faults.parse("loss=0.1, crash=0.02, loss=0.5")
    with pytest.raises(ValueError, match=r"^hostile_server is named twice$"):
        Faults.parse("hostile-server, hostile_server=0.1")


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


# --- invariant helpers -----------------------------------------------------------------------


def test_operation_marks_are_found_in_every_string_value_at_any_depth() -> None:
    from mrtr_core.sim.workload import _marks, _marks_of

    samples: list[dict[str, object]] = [
        {"op": "op-1", "answers": {"a": {"content": {"note": "op-1:a", "n": 5}}}},
        {"op": "op-1", "list": ["x op-22 y", ["op-3"], {"k": "op-"}], "n": None, "b": True},
        {"op": "op-\u0661", "q": 'quote " op-4', "nl": "op-5\nop-6", "u": "é op-7"},
        {"op": "op-8", "f": 1.5, "i": -3, "e": ""},
    ]
    for payload in samples:
        walked: set[str] = set()
        _marks(payload, walked)
        assert _marks_of(payload) == walked
    assert _marks_of({"op": {1, 2}, "x": "op-9"}) == {"op-9"}  # not JSON: walked


def test_a_legs_binding_is_the_canonical_binding_of_its_message() -> None:
    import json

    from mrtr_core.sim._state import Leg, binding_of

    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "deploy", "arguments": {"z": 1, "a": ["é", 2.5]}}}
    expected = json.dumps(["tools/call", "deploy", {"z": 1, "a": ["é", 2.5]}, "user-0"],
                          sort_keys=True, separators=(",", ":"))
    assert binding_of(message, "user-0") == expected
    leg = Leg(None, message, "user-0", None, 0.0, Prng(1))  # type: ignore[arg-type]
    assert leg.binding == expected
    assert leg.binding is leg.binding  # written once
    resource = {"method": "resources/read", "params": {"uri": "sim://x"}}
    assert binding_of(resource, "u") == json.dumps(["resources/read", "sim://x", {}, "u"],
                                                   sort_keys=True, separators=(",", ":"))


def test_a_long_run_keeps_no_register_of_every_id_sent() -> None:
    # Fresh ids are checked against the ids handed to flows and not sent yet, so what the
    # clients hold stays as small as what is outstanding, not one entry per request ever sent.
    from mrtr_core.sim._run import Run

    run = Run(Simulation(5, flows=400))
    report = run.execute()
    assert report.ok, report.summary()
    assert report.counters.legs > 400
    assert [len(client.handed) for client in run.clients] == [0] * len(run.clients)


def test_the_event_queue_does_not_hold_every_flow_start_up_front() -> None:
    # Each start schedules the next, so the queue holds one start, not one per flow of the
    # campaign (a million-flow run held a million starts from its first event).
    from mrtr_core.sim._run import Run

    run = Run(Simulation(5, flows=500))
    waiting: list[int] = []
    start = run._start

    def recording(index: int) -> None:
        # Every queued event is (time, seq, action, argument); a start's argument is an int.
        waiting.append(sum(type(argument) is int for *_, argument in run.sched._heap))
        start(index)

    run._start = recording  # type: ignore[method-assign]
    assert run.execute().ok
    assert len(waiting) == 500
    assert max(waiting) == 1
