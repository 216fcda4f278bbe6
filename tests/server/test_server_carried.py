"""The engine state carried in ``requestState``: written and read back exactly.

- ``Carried.from_payload`` accepts what the straightforward per-entry checks accept and
  refuses (``malformed``) what they refuse, for any payload shape;
- ``payload(...)`` writes what ``Carried(...).to_payload()`` writes, and reading it back
  gives the same ``Carried``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_core.server.carried import Asked, Carried, Recorded, payload
from mrtr_core.state.errors import StateRejectedError
from mrtr_core.wire.models import INPUT_REQUEST_KINDS

SAME = settings(max_examples=400, deadline=None, derandomize=True, database=None)


def reference(data: Any) -> Carried:
    """The per-entry checks, one helper per rule (the oracle)."""

    def mapping(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise TypeError
        return value

    def key(value: Any) -> str:
        if not isinstance(value, str):
            raise TypeError
        return value

    def asked(value: Any) -> Asked:
        if not isinstance(value, list) or len(value) != 3:
            raise TypeError
        kind, digest, schema = value
        if kind not in INPUT_REQUEST_KINDS or not isinstance(digest, str):
            raise ValueError
        if schema is not None and not isinstance(schema, dict):
            raise TypeError
        return Asked(kind, digest, schema)

    def recorded(value: Any) -> Recorded:
        if not isinstance(value, list) or len(value) != 3:
            raise TypeError
        digest, kind, answer = value
        if not isinstance(digest, str) or kind not in INPUT_REQUEST_KINDS or not isinstance(
                answer, dict):
            raise ValueError
        return Recorded(digest, kind, answer)

    try:
        rounds = data["n"]
        if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 0:
            raise ValueError
        q = {key(k): asked(v) for k, v in mapping(data.get("q", {})).items()}
        a = {key(k): recorded(v) for k, v in mapping(data.get("a", {})).items()}
        m = dict(mapping(data.get("m", {})))
        o = dict(mapping(data.get("o", {})))
    except (KeyError, ValueError, TypeError):
        raise StateRejectedError("malformed", "engine state has the wrong shape") from None
    return Carried(rounds, q, a, m, o, data.get("u"))


kinds = st.sampled_from([*sorted(INPUT_REQUEST_KINDS), "nope", 1, None, ["x"]])
anything = st.none() | st.booleans() | st.integers(-2, 3) | st.text(max_size=3) | st.just([])
entries = st.lists(
    st.one_of(kinds, anything, st.dictionaries(st.text(max_size=2), anything, max_size=2)),
    max_size=4,
)
tables = st.dictionaries(st.text(max_size=3) | st.integers(0, 2), entries | anything,
                         max_size=3) | anything
payloads = st.fixed_dictionaries(
    {}, optional={"n": st.integers(-1, 5) | st.booleans() | st.text(max_size=1),
                  "q": tables, "a": tables, "m": tables, "o": tables, "u": anything},
)


def read(reader: Any, data: Any) -> Any:
    try:
        return reader(data)
    except StateRejectedError as exc:
        return ("refused", exc.reason)


@SAME
@given(payloads)
def test_from_payload_decides_what_the_per_entry_checks_decide(data: dict[str, Any]) -> None:
    assert read(Carried.from_payload, data) == read(reference, data)


def test_well_formed_entries_are_read() -> None:
    data = {"n": 2,
            "q": {"ticket": ["elicitation/create", "d1", {"type": "object"}],
                  "roots": ["roots/list", "d2", None]},
            "a": {"confirm": ["d0", "elicitation/create", {"action": "accept"}]},
            "m": {"plan": [1]}, "o": {"charge": 1}, "u": {"mine": True}}
    carried = Carried.from_payload(data)
    assert carried == reference(data)
    assert carried.to_payload() == data


@pytest.mark.parametrize("bad", [
    {"n": 1, "q": {"k": ["elicitation/create", "d"]}},
    {"n": 1, "q": {"k": ["elicitation/create", "d", "schema"]}},
    {"n": 1, "q": {"k": ["nope", "d", None]}},
    {"n": 1, "q": {"k": [["unhashable"], "d", None]}},
    {"n": 1, "a": {"k": ["d", "roots/list", []]}},
    {"n": 1, "a": {"k": [1, "roots/list", {}]}},
    {"n": 1, "a": []},
    {"n": True},
    {"q": {}},
])
def test_malformed_entries_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(StateRejectedError) as info:
        Carried.from_payload(bad)
    assert info.value.reason == "malformed"


def test_payload_writes_what_to_payload_writes() -> None:
    asked = {"ticket": Asked("elicitation/create", "d1", {"type": "object"}),
             "roots": Asked("roots/list", "d2")}
    answers = {"confirm": Recorded("d0", "elicitation/create", {"action": "accept"})}
    for carried in (
        Carried(),
        Carried(1, asked, answers, {"plan": 1}, {"charge": 2}, {"u": 1}),
        Carried(3, {}, answers, {}, {}, None),
    ):
        written = payload(
            carried.rounds,
            {k: [a.kind, a.digest, a.schema] for k, a in carried.asked.items()},
            carried.answers, carried.memo, carried.once, carried.user,
        )
        assert written == carried.to_payload()
        assert list(written) == list(carried.to_payload())  # the same member order
        assert Carried.from_payload(written) == carried
