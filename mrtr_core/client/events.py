"""Facts fed into a :class:`~mrtr_core.client.flow.ClientFlow` (past tense: they happened).

An adapter builds one per response and per handler outcome, so the constructors are
hand-written to write the slots directly (:func:`~mrtr_core.wire.records.slot_setters`);
they take the same keyword arguments attrs would generate, and the classes are attrs'
frozen classes in every other respect (equality, hashing, ``repr``, immutability).
"""

from __future__ import annotations

from typing import Any, TypeAlias

import attrs

from mrtr_core.wire.models import InputResponse, JsonObject
from mrtr_core.wire.records import slot_setters

__all__ = [
    "CancelRequested",
    "ClientEvent",
    "HandlerFailed",
    "HandlerReturned",
    "ResponseReceived",
    "TimerFired",
]


@attrs.frozen(kw_only=True, init=False)
class ResponseReceived:
    """A JSON-RPC response (result or error object, already parsed from JSON) arrived."""

    message: JsonObject

    def __init__(self, *, message: JsonObject) -> None:
        _set_message(self, message)


(_set_message,) = slot_setters(ResponseReceived, "message")


@attrs.frozen(kw_only=True, init=False)
class HandlerReturned:
    """The handler for ``key`` produced its answer."""

    key: str
    answer: InputResponse

    def __init__(self, *, key: str, answer: InputResponse) -> None:
        _set_returned_key(self, key)
        _set_answer(self, answer)


_set_returned_key, _set_answer = slot_setters(HandlerReturned, "key", "answer")


@attrs.frozen(kw_only=True, init=False)
class HandlerFailed:
    """The handler for ``key`` raised ``error`` (or could not be run)."""

    key: str
    error: BaseException

    def __init__(self, *, key: str, error: BaseException) -> None:
        _set_failed_key(self, key)
        _set_error(self, error)


_set_failed_key, _set_error = slot_setters(HandlerFailed, "key", "error")


@attrs.frozen(kw_only=True, init=False)
class TimerFired:
    """The adapter's one timer, armed at ``flow.deadline``, went off."""

    # No fields: object.__init__ (no Python frame) takes no arguments, as attrs' would.


@attrs.frozen(kw_only=True, init=False)
class CancelRequested:
    """The caller gave up on the flow."""

    reason: Any = None

    def __init__(self, *, reason: Any = None) -> None:
        _set_reason(self, reason)


(_set_reason,) = slot_setters(CancelRequested, "reason")


ClientEvent: TypeAlias = (
    ResponseReceived | HandlerReturned | HandlerFailed | TimerFired | CancelRequested
)
