"""Values nested deeper than any interpreter here recurses, for the tests of every part."""

from __future__ import annotations

import functools
from typing import Any

TOO_DEEP_LEVELS = 100_000  # past any interpreter's recursion limit (and marshal's)


def nested(levels: int) -> Any:
    """``"leaf"`` inside ``levels`` nested lists (built without recursion)."""
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


@functools.cache
def too_deep() -> Any:
    """``"leaf"`` inside :data:`TOO_DEEP_LEVELS` nested lists, JSON no encoder here can write
    (one value, built once and shared: never change it)."""
    return nested(TOO_DEEP_LEVELS)


@functools.cache
def too_deep_key() -> Any:
    """``"leaf"`` inside :data:`TOO_DEEP_LEVELS` nested tuples: a dict key ``repr`` cannot
    write (one value, built once and shared)."""
    value: Any = "leaf"
    for _ in range(TOO_DEEP_LEVELS):
        value = (value,)
    return value
