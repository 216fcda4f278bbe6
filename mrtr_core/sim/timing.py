"""Virtual-time constants of a simulated run, and the limits in force."""

from __future__ import annotations

import math
from typing import Any

import attrs

from mrtr_core._checks import instance_of, non_negative_seconds, positive_seconds
from mrtr_core.client import ClientLimits

__all__ = ["SIM_LIMITS", "Timing"]

SIM_LIMITS = ClientLimits(
    max_rounds=8, leg_timeout=5.0, flow_timeout=240.0, handler_timeout=60.0,
    pacing_initial=0.05, pacing_max=1.0, pacing_jitter=0.2, max_state_bytes=16384,
)
"""The client limits of a simulated run: tight enough that hostile servers hit them."""


def _span_field(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Refuse a span that is not ``(low, high)`` seconds with ``0 <= low <= high`` (finite):
    a negative or ``nan`` delay would schedule events in the past or never."""
    if (
        not isinstance(value, tuple) or len(value) != 2
        or any(isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x)
               for x in value)
        or not 0 <= value[0] <= value[1]
    ):
        raise ValueError(
            f"{attribute.name} must be a (low, high) range of seconds with 0 <= low <= high,"
            f" got {value!r}"
        )


def _seconds_field(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    positive_seconds(attribute.name, value)


def _skew_field(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    non_negative_seconds(attribute.name, value)


def _limits_field(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    instance_of(attribute.name, value, ClientLimits, "a ClientLimits")


@attrs.frozen(kw_only=True)
class Timing:
    """Virtual-time constants of a run (seconds) and the limits in force.

    Attributes:
        latency: One-way network latency range.
        service: Time a server takes to answer.
        long_delay: Extra delay of a message the ``delay`` fault holds up.
        reorder_hold: Extra delay of a message the ``reorder`` fault holds back.
        think: How long a person takes with a form.
        sample_think: How long a model takes to sample.
        roots_think: How long listing roots takes.
        slow_think: A handler too slow for ``handler_timeout``.
        long_think: How long a person takes over each question of the hostile ``endless``
            server: within ``handler_timeout``, yet a few rounds of it outlast
            ``flow_timeout``, so that the flow's budget is what stops the flow.
        downtime: How long a crashed instance stays down (another stays up meanwhile).
        interarrival: Mean time between flow starts.
        state_ttl: The codec's token lifetime.
        state_skew: The codec's clock-skew allowance (instance clocks differ by less).
        limits: The client flows' limits.
    """

    latency: tuple[float, float] = attrs.field(default=(0.001, 0.02), validator=_span_field)
    service: tuple[float, float] = attrs.field(default=(0.0005, 0.003), validator=_span_field)
    long_delay: tuple[float, float] = attrs.field(default=(0.5, 8.0), validator=_span_field)
    reorder_hold: tuple[float, float] = attrs.field(default=(0.0, 0.05), validator=_span_field)
    think: tuple[float, float] = attrs.field(default=(0.05, 3.0), validator=_span_field)
    sample_think: tuple[float, float] = attrs.field(default=(0.2, 2.0), validator=_span_field)
    roots_think: tuple[float, float] = attrs.field(default=(0.001, 0.01), validator=_span_field)
    slow_think: tuple[float, float] = attrs.field(default=(65.0, 90.0), validator=_span_field)
    long_think: tuple[float, float] = attrs.field(default=(36.0, 57.0), validator=_span_field)
    downtime: tuple[float, float] = attrs.field(default=(0.2, 2.0), validator=_span_field)
    interarrival: float = attrs.field(default=0.005, validator=_seconds_field)
    state_ttl: float = attrs.field(default=30.0, validator=_seconds_field)
    state_skew: float = attrs.field(default=2.0, validator=_skew_field)
    limits: ClientLimits = attrs.field(factory=lambda: SIM_LIMITS, validator=_limits_field)
