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


_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_PREFIXES: dict[str, int] = {}  # FNV-1a state after a name's prefix ("flow-", "net-", ...)
_MAX_PREFIXES = 256


def _fnv(h: int, data: bytes) -> int:
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


def stream_key(name: str | int) -> int:
    """A stable 64-bit key for a stream name (FNV-1a; never Python's salted ``hash``)."""
    if isinstance(name, int):
        return _mix(name & _MASK)
    # FNV-1a runs byte by byte, so the state after a prefix such as "flow-" (one per kind
    # of stream, shared by thousands of names) is kept and only the rest is hashed.
    cut = name.rfind("-") + 1
    if not cut:
        return _fnv(_FNV_OFFSET, name.encode("utf-8"))
    prefix = name[:cut]
    h = _PREFIXES.get(prefix)
    if h is None:
        h = _fnv(_FNV_OFFSET, prefix.encode("utf-8"))
        if len(_PREFIXES) < _MAX_PREFIXES:
            _PREFIXES[prefix] = h
    return _fnv(h, name[cut:].encode("utf-8"))


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

    __call__ = random
    """Same as :meth:`random`, so a ``Prng`` is a jitter source ``() -> float``."""

    def skip(self, draws: int = 1) -> None:
        """Spend ``draws`` draws whose values are not needed: the stream ends up where
        taking them one by one would leave it (SplitMix64's state only counts draws)."""
        self._state = (self._state + draws * _GAMMA) & _MASK

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
        if p <= 0.0 or p >= 1.0:
            # The draw is spent but its value cannot change the answer (random() < 1).
            self._state = (self._state + _GAMMA) & _MASK
            return p >= 1.0
        # random() inlined (one draw, the same value): drawn for every fault decision.
        z = self._state = (self._state + _GAMMA) & _MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return ((z ^ (z >> 31)) >> 11) * _INV_2_53 < p

    def uniform(self, low: float, high: float) -> float:
        """A float in ``[low, high)``."""
        # random() inlined (one draw, the same value): drawn for every latency and delay.
        z = self._state = (self._state + _GAMMA) & _MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return low + (high - low) * (((z ^ (z >> 31)) >> 11) * _INV_2_53)

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
        words = -(-n // 8)  # whole 64-bit draws, little-endian, cut to n bytes
        return b"".join([self.next_u64().to_bytes(8, "little") for _ in range(words)])[:n]

    def fork(self, name: str | int) -> Prng:
        """An independent stream derived from this generator's seed and ``name``.

        Forking does not advance this generator.
        """
        return Prng(_mix(self.seed ^ _mix((stream_key(name) + _GAMMA) & _MASK)))
