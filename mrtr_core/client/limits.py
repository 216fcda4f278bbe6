"""Client-side limits on an MRTR flow. Every one has a default; ``None`` turns a time limit off."""

from __future__ import annotations

import attrs

__all__ = ["ClientLimits"]


def _positive(_: object, attribute: attrs.Attribute[object], value: object) -> None:
    if value is not None and not (isinstance(value, int | float) and value > 0):
        raise ValueError(f"{attribute.name} must be positive, got {value!r}")


@attrs.frozen(kw_only=True)
class ClientLimits:
    """Bounds on one flow. Settable per client and overridable per call (``attrs.evolve``).

    Attributes:
        max_rounds: Most requests sent in one flow (the first included). The official SDKs
            cap at 10 (digest §2.6).
        leg_timeout: Seconds to wait for one response.
        flow_timeout: Seconds for the whole flow; checked before any handler is invoked.
        handler_timeout: Seconds a handler may take (a person thinking, a model sampling).
        pacing_initial: First delay before a state-only retry, in seconds.
        pacing_max: Cap of the doubling delay between consecutive state-only rounds.
        pacing_jitter: Fraction of each delay drawn at random (0 turns jitter off).
        max_state_bytes: Largest ``requestState`` accepted (UTF-8 bytes).
        max_input_requests: Most ``inputRequests`` entries accepted in one result.
    """

    max_rounds: int = attrs.field(default=10, validator=_positive)
    leg_timeout: float | None = attrs.field(default=60.0, validator=_positive)
    flow_timeout: float | None = attrs.field(default=600.0, validator=_positive)
    handler_timeout: float | None = attrs.field(default=300.0, validator=_positive)
    pacing_initial: float = attrs.field(default=0.05, validator=_positive)
    pacing_max: float = attrs.field(default=2.0, validator=_positive)
    pacing_jitter: float = attrs.field(default=0.2)
    max_state_bytes: int = attrs.field(default=256 * 1024, validator=_positive)
    max_input_requests: int = attrs.field(default=64, validator=_positive)
