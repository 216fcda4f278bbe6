"""Reading JSON that a person typed or wrote to a file: every way it can be unreadable is
one ``ValueError`` with a message that says what is wrong, never a traceback."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["JsonInputError", "read_json"]


class JsonInputError(ValueError):
    """The text is not JSON this program can read (the message says why)."""


def read_json(
    text: str, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None
) -> Any:
    """``json.loads(text)``, with each failure of the text itself a :class:`JsonInputError`:
    not JSON, a number with more digits than Python reads into an int
    (``sys.get_int_max_str_digits()``), or nesting deeper than the interpreter recurses.
    Exceptions raised by ``object_pairs_hook`` pass through unchanged."""
    try:
        return json.loads(text, object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as exc:
        raise JsonInputError(str(exc)) from None
    except RecursionError:
        raise JsonInputError("nested too deeply") from None
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            raise  # from the hook
        limit = sys.get_int_max_str_digits()
        raise JsonInputError(f"a number has more than {limit} digits") from None
