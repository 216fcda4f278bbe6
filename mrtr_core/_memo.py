"""Bounded memos: the one eviction rule every memo in the core follows."""

from __future__ import annotations

import contextlib
import marshal
from collections import OrderedDict
from typing import Any, Final, TypeVar

__all__ = ["fingerprint", "remember"]

_MARSHAL_FORMAT: Final = 2  # the newest format without back-references

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


def fingerprint(value: Any, room: int) -> bytes | None:
    """What finds ``value`` in a memo by exact content: its :mod:`marshal` bytes (format 2
    writes no back-references, so the bytes depend on content alone; they tell ``1``,
    ``1.0`` and ``True`` apart, and hold built-in types only, so equal bytes are equal
    values that encode alike). ``None`` when marshal cannot write ``value`` (a subclass of
    a built-in type, say, or nesting too deep) or its bytes are more than ``room``."""
    try:
        raw = marshal.dumps(value, _MARSHAL_FORMAT)
    except ValueError:
        return None
    return raw if len(raw) <= room else None
