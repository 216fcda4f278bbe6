"""``ctx.memo`` and ``ctx.once`` keep what JSON text would give back, built without the text.

- for values of the plain JSON types the direct copy equals ``json.loads(json.dumps(v))``
  value for value and type for type (tuples become lists, ``1``, ``1.0`` and ``True`` stay
  apart), and shares no container with the value it copies;
- values of other kinds (subclasses, non-string keys, NaN and the infinities, sets, cycles,
  very deep nesting, very long integers) take the text round trip: the same result, or the
  same ``TypeError`` naming the memo, as before.
"""

from __future__ import annotations

import enum
import json
import math
import sys
from typing import Any

import pytest
from deep_values import too_deep
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_core.server.context import _json_roundtrip


def by_text(value: Any) -> Any:
    return json.loads(json.dumps(value, allow_nan=False))


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (``1 == 1.0 == True`` is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a == 0.0:
        return math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(values)
def test_the_direct_copy_is_what_json_text_gives_back(value: Any) -> None:
    copied = _json_roundtrip("plan", value)
    assert same(copied, by_text(value))


def test_the_copy_shares_no_container() -> None:
    inner = {"steps": [1, 2]}
    value = {"plan": inner, "pair": (1, 2)}
    copied = _json_roundtrip("plan", value)
    assert copied == {"plan": {"steps": [1, 2]}, "pair": [1, 2]}
    assert copied["plan"] is not inner and copied["plan"]["steps"] is not inner["steps"]


def nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


class Colour(enum.IntEnum):
    RED = 1


class Text(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {1: "a", False: "b"},  # keys JSON writes as strings
        {None: 1, 2.5: 2},
        [Colour.RED],  # subclasses encode as the encoder decides
        {"x": Text("y")},
        10**2000,  # long, yet within the encoder's digit limit
        nested(40),  # deeper than the direct copy goes
    ],
)
def test_other_values_take_the_text_round_trip(value: Any) -> None:
    assert same(_json_roundtrip("plan", value), by_text(value))


@pytest.mark.parametrize(
    "value",
    [float("nan"), [float("inf")], {"x": -math.inf}, {1, 2}, object(), [10**5000], b"bytes"],
    ids=["nan", "inf", "-inf", "set", "object", "too-many-digits", "bytes"],
)
def test_values_json_cannot_hold_raise_as_before(value: Any) -> None:
    with pytest.raises(TypeError, match="value for 'plan' is not JSON-able"):
        _json_roundtrip("plan", value)


def test_a_value_nested_too_deeply_raises_the_same_type_error() -> None:
    with pytest.raises(TypeError, match="value for 'plan' is not JSON-able: nested too deeply"):
        _json_roundtrip("plan", too_deep())


def test_nesting_around_the_recursion_limit_copies_or_raises_the_same_type_error() -> None:
    # Near the limit the text may be written and still be too deep to read back.
    limit = sys.getrecursionlimit()
    for depth in range(limit - 100, limit + 10):
        try:
            copied = _json_roundtrip("plan", nested(depth))
        except TypeError as exc:
            assert "value for 'plan' is not JSON-able: nested too deeply" in str(exc)
        else:
            for _ in range(depth):  # (== would recurse as deep)
                assert type(copied) is list and len(copied) == 1
                copied = copied[0]
            assert copied == "deep"


def test_a_cycle_raises_as_before() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(TypeError, match="value for 'plan' is not JSON-able"):
        _json_roundtrip("plan", cycle)
