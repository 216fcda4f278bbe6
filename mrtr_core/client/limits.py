"""Client-side limits on an MRTR flow. Every one has a default; ``None`` turns a time limit off."""

from __future__ import annotations

from typing import Any

import attrs

from mrtr_core._checks import MAX_SECONDS, is_time_limit, shown

__all__ = ["ClientLimits"]


def _positive_or_none(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        _positive(_, attribute, value)


def _positive(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not is_time_limit(value):  # also refuses NaN and infinity
        raise ValueError(
            f"{attribute.name} must be a positive number of seconds up to {MAX_SECONDS:g}, "
            f"got {shown(value)}"
        )


def _positive_int(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{attribute.name} must be an integer >= 1, got {shown(value)}")


def _fraction(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"{attribute.name} must be between 0 and 1, got {shown(value)}")


@attrs.frozen(kw_only=True)
class ClientLimits:
    """Bounds on one flow. Settable per client and overridable per call (``attrs.evolve``).

    Attributes:
        max_rounds: Most requests (legs) sent in one flow, the first included. With
            ``max_rounds = N`` at most ``N - 1`` ``input_required`` results are fulfilled:
            the ``input_required`` answering leg ``N`` fails the flow with
            :class:`~mrtr_core.errors.RoundLimitError` before any handler runs.
            ``max_rounds = 1`` means no retry at all. The default 10 matches the Go SDK;
            the Python and TypeScript SDKs send up to 11 legs (digest §2.6).
        leg_timeout: Seconds to wait for one response. Every time limit here is at most
            1e9 seconds; ``None`` turns one off.
        flow_timeout: Seconds for the whole flow; checked before any handler is invoked
            and before any retry is sent.
        handler_timeout: Seconds a handler may take (a person thinking, a model sampling).
            Bounds ``InvokeHandler`` only; in manual mode ``flow_timeout`` bounds the wait.
        pacing_initial: First delay before a state-only retry, in seconds.
        pacing_max: Cap of the doubling delay between consecutive state-only rounds.
        pacing_jitter: Fraction of each delay drawn at random, in ``[0, 1]`` (0 turns
            jitter off; above 0 the flow needs a ``random`` source).
        max_state_bytes: Largest ``requestState`` accepted (UTF-8 bytes).
        max_input_requests: Most ``inputRequests`` entries accepted in one result.
    """

    max_rounds: int = attrs.field(default=10, validator=_positive_int)
    leg_timeout: float | None = attrs.field(default=60.0, validator=_positive_or_none)
    flow_timeout: float | None = attrs.field(default=600.0, validator=_positive_or_none)
    handler_timeout: float | None = attrs.field(default=300.0, validator=_positive_or_none)
    pacing_initial: float = attrs.field(default=0.05, validator=_positive)
    pacing_max: float = attrs.field(default=2.0, validator=_positive)
    pacing_jitter: float = attrs.field(default=0.2, validator=_fraction)
    max_state_bytes: int = attrs.field(default=256 * 1024, validator=_positive_int)
    max_input_requests: int = attrs.field(default=64, validator=_positive_int)
