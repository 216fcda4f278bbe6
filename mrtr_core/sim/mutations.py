"""Planted bugs: a test hook that swaps a real component for a deliberately broken one.

A simulator that never fails proves nothing. :class:`Mutations` lets a test plant a known
bug and check that a campaign catches it, reports the seed and prints a transcript that
shows it. Each mutation wraps the real component; none of them is ever on by default, and
nothing outside tests should set one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from mrtr_core.client.commands import RequestId
from mrtr_core.state import Binding, OpenedState, ReplayGuard, StateCodec, StateRejectedError

__all__ = [
    "MUTATION_NAMES",
    "AcceptAllGuard",
    "LenientExpiryCodec",
    "MiscountingCodec",
    "Mutations",
    "StaleIds",
]


@attrs.frozen(kw_only=True)
class Mutations:
    """Bugs to plant (all off by default).

    Attributes:
        accept_replayed: The shared replay guard says "first use" to every claim, so a
            server accepts a replayed single-use ``requestState`` (breaks S12).
        reuse_request_id: A client's third and later legs reuse the id of the flow's first
            leg (the retry does not get a fresh id; breaks C4 for the connection).
        ignore_expiry: The state codec opens tokens that expired (breaks S11b).
        miscount_rounds: The state codec opens a token as sealed one round later than it
            was, so a handler's ``ctx.round`` runs one ahead of the client's round from the
            second round on (the rounds still work: only the number is wrong).
    """

    accept_replayed: bool = False
    reuse_request_id: bool = False
    ignore_expiry: bool = False
    miscount_rounds: bool = False

    def active(self) -> tuple[str, ...]:
        """Names of the planted bugs."""
        return tuple(name for name in MUTATION_NAMES if getattr(self, name))

    def describe(self) -> str:
        """``none`` or the planted bugs' names."""
        return ", ".join(self.active()) or "none"


MUTATION_NAMES: tuple[str, ...] = tuple(f.name for f in attrs.fields(Mutations))


class AcceptAllGuard:
    """A replay guard that records claims in the real guard but always answers ``True``."""

    def __init__(self, inner: ReplayGuard) -> None:
        self._inner = inner

    def claim(self, token_id: str, expires_at: float, now: float) -> bool:
        """Claim on the real guard, then ignore its answer (the planted bug)."""
        self._inner.claim(token_id, expires_at, now)
        return True


class LenientExpiryCodec(StateCodec):
    """A state codec that, when a token has expired, opens it as if it were earlier."""

    def open(self, token: object, binding: Binding, now: float) -> OpenedState:
        """Open ``token``; on ``expired``, try again one lifetime earlier (the planted bug)."""
        try:
            return super().open(token, binding, now)
        except StateRejectedError as exc:
            if exc.reason != "expired":
                raise
            return super().open(token, binding, now - self.ttl - self.skew)


class MiscountingCodec(StateCodec):
    """A state codec that opens every token with its round count one higher."""

    def open(self, token: object, binding: Binding, now: float) -> OpenedState:
        """Open ``token`` and add one to the rounds it carries (the planted bug)."""
        opened = super().open(token, binding, now)
        payload = dict(opened.payload)
        if isinstance(payload.get("n"), int):  # the engine's round count (server.carried)
            payload["n"] += 1
        return attrs.evolve(opened, payload=payload)


class _LenientMiscountingCodec(MiscountingCodec, LenientExpiryCodec):
    """Both planted codec bugs at once."""


class StaleIds:
    """An id source for one flow that hands its third and later legs the first leg's id."""

    def __init__(self, fresh: Callable[[], RequestId]) -> None:
        self._fresh = fresh
        self._first: RequestId | None = None
        self._legs = 0

    def __call__(self) -> RequestId:
        self._legs += 1
        if self._legs == 1:
            self._first = self._fresh()
            return self._first
        if self._legs >= 3 and self._first is not None:
            return self._first
        return self._fresh()


def codec_class(mutations: Mutations) -> type[StateCodec]:
    """The codec class instances use under ``mutations``."""
    if mutations.miscount_rounds:
        return _LenientMiscountingCodec if mutations.ignore_expiry else MiscountingCodec
    return LenientExpiryCodec if mutations.ignore_expiry else StateCodec


def wrap_guard(guard: ReplayGuard, mutations: Mutations) -> Any:
    """The replay guard instances share under ``mutations``."""
    return AcceptAllGuard(guard) if mutations.accept_replayed else guard
