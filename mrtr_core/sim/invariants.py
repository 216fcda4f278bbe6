"""The invariants every simulated run checks, by name.

Each :class:`~mrtr_core.sim.report.Violation` names one of these. They are checked as the
run goes (at every request a server accepts, every leg a client sends, every flow's end)
and once more when the event queue is empty.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ENDS",
    "FRESH_IDS",
    "INVARIANTS",
    "ISOLATION",
    "LIVENESS",
    "PACING",
    "PEER_CONTRACT",
    "PROBE_REFUSED",
    "ROUND_LIMIT",
    "ROUND_NUMBER",
    "SINGLE_USE",
    "STATE_ECHO",
    "STATE_VALID",
    "TIME_LIMIT",
    "TYPED_OUTCOME",
]

ENDS: Final = "flow ends"
"""Every flow ends (complete or failed) before the event queue empties, within the run's
event budget: nothing hangs."""

TYPED_OUTCOME: Final = "typed outcome"
"""A flow ends with a complete result or a typed ``MrtrError``; the client flow and the
server app never raise out of their entry points."""

ROUND_LIMIT: Final = "round limit"
"""A flow sends at most ``max_rounds`` requests, and the round limit stops it only after
exactly ``max_rounds`` rounds (digest §2.6)."""

ROUND_NUMBER: Final = "round number"
"""A handler's ``ctx.round`` is the round the client is in: 1 for an operation's first
request, one more for each round after it, the same when a round's request is sent again."""

TIME_LIMIT: Final = "time limit"
"""A flow ends within ``flow_timeout`` of its start; a leg timeout fires exactly
``leg_timeout`` after the leg was sent; a handler timeout fires exactly ``handler_timeout``
after the round's handlers were invoked, and no answer later than that is taken."""

PACING: Final = "pacing"
"""A state-only retry waits its doubling, jittered delay, capped at ``pacing_max``
(digest §2.4)."""

STATE_ECHO: Final = "state echo"
"""A retry echoes the last ``requestState`` byte for byte, or none when none was given, and
answers exactly the keys asked (C2, C3, C6)."""

FRESH_IDS: Final = "fresh request ids"
"""Every request on a connection has an id never used on it before (C4)."""

STATE_VALID: Final = "state accepted only when valid"
"""A server accepts only a ``requestState`` some server issued, for this very request and
principal, not expired, under a key still in its ring (S9-S11)."""

SINGLE_USE: Final = "single-use"
"""A single-use state is redeemed once, and a ``ctx.once`` step runs at most once per
operation (S12)."""

ISOLATION: Final = "isolation"
"""A complete result is right for its own operation: the workload's check passes (for the
reference workload: it carries its operation's id and every answer its client gave, and
nothing of any other operation). That holds for the result a ``stale_answer`` probe gets
too: the answer it sends again under a key of an earlier round is ignored (S14)."""

LIVENESS: Final = "liveness"
"""A flow that no fault touched completes."""

PROBE_REFUSED: Final = "hostile probe refused"
"""A tampered, swapped, foreign, expired, malformed (or, for single-use targets, replayed)
state is refused with -32602; a state sent under another method is never served."""

PEER_CONTRACT: Final = "hostile server stopped"
"""A flow sent to a hostile server ends with the typed error for that misbehaviour (or a
timeout when the network lost something first), never completes."""

INVARIANTS: Final = (
    ENDS, TYPED_OUTCOME, ROUND_LIMIT, ROUND_NUMBER, TIME_LIMIT, PACING, STATE_ECHO,
    FRESH_IDS, STATE_VALID, SINGLE_USE, ISOLATION, LIVENESS, PROBE_REFUSED, PEER_CONTRACT,
)
"""Every invariant, in the order the summary lists them."""
