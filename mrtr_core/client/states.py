"""The client flow's states and the one table that moves between them.

Theory of operation
-------------------
One :class:`~mrtr_core.client.flow.ClientFlow` is one MRTR operation: the first request, then
one retry per ``input_required`` answer, until the server completes or something stops it
(digest §2.1). The flow is always in exactly one :class:`FlowState`. Every input the caller
feeds (``start``, a response, a handler outcome, manual answers, the timer, a cancel) is
first checked against :data:`ACCEPTS` (an input the current state does not accept raises
:class:`~mrtr_core.errors.LocalProtocolError` and changes nothing), then classified into one
:class:`Trigger`, and :data:`TRANSITIONS` names the next state. The table is the whole
machine: :func:`state_diagram_dot` renders it.

``COMPLETE`` and ``FAILED`` are terminal: nothing leaves them.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = [
    "ACCEPTS",
    "TERMINAL_STATES",
    "TRANSITIONS",
    "FlowState",
    "Input",
    "Trigger",
    "state_diagram_dot",
]


class FlowState(enum.Enum):
    """Where a flow is."""

    # Identity hash (C speed) instead of Enum's hash of the member name: the machine looks
    # states up on every input. Members compare by identity, so the two agree.
    __hash__ = object.__hash__

    IDLE = "idle"
    """Built, not started (possibly seeded with a persisted ``input_required`` result)."""
    AWAITING_RESPONSE = "awaiting_response"
    """A request leg is in flight."""
    AWAITING_HANDLERS = "awaiting_handlers"
    """The round's handlers are running (automatic mode)."""
    AWAITING_ANSWERS = "awaiting_answers"
    """The round waits for :meth:`~mrtr_core.client.flow.ClientFlow.answer` (manual mode)."""
    PACING = "pacing"
    """A state-only round waits out its backoff before the retry (digest §2.4)."""
    COMPLETE = "complete"
    """The server completed the request (terminal)."""
    FAILED = "failed"
    """A typed error ended the flow (terminal)."""


class Input(enum.Enum):
    """The kinds of input a flow can be fed."""

    __hash__ = object.__hash__

    START = "start"
    RESPONSE = "response"
    HANDLER_RETURNED = "handler_returned"
    HANDLER_FAILED = "handler_failed"
    ANSWER = "answer"
    TIMER = "timer"
    CANCEL = "cancel"


class Trigger(enum.Enum):
    """What an input turned out to mean; each trigger belongs to one :class:`Input` kind."""

    __hash__ = object.__hash__

    SENT_FIRST = (Input.START, "first leg sent")
    RESUMED_WITH_INPUT = (Input.START, "resumed: handlers invoked")
    RESUMED_WITH_INPUT_MANUAL = (Input.START, "resumed: answers awaited")
    RESUMED_STATE_ONLY = (Input.START, "resumed: state-only, pacing")
    RESUME_REJECTED = (Input.START, "resumed result rejected")
    COMPLETED = (Input.RESPONSE, "result complete")
    INPUT_REQUIRED = (Input.RESPONSE, "input_required: handlers invoked")
    INPUT_REQUIRED_MANUAL = (Input.RESPONSE, "input_required: answers awaited")
    STATE_ONLY = (Input.RESPONSE, "input_required, state only")
    REJECTED = (Input.RESPONSE, "error, invalid or over a limit")
    VERSION_RETRIED = (Input.RESPONSE, "-32022 naming our version: leg sent again")
    HANDLER_RETURNED = (Input.HANDLER_RETURNED, "answer recorded")
    ROUND_FULFILLED = (Input.HANDLER_RETURNED, "last answer: retry sent")
    UNUSABLE_ANSWER = (Input.HANDLER_RETURNED, "bad answer or budget spent")
    HANDLER_FAILED = (Input.HANDLER_FAILED, "handler failed")
    ANSWERED = (Input.ANSWER, "answers recorded")
    ROUND_ANSWERED = (Input.ANSWER, "round answered: retry sent")
    ANSWERED_TOO_LATE = (Input.ANSWER, "budget spent")
    TIMER_EARLY = (Input.TIMER, "timer early")
    PACING_ELAPSED = (Input.TIMER, "pacing over: retry sent")
    TIMED_OUT = (Input.TIMER, "timed out")
    CANCELLED = (Input.CANCEL, "cancelled")

    @property
    def input(self) -> Input:
        """The input kind this trigger classifies."""
        return self.value[0]

    @property
    def label(self) -> str:
        """A short human description (used on diagram edges)."""
        return self.value[1]


