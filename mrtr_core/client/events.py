"""Facts fed into a :class:`~mrtr_core.client.flow.ClientFlow` (past tense: they happened)."""

from __future__ import annotations

from typing import Any, TypeAlias

import attrs

from mrtr_core.wire.models import InputResponse, JsonObject

__all__ = [
    "CancelRequested",
    "ClientEvent",
    "HandlerFailed",
    "HandlerReturned",
    "ResponseReceived",
    "TimerFired",
]


@attrs.frozen(kw_only=True)
class ResponseReceived:
    """A JSON-RPC response (result or error object, already parsed from JSON) arrived."""

    message: JsonObject


@attrs.frozen(kw_only=True)
class HandlerReturned:
    """The handler for ``key`` produced its answer."""

    key: str
    answer: InputResponse


@attrs.frozen(kw_only=True)
class HandlerFailed:
    """The handler for ``key`` raised ``error`` (or could not be run)."""

    key: str
    error: BaseException


@attrs.frozen(kw_only=True)
class TimerFired:
    """The adapter's one timer, armed at ``flow.deadline``, went off."""


@attrs.frozen(kw_only=True)
class CancelRequested:
    """The caller gave up on the flow."""

    reason: Any = None


ClientEvent: TypeAlias = (
    ResponseReceived | HandlerReturned | HandlerFailed | TimerFired | CancelRequested
)
