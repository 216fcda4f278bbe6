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
            ValueError: ``progress`` is not finite or did not increase, ``total`` is not
                a finite number or ``None``, or ``message`` is not a string or ``None``.
        """
        try:
            sink = self._sinks.get(ctx)
        except TypeError:  # not weak-referenceable (None, a str, a list): no context
            sink = None
        if sink is None:
            raise LocalProtocolError("ctx is not the context of a running handler of this app")
        if not _finite(progress):
            raise ValueError("progress must be a finite number")
        # progress.mdx: total is a number, message a string. Checked here, where the handler
        # reports: NaN or bytes cannot be written at all (RFC 8259 §6), and a transport
        # would only find out after the handler is done.
        if total is not None and not _finite(total):
            raise ValueError(f"total must be a finite number or None, not {total!r}")
        if message is not None and not isinstance(message, str):
            raise ValueError(f"message must be a string or None, not {type(message).__name__}")
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


def _finite(value: Any) -> bool:
    """Whether ``value`` is a finite JSON number (a ``bool`` is not one)."""
    if isinstance(value, bool):
        return False
    # An int is always finite (math.isfinite would overflow on one beyond a float's range).
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
