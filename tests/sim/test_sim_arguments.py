"""The simulator refuses a bad argument where it is given, naming it.

A negative or nan span would schedule events in the past or never, a bool rate would read as
"always", a ``select`` index past ``flows`` would run a flow the full run never has, and a
short or all-zero ``mix`` would silently drop kinds of operation.
"""

from __future__ import annotations

from typing import Any

import pytest

from mrtr_core import jsonrpc
from mrtr_core.app import App
from mrtr_core.sim import AppWorkload, Faults, Operation, Simulation, SimulationError, Timing
from mrtr_core.sim.workload import ReferenceWorkload

NAN = float("nan")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"latency": (-0.1, 0.2)}, "latency must be a \\(low, high\\) range of seconds"),
        ({"think": (2.0, 1.0)}, "think must be a \\(low, high\\) range"),
        ({"service": (NAN, 0.1)}, "service must be a \\(low, high\\) range"),
        ({"downtime": (0.1, float("inf"))}, "downtime must be a \\(low, high\\) range"),
        ({"long_delay": (0.5,)}, "long_delay must be a \\(low, high\\) range"),
        ({"interarrival": 0}, "interarrival must be a positive number of seconds"),
        ({"interarrival": NAN}, "interarrival must be a positive number of seconds"),
        ({"state_ttl": -1.0}, "state_ttl must be a positive number of seconds"),
        ({"state_skew": NAN}, "state_skew must be a number of seconds >= 0"),
    ],
)
def test_timing_refuses_bad_spans_and_intervals(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Timing(**kwargs)


def test_timing_refuses_limits_of_the_wrong_type() -> None:
    with pytest.raises(TypeError, match="limits must be a ClientLimits, not dict"):
        Timing(limits={"max_rounds": 3})  # type: ignore[arg-type]


def test_timing_keeps_good_values() -> None:
    timing = Timing(reorder_hold=(0.0, 0.0), state_skew=0.0, interarrival=1)
    assert timing.reorder_hold == (0.0, 0.0) and timing.interarrival == 1


@pytest.mark.parametrize("rate", [True, "0.1", None, NAN, -0.1, 1.5])
def test_faults_refuse_what_is_not_a_rate(rate: Any) -> None:
    with pytest.raises(ValueError, match="loss must be a rate in \\[0, 1\\]"):
        Faults(loss=rate)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"seed": "7"}, TypeError, "seed must be an integer, not str"),
        ({"seed": 7.0}, TypeError, "seed must be an integer, not float"),
        ({"flows": -1}, ValueError, "flows must be an integer from 0 to 10000000, got -1"),
        ({"flows": 2.5}, ValueError, "flows must be an integer from 0 to 10000000"),
        ({"instances": 0}, ValueError, "instances must be an integer from 1 to 1000, got 0"),
        ({"clients": "2"}, ValueError, "clients must be an integer from 1 to 100000"),
        # Each instance builds an app and each client keeps its ids: a mistyped count would
        # exhaust memory before the first event; a flow count runs for days.
        ({"flows": 10_000_001}, ValueError,
         "flows must be an integer from 0 to 10000000, got 10000001"),
        ({"instances": 10 ** 9}, ValueError,
         "instances must be an integer from 1 to 1000, got 1000000000"),
        ({"clients": 100_001}, ValueError,
         "clients must be an integer from 1 to 100000, got 100001"),
        ({"max_events": 0}, ValueError, "max_events must be an integer >= 1, got 0"),
        ({"select": [3, 10]}, ValueError, "select holds 10, not a flow index in \\[0, 10\\)"),
        ({"select": [-1]}, ValueError, "select holds -1"),
        ({"select": [1, 1]}, ValueError, "select must not hold a flow index twice"),
        ({"faults": "all"}, TypeError, "faults must be Faults or None, not str"),
        ({"timing": {}}, TypeError, "timing must be a Timing or None, not dict"),
    ],
)
def test_simulation_refuses_bad_arguments(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    args: dict[str, Any] = {"seed": 1, "flows": 10, **kwargs}
    with pytest.raises(error, match=message):
        Simulation(args.pop("seed"), **args)


def test_simulation_runs_a_selection_within_its_flows() -> None:
    report = Simulation(1, flows=10, select=[9, 0], shrink=False).run()
    assert report.selected == (9, 0) and not report.violations


@pytest.mark.parametrize("mix", [(1.0, 1.0), (0.5, -0.1, 0.6), (0, 0, 0), (NAN, 1, 1),
                                 (True, 1, 1), ("a", "b", "c")])
def test_reference_workload_refuses_a_bad_mix(mix: Any) -> None:
    with pytest.raises(ValueError, match="mix must be 3 finite weights >= 0, not all 0"):
        ReferenceWorkload(mix=mix)


def test_reference_workload_keeps_a_good_mix() -> None:
    assert ReferenceWorkload(mix=[0, 1, 0]).mix == (0, 1, 0)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        # A transcript line is split on whitespace to find its operation: "buy 4" would
        # leave the shortest transcript empty.
        ({"op": "buy 4"}, ValueError, "op must be a non-empty string without whitespace"),
        ({"op": ""}, ValueError, "op must be a non-empty string without whitespace"),
        ({"op": 4}, ValueError, "op must be a non-empty string without whitespace, got 4"),
        ({"method": "tools/cal"}, ValueError,
         "method must be tools/call, prompts/get or resources/read, got 'tools/cal'"),
        ({"params": {"arguments": {}}}, ValueError,
         "params of a tools/call operation must name its target as a string"),
        ({"method": "resources/read"}, ValueError,
         "params of a resources/read operation must name its target as a string in 'uri'"),
        ({"params": [("name", "deploy")]}, TypeError, "params must be a dict, not list"),
        ({"single_use": "yes"}, TypeError, "single_use must be True or False, not str"),
    ],
)
def test_operation_refuses_what_no_flow_can_run(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    args: dict[str, Any] = {"op": "op-1", "method": "tools/call",
                            "params": {"name": "deploy", "arguments": {}}, **kwargs}
    with pytest.raises(error, match=message):
        Operation(**args)


def test_operations_that_return_no_operation_are_refused_by_name() -> None:
    workload = AppWorkload(app_factory=lambda codec: App("x", "1.0", codec=codec),
                           operations=lambda index, prng: {"op": f"op-{index}"})
    with pytest.raises(SimulationError, match="operations returned dict, not an Operation"
                       ) as caught:
        Simulation(1, flows=1, workload=workload).run()
    assert isinstance(caught.value.__cause__, TypeError)


class _Opaque:
    """No JSON value: what a caller passing an object of its own gives."""


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        # A set's order follows the process's string hashes: the violation text it shows
        # would differ from one run of the same seed to the next.
        ({"tags": {"a", "b"}}, TypeError,
         r"operation 'op-1': params\.arguments\.tags is a set, not a JSON value"),
        ({"n": NAN}, ValueError,
         r"operation 'op-1': params\.arguments\.n is nan, not a JSON number"),
        ({"n": [1, float("-inf")]}, ValueError,
         r"params\.arguments\.n\[1\] is -inf, not a JSON number"),
        ({"by": {1: "a"}}, TypeError,
         r"params\.arguments\.by has the key 1 \(int\), not a string"),
        ({"it": _Opaque()}, TypeError, r"params\.arguments\.it is a _Opaque, not a JSON value"),
        ({"odd key": {"x": b"raw"}}, TypeError,
         r"params\.arguments\['odd key'\]\.x is a bytes, not a JSON value"),
        ({"big": 10 ** 5000}, ValueError, r"params\.arguments\.big is an integer too long"),
        # The simulated server receives params as they are, not as JSON text: a tuple
        # reaches it as a tuple, which no schema's array accepts (a wire client sends a list).
        ({"tags": ("a", "b")}, TypeError,
         r"params\.arguments\.tags is a tuple, not a JSON value \(write a list\)"),
    ],
)
def test_operation_refuses_params_that_are_not_json_naming_where(
    arguments: dict[Any, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        Operation(op="op-1", method="tools/call",
                  params={"name": "deploy", "arguments": arguments})


def test_operation_refuses_params_that_hold_themselves() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match=r"params\.arguments\.loop(\[0\])+ is nested deeper"):
        Operation(op="op-1", method="tools/call",
                  params={"name": "deploy", "arguments": {"loop": loop}})


def test_operation_keeps_params_that_are_json() -> None:
    arguments = {"s": "é\u2028", "n": [1, -0.0, 2 ** 70, True, None], "t": ["a", 1],
                 "o": {"": {"deep": [[{}]]}}}
    operation = Operation(op="op-1", method="tools/call",
                          params={"name": "deploy", "arguments": arguments})
    assert operation.params["arguments"] is arguments


def _nested(levels: int) -> list[Any]:
    """A list nesting ``levels`` lists (itself included)."""
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_operation_refuses_params_nested_deeper_than_a_peer_decodes_their_request() -> None:
    # The params sit one level inside their request, which a peer decodes 64 levels deep:
    # params of 64 levels make a request of 65, refused before any server reads it.
    def params(levels: int) -> dict[str, Any]:  # params, arguments, then the lists
        return {"name": "deploy", "arguments": {"deep": _nested(levels - 2)}}

    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params(63)}
    Operation(op="op-1", method="tools/call", params=params(63))
    assert jsonrpc.decode(jsonrpc.encode(request)) == request
    with pytest.raises(ValueError, match=r"operation 'op-1': params\.arguments\.deep(\[0\])+ "
                                         r"is nested deeper than 63 levels"):
        Operation(op="op-1", method="tools/call", params=params(64))
