"""``benchmarks/bench_core_round.py`` drives the flows it times the way its doc says."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_core_round as bench


def test_a_flow_of_n_rounds_sends_n_retries_with_the_answers_and_the_state() -> None:
    sent: list[Any] = bench.one_flow(3)
    assert [m["id"] for m in sent] == [1, 2, 3, 4]
    assert "inputResponses" not in sent[0]["params"]
    for retry in sent[1:]:
        params = retry["params"]
        assert set(params["inputResponses"]) == {"confirm_deploy", "change_ticket"}
        assert params["requestState"] == bench.INPUT_REQUIRED["requestState"]


def test_the_one_round_flow_is_the_whole_flow_measured() -> None:
    assert bench.one_flow(1) == bench.one_round()


def test_per_round_is_the_difference_of_flows_spread_over_the_extra_rounds() -> None:
    # A measure that counts the messages a flow sends: 2 + EXTRA_ROUNDS against 2.
    per_round = bench.per_round_us(lambda fn: float(len(fn())))  # type: ignore[arg-type]
    assert per_round == 1.0
