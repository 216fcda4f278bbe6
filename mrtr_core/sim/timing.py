"""Virtual-time constants of a simulated run, and the limits in force."""

from __future__ import annotations

import attrs

from mrtr_core.client import ClientLimits

__all__ = ["SIM_LIMITS", "Timing"]

SIM_LIMITS = ClientLimits(
    max_rounds=8, leg_timeout=5.0, flow_timeout=240.0, handler_timeout=60.0,
    pacing_initial=0.05, pacing_max=1.0, pacing_jitter=0.2, max_state_bytes=16384,
)
"""The client limits of a simulated run: tight enough that hostile servers hit them."""


def _span(low: float, high: float) -> tuple[float, float]:
    if not 0 <= low <= high:
        raise ValueError(f"bad range ({low}, {high})")
    return (low, high)


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

    latency: tuple[float, float] = _span(0.001, 0.02)
    service: tuple[float, float] = _span(0.0005, 0.003)
    long_delay: tuple[float, float] = _span(0.5, 8.0)
    reorder_hold: tuple[float, float] = _span(0.0, 0.05)
    think: tuple[float, float] = _span(0.05, 3.0)
    sample_think: tuple[float, float] = _span(0.2, 2.0)
    roots_think: tuple[float, float] = _span(0.001, 0.01)
    slow_think: tuple[float, float] = _span(65.0, 90.0)
    long_think: tuple[float, float] = _span(36.0, 57.0)
    downtime: tuple[float, float] = _span(0.2, 2.0)
    interarrival: float = 0.005
    state_ttl: float = 30.0
    state_skew: float = 2.0
    limits: ClientLimits = attrs.field(factory=lambda: SIM_LIMITS)
