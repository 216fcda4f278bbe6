"""The bounded memo rule the core's memos share."""

from __future__ import annotations

from collections import OrderedDict

from mrtr_core._memo import remember


def test_a_full_memo_drops_its_oldest_entry_first() -> None:
    table: OrderedDict[str, int] = OrderedDict()
    for number, key in enumerate("abcd"):
        remember(table, key, number, 3)
    assert list(table.items()) == [("b", 1), ("c", 2), ("d", 3)]


def test_a_key_remembered_again_takes_its_new_value() -> None:
    table: OrderedDict[str, int] = OrderedDict([("a", 0), ("b", 1)])
    remember(table, "b", 9, 3)
    assert dict(table) == {"a": 0, "b": 9}


def test_a_memo_at_its_bound_but_emptied_meanwhile_still_takes_the_entry() -> None:
    class EmptiedByAnotherThread(OrderedDict[str, int]):
        def __len__(self) -> int:
            return 5  # looks full; the entries it counted were taken meanwhile

    table = EmptiedByAnotherThread()
    remember(table, "a", 1, 5)
    assert dict(table) == {"a": 1}
