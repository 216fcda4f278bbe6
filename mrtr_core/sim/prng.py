"""A small, pure, seedable pseudo-random generator for the simulator.

``mrtr_core`` never imports :mod:`random`: randomness is a value passed in. :class:`Prng` is
SplitMix64 (Steele, Lea and Flood, 2014), which is tiny, fast in pure Python and good enough
for fault injection. Independent streams are derived by name with :meth:`Prng.fork`, so the
draws of one flow do not depend on how many other flows a run has: that is what lets the
shrinker drop flows and keep the one that fails unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["Prng", "stream_key"]

T = TypeVar("T")

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_INV_2_53 = 1.0 / (1 << 53)


def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def stream_key(name: str | int) -> int:
    """A stable 64-bit key for a stream name (FNV-1a; never Python's salted ``hash``)."""
    if isinstance(name, int):
        return _mix(name & _MASK)
    h = 0xCBF29CE484222325
    for byte in name.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & _MASK
    return h


class Prng:
    """SplitMix64: a seeded source of 64-bit words, floats, choices and bytes.

    The same seed gives the same sequence on every platform and Python version.
    """

    __slots__ = ("_state", "seed")

    def __init__(self, seed: int) -> None:
        self.seed = seed & _MASK
        self._state = self.seed

    def next_u64(self) -> int:
        """The next 64-bit word."""
        # _mix inlined: this is the simulator's hottest function.
        z = self._state = (self._state + _GAMMA) & _MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def random(self) -> float:
        """A float in ``[0, 1)`` (53 random bits)."""
        z = self._state = (self._state + _GAMMA) & _MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return ((z ^ (z >> 31)) >> 11) * _INV_2_53

    def __call__(self) -> float:
        """Same as :meth:`random`, so a ``Prng`` is a jitter source ``() -> float``."""
        return self.random()

    def below(self, n: int) -> int:
        """An integer in ``[0, n)``; ``n`` must be positive."""
        if n <= 0:
            raise ValueError("n must be positive")
        return self.next_u64() % n

    def chance(self, p: float) -> bool:
        """True with probability ``p``.

        One draw is spent whatever ``p`` is, so turning a fault off (``p = 0``) does not
        shift the draws after it: the shrinker relies on that.
        """
        return self.random() < p

    def uniform(self, low: float, high: float) -> float:
        """A float in ``[low, high)``."""
        return low + (high - low) * self.random()

    def choice(self, items: Sequence[T]) -> T:
        """One element of a non-empty sequence."""
        return items[self.below(len(items))]

    def weighted(self, items: Sequence[tuple[T, float]]) -> T:
        """One element, chosen with probability proportional to its weight."""
        total = sum(weight for _, weight in items)
        point = self.random() * total
        for item, weight in items:
            point -= weight
            if point < 0:
                return item
        return items[-1][0]

    def bytes(self, n: int) -> bytes:
        """``n`` pseudo-random bytes (a deterministic nonce source for the state codec)."""
        out = bytearray()
        while len(out) < n:
            out += self.next_u64().to_bytes(8, "little")
        return bytes(out[:n])

    def fork(self, name: str | int) -> Prng:
        """An independent stream derived from this generator's seed and ``name``.

        Forking does not advance this generator.
        """
        return Prng(_mix(self.seed ^ _mix((stream_key(name) + _GAMMA) & _MASK)))
