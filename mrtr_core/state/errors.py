"""Why a ``requestState`` was refused, and the one wire error every refusal becomes."""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

from mrtr_core.errors import INVALID_PARAMS, JsonRpcError

__all__ = [
    "REJECTION_REASONS",
    "STATE_REJECTED_DATA",
    "STATE_REJECTED_MESSAGE",
    "RejectionReason",
    "StateRejectedError",
]

RejectionReason: TypeAlias = Literal[
    "malformed", "bad_mac", "unknown_key", "expired", "binding_mismatch", "replayed", "too_large"
]

REJECTION_REASONS: Final = frozenset(
    {"malformed", "bad_mac", "unknown_key", "expired", "binding_mismatch", "replayed", "too_large"}
)

# The spec names no code (digest §2.5, §5.1); -32602 with this message and data is the
# convention the official Python SDK uses, and the conformance suite expects an error.
STATE_REJECTED_MESSAGE: Final = "Invalid or expired requestState"
STATE_REJECTED_DATA: Final = {"reason": "invalid_request_state"}


class StateRejectedError(JsonRpcError):
    """A ``requestState`` failed verification; the handler must not run.

    On the wire this is always JSON-RPC ``-32602`` "Invalid or expired requestState" with
    ``data: {"reason": "invalid_request_state"}``: :meth:`to_error_object` never shows the
    detailed reason, which is kept here for the server's logs (S9, S10, S11; digest §2.5).

    Attributes:
        reason: One of ``malformed``, ``bad_mac``, ``unknown_key``, ``expired``,
            ``binding_mismatch``, ``replayed``, ``too_large``.
        detail: A short log-only explanation (never sent to the peer).
    """

    def __init__(self, reason: RejectionReason, detail: str = "") -> None:
        if reason not in REJECTION_REASONS:
            raise ValueError(f"unknown rejection reason {reason!r}")
        super().__init__(INVALID_PARAMS, STATE_REJECTED_MESSAGE, dict(STATE_REJECTED_DATA))
        self.reason: RejectionReason = reason
        self.detail = detail

    def __str__(self) -> str:
        suffix = f": {self.detail}" if self.detail else ""
        return f"requestState rejected ({self.reason}){suffix}"
