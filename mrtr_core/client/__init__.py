"""The client side of MRTR: :class:`ClientFlow`, one operation round by round, with no I/O.

An adapter calls ``flow.start(now)``, carries out the commands it gets back
(:mod:`mrtr_core.client.commands`), feeds what happened with ``flow.handle(event, now)``
(:mod:`mrtr_core.client.events`), and keeps one timer armed at ``flow.deadline``.
"""

from mrtr_core.client.commands import (
    AwaitAnswers,
    CancelHandlers,
    ClientCommand,
    Complete,
    Fail,
    InputNeeded,
    InvokeHandler,
    RequestId,
    RoundFulfilled,
    RoundStarted,
    SendRequest,
)
from mrtr_core.client.events import (
    CancelRequested,
    ClientEvent,
    HandlerFailed,
    HandlerReturned,
    ResponseReceived,
    TimerFired,
)
from mrtr_core.client.flow import ClientFlow
from mrtr_core.client.limits import ClientLimits
from mrtr_core.client.pacing import pacing_delay
from mrtr_core.client.persist import FORMAT as SAVED_FLOW_FORMAT
from mrtr_core.client.persist import SavedFlowVersionError
from mrtr_core.client.retry import LegBuilder, answer_to_wire
from mrtr_core.client.states import (
    ACCEPTS,
    TERMINAL_STATES,
    TRANSITIONS,
    FlowState,
    Input,
    Trigger,
    state_diagram_dot,
)

__all__ = [
    "ACCEPTS",
    "SAVED_FLOW_FORMAT",
    "TERMINAL_STATES",
    "TRANSITIONS",
    "AwaitAnswers",
    "CancelHandlers",
    "CancelRequested",
    "ClientCommand",
    "ClientEvent",
    "ClientFlow",
    "ClientLimits",
    "Complete",
    "Fail",
    "FlowState",
    "HandlerFailed",
    "HandlerReturned",
    "Input",
    "InputNeeded",
    "InvokeHandler",
    "LegBuilder",
    "RequestId",
    "ResponseReceived",
    "RoundFulfilled",
    "RoundStarted",
    "SavedFlowVersionError",
    "SendRequest",
    "TimerFired",
    "Trigger",
    "answer_to_wire",
    "pacing_delay",
    "state_diagram_dot",
]
