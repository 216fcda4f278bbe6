"""Single-use ``requestState``: the replay guard protocol and an in-memory guard.

Binding, expiry and audience narrow replay but do not prevent it: a token can be echoed
again until it expires. A server that needs at-most-once use must enforce it itself (S12;
digest §2.10). The engine hands the driver ``(token_id, expires_at)``; the driver asks a
guard to claim the id before the handler runs. A guard shared by every instance (Redis, in
the adapters) makes a token usable once across the whole deployment.
"""

from __future__ import annotations

import heapq
import inspect
import math
from typing import Protocol, runtime_checkable

__all__ = ["MemoryReplayGuard", "ReplayGuard", "claim_verdict"]


@runtime_checkable
class ReplayGuard(Protocol):
    """Remembers token ids until they expire."""

    def claim(self, token_id: str, expires_at: float, now: float) -> bool:
        """Record ``token_id`` as used until ``expires_at``.

        Returns:
            ``True`` the first time an id is claimed, ``False`` when it was claimed before
            and has not expired yet. The drivers take nothing else (see
            :func:`claim_verdict`); an async guard's ``claim`` returns an awaitable of it.
        """
        ...


def claim_verdict(answer: object) -> bool:
    """What a guard's :meth:`ReplayGuard.claim` answered, read strictly: ``True`` or ``False``.

    Anything else is no verdict and is refused rather than read by its truth value: an
    async guard handed to a sync driver answers with an un-awaited coroutine, and a guard
    may pass on a raw Redis reply (``"OK"``); both are truthy and, read as won claims,
    would let every replay of a single-use state through (S12; digest §2.10).

    Raises:
        TypeError: The answer is neither ``True`` nor ``False`` (a coroutine is closed
            first: the claim it stands for never ran).
    """
    if answer is True or answer is False:
        return answer
    if inspect.iscoroutine(answer):
        answer.close()
        raise TypeError(
            "the replay guard's claim returned a coroutine: a sync server needs a sync guard "
            "(await an async guard's claim in an async server)"
        )
    raise TypeError(f"the replay guard's claim answered {type(answer).__name__}, not a bool")


class MemoryReplayGuard:
    """A replay guard held in this process's memory (one instance only).

    Pure: the caller passes ``now``; expired ids are pruned as time moves on, so memory
    stays bounded by the number of tokens alive at once.

    Time never goes back for the guard: it prunes by the latest ``now`` it was given. A
    clock that is set back (the wall clock ``requestState`` expiry is read from) would
    otherwise make a pruned token alive again for the codec and new to the guard: such a
    token, past its lifetime by the latest time seen but not by ``now``, is refused.

    Threads may share one guard (the sync HTTP server serves each connection in its own):
    an id is recorded by one atomic ``dict.setdefault``, so of two claims of the same id
    that overlap, one wins; and pruning puts back an entry it finds not expired after all,
    because another claim pruned the expired one it had looked at.
    """

    def __init__(self) -> None:
        self._seen: dict[str, tuple[float]] = {}
        self._expiry: list[tuple[float, str]] = []
        self._latest = -math.inf

    def claim(self, token_id: str, expires_at: float, now: float) -> bool:
        """See :meth:`ReplayGuard.claim`."""
        self._latest = latest = max(self._latest, now)
        self._prune(latest)
        if token_id in self._seen:
            return False
        if expires_at <= now:
            # Already past its lifetime: nothing to remember, and the codec refuses it anyway.
            return True
        if expires_at <= latest:
            # The clock went back past this token's end: it may have been claimed and pruned.
            return False
        entry = (expires_at,)  # this claim's own object: whoever stored it won the id
        if self._seen.setdefault(token_id, entry) is not entry:
            return False
        heapq.heappush(self._expiry, (expires_at, token_id))
        return True

    def _prune(self, now: float) -> None:
        expiry = self._expiry
        while True:
            try:
                if expiry[0][0] > now:
                    return
                item = heapq.heappop(expiry)
            except IndexError:  # empty (another claim may have emptied it meanwhile)
                return
            if item[0] > now:
                # Another claim popped the expired head first; this one is still alive.
                heapq.heappush(expiry, item)
                return
            self._seen.pop(item[1], None)

    def __len__(self) -> int:
        return len(self._seen)
