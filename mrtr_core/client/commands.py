"""Orders emitted by a :class:`~mrtr_core.client.flow.ClientFlow` (imperatives: do this).

Notices (``RoundStarted``, ``InputNeeded``, ``RoundFulfilled``) are informational commands
for progress displays; an adapter may ignore them.
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from mrtr_core.errors import MrtrError
from mrtr_core.wire.models import InputRequest, InputRequiredResult, JsonObject

__all__ = [
    "AwaitAnswers",
    "CancelHandlers",
    "ClientCommand",
    "Complete",
    "Fail",
    "InputNeeded",
    "InvokeHandler",
    "RequestId",
    "RoundFulfilled",
    "RoundStarted",
    "SendRequest",
]

RequestId: TypeAlias = str | int


@attrs.frozen(kw_only=True)
class SendRequest:
    """Send this JSON-RPC request (``message`` is the whole ready-to-encode object)."""

    request_id: RequestId
    method: str
    message: JsonObject


@attrs.frozen(kw_only=True)
class InvokeHandler:
    """Run the user's handler for one ``inputRequests`` entry.

    ``deadline`` is when the handler's own time limit (a person thinking) ends, or ``None``.
    """

    key: str
    request: InputRequest
    deadline: float | None


@attrs.frozen(kw_only=True)
class CancelHandlers:
    """Cancel the still-running handlers for these keys; their outcomes are ignored."""

    keys: tuple[str, ...]


@attrs.frozen(kw_only=True)
class AwaitAnswers:
    """Manual mode: hand this ``input_required`` result to the caller, who answers later."""

    round: int
    result: InputRequiredResult


@attrs.frozen(kw_only=True)
class Complete:
    """The flow finished: ``result`` is the final result object, whole, unknown fields kept."""

    result: JsonObject
    rounds: int


@attrs.frozen(kw_only=True)
class Fail:
    """The flow failed with a typed error (sticky: nothing follows)."""

    error: MrtrError


@attrs.frozen(kw_only=True)
class RoundStarted:
    """Notice: round ``round`` (1-based) was sent as request ``request_id``."""

    round: int
    request_id: RequestId
    state_only: bool


@attrs.frozen(kw_only=True)
class InputNeeded:
    """Notice: the server answered round ``round`` with ``input_required``."""

    round: int
    result: InputRequiredResult


@attrs.frozen(kw_only=True)
class RoundFulfilled:
    """Notice: every input of round ``round`` was answered."""

    round: int
    keys: tuple[str, ...]


ClientCommand: TypeAlias = (
    SendRequest
    | InvokeHandler
    | CancelHandlers
    | AwaitAnswers
    | Complete
    | Fail
    | RoundStarted
    | InputNeeded
    | RoundFulfilled
)
