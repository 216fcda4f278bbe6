"""Bounded memos: the one eviction rule every memo in the core follows."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from typing import TypeVar

__all__ = ["remember"]

K = TypeVar("K")
V = TypeVar("V")


def remember(table: OrderedDict[K, V], key: K, value: V, most: int) -> None:
    """``table[key] = value``, the oldest entry going first when ``table`` holds ``most``.

    An ``OrderedDict`` drops its oldest entry in O(1); a plain dict would scan the slots its
    deleted front entries left behind, on every eviction. Threads may share a memo: an entry
    another thread evicted meanwhile is simply gone.
    """
    if len(table) >= most:
        with contextlib.suppress(KeyError):
            table.popitem(last=False)
    table[key] = value
