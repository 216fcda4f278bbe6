"""What every client driver shares, whatever its runtime.

The drivers (``mrtr_sync``, ``mrtr_trio``, ``mrtr_asyncio``) keep the handlers the user
registered, declare the capabilities those handlers imply, build one
:class:`~mrtr_core.client.flow.ClientFlow` per call with the per-call limits, and hand a
manual-mode round to the caller. That configuration lives here once, in
:class:`ClientBase`, so the three drivers cannot drift apart; each driver adds only its own
way of waiting. Every protocol decision is the flow's.
"""

from __future__ import annotations

import abc
import collections
import inspect
import itertools
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, Self, TypedDict, TypeVar, Unpack

import attrs

from mrtr_core._checks import flag, instance_of, shown
from mrtr_core._pickling import PicklableError
from mrtr_core.client.commands import (
    AwaitAnswers,
    ClientCommand,
    Fail,
    InputNeeded,
    InvokeHandler,
    RoundFulfilled,
    RoundStarted,
)
from mrtr_core.client.events import CancelRequested, HandlerFailed, HandlerReturned
from mrtr_core.client.flow import ClientFlow, ResultCheck
from mrtr_core.client.limits import ClientLimits
from mrtr_core.client.outputs import OutputSchemas
from mrtr_core.errors import LocalProtocolError, TransportClosedError, TransportError
from mrtr_core.wire.formats import URI_FORMAT, is_uri
from mrtr_core.wire.models import (
    CALL_TOOL,
    ELICITATION_CREATE,
    GET_PROMPT,
    PROTOCOL_VERSION,
    READ_RESOURCE,
    ROOTS_LIST,
    SAMPLING_CREATE_MESSAGE,
    ClientCapabilities,
    ElicitationCapability,
    Implementation,
    InputRequest,
    InputRequiredResult,
    JsonObject,
    RequestMeta,
    SamplingCapability,
)

__all__ = [
    "NOTICES",
    "AsyncClientBase",
    "CallOptions",
    "ClientBase",
    "HandlerOutcome",
    "HandlerRuns",
    "HandlerTable",
    "InputRequired",
    "bare_exception",
    "call_limits",
    "client_closed",
    "prompt_params",
    "resource_params",
    "tool_params",
    "transport_failed",
]

H = TypeVar("H")
R = TypeVar("R")

HandlerOutcome = HandlerReturned | HandlerFailed
"""What a handler's run ends in, for the flow."""

NOTICES = (RoundStarted, InputNeeded, RoundFulfilled)
"""The informational commands a driver passes to its ``on_event`` callback."""

_KINDS = (ELICITATION_CREATE, SAMPLING_CREATE_MESSAGE, ROOTS_LIST)


