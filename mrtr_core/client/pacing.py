"""Backoff for state-only rounds (digest §2.4): pure arithmetic, jitter from an injected source.

The spec sets no backoff; a server answering ``input_required`` with only ``requestState``
("not done yet", load shedding) must not be hammered. The delay doubles from
``pacing_initial`` to ``pacing_max`` over consecutive state-only rounds, and a round that
carries ``inputRequests`` resets it.
"""

from __future__ import annotations

from collections.abc import Callable

from mrtr_core.client.limits import ClientLimits
from mrtr_core.errors import LocalProtocolError

__all__ = ["pacing_delay"]

_MAX_DOUBLINGS = 64  # 2**64 times any positive delay is past every sane cap.


def pacing_delay(
    streak: int, limits: ClientLimits, random: Callable[[], float] | None
) -> float:
    """Seconds to wait before the retry of the ``streak``-th consecutive state-only round.

    The base delay is ``pacing_initial * 2 ** (streak - 1)``, capped at ``pacing_max``.
    With ``pacing_jitter = j > 0`` the fraction ``j`` of it is drawn at random, so the delay
    lies in ``[base * (1 - j), base)`` and never exceeds the cap.

    Args:
        streak: 1 for the first state-only round after a round with input requests (or the
            first leg), 2 for the next one in a row, and so on.
        limits: Supplies ``pacing_initial``, ``pacing_max`` and ``pacing_jitter``.
        random: A source of floats in ``[0, 1)``; required when jitter is on.

    Raises:
        LocalProtocolError: jitter is on and ``random`` is missing or returned a value
            outside ``[0, 1)``.
    """
    doublings = min(max(streak - 1, 0), _MAX_DOUBLINGS)
    base = min(limits.pacing_initial * float(2**doublings), limits.pacing_max)
    jitter = limits.pacing_jitter
    if not jitter:
        return base
    if random is None:
        raise LocalProtocolError("pacing_jitter > 0 needs a random source")
    draw = random()
    if isinstance(draw, bool) or not isinstance(draw, int | float) or not 0.0 <= draw < 1.0:
        raise LocalProtocolError(f"random source returned {draw!r}, expected a float in [0, 1)")
    return base * (1.0 - jitter) + base * jitter * draw
