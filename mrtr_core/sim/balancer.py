"""Load balancers: which server instance takes the next request.

MRTR servers keep nothing between rounds (digest §2.1), so any instance that shares the key
ring must be able to take any round. The balancers here make sure the simulation moves
flows between instances: ``never_same`` never sends two consecutive rounds of one flow to
the same instance when another is up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Protocol

from mrtr_core.sim.prng import Prng

__all__ = ["BALANCERS", "Balancer", "NeverSame", "RandomBalancer", "RoundRobin", "make_balancer"]


class Balancer(Protocol):
    """Picks an instance index among those that are up."""

    name: str

    def pick(self, up: Sequence[int], flow: str, previous: int | None) -> int | None:
        """The index of the instance for this request, or ``None`` when nothing is up.

        Args:
            up: Indexes of the instances that are up, ascending.
            flow: The operation this request belongs to.
            previous: The instance that took this flow's previous round, if any.
        """
        ...


class RoundRobin:
    """Each request goes to the next instance that is up, in turn."""

    name = "round_robin"

    def __init__(self, count: int, prng: Prng) -> None:
        self._count = count
        self._next = 0

    def pick(self, up: Sequence[int], flow: str, previous: int | None) -> int | None:
        """See :meth:`Balancer.pick`."""
        if not up:
            return None
        for _ in range(self._count):
            candidate = self._next
            self._next = (self._next + 1) % self._count
            if candidate in up:
                return candidate
        return up[0]


class RandomBalancer:
    """Each request goes to an instance drawn at random among those up."""

    name = "random"

    def __init__(self, count: int, prng: Prng) -> None:
        self._prng = prng

    def pick(self, up: Sequence[int], flow: str, previous: int | None) -> int | None:
        """See :meth:`Balancer.pick`."""
        if not up:
            return None
        return up[self._prng.below(len(up))]


class NeverSame:
    """Like random, but never the instance that took the flow's previous round (when
    another is up): every round of every flow resumes on a different instance."""

    name = "never_same"

    def __init__(self, count: int, prng: Prng) -> None:
        self._prng = prng

    def pick(self, up: Sequence[int], flow: str, previous: int | None) -> int | None:
        """See :meth:`Balancer.pick`."""
        if not up:
            return None
        others = [i for i in up if i != previous] or list(up)
        return others[self._prng.below(len(others))]


BALANCERS: Final[dict[str, Callable[[int, Prng], Balancer]]] = {
    RoundRobin.name: RoundRobin,
    RandomBalancer.name: RandomBalancer,
    NeverSame.name: NeverSame,
}


def make_balancer(name: str, count: int, prng: Prng) -> Balancer:
    """Build the balancer called ``name`` over ``count`` instances.

    Raises:
        ValueError: an unknown balancer name.
    """
    try:
        cls = BALANCERS[name]
    except KeyError:
        raise ValueError(f"unknown balancer {name!r}; known: {', '.join(BALANCERS)}") from None
    return cls(count, prng)