def _is_progress_token(value: object) -> bool:
    """Whether ``value`` is a ``ProgressToken``: a string or a finite number (digest §1.7)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str | int)


@attrs.define
class HandlerTable(Generic[H]):
    """The user's handlers, one per input kind, and the capabilities they imply.

    A kind is declared in ``clientCapabilities`` exactly when it has a handler (digest §2.3
    C8: declare what you support, on every request). Elicitation declares the modes set here;
    ``elicitation: {}`` would mean form only, so both modes are always spelled out.

    Attributes:
        elicitation: Handler for ``elicitation/create``.
        elicitation_form: Declare form mode.
        elicitation_url: Declare URL mode.
        sampling: Handler for ``sampling/createMessage``.
        roots: Handler for ``roots/list``.
    """

    elicitation: H | None = None
    elicitation_form: bool = True
    elicitation_url: bool = False
    sampling: H | None = None
    roots: H | None = None

    def for_kind(self, kind: str) -> H | None:
        """The handler registered for an input request kind, if any."""
        return {
            ELICITATION_CREATE: self.elicitation,
            SAMPLING_CREATE_MESSAGE: self.sampling,
            ROOTS_LIST: self.roots,
        }.get(kind)

    @property
    def handled_kinds(self) -> frozenset[str]:
        """The kinds that have a handler."""
        return frozenset(k for k in _KINDS if self.for_kind(k) is not None)

    def capabilities(
        self, base: ClientCapabilities | None = None, *, manual: bool = False
    ) -> ClientCapabilities:
        """``base`` (experimental, extensions, ...) with the handled kinds declared.

        A ``sampling`` declared in ``base`` is kept when a sampling handler is registered:
        its ``tools`` and ``context`` say what that handler supports, and tool-enabled
        sampling needs ``sampling.tools`` (digest S6b, C12). In ``manual`` mode the caller
        answers every round, so a kind ``base`` declares stays declared, as given, without
        a handler too.
        """
        base = base or ClientCapabilities()
        sampling = base.sampling if manual else None
        if self.sampling is not None:
            sampling = base.sampling or SamplingCapability()
        elicitation = base.elicitation if manual else None
        if self.elicitation is not None and (self.elicitation_form or self.elicitation_url):
            elicitation = ElicitationCapability(
                form={} if self.elicitation_form else None,
                url={} if self.elicitation_url else None,
            )
        roots = base.roots if manual else None
        if self.roots is not None:
            roots = {}
        return attrs.evolve(base, elicitation=elicitation, sampling=sampling, roots=roots)


def call_limits(
    base: ClientLimits,
    *,
    limits: ClientLimits | None = None,
    max_rounds: int | None = None,
    timeout: float | None = None,
) -> ClientLimits:
    """The limits of one call: the client's, replaced by ``limits``, then per-call overrides.

    ``timeout`` is the whole-flow budget (``flow_timeout``).
    """
    out = limits or base
    changes: dict[str, Any] = {}
    if max_rounds is not None:
        changes["max_rounds"] = max_rounds
    if timeout is not None:
        changes["flow_timeout"] = timeout
    return attrs.evolve(out, **changes) if changes else out


class CallOptions(TypedDict, total=False):
    """Per-call options of every client method (``call_tool``, ``request``, ...).

    Attributes:
        auto: Override the client's ``auto`` (``False``: manual mode for this call).
        limits: Replace the client's limits for this call.
        max_rounds: Override ``limits.max_rounds``.
        timeout: Override ``limits.flow_timeout``, the whole-flow budget in seconds.
        progress_token: Sent as ``_meta.progressToken`` on every leg: a string or a finite
            number (anything else is a ``LocalProtocolError`` before anything is sent).
    """

    auto: bool | None
    limits: ClientLimits | None
    max_rounds: int | None
    timeout: float | None
    progress_token: str | int | None


_CALL_OPTIONS = frozenset(CallOptions.__annotations__)
"""The names of the per-call options (any other is refused)."""


class InputRequired(PicklableError, Exception):
    """Manual mode: the server needs input the caller will provide.

    Not an :class:`~mrtr_core.errors.MrtrError`: nothing failed. Answer it with the client's
    ``resume(pending, answers)``. ``data`` is plain JSON and independent of any clock, so
    the flow can be stored and resumed later by another client instance, in another
    process.

    A round is answered once (its ``requestState`` goes to the server once): after a
    ``resume`` of this exception has taken its answers (:attr:`resumed`), another resume of
    it, whether the first is still running or over, is refused and sends nothing. ``data``
    carries no such mark: saved data resumed twice is refused only by the server (a
    single-use tool's replay guard).

    The time the flow waits for answers counts against its budget (``flow_timeout``)
    whenever it can be measured: when this exception itself is resumed on the clock it was
    raised on. Data restored elsewhere carries the budget that was left when it was saved.

    It pickles (to hand the round to another process) with every attribute but ``clock``,
    which identifies a time line of this process only (``None`` in the copy). A copy is
    resumed apart from the original, as its ``data`` would be.

    Attributes:
        round: The round that answered ``input_required``.
        result: That result (typed).
        data: The saved flow (``ClientFlow.to_data(saved_at)``).
        saved_at: When ``data`` was saved, on the raising driver's clock.
        clock: What identifies that clock (the driver decides; ``None``: unknown).
    """

    def __init__(
        self,
        round: int,
        result: InputRequiredResult,
        data: JsonObject,
        *,
        saved_at: float | None = None,
        clock: object = None,
    ) -> None:
        keys = ", ".join(sorted(result.input_requests or {})) or "none"
        super().__init__(f"round {round} needs input (keys: {keys})")
        self.round = round
        self.result = result
        self.data = data
        self.saved_at = saved_at
        self.clock = clock
        # Emptied by the resume that takes the round: list.pop is atomic, so only one of two
        # resumes racing in threads gets the item.
        self._unresumed: list[None] = [None]

    @property
    def resumed(self) -> bool:
        """Whether a ``resume`` has taken this round's answers (it is not resumed again)."""
        return not self._unresumed

    def _take(self) -> bool:
        """Mark the round resumed; ``False`` when a resume took it already."""
        try:
            self._unresumed.pop()
        except IndexError:
            return False
        return True

    @property
    def input_requests(self) -> Mapping[str, InputRequest]:
        """The entries to answer, by key."""
        return self.result.input_requests or {}

    def _pickled_fields(self) -> dict[str, Any]:
        # The clock identifies a time line of this process only: a copy (pickled to another
        # process, or copied) is resumed as data restored elsewhere is, with the budget that
        # was left when it was saved.
        return {**super()._pickled_fields(), "clock": None}


def _target(what: str, value: object) -> None:
    """Refuse a tool or prompt name or a resource URI that is not a non-empty string (the
    server could only answer -32602 for it)."""
    instance_of(what, value, str, "a string")
    if not value:
        raise ValueError(f"{what} must not be empty")


def _arguments(arguments: object, *, strings: bool) -> JsonObject:
    """A copy of call ``arguments``: a mapping with string keys (and, for a prompt, string
    values: digest §1.3, ``GetPromptRequest.params.arguments``).

    Raises:
        TypeError: naming what is not so.
    """
    instance_of("arguments", arguments, Mapping, "a mapping or None")
    assert isinstance(arguments, Mapping)
    out: JsonObject = {}
    for key, value in arguments.items():
        if type(key) is not str:
            raise TypeError(f"arguments: a name must be a string, not {type(key).__name__}")
        if strings and type(value) is not str:
            raise TypeError(f"arguments[{key!r}]: a prompt argument is a string, not "
                            f"{type(value).__name__}")
        out[key] = value
    return out


def tool_params(name: str, arguments: Mapping[str, Any] | None) -> tuple[str, JsonObject]:
    """Method and params of ``tools/call``.

    Raises:
        TypeError, ValueError: ``name`` is not a non-empty string, or ``arguments`` is not a
            mapping with string names (or ``None``).
    """
    _target("name", name)
    params: JsonObject = {"name": name}
    if arguments is not None:
        params["arguments"] = _arguments(arguments, strings=False)
    return CALL_TOOL, params


def prompt_params(name: str, arguments: Mapping[str, str] | None) -> tuple[str, JsonObject]:
    """Method and params of ``prompts/get``.

    Raises:
        TypeError, ValueError: ``name`` is not a non-empty string, or ``arguments`` is not a
            mapping of strings to strings (or ``None``).
    """
    _target("name", name)
    params: JsonObject = {"name": name}
    if arguments is not None:
        params["arguments"] = _arguments(arguments, strings=True)
    return GET_PROMPT, params


def resource_params(uri: str) -> tuple[str, JsonObject]:
    """Method and params of ``resources/read``.

    Raises:
        TypeError, ValueError: ``uri`` is not a non-empty string, or not a URI with a
            scheme (schema.json gives ``ReadResourceRequestParams.uri`` format ``uri``:
            the server could only answer -32602 for it).
    """
    _target("uri", uri)
    if not is_uri(uri):
        raise ValueError(f"uri must be {URI_FORMAT}, got {shown(uri)}")
    return READ_RESOURCE, {"uri": uri}


class ClientBase(Generic[H]):
    """Configuration and flow construction shared by the sync, trio and asyncio clients.

    Args:
        client_info: Sent as ``clientInfo`` in every request's ``_meta``.
        elicitation, sampling, roots: Handlers for the three input kinds; a kind is declared
            in ``clientCapabilities`` exactly when it has a handler.
        elicitation_form, elicitation_url: The elicitation modes to declare. A URL-mode
            answer carries no ``content`` (digest §1.6): one with content fails the call
            with :class:`~mrtr_core.errors.LocalProtocolError` naming the key.
        capabilities: Extra capabilities (``experimental``, ``extensions``) to declare; its
            ``sampling`` (``tools``, ``context``) is declared when there is a sampling handler.
            In manual mode each kind it declares (``elicitation``, ``sampling``, ``roots``)
            is declared as given even without a handler: the caller answers with ``resume``.
        limits: The client's limits; each call may override them.
        random: Floats in ``[0, 1)``, the jitter source for state-only pacing.
        on_event: Called with each round notice (``RoundStarted``, ``InputNeeded``,
            ``RoundFulfilled``), in order.
        auto: ``False`` puts calls in manual mode: a round needing input raises
            :class:`InputRequired`, answered with ``resume``.
        protocol_version: Sent in every request's ``_meta``.
        validate_output: Check each complete ``tools/call`` result that is not an error
            against the ``outputSchema`` the tool was listed with (clients SHOULD:
            server/tools.mdx § Output Schema): one without ``structuredContent``, or with
            one the schema does not accept, fails the call with
            :class:`~mrtr_core.errors.StructuredContentError`. The schemas are those of the
            latest ``tools/list`` made through this client (:attr:`output_schemas`; a
            paged listing's pages so far count until its last page is in); the
            client never lists on its own, so without a listing nothing is checked. A
            listed schema that is not a valid JSON Schema 2020-12 is not used (see
            :mod:`mrtr_core.client.outputs`). ``False``: results are not checked and
            listings not remembered.
    """

    def __init__(
        self,
        *,
        client_info: Implementation,
        elicitation: H | None,
        elicitation_form: bool,
        elicitation_url: bool,
        sampling: H | None,
        roots: H | None,
        capabilities: ClientCapabilities | None,
        limits: ClientLimits | None,
        random: Callable[[], float],
        on_event: Callable[[ClientCommand], object] | None,
        auto: bool,
        protocol_version: str = PROTOCOL_VERSION,
        validate_output: bool = True,
    ) -> None:
        instance_of("capabilities", capabilities, (ClientCapabilities, type(None)),
                    "a ClientCapabilities or None")
        instance_of("limits", limits, (ClientLimits, type(None)), "a ClientLimits or None")
        instance_of("protocol_version", protocol_version, str, "a string")
        flag("auto", auto)
        flag("validate_output", validate_output)
        if not protocol_version:
            raise ValueError("protocol_version must not be empty")
        self.client_info = client_info
        self.handlers: HandlerTable[H] = HandlerTable(
            elicitation=elicitation, elicitation_form=elicitation_form,
            elicitation_url=elicitation_url, sampling=sampling, roots=roots,
        )
        self.limits = limits or ClientLimits()
        self.on_event = on_event
        self.auto = auto
        self.protocol_version = protocol_version
        self.validate_output = validate_output
        self.output_schemas = OutputSchemas()
        """The output schemas of the latest ``tools/list`` (see ``validate_output``)."""
        self._base_capabilities = capabilities
        self._random = random
        # The connection owns the ids; next() on a count is atomic under the GIL.
        self._ids = itertools.count(1)
        # The last call's meta and handled kinds, and what they were derived from: calls
        # with the same configuration share them (and so the flow's per-meta caches).
        self._setup: tuple[tuple[Any, ...], RequestMeta, frozenset[str]] | None = None
        self._closed = False
        """Set when the client is closed: no call starts, and no round is resumed, after it."""

    def on_elicitation(self, fn: H, *, form: bool = True, url: bool = False) -> H:
        """Register the ``elicitation/create`` handler and the modes to declare."""
        self.handlers.elicitation = fn
        self.handlers.elicitation_form, self.handlers.elicitation_url = form, url
        return fn

    def on_sampling(self, fn: H) -> H:
        """Register the ``sampling/createMessage`` handler."""
        self.handlers.sampling = fn
        return fn

    def on_roots(self, fn: H) -> H:
        """Register the ``roots/list`` handler."""
        self.handlers.roots = fn
        return fn

    @property
    def capabilities(self) -> ClientCapabilities:
        """What every request of an automatic call declares, derived from the registered
        handlers (a manual call also declares the kinds the base capabilities declare)."""
        return self.handlers.capabilities(self._base_capabilities)

    def next_id(self) -> int:
        """A new JSON-RPC id (never reused by this client)."""
        return next(self._ids)

    def _call_setup(
        self, progress_token: str | int | None, manual: bool = False
    ) -> tuple[RequestMeta, frozenset[str]]:
        """The ``_meta`` of a call and the kinds it handles, as configured right now: in
        ``manual`` mode, also each kind the base capabilities declare (the caller answers).

        Reused while the configuration (handlers, modes, client info, base capabilities,
        protocol version, progress token, manual mode) stays the same.
        """
        if progress_token is not None and not _is_progress_token(progress_token):
            raise LocalProtocolError(
                f"progress_token must be a string or a number, not "
                f"{type(progress_token).__name__}"
            )
        h = self.handlers
        key = (
            h.elicitation is not None, h.elicitation_form, h.elicitation_url,
            h.sampling is not None, h.roots is not None, self.protocol_version,
            self.client_info, self._base_capabilities, type(progress_token), progress_token,
            manual,
        )
        setup = self._setup
        if setup is not None and len(setup[0]) == len(key) and all(
            a is b or (type(a) is type(b) and a == b) for a, b in zip(setup[0], key)
        ):
            return setup[1], setup[2]
        capabilities = h.capabilities(self._base_capabilities, manual=manual)
        meta = RequestMeta(
            protocol_version=self.protocol_version, client_capabilities=capabilities,
            client_info=self.client_info, progress_token=progress_token,
        )
        kinds = h.handled_kinds
        if manual:
            kinds |= {kind for kind in _KINDS if capabilities.declares(kind)}
        self._setup = (key, meta, kinds)
        return meta, kinds

    def refuse_if_closed(self) -> None:
        """Refuse a call once the client was closed, before anything is sent: a user's
        transport may still accept requests after its close.

        Raises:
            TransportError: the client was closed (its ``cause`` is
                :func:`client_closed`'s error, as for a call the close ended in flight).
        """
        if self._closed:
            raise TransportError(client_closed())

    def new_flow(
        self, method: str, params: Mapping[str, Any] | None, **options: Unpack[CallOptions]
    ) -> ClientFlow:
        """The flow of one call, with this client's meta and the call's limits.

        Raises:
            TransportError: the client was closed (:meth:`refuse_if_closed`).
            TypeError: An option that is not one of :class:`CallOptions` (a misspelt
                ``timeout`` would leave the call without its budget), ``limits`` that is
                not a :class:`ClientLimits` or ``None``, or ``auto`` that is not a bool or
                ``None`` (``"no"`` would be read as true).
        """
        self.refuse_if_closed()
        if options:
            unknown = options.keys() - _CALL_OPTIONS
            if unknown:
                raise TypeError(
                    f"unexpected call option {', '.join(map(repr, sorted(unknown)))} (the "
                    f"options are {', '.join(CallOptions.__annotations__)})"
                )
            instance_of("limits", options.get("limits"), (ClientLimits, type(None)),
                        "a ClientLimits or None")
            instance_of("auto", options.get("auto"), (bool, type(None)), "True, False or None")
        auto = options.get("auto")
        manual = not (self.auto if auto is None else auto)
        meta, kinds = self._call_setup(options.get("progress_token"), manual)
        limits = call_limits(
            self.limits, limits=options.get("limits"), max_rounds=options.get("max_rounds"),
            timeout=options.get("timeout"),
        )
        return ClientFlow(
            method, params or {}, meta=meta, handled_kinds=kinds,
            next_id=self.next_id, limits=limits, random=self._random, manual=manual,
            result_check=self._result_check(method, params),
        )

    def _result_check(self, method: object, params: object) -> ResultCheck | None:
        """What a call's flow runs on its complete result: learn a ``tools/list``, check a
        ``tools/call`` against its tool's output schema (nothing with ``validate_output``
        off)."""
        if not self.validate_output:
            return None
        return self.output_schemas.result_check(method, params)

    def input_required(
        self, cmd: AwaitAnswers, flow: ClientFlow, now: float, clock: object
    ) -> InputRequired:
        """The :class:`InputRequired` for a manual-mode round, its flow saved at ``now``.

        ``clock`` identifies the driver's clock (an object that is the same exactly when
        times are comparable), so that :meth:`restore_flow` can count the wait.
        """
        return InputRequired(
            cmd.round, cmd.result, flow.to_data(now), saved_at=now, clock=clock
        )

    def restore_flow(
        self, pending: InputRequired | Mapping[str, Any], now: float, clock: object = None
    ) -> ClientFlow:
        """The flow saved in a manual-mode :class:`InputRequired` (or its ``data``).

        The saved timers are rebased onto the driver's clock at ``now``. An
        :class:`InputRequired` raised on the same ``clock`` (not ``None``) is restored as of
        its ``saved_at`` instead, so the time spent waiting for the answers counts against
        the flow's budget.

        Raises:
            TransportError: the client was closed (:meth:`refuse_if_closed`).
            LocalProtocolError: ``pending`` is neither, or its data is not a saved flow.
        """
        self.refuse_if_closed()
        data = pending.data if isinstance(pending, InputRequired) else pending
        if not isinstance(data, Mapping):
            raise LocalProtocolError(
                f"pending must be an InputRequired or its saved data (a mapping), "
                f"not {type(data).__name__}"
            )
        at = now
        if (
            isinstance(pending, InputRequired)
            and clock is not None
            and pending.clock is clock
            and pending.saved_at is not None
            and pending.saved_at <= now
        ):
            at = pending.saved_at
        last = data.get("last_request_id")

        def next_id() -> int:
            # The flow may have been saved by another connection, whose ids we do not know;
            # its last leg's id must not come back on the retry (C4).
            new = self.next_id()
            return self.next_id() if type(new) is type(last) and new == last else new

        return ClientFlow.from_data(
            data, now=at, next_id=next_id, random=self._random,
            result_check=self._result_check(data.get("method"), data.get("params")),
        )

    def resume_flow(
        self,
        pending: InputRequired | Mapping[str, Any],
        answers: Mapping[str, object],
        now: float,
        clock: object = None,
    ) -> tuple[ClientFlow, list[ClientCommand]]:
        """The flow of a manual-mode round and what it orders once ``answers`` are in
        (``resume``): :meth:`restore_flow`, then :meth:`answer_round`. An
        :class:`InputRequired` is marked :attr:`~InputRequired.resumed` then, and resumed once.

        Raises:
            TransportError: the client was closed (:meth:`refuse_if_closed`).
            LocalProtocolError: ``pending`` is an :class:`InputRequired` resumed already,
                or see :meth:`restore_flow` and :meth:`answer_round`; nothing is sent.
        """
        self.refuse_if_closed()
        once = pending if isinstance(pending, InputRequired) else None
        if once is not None and once.resumed:
            raise _resumed_again(once)
        flow = self.restore_flow(pending, now, clock)
        cmds = self.answer_round(flow, answers, now)
        if once is not None and not once._take():  # another resume took it meanwhile
            raise _resumed_again(once)
        return flow, cmds

    @staticmethod
    def answer_round(
        flow: ClientFlow, answers: Mapping[str, object], now: float
    ) -> list[ClientCommand]:
        """Answer every entry of a restored manual-mode round at once (``resume``).

        ``resume`` ends with the call's result or the next :class:`InputRequired`, so the
        answers must cover every key still awaited: with one missing, the retry could never
        be sent (C1: every entry is fulfilled) and the call would wait out its budget.

        Raises:
            LocalProtocolError: an answer is missing, or one the flow refuses (an unknown
                key, an answer of the wrong shape); nothing is sent.
        """
        if isinstance(answers, Mapping):
            missing = [key for key in flow.pending_keys if key not in answers]
            if missing:
                raise LocalProtocolError(
                    f"no answer for input request {', '.join(map(repr, missing))}; "
                    f"resume needs one for every key of the round"
                )
        return flow.answer(answers, now)

    def notify(self, cmd: ClientCommand) -> None:
        """Pass a round notice to ``on_event``."""
        if self.on_event is not None:
            self.on_event(cmd)


def _resumed_again(pending: InputRequired) -> LocalProtocolError:
    """Why a second ``resume`` of ``pending`` is refused."""
    return LocalProtocolError(
        f"round {pending.round} was already resumed: a round is answered once (its "
        f"requestState goes to the server once); nothing was sent"
    )


def transport_failed(flow: ClientFlow, exc: BaseException, now: float) -> TransportError:
    """End ``flow`` after its transport failed with ``exc``; only this call fails.

    The error carries the last ``input_required`` result the flow saw. A flow that is over
    already (it failed, and the call was still waiting for its cancelled handlers to end)
    takes no more input: the error is built from what it holds.
    """
    if flow.done:
        return TransportError(exc, last_result=flow.last_result)
    last = None
    for cmd in flow.handle(CancelRequested(reason=exc), now):
        if isinstance(cmd, Fail):
            last = getattr(cmd.error, "last_result", None)
    return TransportError(exc, last_result=last)


def client_closed() -> TransportClosedError:
    """Why a call in flight ended when its client (sync, trio or asyncio) was closed, or why
    one made after the close was refused (the ``cause`` of its
    :class:`~mrtr_core.errors.TransportError`)."""
    return TransportClosedError("the client was closed")


def bare_exception(
    group: BaseExceptionGroup[BaseException], *, cancellation: type[BaseException]
) -> BaseException:
    """The one exception to raise for what a call's handler nursery or task group gathered,
    so that no exception group ever leaves a call: the first that is not ``cancellation``
    (the runtime's own, e.g. the caller's scope firing in every handler at once), or the
    first one. Only exceptions that are not ``Exception`` get here (a handler's
    ``Exception`` is a fact for the flow)."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            pending[:0] = exc.exceptions
        else:
            leaves.append(exc)
    return next((exc for exc in leaves if not isinstance(exc, cancellation)), leaves[0])


class AsyncClientBase(ClientBase[H], abc.ABC):
    """The call methods of the trio and asyncio clients, whose runtimes differ only below them.

    A subclass sets :attr:`transport` and provides its runtime's clock (:meth:`_now`), what
    identifies that clock (:meth:`_clock`) and the driver (:meth:`_drive`).
    """

    transport: Any
    """Carries each request leg (``request(message)``, ``aclose()``)."""

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, **options: Unpack[CallOptions]
    ) -> JsonObject:
        """``tools/call``; returns the final ``CallToolResult`` dict (options: :meth:`request`)."""
        return await self.request(*tool_params(name, arguments), **options)

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None, **options: Unpack[CallOptions]
    ) -> JsonObject:
        """``prompts/get``; returns the final ``GetPromptResult`` dict."""
        return await self.request(*prompt_params(name, arguments), **options)

    async def read_resource(self, uri: str, **options: Unpack[CallOptions]) -> JsonObject:
        """``resources/read``; returns the final ``ReadResourceResult`` dict."""
        return await self.request(*resource_params(uri), **options)

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, **options: Unpack[CallOptions]
    ) -> JsonObject:
        """Run one request through as many rounds as the server needs; return its result.

        Any method works; only ``tools/call``, ``prompts/get`` and ``resources/read`` may go
        past one leg. Options: :class:`~mrtr_core.client.driver.CallOptions`.

        Raises:
            MrtrError: the typed failure (round limit, a timeout, a handler failure, a
                JSON-RPC error, a broken transport, ...).
            InputRequired: manual mode, when a round needs input.
        """
        flow = self.new_flow(method, params, **options)
        return await self._drive(flow, flow.start(self._now()))

    async def resume(
        self, pending: InputRequired | Mapping[str, Any], answers: Mapping[str, object]
    ) -> JsonObject:
        """Answer a manual-mode round (an :class:`InputRequired` or its saved ``data``).

        The wait for the answers counts against the flow's budget when ``pending`` was
        raised on the same clock (the same event loop, the same ``trio.run``); saved data
        carries the budget it had left.

        A round is answered once: an :class:`InputRequired` resumed already is refused.

        Raises:
            LocalProtocolError: ``pending`` is not a pending round or its saved data, or is
                an :class:`InputRequired` resumed already (the first resume may still be
                running), or ``answers`` misses a key of the round, names a key not in it,
                or holds an answer of the wrong shape; nothing is sent.
        """
        flow, cmds = self.resume_flow(pending, answers, self._now(), self._clock())
        return await self._drive(flow, cmds)

    async def aclose(self) -> None:
        """Close the transport. A call it fails (the HTTP transports fail every request in
        flight) raises :class:`~mrtr_core.errors.TransportError` to its caller; so does,
        before anything is sent, every call and ``resume`` made after it."""
        self._closed = True
        await self.transport.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @staticmethod
    @abc.abstractmethod
    def _now() -> float:
        """The runtime's time, the clock of every deadline of the flow."""

    @staticmethod
    @abc.abstractmethod
    def _clock() -> object:
        """What identifies the runtime's clock (the same object exactly when times compare)."""

    @abc.abstractmethod
    async def _drive(self, flow: ClientFlow, cmds: list[ClientCommand]) -> JsonObject:
        """Carry out ``cmds`` and what the flow orders next, until it ends."""


class HandlerRuns(Generic[R], abc.ABC):
    """The handlers of one async call, and which of their outcomes the flow still expects.

    A plain function runs at once (in a task of its own it would hold the event loop just
    the same) and its outcome waits in :attr:`finished`. An awaitable answer goes to
    :meth:`_launch`, where the runtime's driver awaits it in a task that reports the outcome
    with the same token. A handler cancelled, or invoked again under the same key, leaves a
    stale outcome behind: its token is no longer the key's, and it is dropped.

    Attributes:
        running: Per key, the token of the handler the flow waits for and what cancels it
            (``R``: the runtime's task or scope; ``None`` for a plain function, and for an
            awaitable whose task has not started).
        finished: The outcomes of plain-function handlers, in order, with their tokens.
    """

    def __init__(self, client: ClientBase[Any]) -> None:
        self._client = client
        self._tokens = itertools.count()
        self.running: dict[str, tuple[int, R | None]] = {}
        self.finished: collections.deque[tuple[int, HandlerOutcome]] = collections.deque()

    def start(self, cmd: InvokeHandler) -> None:
        """Invoke the handler for ``cmd``; a failure to invoke it is its outcome."""
        token = next(self._tokens)
        fn = self._client.handlers.for_kind(cmd.request.method)
        event: HandlerOutcome
        try:
            if fn is None:
                raise LookupError(f"no handler for {cmd.request.method}")
            value = fn(cmd.request, cmd.key)
        except Exception as exc:  # a handler's failure is a fact for the flow
            event = HandlerFailed(key=cmd.key, error=exc)
        else:
            if inspect.isawaitable(value):
                self._launch(value, cmd, token)
                return
            event = HandlerReturned(key=cmd.key, answer=value)
        self.running[cmd.key] = (token, None)
        self.finished.append((token, event))

    @abc.abstractmethod
    def _launch(self, value: Awaitable[Any], cmd: InvokeHandler, token: int) -> None:
        """Await ``value`` in a task, record it in :attr:`running` under ``token``."""

    def _current(self, token: int, event: HandlerOutcome) -> bool:
        """Whether ``event`` is the outcome still expected for its key (then it is no more)."""
        entry = self.running.get(event.key)
        if entry is not None and entry[0] == token:
            del self.running[event.key]
            return True
        return False

    def cancelled_outcomes(
        self,
        expected: Mapping[str, tuple[int, R | None]],
        reported: list[tuple[int, HandlerOutcome]],
    ) -> tuple[list[HandlerOutcome], list[tuple[int, HandlerOutcome]]]:
        """Split what handlers reported, once those in ``expected`` (taken from
        :attr:`running` and cancelled) have ended: their outcomes, for the flow (which keeps
        a failure that raced the first one on ``HandlerFailedError.others``), and the other
        ``reported`` items, to be kept. :attr:`finished` loses the outcomes returned."""

        def wanted(token: int, event: HandlerOutcome) -> bool:
            entry = expected.get(event.key)
            return entry is not None and entry[0] == token

        late = [event for token, event in self.finished if wanted(token, event)]
        late += [event for token, event in reported if wanted(token, event)]
        kept = [(token, event) for token, event in self.finished if not wanted(token, event)]
        self.finished = collections.deque(kept)
        return late, [(token, event) for token, event in reported if not wanted(token, event)]

    def pop_finished(self) -> HandlerOutcome | None:
        """The next outcome of a plain-function handler still expected (stale ones dropped)."""
        while self.finished:
            token, event = self.finished.popleft()
            if self._current(token, event):
                return event
        return None
