"""``ClientFlow``: one MRTR operation, round by round, with no I/O (digest §2.1, §2.3).

The flow never reads a clock, sleeps, draws randomness or makes ids up: ``now`` is an
argument of every call, ids come from ``next_id`` and jitter from ``random``. It never calls
user code either: it emits commands (:mod:`mrtr_core.client.commands`) and the adapter
carries them out, then feeds the facts back (:mod:`mrtr_core.client.events`).

Error policy (h11 style). An input that is illegal in the current state, or malformed by
the caller (a response whose ``id`` is not the leg's, an unknown handler key, a repeated
id from ``next_id``, time running backwards) *raises* :class:`LocalProtocolError` at once
and changes nothing. Whatever the peer or a limit does wrong is *emitted* as
``Fail(error)``, and the flow becomes terminal. After ``Complete``/``Fail`` every input
raises :class:`LocalProtocolError`, with one exception: the outcome of a handler the flow
itself cancelled is absorbed (a failure is added to the ``HandlerFailedError.others`` of
the failure that cancelled it), so an adapter can feed failures that raced the cancel, or
that arrived in the same batch, without special cases.

Deadlines are enforced when the timer fires (``TimerFired`` at or after ``flow.deadline``)
and, for the whole-flow budget, also before any handler is invoked and before any retry is
sent: a user is never prompted, and no leg sent, once the budget is spent.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeAlias

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
from mrtr_core.client.limits import ClientLimits
from mrtr_core.client.pacing import pacing_delay
from mrtr_core.client.persist import (
    SAVABLE_STATES,
    FlowSnapshot,
    snapshot_from_data,
    snapshot_to_data,
)
from mrtr_core.client.retry import LegBuilder, answer_for
from mrtr_core.client.states import (
    ACCEPTS,
    TERMINAL_STATES,
    TRANSITIONS,
    FlowState,
    Input,
    Trigger,
)
from mrtr_core.errors import (
    UNSUPPORTED_PROTOCOL_VERSION,
    CodecError,
    FlowCancelledError,
    FlowDeadlineError,
    HandlerFailedError,
    HandlerTimeoutError,
    InputRequestsLimitError,
    JsonRpcError,
    LegTimeoutError,
    LocalProtocolError,
    MrtrError,
    RemoteProtocolError,
    RoundLimitError,
    StateSizeLimitError,
    UnsupportedInputError,
)
from mrtr_core.wire.converter import check_complete_result, structure_input_required
from mrtr_core.wire.models import (
    ELICITATION_CREATE,
    INPUT_REQUEST_KINDS,
    MRTR_METHODS,
    RESULT_TYPE_COMPLETE,
    RESULT_TYPE_INPUT_REQUIRED,
    SAMPLING_CREATE_MESSAGE,
    ClientCapabilities,
    CreateMessageRequest,
    ElicitFormRequest,
    ElicitUrlRequest,
    InputRequest,
    InputRequiredResult,
    JsonObject,
    ListRootsRequest,
    RequestMeta,
)
from mrtr_core.wire.records import record_maker

__all__ = ["ClientFlow", "ResultCheck"]

_INF = float("inf")


# The members the machine reads on every input, as module constants: on Python 3.11
# reading a member off an Enum class (``FlowState.IDLE``) goes through the metaclass's
# ``__getattr__`` hook, and any class attribute costs a lookup more than a global.
_S_IDLE: Final = FlowState.IDLE
_S_AWAITING_RESPONSE: Final = FlowState.AWAITING_RESPONSE
_S_AWAITING_HANDLERS: Final = FlowState.AWAITING_HANDLERS
_S_AWAITING_ANSWERS: Final = FlowState.AWAITING_ANSWERS
_S_PACING: Final = FlowState.PACING

_I_START: Final = Input.START
_I_RESPONSE: Final = Input.RESPONSE
_I_HANDLER_RETURNED: Final = Input.HANDLER_RETURNED
_I_HANDLER_FAILED: Final = Input.HANDLER_FAILED
_I_ANSWER: Final = Input.ANSWER
_I_TIMER: Final = Input.TIMER
_I_CANCEL: Final = Input.CANCEL

_T_SENT_FIRST: Final = Trigger.SENT_FIRST
_T_RESUMED_WITH_INPUT: Final = Trigger.RESUMED_WITH_INPUT
_T_RESUMED_WITH_INPUT_MANUAL: Final = Trigger.RESUMED_WITH_INPUT_MANUAL
_T_RESUMED_STATE_ONLY: Final = Trigger.RESUMED_STATE_ONLY
_T_RESUME_REJECTED: Final = Trigger.RESUME_REJECTED
_T_COMPLETED: Final = Trigger.COMPLETED
_T_INPUT_REQUIRED: Final = Trigger.INPUT_REQUIRED
_T_INPUT_REQUIRED_MANUAL: Final = Trigger.INPUT_REQUIRED_MANUAL
_T_STATE_ONLY: Final = Trigger.STATE_ONLY
_T_REJECTED: Final = Trigger.REJECTED
_T_VERSION_RETRIED: Final = Trigger.VERSION_RETRIED
_T_HANDLER_RETURNED: Final = Trigger.HANDLER_RETURNED
_T_ROUND_FULFILLED: Final = Trigger.ROUND_FULFILLED
_T_UNUSABLE_ANSWER: Final = Trigger.UNUSABLE_ANSWER
_T_HANDLER_FAILED: Final = Trigger.HANDLER_FAILED
_T_ANSWERED: Final = Trigger.ANSWERED
_T_ROUND_ANSWERED: Final = Trigger.ROUND_ANSWERED
_T_ANSWERED_TOO_LATE: Final = Trigger.ANSWERED_TOO_LATE
_T_TIMER_EARLY: Final = Trigger.TIMER_EARLY
_T_PACING_ELAPSED: Final = Trigger.PACING_ELAPSED
_T_TIMED_OUT: Final = Trigger.TIMED_OUT
_T_CANCELLED: Final = Trigger.CANCELLED


# The commands, built from values the flow has checked: no __init__, no keyword dict
# (see mrtr_core.wire.records). Arguments in field order.
_round_started: Final[Callable[[int, RequestId, bool], RoundStarted]] = record_maker(
    RoundStarted
)
_send_request: Final[Callable[[RequestId, str, JsonObject], SendRequest]] = record_maker(
    SendRequest
)
_input_needed: Final[Callable[[int, InputRequiredResult], InputNeeded]] = record_maker(
    InputNeeded
)
_invoke_handler: Final[Callable[[str, InputRequest, float | None], InvokeHandler]] = (
    record_maker(InvokeHandler)
)
_round_fulfilled: Final[Callable[[int, tuple[str, ...]], RoundFulfilled]] = record_maker(
    RoundFulfilled
)
_complete: Final[Callable[[JsonObject, int], Complete]] = record_maker(Complete)

_DEFAULT_LIMITS: Final = ClientLimits()
_NO_REQUESTS: Final[dict[str, InputRequest]] = {}  # never mutated
_UNJUDGED: Final = "?"  # a verdict cache miss (never a real verdict)
_SAME_VERDICT_PER_CLASS: Final = frozenset({ElicitFormRequest, ElicitUrlRequest, ListRootsRequest})

Verdicts: TypeAlias = dict[type, str | None]
ResultCheck: TypeAlias = Callable[[JsonObject], "MrtrError | None"]
"""Judges a complete result (see :class:`ClientFlow`'s ``result_check``): the error to fail
with, or ``None``."""
LegInputs: TypeAlias = tuple["JsonObject | None", "str | None", bool]
"""What a leg carries besides the request: ``inputResponses``, ``requestState``, and whether
it is a state-only retry."""
_VERDICT_CACHE_SIZE: Final = 32
# Verdicts (see ClientFlow._unsupported) shared by the flows of the same capabilities object
# (by identity; held, so its id is not reused) and handled kinds: a client's flows share them.
_verdict_cache: dict[tuple[int, frozenset[str]], tuple[ClientCapabilities, Verdicts]] = {}


def _shared_verdicts(capabilities: ClientCapabilities, kinds: frozenset[str]) -> Verdicts:
    key = (id(capabilities), kinds)
    entry = _verdict_cache.get(key)
    if entry is not None and entry[0] is capabilities:
        return entry[1]
    if len(_verdict_cache) >= _VERDICT_CACHE_SIZE:
        _verdict_cache.clear()  # one step, safe against concurrent flows in threads
    verdicts: Verdicts = {}
    _verdict_cache[key] = (capabilities, verdicts)
    return verdicts


def _time_left(deadline: float | None, now: float, most: float | None) -> float | None:
    """Seconds from ``now`` to ``deadline``, within ``[0, most]`` (``most`` bounds it
    anyway; the clamp only absorbs rounding)."""
    if deadline is None:
        return None
    left = max(deadline - now, 0.0)
    return left if most is None else min(left, most)


def _min(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


class ClientFlow:
    """One MRTR operation (the first request and its retries), as a pure state machine.

    Args:
        method: The request method. ``tools/call``, ``prompts/get`` and
            ``resources/read`` may answer ``input_required`` (digest §1.4); any other method
            is sent once and an ``input_required`` answer is a protocol error (S2).
        params: The caller's params, without ``_meta``: JSON values (RFC 8259: no set,
            bytes or other object, no key that is not a string, no NaN or infinity; a
            tuple is an array, sent as a list). Deep-copied, never mutated; stale
            ``inputResponses``/``requestState`` in it are dropped.
        meta: The per-request ``_meta``, sent in full on every leg (digest §1.7).
        handled_kinds: Input request kinds (methods) the caller can answer.
        next_id: Called once per leg for a new JSON-RPC id (owned by the connection).
        limits: Bounds on this flow; adapters pass per-call overrides here.
        random: Floats in ``[0, 1)`` for pacing jitter; required when
            ``limits.pacing_jitter > 0``.
        manual: Emit ``AwaitAnswers`` and wait for :meth:`answer` instead of invoking
            handlers.
        result_check: Called with a complete result that passed the flow's own checks; an
            error it returns fails the flow instead (``Fail``), as a result the protocol
            forbids would. A client checks ``structuredContent`` against the tool's
            ``outputSchema`` with it, and learns from ``tools/list``. Not saved by
            :meth:`to_data`: whoever restores the flow passes it again.

    Raises:
        LocalProtocolError: an argument is unusable (params or a meta that is not JSON
            name where: ``params.arguments.tags: not JSON: a set``).
    """

    __slots__ = (
        "_answers", "_cancelled", "_capabilities", "_error", "_flow_deadline",
        "_handled_kinds", "_handler_deadline", "_last_result", "_leg_deadline", "_leg_id",
        "_leg_inputs", "_legs", "_limits", "_manual", "_meta", "_method", "_next_id", "_now",
        "_outstanding", "_pending", "_random", "_requests", "_result", "_result_check", "_rounds",
        "_seeded", "_state", "_streak", "_verdicts", "_version_retried", "_wake_at",
    )

    def __init__(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        meta: RequestMeta,
        handled_kinds: Iterable[str],
        next_id: Callable[[], RequestId],
        limits: ClientLimits | None = None,
        random: Callable[[], float] | None = None,
        manual: bool = False,
        result_check: ResultCheck | None = None,
    ) -> None:
        if not isinstance(method, str) or not method:
            raise LocalProtocolError(f"method must be a non-empty string, got {method!r}")
        if not isinstance(meta, RequestMeta):
            raise LocalProtocolError(f"meta must be a RequestMeta, got {type(meta).__name__}")
        limits = _DEFAULT_LIMITS if limits is None else limits
        if not isinstance(limits, ClientLimits):
            raise LocalProtocolError(f"limits must be ClientLimits, got {type(limits).__name__}")
        if limits.pacing_jitter > 0 and random is None:
            raise LocalProtocolError("limits.pacing_jitter > 0 needs a random source")
        if not callable(next_id):
            raise LocalProtocolError("next_id must be callable")
        if result_check is not None and not callable(result_check):
            raise LocalProtocolError("result_check must be callable or None")
        kinds = frozenset(handled_kinds)
        if not kinds <= INPUT_REQUEST_KINDS and not all(isinstance(k, str) for k in kinds):
            raise LocalProtocolError("handled_kinds must be strings")
        self._legs = LegBuilder(method, params, meta)
        self._method = method
        self._meta = meta
        self._capabilities = meta.client_capabilities
        self._handled_kinds = kinds
        self._next_id = next_id
        self._limits = limits
        self._random = random
        self._manual = bool(manual)
        self._result_check = result_check
        # Progress.
        self._state = _S_IDLE
        self._rounds = 0  # legs sent
        self._leg_id: RequestId | None = None  # id of the last leg sent
        # What the last leg carried: (inputResponses, requestState, state-only).
        self._leg_inputs: LegInputs = (None, None, False)
        self._version_retried = False  # a leg was sent again after -32022 (once per flow)
        self._outstanding: RequestId | None = None  # leg whose response is awaited
        self._last_result: InputRequiredResult | None = None
        self._seeded = False  # IDLE with a persisted input_required result to resume from
        self._requests: dict[str, InputRequest] = {}  # this round's inputRequests
        self._pending: dict[str, None] = {}  # unanswered keys, in request order
        self._answers: dict[str, JsonObject] = {}  # wire-form answers received so far
        self._streak = 0  # consecutive state-only rounds
        self._cancelled: set[str] = set()  # keys cancelled by the terminal step
        # Why each input request class cannot be taken (or None), filled on first use.
        self._verdicts: Verdicts | None = None
        self._now: float = -_INF  # the latest time fed; time never runs backwards
        # Timers (absolute, in the caller's clock domain).
        self._flow_deadline: float | None = None
        self._leg_deadline: float | None = None
        self._handler_deadline: float | None = None
        self._wake_at: float | None = None
        # Outcome.
        self._result: JsonObject | None = None
        self._error: MrtrError | None = None

    # --- construction from persisted data ------------------------------------------------

    @classmethod
    def resume(
        cls,
        method: str,
        params: Mapping[str, Any],
        result: InputRequiredResult | Mapping[str, Any],
        *,
        meta: RequestMeta,
        handled_kinds: Iterable[str],
        next_id: Callable[[], RequestId],
        limits: ClientLimits | None = None,
        random: Callable[[], float] | None = None,
        manual: bool = False,
        result_check: ResultCheck | None = None,
    ) -> ClientFlow:
        """A flow seeded with an ``input_required`` result received earlier.

        Use it to carry on after a limit error (``error.last_result``) or from a stored
        result. :meth:`start` then processes the seeded result as round 0 (``InputNeeded``
        with ``round=0``; handlers or ``AwaitAnswers``; pacing for a state-only result)
        instead of sending the first request. The round budget starts afresh: the legs
        this flow sends are counted, not the ones that led to ``result``.

        Args:
            result: The model, or its wire form (``resultType`` optional but, when present,
                ``"input_required"``).

        Raises:
            LocalProtocolError: ``method`` cannot answer ``input_required``, or an argument
                is unusable.
            CodecError: ``result`` in wire form is malformed.
        """
        flow = cls(
            method,
            params,
            meta=meta,
            handled_kinds=handled_kinds,
            next_id=next_id,
            limits=limits,
            random=random,
            manual=manual,
            result_check=result_check,
        )
        if method not in MRTR_METHODS:
            raise LocalProtocolError(f"{method} cannot answer input_required (digest §1.4)")
        if not isinstance(result, InputRequiredResult):
            if not isinstance(result, Mapping):
                raise LocalProtocolError("result must be an InputRequiredResult or a mapping")
            if result.get("resultType", RESULT_TYPE_INPUT_REQUIRED) != RESULT_TYPE_INPUT_REQUIRED:
                raise LocalProtocolError("result is not an input_required result")
            result = structure_input_required(dict(result))
        flow._last_result = result
        flow._seeded = True
        return flow

    @classmethod
    def from_data(
        cls,
        data: Mapping[str, Any],
        *,
        now: float,
        next_id: Callable[[], RequestId],
        random: Callable[[], float] | None = None,
        result_check: ResultCheck | None = None,
    ) -> ClientFlow:
        """Restore a flow saved with :meth:`to_data`, possibly in another process.

        The saved timers are durations; they are rebased onto this caller's clock at
        ``now``: the whole-flow budget ends at ``now`` plus the seconds it had left when
        saved, and a pacing wait at ``now`` plus what was left of it. Time spent while
        the data was stored is not counted (no clock spans two processes); a caller that
        can measure it on one clock restores at the save time instead, so it counts.

        Args:
            now: The time on this caller's clock; the restored flow is fed only times at
                or after it.
            result_check: As for the constructor (it is not part of the saved data).

        Raises:
            SavedFlowVersionError: ``data`` is of another format version.
            LocalProtocolError: ``data`` is not a valid saved flow, or ``now`` is unusable.
        """
        snap = snapshot_from_data(data)
        try:
            flow = cls(
                snap.method,
                snap.params,
                meta=snap.meta,
                handled_kinds=snap.handled_kinds,
                next_id=next_id,
                limits=snap.limits,
                random=random,
                manual=snap.manual,
                result_check=result_check,
            )
        except LocalProtocolError as exc:  # params or meta not JSON, or too deep to copy
            raise LocalProtocolError(f"saved flow: {exc}") from None
        flow._state = snap.state
        flow._rounds = snap.rounds
        flow._leg_id = snap.last_request_id
        flow._last_result = snap.last_result
        flow._seeded = snap.seeded
        flow._streak = snap.streak
        flow._tick(now)
        left = snap.flow_time_left
        flow._flow_deadline = None if left is None else now + left
        left = snap.pacing_time_left
        flow._wake_at = None if left is None else now + left
        if snap.state is not _S_IDLE and snap.last_result is not None:
            # The result a paused round rests on is one the flow took (a seeded one is
            # checked when the flow starts): within its limits, of declared kinds (S6).
            error = flow._unusable_result(snap.last_result)
            if error is not None:
                raise LocalProtocolError(f"saved flow: last_result: {error}")
        if snap.state is _S_AWAITING_ANSWERS:
            assert snap.last_result is not None and snap.last_result.input_requests
            flow._requests = dict(snap.last_result.input_requests)
            flow._answers = dict(snap.answers)
            flow._pending = {key: None for key in flow._requests if key not in snap.answers}
        return flow

    def to_data(self, now: float) -> JsonObject:
        """Save the flow as plain JSON-able data (see :meth:`from_data`).

        Possible while ``IDLE``, ``AWAITING_ANSWERS`` (manual mode) or ``PACING``: nothing
        is in flight and no handler runs. ``next_id`` and ``random`` are not saved.

        The data does not depend on the caller's clock: each timer is saved as the
        seconds it has left at ``now`` (none when it has run out), so the data can be
        restored on any other clock.

        Args:
            now: The time on this flow's clock (not before any time it was fed).

        Raises:
            LocalProtocolError: the flow is in another state, ``now`` is unusable, or its
                params are nested too deeply to save (a leg's copy takes more).
        """
        if self._state not in SAVABLE_STATES:
            raise LocalProtocolError(
                f"a flow can be saved only while idle, awaiting answers or pacing, "
                f"not {self._state.name}"
            )
        self._tick(now)
        limits = self._limits
        flow_deadline = self._flow_deadline
        wake_at = self._wake_at
        return snapshot_to_data(
            FlowSnapshot(
                method=self._method,
                params=self._legs.base_params,
                meta=self._meta,
                handled_kinds=self._handled_kinds,
                limits=self._limits,
                manual=self._manual,
                state=self._state,
                rounds=self._rounds,
                last_request_id=self._leg_id,
                last_result=self._last_result,
                seeded=self._seeded,
                answers=dict(self._answers),
                streak=self._streak,
                flow_time_left=_time_left(flow_deadline, now, limits.flow_timeout),
                pacing_time_left=_time_left(wake_at, now, limits.pacing_max),
            )
        )

    # --- read-only view ----------------------------------------------------------------------

    @property
    def state(self) -> FlowState:
        """Where the flow is."""
        return self._state

    @property
    def done(self) -> bool:
        """The flow is terminal (``COMPLETE`` or ``FAILED``)."""
        return self._state in TERMINAL_STATES

    @property
    def rounds(self) -> int:
        """Legs (requests) sent so far, the first included."""
        return self._rounds

    @property
    def method(self) -> str:
        """The request method."""
        return self._method

    @property
    def limits(self) -> ClientLimits:
        """The limits this flow runs under."""
        return self._limits

    @property
    def manual(self) -> bool:
        """Manual mode: answers come through :meth:`answer`."""
        return self._manual

    @property
    def deadline(self) -> float | None:
        """When the adapter's one timer must fire (``TimerFired``), or ``None``.

        The earliest of: the leg timeout while a request is in flight, the handler limit
        while handlers run, the pacing wake-up of a state-only round, and the whole-flow
        budget. Re-read it after every call.
        """
        state = self._state
        if state is _S_AWAITING_RESPONSE:
            return _min(self._leg_deadline, self._flow_deadline)
        if state is _S_AWAITING_HANDLERS:
            return _min(self._handler_deadline, self._flow_deadline)
        if state is _S_PACING:
            return _min(self._wake_at, self._flow_deadline)
        if state is _S_AWAITING_ANSWERS:
            return self._flow_deadline
        return None

    @property
    def pending_keys(self) -> tuple[str, ...]:
        """Keys of this round still unanswered (running handlers or awaited answers)."""
        return tuple(self._pending)

    @property
    def outstanding_request(self) -> RequestId | None:
        """Id of the leg whose response is awaited.

        Stays set when a timeout or cancel ended the flow while the leg was in flight, so
        the adapter can cancel that request (``notifications/cancelled`` on stdio,
        digest §2.7).
        """
        return self._outstanding

    @property
    def last_result(self) -> InputRequiredResult | None:
        """The last ``input_required`` result accepted (or seeded)."""
        return self._last_result

    @property
    def result(self) -> JsonObject | None:
        """The final result once ``COMPLETE``."""
        return self._result

    @property
    def error(self) -> MrtrError | None:
        """The error once ``FAILED``."""
        return self._error

    # --- inputs ------------------------------------------------------------------------------

    def start(self, now: float) -> list[ClientCommand]:
        """Send the first leg (``[RoundStarted, SendRequest]``), or process the seeded
        result of a resumed flow.

        Raises:
            LocalProtocolError: the flow was already started, or ``next_id`` misbehaved.
        """
        self._tick(now)
        if self._state is not _S_IDLE:  # the one state that accepts START
            self._accept(_I_START)
        budget = self._limits.flow_timeout
        flow_deadline = None if budget is None else now + budget
        if self._seeded:
            assert self._last_result is not None
            self._flow_deadline = flow_deadline
            return self._take_input_required(self._last_result, now, resumed=True)
        request_id = self._draw_id()
        message = self._legs.build(request_id, None, None)
        self._flow_deadline = flow_deadline
        return self._commit_leg(request_id, message, now, _T_SENT_FIRST, False)

    def handle(self, event: ClientEvent, now: float) -> list[ClientCommand]:
        """Feed one fact; returns the commands to carry out, in order.

        Raises:
            LocalProtocolError: the event is illegal in the current state or malformed.
        """
        # _tick and _accept, inlined on the hot path: every input but start comes here.
        if (type(now) is not float and type(now) is not int) or not now >= self._now:
            self._tick(now)
        before, self._now = self._now, now
        try:
            return self._handle(event, now)
        except LocalProtocolError:
            self._now = before  # a refused input changes nothing, the clock included
            raise

    def _handle(self, event: ClientEvent, now: float) -> list[ClientCommand]:
        state = self._state
        # Each input's usual state is checked by identity; any other goes to the table.
        kind = type(event)
        if kind is ResponseReceived and state is _S_AWAITING_RESPONSE:
            return self._on_response(event.message, now)  # type: ignore[union-attr]
        if kind is HandlerReturned and state is _S_AWAITING_HANDLERS:
            return self._on_handler_returned(
                event.key, event.answer, now  # type: ignore[union-attr]
            )
        if state in TERMINAL_STATES and self._absorb(event):
            return []
        if type(event) is ResponseReceived:
            self._accept(_I_RESPONSE)
            return self._on_response(event.message, now)
        if type(event) is HandlerReturned:
            self._accept(_I_HANDLER_RETURNED)
            return self._on_handler_returned(event.key, event.answer, now)
        if type(event) is HandlerFailed:
            self._accept(_I_HANDLER_FAILED)
            return self._on_handler_failed(event.key, event.error)
        if type(event) is TimerFired:
            self._accept(_I_TIMER)
            return self._on_timer(now)
        if type(event) is CancelRequested:
            self._accept(_I_CANCEL)
            reason = event.reason
            message = "flow cancelled" if reason is None else f"flow cancelled: {reason}"
            error = FlowCancelledError(message, last_result=self._last_result)
            return self._fail(error, _T_CANCELLED)
        raise LocalProtocolError(f"unknown event {event!r} (events are matched by exact type)")

    def handle_many(self, events: Iterable[ClientEvent], now: float) -> list[ClientCommand]:
        """Feed several facts that happened at the same time, in order; the commands of all.

        Meant for handler outcomes that arrive together: when the first failure ends the
        flow, the failures after it in the batch end up on its ``others``. Raises like
        :meth:`handle`; events before the one that raised stay applied.
        """
        commands: list[ClientCommand] = []
        for event in events:
            commands.extend(self.handle(event, now))
        return commands

    def answer(self, answers: Mapping[str, object], now: float) -> list[ClientCommand]:
        """Manual mode: answer some or all entries of the awaited round.

        Answers may come in several calls; once every key is answered the retry is sent
        (``[RoundFulfilled, RoundStarted, SendRequest]``). Each answer is the model for
        its kind or a plain JSON object.

        Raises:
            LocalProtocolError: not awaiting answers, an unknown or already answered key,
                or an answer of the wrong shape (nothing is recorded then).
        """
        self._tick(now)
        self._accept(_I_ANSWER)
        if not isinstance(answers, Mapping):
            raise LocalProtocolError("answers must be a mapping of key -> answer")
        wire: dict[str, JsonObject] = {}
        for key, value in answers.items():
            if key not in self._requests:
                raise LocalProtocolError(f"no input request {key!r} in this round")
            if key not in self._pending:
                raise LocalProtocolError(f"input request {key!r} is already answered")
            wire[key] = answer_for(self._requests[key], value, key=key)
        self._answers.update(wire)
        if len(wire) < len(self._pending):
            for key in wire:
                del self._pending[key]
            self._state = TRANSITIONS[self._state, _T_ANSWERED]
            return []
        return self._finish_round(wire, now, _T_ROUND_ANSWERED, _T_ANSWERED_TOO_LATE)

    # --- the steps ---------------------------------------------------------------------------

    def _on_response(self, message: Any, now: float) -> list[ClientCommand]:
        if not isinstance(message, dict):
            return self._reject(RemoteProtocolError("response is not a JSON object"))
        response_id = message.get("id")
        # The adapter routes responses by id, so another id is the adapter's mistake.
        outstanding = self._outstanding
        # JSON-RPC ids match by type and value: 1, "1" and true are three different ids.
        if response_id is not None and not (
            type(response_id) is type(outstanding) and response_id == outstanding
        ):
            raise LocalProtocolError(
                f"response id {response_id!r} is not the request in flight "
                f"({self._outstanding!r})"
            )
        if message.get("jsonrpc") != "2.0":
            return self._reject(RemoteProtocolError('response lacks "jsonrpc": "2.0"'))
        has_result = "result" in message
        if has_result == ("error" in message):
            return self._reject(
                RemoteProtocolError("response must carry exactly one of result and error")
            )
        if not has_result:
            # An error response's id may be null when the server could not read ours.
            error = _read_error(message["error"])
            if self._version_retried or not _names_our_version(error, self._meta):
                return self._reject(error)
            return self._send_leg_again(now)
        if response_id is None:
            return self._reject(RemoteProtocolError("result response carries no id"))
        result = message["result"]
        if not isinstance(result, dict):
            return self._reject(CodecError("result must be an object", path="result",
                                           result=result))
        # C7: a missing resultType means complete; an unknown one is invalid (digest §1.1).
        result_type = result.get("resultType", RESULT_TYPE_COMPLETE)
        if result_type == RESULT_TYPE_COMPLETE:
            # digest §1.3: an MRTR method's result type names its payload (content,
            # messages, contents); one without it is no result of that method.
            try:
                check_complete_result(self._method, result)
            except CodecError as exc:
                exc.result = result
                return self._reject(exc)
            check = self._result_check
            if check is not None:
                refused = check(result)
                if refused is not None:
                    return self._reject(refused)
            self._outstanding = None
            self._result = result
            self._state = TRANSITIONS[self._state, _T_COMPLETED]
            return [_complete(result, self._rounds)]
        if result_type != RESULT_TYPE_INPUT_REQUIRED:
            return self._reject(
                RemoteProtocolError(f"unknown resultType {result_type!r}", result=result)
            )
        if self._method not in MRTR_METHODS:  # S2, digest §1.4
            return self._reject(
                RemoteProtocolError(f"{self._method} must not answer input_required",
                                    result=result)
            )
        # Peer input is bounded before it is read: an oversized inputRequests map is
        # refused on its count alone, before any of its entries is structured.
        raw_requests = result.get("inputRequests")
        if isinstance(raw_requests, dict) and len(raw_requests) > self._limits.max_input_requests:
            return self._reject(self._too_many_requests(len(raw_requests), result))
        try:
            parsed = structure_input_required(result)
        except CodecError as exc:
            exc.result = result
            return self._reject(exc)
        return self._take_input_required(parsed, now, resumed=False)

    def _take_input_required(
        self, result: InputRequiredResult, now: float, *, resumed: bool
    ) -> list[ClientCommand]:
        """Check an ``input_required`` result, then start fulfilling it (or pacing)."""
        error = self._check_input_required(result, now)
        if error is not None:
            self._last_result = result
            self._outstanding = None
            return self._fail(error, _T_RESUME_REJECTED if resumed else _T_REJECTED)
        requests = result.input_requests
        round_no = self._rounds
        if not requests:
            # A state-only round (digest §2.4): pace, then retry with the state alone.
            delay = pacing_delay(self._streak + 1, self._limits, self._random)
            self._streak += 1
            self._wake_at = now + delay
            self._commit_result(result)
            trigger = _T_RESUMED_STATE_ONLY if resumed else _T_STATE_ONLY
            self._state = TRANSITIONS[self._state, trigger]
            return [_input_needed(round_no, result)]
        self._streak = 0
        # _commit_result, inlined.
        self._last_result = result
        self._outstanding = None
        self._leg_deadline = None
        self._seeded = False
        self._requests = requests
        self._pending = dict.fromkeys(requests)
        self._answers = {}
        commands: list[ClientCommand] = [_input_needed(round_no, result)]
        if self._manual:
            commands.append(AwaitAnswers(round=round_no, result=result))
            trigger = _T_RESUMED_WITH_INPUT_MANUAL if resumed else _T_INPUT_REQUIRED_MANUAL
            self._state = TRANSITIONS[self._state, trigger]
            return commands
        # C1: every entry is fulfilled, all at once.
        timeout = self._limits.handler_timeout
        deadline = None if timeout is None else now + timeout
        self._handler_deadline = deadline
        append = commands.append
        invoke = _invoke_handler
        for key, request in requests.items():
            append(invoke(key, request, deadline))
        trigger = _T_RESUMED_WITH_INPUT if resumed else _T_INPUT_REQUIRED
        self._state = TRANSITIONS[self._state, trigger]
        return commands

    def _check_input_required(self, result: InputRequiredResult, now: float) -> MrtrError | None:
        """Everything that must hold before a handler runs or a retry is sent."""
        error = self._unusable_result(result)
        if error is not None:
            return error
        limits = self._limits
        if self._rounds >= limits.max_rounds:
            return RoundLimitError(
                f"input_required after {self._rounds} requests; max_rounds is "
                f"{limits.max_rounds}",
                limit="max_rounds", value=limits.max_rounds, last_result=result,
            )
        flow_deadline = self._flow_deadline
        if flow_deadline is not None and now >= flow_deadline:
            return self._flow_deadline_error(result)
        return None

    def _unusable_result(self, result: InputRequiredResult) -> MrtrError | None:
        """Why this flow cannot take ``result`` at all (a size limit, or an input request it
        does not declare or handle), or ``None``."""
        limits = self._limits
        requests = result.input_requests or _NO_REQUESTS
        if len(requests) > limits.max_input_requests:
            return self._too_many_requests(len(requests), result)
        state = result.request_state
        # A str of n code points is at most 4n UTF-8 bytes: encode only when it may matter.
        if state is not None and len(state) * 4 > limits.max_state_bytes:
            size = len(state.encode("utf-8", "surrogatepass"))
            if size > limits.max_state_bytes:
                return StateSizeLimitError(
                    f"requestState of {size} bytes, more than {limits.max_state_bytes}",
                    limit="max_state_bytes", value=limits.max_state_bytes, last_result=result,
                )
        verdicts = self._verdicts
        if verdicts is None:
            verdicts = self._verdicts = _shared_verdicts(self._capabilities, self._handled_kinds)
        for key, request in requests.items():
            reason = verdicts.get(type(request), _UNJUDGED)
            if reason is _UNJUDGED:
                reason = self._unsupported(request)
            if reason is not None:
                return UnsupportedInputError(key, request.method, reason, last_result=result)
        return None

    def _too_many_requests(self, count: int, result: Any) -> InputRequestsLimitError:
        """The error for an ``input_required`` result (a model, or as received) with
        ``count`` ``inputRequests`` entries, more than ``max_input_requests``."""
        limit = self._limits.max_input_requests
        return InputRequestsLimitError(
            f"{count} inputRequests entries, more than {limit}",
            limit="max_input_requests", value=limit, last_result=result,
        )

    def _unsupported(self, request: InputRequest) -> str | None:
        """Why this client cannot take ``request`` (S6, S6a, S6b), or ``None``.

        The verdict on an elicitation or roots request depends on its class alone (given
        the capabilities and handled kinds), so it is kept in ``_verdicts``; a sampling
        request's depends on its tools.
        """
        reason = self._judge(request)
        if type(request) in _SAME_VERDICT_PER_CLASS and self._verdicts is not None:
            self._verdicts[type(request)] = reason
        return reason

    def _judge(self, request: InputRequest) -> str | None:
        kind = request.method
        caps = self._capabilities
        if not caps.declares(kind):
            return "not declared"
        if kind == ELICITATION_CREATE:
            elicitation = caps.elicitation
            assert elicitation is not None
            if isinstance(request, ElicitUrlRequest) and not elicitation.supports_url:
                return "not declared"  # URL mode needs elicitation.url (S6a)
            if isinstance(request, ElicitFormRequest) and not elicitation.supports_form:
                return "not declared"
        elif kind == SAMPLING_CREATE_MESSAGE:
            sampling = caps.sampling
            assert sampling is not None and isinstance(request, CreateMessageRequest)
            extra = request.extra
            if ("tools" in extra or "toolChoice" in extra) and sampling.tools is None:
                return "not declared"  # tools need sampling.tools (S6b, C12)
        if kind not in self._handled_kinds:
            return "no handler"
        return None

    def _on_handler_returned(self, key: str, answer: object, now: float) -> list[ClientCommand]:
        pending = self._pending
        if key not in pending:
            raise LocalProtocolError(f"no handler is running for input request {key!r}")
        try:
            wire = answer_for(self._requests[key], answer, key=key)
        except LocalProtocolError as exc:
            del self._pending[key]  # it returned: nothing to cancel
            return self._fail(
                HandlerFailedError(key, exc, last_result=self._last_result),
                _T_UNUSABLE_ANSWER,
            )
        self._answers[key] = wire
        if len(pending) > 1:
            del pending[key]
            self._state = TRANSITIONS[self._state, _T_HANDLER_RETURNED]
            return []
        return self._finish_round((key,), now, _T_ROUND_FULFILLED, _T_UNUSABLE_ANSWER)

    def _on_handler_failed(self, key: str, error: BaseException) -> list[ClientCommand]:
        if key not in self._pending:
            raise LocalProtocolError(f"no handler is running for input request {key!r}")
        del self._pending[key]  # the failed one needs no cancel
        return self._fail(
            HandlerFailedError(key, error, last_result=self._last_result), _T_HANDLER_FAILED
        )

    def _on_timer(self, now: float) -> list[ClientCommand]:
        state = self._state
        # Every limit that has run out by now, as (deadline, rank, error); the earliest is
        # reported, and on a tie the leg's or handler's own limit before the flow budget.
        expired: list[tuple[float, int, MrtrError]] = []
        flow_deadline = self._flow_deadline
        if flow_deadline is not None and now >= flow_deadline:
            expired.append((flow_deadline, 1, self._flow_deadline_error(self._last_result)))
        leg = self._leg_deadline
        if state is _S_AWAITING_RESPONSE and leg is not None and now >= leg:
            expired.append((leg, 0, LegTimeoutError(
                f"no response to request {self._outstanding!r} within "
                f"{self._limits.leg_timeout} s",
                limit="leg_timeout", value=self._limits.leg_timeout,
                last_result=self._last_result,
            )))
        handler = self._handler_deadline
        if state is _S_AWAITING_HANDLERS and handler is not None and now >= handler:
            key = next(iter(self._pending))
            expired.append((handler, 0, HandlerTimeoutError(
                f"handler for input request {key!r} took longer than "
                f"{self._limits.handler_timeout} s",
                key=key, limit="handler_timeout", value=self._limits.handler_timeout,
                last_result=self._last_result,
            )))
        if expired:
            _, _, error = min(expired, key=lambda item: (item[0], item[1]))
            return self._fail(error, _T_TIMED_OUT)
        if state is _S_PACING and self._wake_at is not None and now >= self._wake_at:
            assert self._last_result is not None
            # digest §2.4: a state-only retry carries the state and no inputResponses.
            request_id = self._draw_id()
            carried = self._last_result.request_state
            message = self._legs.build(request_id, None, carried)
            return self._commit_leg(request_id, message, now, _T_PACING_ELAPSED,
                                    state_only=True, inputs=(None, carried, True))
        self._state = TRANSITIONS[self._state, _T_TIMER_EARLY]
        return []

    # --- helpers ---------------------------------------------------------------------------

    def _finish_round(
        self, last: Iterable[str], now: float, sent: Trigger, late: Trigger
    ) -> list[ClientCommand]:
        """Every entry is answered: send the retry (unless the budget is spent).

        ``self._answers`` holds every answer of the round; ``last`` names the ones this
        input added, taken out again if ``next_id`` fails (the input then changes nothing).
        """
        result = self._last_result
        assert result is not None and result.input_requests is not None
        flow_deadline = self._flow_deadline
        if flow_deadline is not None and now >= flow_deadline:
            self._pending.clear()
            return self._fail(self._flow_deadline_error(result), late)
        answers = self._answers
        try:
            request_id = self._draw_id()
        except LocalProtocolError:
            for key in last:
                del answers[key]
            raise
        keys = tuple(result.input_requests)
        # C6: inputResponses holds this round's answers under the server's keys, in the
        # server's order. The dict goes into the message; the flow reads it again only to
        # send the leg once more after a -32022, and then sends a copy.
        responses = answers if tuple(answers) == keys else {key: answers[key] for key in keys}
        state = result.request_state
        message = self._legs.build(request_id, responses, state)
        fulfilled = _round_fulfilled(self._rounds, keys)
        self._answers = {}
        self._pending = {}
        return self._commit_leg(request_id, message, now, sent, False, fulfilled,
                                inputs=(responses, state, False))

    def _send_leg_again(self, now: float) -> list[ClientCommand]:
        """The leg in flight once more, the same round on a new id (C4): the server refused
        its protocol version while listing it as supported (digest §3.2, Versioning)."""
        responses, state, state_only = self._leg_inputs
        request_id = self._draw_id()
        # The last message holds the answers it carried; this one gets copies of its own.
        again = None if responses is None else copy.deepcopy(responses)
        message = self._legs.build(request_id, again, state)
        self._version_retried = True
        return self._commit_leg(request_id, message, now, _T_VERSION_RETRIED, state_only,
                                inputs=(again, state, state_only), same_round=True)

    def _draw_id(self) -> RequestId:
        """The next leg's id from ``next_id``, checked; changes nothing in the flow."""
        request_id = self._next_id()
        kind = type(request_id)
        if kind is not int and kind is not str and (
            isinstance(request_id, bool) or not isinstance(request_id, str | int)
        ):
            raise LocalProtocolError(f"next_id returned {request_id!r}, not a str or int")
        last = self._leg_id
        if last is not None and kind is type(last) and request_id == last:
            # C4: every retry is a new request with a new id.
            raise LocalProtocolError(f"next_id repeated the previous id {request_id!r}")
        return request_id

    def _commit_leg(
        self,
        request_id: RequestId,
        message: JsonObject,
        now: float,
        trigger: Trigger,
        state_only: bool,
        notice: RoundFulfilled | None = None,
        inputs: LegInputs = (None, None, False),
        same_round: bool = False,
    ) -> list[ClientCommand]:
        """The leg is sent: ``[notice,] RoundStarted, SendRequest``. ``inputs`` are what
        it carries; ``same_round``: it is a round's leg sent again (it does not count)."""
        rounds = self._rounds = self._rounds if same_round else self._rounds + 1
        self._leg_inputs = inputs
        self._leg_id = request_id
        self._outstanding = request_id
        self._seeded = False
        timeout = self._limits.leg_timeout
        self._leg_deadline = None if timeout is None else now + timeout
        self._handler_deadline = None
        self._wake_at = None
        self._state = TRANSITIONS[self._state, trigger]
        started = _round_started(rounds, request_id, state_only)
        send = _send_request(request_id, self._method, message)
        if notice is None:
            return [started, send]
        return [notice, started, send]

    def _commit_result(self, result: InputRequiredResult) -> None:
        self._last_result = result
        self._outstanding = None
        self._leg_deadline = None
        self._seeded = False

    def _flow_deadline_error(self, last_result: InputRequiredResult | None) -> FlowDeadlineError:
        return FlowDeadlineError(
            f"the flow's budget of {self._limits.flow_timeout} s is spent",
            limit="flow_timeout", value=self._limits.flow_timeout, last_result=last_result,
        )

    def _reject(self, error: MrtrError) -> list[ClientCommand]:
        """The response to the leg in flight is unusable: fail (nothing is in flight now)."""
        self._outstanding = None
        return self._fail(error, _T_REJECTED)

    def _fail(self, error: MrtrError, trigger: Trigger) -> list[ClientCommand]:
        commands: list[ClientCommand] = []
        if self._pending and self._state is _S_AWAITING_HANDLERS:
            keys = tuple(self._pending)
            self._cancelled = set(keys)
            commands.append(CancelHandlers(keys=keys))
        self._pending = {}
        self._answers = {}
        self._error = error
        self._state = TRANSITIONS[self._state, trigger]
        commands.append(Fail(error=error))
        return commands

    def _absorb(self, event: object) -> bool:
        """After the end: take the outcome of a handler this flow cancelled, once."""
        if not isinstance(event, HandlerReturned | HandlerFailed):
            return False
        if event.key not in self._cancelled:
            return False
        self._cancelled.discard(event.key)
        if isinstance(event, HandlerFailed) and isinstance(self._error, HandlerFailedError):
            self._error.add_other(event.key, event.error)
        return True

    def _accept(self, kind: Input) -> None:
        if kind not in ACCEPTS[self._state]:
            raise LocalProtocolError(f"{kind.value} is not expected while {self._state.name}")

    def _tick(self, now: float) -> None:
        kind = type(now)
        if kind is not float and kind is not int and (
            isinstance(now, bool) or not isinstance(now, int | float)
        ):
            raise LocalProtocolError(f"now must be a number, got {now!r}")
        if not now >= self._now:  # also refuses NaN
            raise LocalProtocolError(f"now must not run backwards: {now!r} after {self._now!r}")
        self._now = now


def _names_our_version(error: MrtrError, meta: RequestMeta) -> bool:
    """Whether ``error`` is ``-32022`` (unsupported protocol version) whose
    ``data.supported`` lists the version ``meta`` sends: the one version this flow can
    retry with (digest §1.8, §3.2)."""
    if type(error) is not JsonRpcError or error.code != UNSUPPORTED_PROTOCOL_VERSION:
        return False
    data = error.data
    supported = data.get("supported") if isinstance(data, dict) else None
    return isinstance(supported, list) and meta.protocol_version in supported


def _read_error(error: Any) -> MrtrError:
    """The typed form of a JSON-RPC ``error`` member (digest §1.8)."""
    if not isinstance(error, dict):
        return RemoteProtocolError("error must be an object")
    code = error.get("code")
    message = error.get("message")
    if isinstance(code, bool) or not isinstance(code, int):
        return RemoteProtocolError(f"error code must be an integer, got {code!r}")
    if not isinstance(message, str):
        return RemoteProtocolError(f"error message must be a string, got {message!r}")
    return JsonRpcError(code, message, error.get("data"))
