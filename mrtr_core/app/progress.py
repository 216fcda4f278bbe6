"""Progress notifications of running handlers (``notifications/progress``).

A handler reports progress through :meth:`App.report_progress`; the app finds the request
it belongs to by its context. Notifications are collected on the step and delivered before
the reply (on HTTP the reply becomes an event stream, digest §3.3). They exist only for a
request that carried a ``progressToken`` (progress.mdx), and ``progress`` must increase with
each one.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import attrs

from mrtr_core.errors import LocalProtocolError
from mrtr_core.wire.models import JsonObject

__all__ = ["ProgressBook"]


@attrs.define
class _Sink:
    token: str | int | None
    notes: list[JsonObject]
    last: float | None = None


class ProgressBook:
    """Running handlers' contexts -> where their progress notifications go.

    Weak on the context, so a step a driver drops does not leak.
    """

    def __init__(self) -> None:
        self._sinks: weakref.WeakKeyDictionary[Any, _Sink] = weakref.WeakKeyDictionary()

    def open(self, ctx: Any, token: str | int | None) -> list[JsonObject]:
        """Start collecting for ``ctx``; returns the list the notifications go to."""
        notes: list[JsonObject] = []
        self._sinks[ctx] = _Sink(token, notes)
        return notes

    def close(self, ctx: Any) -> None:
        """Stop collecting for ``ctx`` (its handler finished)."""
        self._sinks.pop(ctx, None)

    def report(
        self, ctx: Any, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Record one ``notifications/progress`` for the request of ``ctx``.

        Raises:
            LocalProtocolError: ``ctx`` belongs to no running handler.
            ValueError: ``progress`` is not finite or did not increase.
        """
        try:
            sink = self._sinks.get(ctx)
        except TypeError:  # not weak-referenceable (None, a str, a list): no context
            sink = None
        if sink is None:
            raise LocalProtocolError("ctx is not the context of a running handler of this app")
        if isinstance(progress, bool) or not (
            isinstance(progress, int | float) and math.isfinite(progress)
        ):
            raise ValueError("progress must be a finite number")
        if sink.last is not None and progress <= sink.last:
            raise ValueError("progress must increase with every notification")
        sink.last = progress
        if sink.token is None:
            return
        params: JsonObject = {"progressToken": sink.token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        sink.notes.append({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