_S = FlowState
_T = Trigger
_LIVE: Final = (_S.AWAITING_RESPONSE, _S.AWAITING_HANDLERS, _S.AWAITING_ANSWERS, _S.PACING)

TRANSITIONS: Final[dict[tuple[FlowState, Trigger], FlowState]] = {
    # Start: a fresh flow sends leg 1; a resumed one processes its seeded result first.
    (_S.IDLE, _T.SENT_FIRST): _S.AWAITING_RESPONSE,
    (_S.IDLE, _T.RESUMED_WITH_INPUT): _S.AWAITING_HANDLERS,
    (_S.IDLE, _T.RESUMED_WITH_INPUT_MANUAL): _S.AWAITING_ANSWERS,
    (_S.IDLE, _T.RESUMED_STATE_ONLY): _S.PACING,
    (_S.IDLE, _T.RESUME_REJECTED): _S.FAILED,
    (_S.IDLE, _T.CANCELLED): _S.FAILED,
    # A response to the leg in flight (digest §1.1, §1.2, §2.3).
    (_S.AWAITING_RESPONSE, _T.COMPLETED): _S.COMPLETE,
    (_S.AWAITING_RESPONSE, _T.INPUT_REQUIRED): _S.AWAITING_HANDLERS,
    (_S.AWAITING_RESPONSE, _T.INPUT_REQUIRED_MANUAL): _S.AWAITING_ANSWERS,
    (_S.AWAITING_RESPONSE, _T.STATE_ONLY): _S.PACING,
    (_S.AWAITING_RESPONSE, _T.REJECTED): _S.FAILED,
    # The server refused the leg's protocol version but lists it as supported (digest §3.2,
    # Versioning: the client picks a common version and retries): once per flow.
    (_S.AWAITING_RESPONSE, _T.VERSION_RETRIED): _S.AWAITING_RESPONSE,
    # Handlers of one round, all running at once (C1).
    (_S.AWAITING_HANDLERS, _T.HANDLER_RETURNED): _S.AWAITING_HANDLERS,
    (_S.AWAITING_HANDLERS, _T.ROUND_FULFILLED): _S.AWAITING_RESPONSE,
    (_S.AWAITING_HANDLERS, _T.UNUSABLE_ANSWER): _S.FAILED,
    (_S.AWAITING_HANDLERS, _T.HANDLER_FAILED): _S.FAILED,
    # Manual answers.
    (_S.AWAITING_ANSWERS, _T.ANSWERED): _S.AWAITING_ANSWERS,
    (_S.AWAITING_ANSWERS, _T.ROUND_ANSWERED): _S.AWAITING_RESPONSE,
    (_S.AWAITING_ANSWERS, _T.ANSWERED_TOO_LATE): _S.FAILED,
    # Pacing of a state-only round (digest §2.4).
    (_S.PACING, _T.PACING_ELAPSED): _S.AWAITING_RESPONSE,
    # The timer and cancellation apply to every live state.
    **{(state, _T.TIMER_EARLY): state for state in _LIVE},
    **{(state, _T.TIMED_OUT): _S.FAILED for state in _LIVE},
    **{(state, _T.CANCELLED): _S.FAILED for state in _LIVE},
}
"""``(state, trigger) -> next state``. A pair that is missing cannot happen."""

ACCEPTS: Final[dict[FlowState, frozenset[Input]]] = {
    state: frozenset(trigger.input for (source, trigger) in TRANSITIONS if source is state)
    for state in FlowState
}
"""Which input kinds each state accepts (derived from :data:`TRANSITIONS`)."""

TERMINAL_STATES: Final = frozenset({FlowState.COMPLETE, FlowState.FAILED})


def state_diagram_dot() -> str:
    """Render :data:`TRANSITIONS` as a Graphviz ``dot`` digraph."""
    lines = ["digraph ClientFlow {", "  rankdir=LR;"]
    for state in FlowState:
        if state in TERMINAL_STATES:
            lines.append(f"  {state.name} [shape=doublecircle];")
    edges: dict[tuple[FlowState, FlowState], list[str]] = {}
    for (source, trigger), target in TRANSITIONS.items():
        edges.setdefault((source, target), []).append(trigger.label)
    for (source, target), labels in edges.items():
        label = "\\n".join(labels)
        lines.append(f'  {source.name} -> {target.name} [label="{label}"];')
    lines.append("}")
    return "\n".join(lines)
