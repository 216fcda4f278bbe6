"""Bounds on everything a client controls in a server-side MRTR operation."""

from __future__ import annotations

from typing import Any

import attrs

from mrtr_core._checks import positive_int, positive_int_field

__all__ = ["ServerLimits"]


def _positive_int_or_none(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        positive_int(attribute.name, value)


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

    Raises:
        ValueError: A limit is not an integer >= 1 (``max_state_bytes`` may also be ``None``).
    """

    max_input_requests: int = attrs.field(default=16, validator=positive_int_field)
    max_rounds: int = attrs.field(default=16, validator=positive_int_field)
    max_state_bytes: int | None = attrs.field(default=None, validator=_positive_int_or_none)
    max_input_responses: int = attrs.field(default=64, validator=positive_int_field)
    max_input_responses_bytes: int = attrs.field(default=1 << 20, validator=positive_int_field)
