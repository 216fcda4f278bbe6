"""Bounds on everything a client controls in a server-side MRTR operation."""

from __future__ import annotations

import attrs

__all__ = ["ServerLimits"]


def _positive(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be at least 1, got {value!r}")


def _positive_or_none(_: object, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{attribute.name} must be at least 1 or None, got {value!r}")


@attrs.frozen(kw_only=True)
class ServerLimits:
    """Limits the engine enforces on every round.

    The spec sets no round or size limit (digest §2.6); a malicious client can otherwise make
    a server re-ask forever or open huge states. Every limit here is checked before the
    handler runs (for what the client sends) or before anything is sealed (for what the
    handler produces).

    Attributes:
        max_input_requests: Input requests one ``input_required`` result may carry.
        max_rounds: ``input_required`` results one operation may produce; asking once more
            fails the request.
        max_state_bytes: Longest ``requestState`` accepted or produced (checked before any
            cryptographic work). ``None`` uses the codec's ``max_bytes``.
        max_input_responses: ``inputResponses`` entries accepted in one request.
        max_input_responses_bytes: Size of ``inputResponses`` as compact JSON.
    """

    max_input_requests: int = attrs.field(default=16, validator=_positive)
    max_rounds: int = attrs.field(default=16, validator=_positive)
    max_state_bytes: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_input_responses: int = attrs.field(default=64, validator=_positive)
    max_input_responses_bytes: int = attrs.field(default=1 << 20, validator=_positive)
