"""A user's own app under the simulator (``AppWorkload``): bugs planted in the user's
handlers are caught, named with the seed, shown in a short transcript, and the same seed
prints the same report byte for byte."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from mrtr_core.app import App
from mrtr_core.server import Context, accepted, content, form, sample
from mrtr_core.sim import (
    AppWorkload,
    Effects,
    Faults,
    Operation,
    Prng,
    Simulation,
    SimulationError,
    campaign,
)
from mrtr_core.sim import invariants as inv
from mrtr_core.state import StateCodec
from mrtr_core.wire.models import JsonObject


def _trips(bug: str = "", cache: dict[str, Any] | None = None) -> Callable[..., App]:
    """An app of a user's own: a tool asking two questions in one round then one more, a
    prompt, a resource with a state-only round, and a single-use payment.

    ``bug``: ``"leak"`` keeps the first operation's dates in ``cache``, shared by every
    instance (a module-level dict); ``"effect_outside_once"`` charges before the
    confirmation, on every round; ``"question_drifts"`` asks a question that changes from
    round to round.
    """
    shared = cache if cache is not None else {}

    def make(codec: StateCodec, effects: Effects) -> App:
        app = App("trips", "1.0", codec=codec)
        rounds = [0]

        @app.tool()
        def plan_trip(ctx: Context, city: str) -> str:
            got = ctx.ask_all({
                "dates": form(f"Dates for {city}?", dates=str),
                "budget": form(f"Budget for {city}?", amount=int),
            })
            rounds[0] += 1
            drift = f" (asked {rounds[0]} times)" if bug == "question_drifts" else ""
            hotel = ctx.ask("hotel", form(f"Hotel in {city}?{drift}", name=str))
            dates = (content(got["dates"]) or {}).get("dates")
            if bug == "leak":
                dates = shared.setdefault("dates", dates)
            return f"{city}: {dates}, {(content(hotel) or {}).get('name')}"

        @app.prompt()
        def letter(ctx: Context, to: str) -> Any:
            draft = ctx.ask("draft", sample(f"Write to {to}", 100))
            text = draft.content.get("text") if isinstance(draft.content, dict) else None
            return [f"Dear {to}, {text}"]

        @app.resource("trips://report/{rid}")
        def report(ctx: Context, uri: str, rid: str) -> str:
            if ctx.round == 1:
                return ctx.input_required(state={"rid": rid})  # type: ignore[return-value]
            publish = ctx.ask("publish", form(f"Publish {rid}?", ok=bool))
            return json.dumps({"rid": rid, "published": accepted(publish)})

        @app.tool(single_use=True)
        def pay(ctx: Context, amount: int) -> str:
            if bug == "effect_outside_once":
                effects.ran("charge")
            confirm = ctx.ask("confirm", form(f"Pay {amount}?", ok=bool))
            if not accepted(confirm):
                return "not paid"
            if bug != "effect_outside_once":
                ctx.once("charge", lambda: effects.ran("charge"))
            return f"paid {amount}"

        return app

    return make


def _operations(index: int, prng: Prng) -> Operation:
    op = f"op-{index}"
    kind = prng.choice(["plan", "letter", "report", "pay"])
    if kind == "plan":
        return Operation(op=op, method="tools/call",
                         params={"name": "plan_trip", "arguments": {"city": f"city{index}"}})
    if kind == "letter":
        return Operation(op=op, method="prompts/get",
                         params={"name": "letter", "arguments": {"to": f"p{index}"}})
    if kind == "report":
        return Operation(op=op, method="resources/read",
                         params={"uri": f"trips://report/r{index}"})
    return Operation(op=op, method="tools/call", single_use=True,
                     params={"name": "pay", "arguments": {"amount": index}})


def _workload(bug: str = "", **changes: Any) -> AppWorkload:
    return AppWorkload(app_factory=_trips(bug), operations=_operations, pass_effects=True,
                       **changes)


def _ops_in(transcript: str | None) -> set[str]:
    assert transcript is not None
    return {line.split()[1] for line in transcript.splitlines()} - {"-"}


def test_a_correct_app_holds_every_invariant_under_every_fault() -> None:
    report = campaign(7, flows=300, faults="all", workload=_workload())
    assert report.ok, report.summary()
    assert report.completed > 200
    assert report.counters.effects > 20  # the payments' charges were counted, once each


def test_a_side_effect_outside_once_in_a_single_use_tool_is_caught() -> None:
    report = campaign(7, flows=300, faults="all", workload=_workload("effect_outside_once"))
    assert not report.ok
    assert {v.invariant for v in report.violations} == {inv.SINGLE_USE}
    text = report.summary()
    assert "(seed 7)" in text and "ran side effect 'charge'" in text
    assert len(_ops_in(report.transcript)) == 1
    # The second round alone charges again: no fault is needed to show it.
    assert report.reproduce is not None and "Faults.parse('none')" in report.reproduce
    assert " net " not in (report.transcript or "")
    assert text == campaign(7, flows=300, faults="all",
                            workload=_workload("effect_outside_once")).summary()


def test_an_answer_leaking_into_another_operations_result_is_caught() -> None:
    cache: dict[str, Any] = {}
    workload = AppWorkload(app_factory=_trips("leak", cache), operations=_operations,
                           pass_effects=True)
    report = Simulation(8, flows=60, workload=workload).run()
    assert not report.ok
    assert {v.invariant for v in report.violations} == {inv.ISOLATION}
    assert "result holds answers given to op-" in report.violations[0].detail
    assert "shortest transcript:" in report.summary()


def test_the_leak_check_stays_off_with_answers_of_the_users_own() -> None:
    def answer(operation: Operation, key: str, request: Any) -> Any:
        from mrtr_core.sim import honest_answer

        return honest_answer("op-0", key, request)  # every answer marked as op-0's

    assert Simulation(8, flows=40, workload=_workload(answer_fn=answer)).run().ok
    assert Simulation(8, flows=40, workload=_workload(check_leaks=False)).run().ok


def test_a_question_that_changes_between_rounds_is_caught() -> None:
    report = Simulation(9, flows=40, workload=_workload("question_drifts")).run()
    assert not report.ok
    assert inv.LIVENESS in {v.invariant for v in report.violations}
    assert "RoundLimitError" in report.summary()


def test_a_check_that_raises_is_a_violation_with_seed_and_transcript() -> None:
    def check(operation: Operation, result: JsonObject, answers: Any) -> str:
        return "" if result["content"][0]["text"] else "empty"  # prompts have no content

    report = Simulation(10, flows=40, workload=_workload(check_fn=check)).run()
    assert not report.ok
    assert {v.invariant for v in report.violations} == {inv.ISOLATION}
    assert "the workload's check raised KeyError('content')" in report.violations[0].detail
    assert "(seed 10)" in report.summary() and report.transcript


def test_an_answer_that_raises_fails_its_flow_with_seed_and_transcript() -> None:
    # A client whose input handler raises fails its flow with HandlerFailedError.
    def answer(operation: Operation, key: str, request: Any) -> Any:
        if key == "hotel":
            raise LookupError(f"no hotel for {operation.op}")
        from mrtr_core.sim import honest_answer

        return honest_answer(operation.op, key, request)

    report = Simulation(15, flows=20, workload=_workload(answer_fn=answer)).run()
    assert not report.ok
    assert {v.invariant for v in report.violations} == {inv.LIVENESS}
    assert "LookupError('no hotel for op-" in report.violations[0].detail
    assert "(seed 15)" in report.summary() and report.transcript
    assert "the workload's answer raised LookupError" in report.transcript


def test_two_running_operations_with_one_id_are_refused_by_name() -> None:
    # Their side effects would be counted as one operation's, twice: a single-use
    # violation of an app that has no bug.
    def operations(index: int, prng: Prng) -> Operation:
        return Operation(op="pay", method="tools/call", single_use=True,
                         params={"name": "pay", "arguments": {"amount": index}})

    workload = AppWorkload(app_factory=_trips(), operations=operations, pass_effects=True)
    with pytest.raises(ValueError, match="operations gave flow 1 the id 'pay' of flow 0, "
                                         "which still runs"):
        Simulation(16, flows=2, workload=workload).run()


def test_a_factory_that_returns_no_app_is_refused_by_name() -> None:
    def no_app(codec: StateCodec) -> Any:
        return None

    workload = AppWorkload(app_factory=no_app, operations=_operations)
    with pytest.raises(SimulationError, match="app_factory returned NoneType, not an App"
                       ) as caught:
        Simulation(1, flows=1, workload=workload).run()
    assert isinstance(caught.value.__cause__, TypeError)


def test_operations_that_raise_stop_the_run_with_its_seed_and_flow() -> None:
    def operations(index: int, prng: Prng) -> Operation:
        if index == 7:
            raise KeyError("no seventh trip")
        return _operations(index, prng)

    workload = AppWorkload(app_factory=_trips(), operations=operations, pass_effects=True)
    with pytest.raises(SimulationError) as caught:
        Simulation(21, flows=10, workload=workload).run()
    error = caught.value
    assert (error.seed, error.flow, error.op) == (21, 7, None)
    assert str(error) == (
        "the run with seed 21 stopped: the workload's operations raised "
        "KeyError('no seventh trip') for flow 7 (the same seed replays it)"
    )
    assert isinstance(error.__cause__, KeyError)


def test_operations_that_raise_for_a_swap_probe_name_the_probing_flow() -> None:
    # A hostile client's swap probe asks the workload again for another flow's operation:
    # under this seed, op-3's probe is the first to ask for one twice (flow 1's).
    asked: set[int] = set()

    def operations(index: int, prng: Prng) -> Operation:
        if index in asked:
            raise RuntimeError(f"flow {index} asked twice")
        asked.add(index)
        return _operations(index, prng)

    workload = AppWorkload(app_factory=_trips(), operations=operations, pass_effects=True)
    with pytest.raises(SimulationError) as caught:
        Simulation(28, flows=30, faults=Faults(hostile_client=1.0), workload=workload).run()
    error = caught.value
    assert (error.seed, error.flow, error.op) == (28, 1, "op-3")
    assert "RuntimeError('flow 1 asked twice') for flow 1, asked by a swap probe of op-3" in (
        str(error))
    assert isinstance(error.__cause__, RuntimeError)


@pytest.mark.parametrize(
    ("faults", "where"),
    [(Faults(crash=0.2), "server-0 (restart)"), (Faults(rotate=0.05), "server-0 (key ring add)")],
)
def test_an_app_factory_that_raises_names_the_instance_and_the_seed(
    faults: Faults, where: str
) -> None:
    built: list[int] = []
    trips = _trips()

    def factory(codec: StateCodec, effects: Effects) -> App:
        built.append(1)
        if len(built) > 3:  # the three instances start; a later build fails
            raise OSError("out of memory")
        return trips(codec, effects)

    workload = AppWorkload(app_factory=factory, operations=_operations, pass_effects=True)
    with pytest.raises(SimulationError) as caught:
        Simulation(23, flows=200, faults=faults, workload=workload).run()
    assert str(caught.value) == (
        "the run with seed 23 stopped: the workload's app_factory raised "
        f"OSError('out of memory') for {where} (the same seed replays it)"
    )
    assert caught.value.flow is None and caught.value.op is None
    assert isinstance(caught.value.__cause__, OSError)


def test_effects_ran_outside_a_handler_is_refused() -> None:
    with pytest.raises(RuntimeError, match="'charge' recorded while no handler runs"):
        Effects().ran("charge")


def test_refused_probes_are_counted_once_however_often_their_answers_arrive() -> None:
    report = Simulation(11, flows=400, faults=Faults(hostile_client=0.5, duplicate=0.5),
                        workload=_workload()).run()
    assert report.ok, report.summary()
    assert report.counters.duplicated > 0
    assert 0 < report.counters.probes_refused <= report.counters.probes


def test_probes_ask_the_workload_only_for_operations_of_the_run() -> None:
    # A workload of a fixed list of operations knows only the indexes of the run's flows:
    # a swap probe takes the request of another of them.
    cities = [f"city{index}" for index in range(30)]
    asked: list[int] = []

    def operations(index: int, prng: Prng) -> Operation:
        asked.append(index)
        return Operation(op=f"op-{index}", method="tools/call",
                         params={"name": "plan_trip", "arguments": {"city": cities[index]}})

    workload = AppWorkload(app_factory=_trips(), operations=operations, pass_effects=True)
    report = Simulation(14, flows=len(cities), faults=Faults(hostile_client=1.0),
                        workload=workload).run()
    assert report.ok, report.summary()
    assert report.counters.probes_refused > 0
    assert max(asked) < len(cities)


def _async_app(codec: StateCodec, effects: Effects) -> App:
    """The same kinds of handler as ``_trips``, each ``async def``, with ``amemo``/``aonce``."""
    app = App("async-trips", "1.0", codec=codec)

    async def plan() -> dict[str, int]:
        return {"nights": 3}

    async def charge() -> int:
        return effects.ran("charge")

    @app.tool(single_use=True)
    async def pay(ctx: Context, amount: int) -> str:
        nights = (await ctx.amemo("plan", plan))["nights"]
        confirm = ctx.ask("confirm", form(f"Pay {amount} for {nights} nights?", note=str))
        charged = await ctx.aonce("charge", charge)
        return f"paid {amount}: {(content(confirm) or {}).get('note')} ({charged})"

    @app.prompt()
    async def letter(ctx: Context, to: str) -> Any:
        draft = ctx.ask("draft", sample(f"Write to {to}", 100))
        text = draft.content.get("text") if isinstance(draft.content, dict) else None
        return [f"Dear {to}, {text}"]

    @app.resource("trips://report/{rid}")
    async def report(ctx: Context, uri: str, rid: str) -> str:
        publish = ctx.ask("publish", form(f"Publish {rid}?", note=str))
        return json.dumps({"rid": rid, "note": (content(publish) or {}).get("note")})

    return app


def _async_operations(index: int, prng: Prng) -> Operation:
    op = f"op-{index}"
    kind = ("pay", "letter", "report")[index % 3]
    if kind == "letter":
        return Operation(op=op, method="prompts/get",
                         params={"name": "letter", "arguments": {"to": op}})
    if kind == "report":
        return Operation(op=op, method="resources/read", params={"uri": f"trips://report/{op}"})
    return Operation(op=op, method="tools/call", single_use=True,
                     params={"name": "pay", "arguments": {"amount": index}})


def _echoes_its_answer(operation: Operation, result: JsonObject, answers: Any) -> str:
    return "" if f"{operation.op}:" in json.dumps(result) else "the answer is not in the result"


def test_async_handlers_of_every_kind_run_under_the_simulator() -> None:
    workload = AppWorkload(app_factory=_async_app, operations=_async_operations,
                           check_fn=_echoes_its_answer, pass_effects=True)
    report = Simulation(12, flows=60, workload=workload).run()
    assert report.ok, report.summary()
    assert report.outcomes == {"completed": 60}
    assert report.counters.effects == 20  # every payment charged, once


def test_an_async_handler_that_suspends_fails_its_flow_saying_why() -> None:
    def make(codec: StateCodec) -> App:
        app = App("suspends", "1.0", codec=codec)

        @app.tool()
        async def wait(ctx: Context) -> str:
            await asyncio.sleep(0)
            return "waited"

        return app

    workload = AppWorkload(app_factory=make, operations=lambda index, prng: Operation(
        op=f"op-{index}", method="tools/call", params={"name": "wait", "arguments": {}}))
    report = Simulation(13, flows=1, workload=workload, shrink=False).run()
    assert [v.invariant for v in report.violations] == [inv.LIVENESS]
    assert "an async handler suspended on an event loop" in report.violations[0].detail
