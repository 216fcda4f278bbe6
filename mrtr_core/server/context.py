"""The handler's view of one round: ask, remember, read what came back.

A handler is straight-line code. Every round the engine runs it again from the top with
every answer gathered so far; ``ctx.ask`` returns the recorded answer or, when there is
none yet, stops the run (by raising :class:`InputPending`) and the engine answers
``input_required`` with the questions asked in that run.

Answers. An answer to a question the previous round asked was checked before the handler
started. An answer under a key the sealed state does not record (a first call that already
carries ``inputResponses``, or the retry of a round that sealed no state, digest §4.2) is
checked when the handler asks that key, against the question asked then: its kind's shape,
and for a form elicitation the requested schema (S13, S18). It is then used and recorded,
pinned to that question, like any other answer. Keys never asked are ignored (S14).

Side effects: code before the last ``ask`` runs again on every round. Wrap work that must
not repeat in ``ctx.once`` (a step run once per operation, its result carried in the sealed
state) and make the handler ``single_use`` so an old ``requestState`` cannot be replayed to
run it again; wrap expensive pure work in ``ctx.memo``. The same holds when an answer read
at ``ask`` time turns out bad: the code before that ``ask`` has run (as it would on any
round), nothing after it runs (:class:`InputRejected` passes ``except Exception``), no state
is sealed, and the request fails with ``-32602`` naming the key even if the handler caught
the stop. That failure ends the operation: a ``ctx.once`` step that ran in it is not
recorded anywhere, so a new call runs it again.

A handler that catches the stop ``ask`` raises (a bare ``except:``) goes on without the
answer; the round still ends with ``input_required``, and a ``once`` step or a new ``memo``
value reached after that point stops the run again, so neither runs on an answer not given.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, TypeVar, cast, overload

import attrs

from mrtr_core import jsontext
from mrtr_core._pickling import PicklableError
from mrtr_core.errors import INTERNAL_ERROR, JsonRpcError
from mrtr_core.server.capabilities import (
    MissingCapabilityError,
    merge_capabilities,
    missing_capabilities,
)
from mrtr_core.server.carried import Recorded
from mrtr_core.server.digests import SHARED_DIGESTS, question_digest
from mrtr_core.wire.converter import structure_input_response, unstructure_input_request
from mrtr_core.wire.models import (
    INPUT_REQUEST_KINDS,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageResult,
    ElicitFormRequest,
    ElicitResult,
    ElicitUrlRequest,
    InputRequest,
    InputResponse,
    JsonObject,
    ListRootsRequest,
    ListRootsResult,
    MrtrParams,
)
from mrtr_core.wire.records import record_maker

__all__ = ["Context", "InputPending", "InputRejected", "InputRequired", "question_digest"]

T = TypeVar("T")

#: ``read(key, request, digest, value) -> (answer, record)``: checks an answer the state did
#: not expect against the question asked now; raises ``JsonRpcError`` (-32602, key named).
OfferedReader = Callable[[str, InputRequest, str, Any], tuple[InputResponse, Recorded]]


class InputPending(PicklableError):
    """Control flow: the handler asked something that has no answer yet.

    Raised by :meth:`Context.ask` / :meth:`Context.ask_all` and turned into an
    ``input_required`` result by ``Run.finish``. It derives from ``BaseException`` so that
    ``except Exception`` in handler code lets it through; never catch it.
    """

    def __init__(self, keys: tuple[str, ...]) -> None:
        super().__init__(f"input pending for {', '.join(keys)}")
        self.keys = keys


class InputRejected(PicklableError):
    """Control flow: an answer the client sent for the question just asked does not fit it.

    Raised by :meth:`Context.ask` / :meth:`Context.ask_all` when a key the sealed state did
    not record has an answer of the wrong shape, or one that misses the requested schema.
    ``Run.finish`` turns it into :attr:`error` (``-32602`` naming the key); like
    :class:`InputPending` it derives from ``BaseException`` so that ``except Exception`` lets
    it through. Catching it changes nothing: the round fails all the same.
    """

    def __init__(self, error: JsonRpcError) -> None:
        super().__init__(str(error))
        self.error = error


@attrs.frozen
class InputRequired:
    """Explicit mode: return this from a handler to end the round by hand.

    Attributes:
        requests: The questions (may be empty for a state-only round).
        state: The handler's own JSON-able state; sealed by the engine and given back as
            ``ctx.request_state`` on the next round.
    """

    requests: Mapping[str, InputRequest] = attrs.field(factory=dict)
    state: Any = None


@attrs.frozen
class Pending:
    """A question asked in this run that has no answer yet."""

    request: InputRequest
    wire: JsonObject
    digest: str


_pending: Final[Callable[[InputRequest, JsonObject, str], Pending]] = record_maker(Pending)

INPUT_REQUEST_TYPES: Final = (
    ElicitFormRequest, ElicitUrlRequest, CreateMessageRequest, ListRootsRequest
)
_DIGESTS: Final = SHARED_DIGESTS  # digests of recent questions (digests.py)


class Context:
    """What a handler gets for one round. Created by the engine (``run.context``)."""

    def __init__(
        self,
        *,
        params: MrtrParams,
        principal: str | None,
        round: int,
        answers: Mapping[str, Recorded],
        fresh: Mapping[str, InputResponse],
        offered: Mapping[str, Any],
        read_offered: OfferedReader,
        memo: Mapping[str, Any],
        once: Mapping[str, Any],
        request_state: Any,
    ) -> None:
        self._fill(
            params, principal, round, dict(answers), dict(fresh), dict(offered), read_offered,
            dict(memo), dict(once), request_state,
        )

    @classmethod
    def _adopt(
        cls,
        *,
        params: MrtrParams,
        principal: str | None,
        round: int,
        answers: dict[str, Recorded],
        fresh: dict[str, InputResponse],
        offered: dict[str, Any],
        read_offered: OfferedReader,
        memo: dict[str, Any],
        once: dict[str, Any],
        request_state: Any,
    ) -> Context:
        """The engine's constructor: like ``Context(...)``, but it takes these dicts as
        they are instead of copying them (the engine built them for this context alone and
        never touches them again)."""
        self = cls.__new__(cls)
        self._fill(
            params, principal, round, answers, fresh, offered, read_offered, memo, once,
            request_state,
        )
        return self

    def _fill(
        self,
        params: MrtrParams,
        principal: str | None,
        round: int,
        answers: dict[str, Recorded],
        fresh: dict[str, InputResponse],
        offered: dict[str, Any],
        read_offered: OfferedReader,
        memo: dict[str, Any],
        once: dict[str, Any],
        request_state: Any,
    ) -> None:
        self._params = params
        self._principal = principal
        self._round = round
        self._answers = answers
        self._structured = dict(fresh)  # grows as answers are read; _fresh stays as it was
        self._fresh = MappingProxyType(fresh)
        self._offered = offered
        self._read_offered = read_offered
        self._rejected: JsonRpcError | None = None
        self._memo = memo
        self._once = once
        self._request_state = request_state
        self._questions: dict[str, str] = {}
        self._pending: dict[str, Pending] = {}

    # --- the request ---------------------------------------------------------------------

    @property
    def params(self) -> MrtrParams:
        """The request's params as received."""
        return self._params

    @property
    def method(self) -> str:
        """``tools/call``, ``prompts/get`` or ``resources/read``."""
        return self._params.method

    @property
    def target(self) -> str:
        """The tool or prompt name, or the resource URI."""
        return self._params.target

    @property
    def arguments(self) -> dict[str, Any]:
        """The request's arguments (``{}`` when absent or for ``resources/read``)."""
        arguments = getattr(self._params, "arguments", None)
        return dict(arguments) if arguments else {}

    @property
    def principal(self) -> str | None:
        """The authenticated user the state is bound to, or ``None``."""
        return self._principal

    @property
    def capabilities(self) -> ClientCapabilities:
        """What the client declared on *this* request (never inferred from earlier ones)."""
        return self._params.meta.client_capabilities

    @property
    def round(self) -> int:
        """1 for the first request of the operation, 2 for the first retry, ..."""
        return self._round

    # --- asking ----------------------------------------------------------------------------

    def can_ask(self, request: InputRequest | str) -> bool:
        """Whether this request's capabilities allow asking ``request`` (a request, or a
        kind such as ``"elicitation/create"``). Use it to go on without input the client
        cannot give; ``ask`` on an undeclared kind fails the request with ``-32021``."""
        if isinstance(request, str):
            return request in INPUT_REQUEST_KINDS and self.capabilities.declares(request)
        return missing_capabilities(self.capabilities, request) is None

    @overload
    def ask(self, key: str, request: ElicitFormRequest | ElicitUrlRequest) -> ElicitResult: ...
    @overload
    def ask(self, key: str, request: CreateMessageRequest) -> CreateMessageResult: ...
    @overload
    def ask(self, key: str, request: ListRootsRequest) -> ListRootsResult: ...

    def ask(self, key: str, request: InputRequest) -> InputResponse:
        """The answer to ``request`` under ``key``, or stop the run to ask for it.

        The answer is only used when it answers this exact question (same canonical JSON);
        a changed question is asked again. An answer the request carries under a key the
        sealed state does not record (say, on a first call) is checked against this
        question now and, when it fits, used and recorded. When there is no answer yet this
        raises :class:`InputPending` and nothing after it runs this round: a later ``ask``
        is not reached until this one is answered (use :meth:`ask_all` to ask several at
        once).
        A recorded answer stays the answer to that key and question for the rest of the
        operation; to ask the same question again (say, after a decline), use a new key.

        Raises:
            InputPending: Not answered yet (let it propagate).
            InputRejected: The request's answer under ``key`` does not fit this question
                (the round fails with ``-32602`` naming the key; let it propagate).
            MissingCapabilityError: The client did not declare what this question needs
                (``-32021``, S7).
            ValueError: ``key`` was asked a different question earlier in this run, or is
                not a non-empty string.
            TypeError: ``request`` is not an input request.
            JsonRpcError: ``-32603`` (``reason: invalid_question``, key named): the
                question is not JSON (a set, ``NaN``), so it is never sent.
        """
        answer = self._lookup(key, request)
        if answer is not None:
            return answer
        required = missing_capabilities(self.capabilities, request)
        if required is not None:
            self._pending.pop(key, None)
            raise MissingCapabilityError(required)
        raise InputPending((key,))

    def ask_all(self, requests: Mapping[str, InputRequest]) -> dict[str, InputResponse]:
        """Answers to several questions, asked together in one round when any is missing.

        Raises:
            InputPending: Some are not answered yet; all of those are asked at once.
            InputRejected: An answer the request carries does not fit its question
                (``-32602`` naming the key).
            MissingCapabilityError: Some missing question needs an undeclared capability.
            TypeError, ValueError, JsonRpcError: As :meth:`ask`, for any key; and
                ``TypeError`` when ``requests`` is not a mapping.
        """
        if type(requests) is not dict and not isinstance(requests, Mapping):
            raise TypeError(
                f"ask_all takes a mapping of key to question, not {type(requests).__name__}"
            )
        answers: dict[str, InputResponse] = {}
        missing: list[str] = []
        for key, request in requests.items():
            answer = self._lookup(key, request)
            if answer is None:
                missing.append(key)
            else:
                answers[key] = answer
        if missing:
            needed = [
                r
                for key in missing
                if (r := missing_capabilities(self.capabilities, requests[key])) is not None
            ]
            if needed:
                for key in missing:
                    self._pending.pop(key, None)
                raise MissingCapabilityError(merge_capabilities(needed))
            raise InputPending(tuple(missing))
        return answers

    def _lookup(self, key: str, request: InputRequest) -> InputResponse | None:
        if not isinstance(key, str) or not key:
            raise ValueError(bad_key_message(key))
        try:
            digest, wire = _DIGESTS.digest(request)
        except (TypeError, ValueError, AttributeError) as exc:
            if not isinstance(request, INPUT_REQUEST_TYPES):
                raise TypeError(
                    f"the question under {key!r} must be an input request (form, url, "
                    f"sample or roots), not {type(request).__name__}"
                ) from None
            raise invalid_question(key, exc) from exc
        seen = self._questions.get(key)
        if seen is not None and seen != digest:
            raise ValueError(f"key {key!r} was asked a different question earlier in this run")
        self._questions[key] = digest
        recorded = self._answers.get(key)
        if recorded is not None and recorded.digest == digest:
            answer = self._structured.get(key)
            if answer is None:
                answer = structure_input_response(recorded.kind, recorded.data)
                self._structured[key] = answer
            return answer
        if recorded is None and key in self._offered:
            # Not expected by the state: read against this question, once (S13, S18).
            value = self._offered.pop(key)
            try:
                answer, record = self._read_offered(key, request, digest, value)
            except JsonRpcError as exc:
                if self._rejected is None:
                    self._rejected = exc
                raise InputRejected(exc) from None
            self._answers[key] = record
            self._structured[key] = answer
            return answer
        if wire is None:  # the digest was remembered: the question is written only now
            wire = unstructure_input_request(request)
        self._pending[key] = _pending(request, wire, digest)
        return None

    # --- remembering ---------------------------------------------------------------------

    def memo(self, name: str, fn: Callable[[], T]) -> T:
        """``fn()`` computed on the first round that reaches here, then carried (sealed)
        to later rounds. The value must be JSON-able; it is returned as it will read back
        (tuples become lists).

        Raises:
            InputPending: A question asked earlier in this run has no answer yet (the
                handler caught the stop): ``fn`` does not run, so nothing computed without
                that answer is carried to later rounds.
            TypeError: ``name`` is not a string, or the value is not JSON-able (named).
        """
        _check_name(name)
        if name in self._memo:
            return cast(T, self._memo[name])
        self._stop_if_pending()
        value = _json_roundtrip(name, fn())
        self._memo[name] = value
        return cast(T, value)

    async def amemo(self, name: str, fn: Callable[[], Awaitable[T]]) -> T:
        """:meth:`memo` for an async ``fn`` (any async runtime)."""
        _check_name(name)
        if name in self._memo:
            return cast(T, self._memo[name])
        self._stop_if_pending()
        value = _json_roundtrip(name, await fn())
        self._memo[name] = value
        return cast(T, value)

    def once(self, name: str, fn: Callable[[], T]) -> T:
        """Run a side-effecting step once per operation; later rounds get its recorded
        (JSON-able) result without running it.

        The record travels in the next ``requestState``. A client that echoes an *older*
        state (from before the step ran) would run it again: declare the handler
        ``HandlerSpec(single_use=True)`` with a shared replay guard so that cannot happen.
        If ``fn`` raises, nothing is recorded (a later round runs it again).

        Raises:
            InputPending: A question asked earlier in this run has no answer yet (the
                handler caught the stop, say with a bare ``except:``): the step does not
                run before the answers the code above it waits for.
            TypeError: ``name`` is not a string (checked before ``fn`` runs), or the
                result is not JSON-able (named; ``fn`` has run, and nothing is recorded).
        """
        _check_name(name)
        if name in self._once:
            return cast(T, self._once[name])
        self._stop_if_pending()
        value = _json_roundtrip(name, fn())
        self._once[name] = value
        return cast(T, value)

    async def aonce(self, name: str, fn: Callable[[], Awaitable[T]]) -> T:
        """:meth:`once` for an async ``fn`` (any async runtime)."""
        _check_name(name)
        if name in self._once:
            return cast(T, self._once[name])
        self._stop_if_pending()
        value = _json_roundtrip(name, await fn())
        self._once[name] = value
        return cast(T, value)

    def _stop_if_pending(self) -> None:
        """Stop the run again when a question asked in it is still unanswered.

        ``ask`` stops the run with :class:`InputPending`; a handler that catches it goes on
        without the answer. The engine still ends the round with ``input_required``, but a
        ``once`` step or a ``memo`` value reached after that point would run (or be
        computed) on a made-up answer and be carried as done: both stop here instead.
        """
        if self._pending:
            raise InputPending(tuple(self._pending))

    # --- explicit mode -------------------------------------------------------------------

    @property
    def input_responses(self) -> Mapping[str, InputResponse]:
        """Answers to the previous round's questions, validated (wrong shapes and schema
        mismatches were refused with ``-32602`` before the handler ran; keys never asked
        are dropped, S14). Answers under keys the sealed state does not record are not
        here: ``ask`` / ``ask_all`` read them against the question they ask."""
        return self._fresh

    @property
    def request_state(self) -> Any:
        """The state the handler returned with its last :class:`InputRequired` (or
        ``InputRequiredResult``), opened and verified; ``None`` on the first round."""
        return self._request_state

    def input_required(
        self, requests: Mapping[str, InputRequest] | None = None, *, state: Any = None
    ) -> InputRequired:
        """Build the value an explicit-mode handler returns to ask by hand.

        One run asks one way: returning this while a :meth:`ask` question has no answer
        (the handler caught the stop ``ask`` raises) ends the request with ``-32603``."""
        return InputRequired(dict(requests or {}), state)

    # --- for the engine --------------------------------------------------------------------

    @property
    def pending(self) -> Mapping[str, Pending]:
        """Questions asked in this run that have no answer yet."""
        return self._pending

    @property
    def rejected(self) -> JsonRpcError | None:
        """The ``-32602`` error for the first answer that did not fit the question asked
        under its key in this run, or ``None``."""
        return self._rejected

    @property
    def memo_values(self) -> Mapping[str, Any]:
        """Memoised values to carry."""
        return self._memo

    @property
    def once_values(self) -> Mapping[str, Any]:
        """Results of ``once`` steps to carry."""
        return self._once

    @property
    def answers(self) -> Mapping[str, Recorded]:
        """Every answer recorded so far, pinned to its question's digest."""
        return self._answers


def _check_name(name: object) -> None:
    """Refuse a ``memo`` / ``once`` name that is not a string: the record travels as a JSON
    object member, whose name is a string (RFC 8259 §4), so a name of another type (say,
    ``7``) would read back as ``"7"`` and never be found again: its step would run, or its
    value be computed, again on every round."""
    if not isinstance(name, str):
        raise TypeError(
            f"a memo or once name must be a string, not {name!r} ({type(name).__name__})"
        )


def invalid_question(key: str, exc: Exception) -> JsonRpcError:
    """The ``-32603`` for a question that is not JSON (a set in a sampling ``metadata``,
    ``NaN`` for a ``temperature``; RFC 8259 §6 has no NaN or infinities): the handler's
    mistake, named by its key, and never sent."""
    return JsonRpcError(
        INTERNAL_ERROR,
        f"The question asked under {key!r} is not JSON: {exc}",
        {"key": key, "reason": "invalid_question"},
    )


def bad_key_message(key: object) -> str:
    """Why ``key`` cannot key an input request (``inputRequests`` is a JSON object: its
    keys are strings; an empty one names nothing)."""
    return f"an input request key must be a non-empty string, not {key!r} ({type(key).__name__})"


_STRICT_ENCODE: Final = jsontext.reusable(json.JSONEncoder(allow_nan=False))
_COPY_DEPTH: Final = 32  # deeper values (and cycles) take the encoder's way
_COPY_BITS: Final = 4000  # longer integers too (the encoder limits their digits)
_INFINITY: Final = float("inf")


class _NotPlain(Exception):
    """The value is not made of the plain JSON types only: round-trip it as text."""


def _json_roundtrip(name: str, value: Any) -> Any:
    """``value`` as it reads back from JSON text (tuples become lists); ``TypeError``
    naming ``name`` when it is not JSON-able."""
    try:
        return _plain_copy(value, _COPY_DEPTH)
    except _NotPlain:
        pass
    try:
        return json.loads(_STRICT_ENCODE(value))
    except RecursionError:  # written, but too deep to read back at this depth of the stack
        raise TypeError(f"value for {name!r} is not JSON-able: {jsontext.TOO_DEEP}") from None
    except (TypeError, ValueError) as exc:
        raise TypeError(f"value for {name!r} is not JSON-able: {exc}") from exc


def _plain_copy(value: Any, depth: int) -> Any:
    """What ``json.loads(json.dumps(value))`` gives, built directly, for values made only of
    ``dict`` (``str`` keys), ``list``, ``tuple``, ``str``, ``int``, finite ``float``,
    ``bool`` and ``None`` (exact types: subclasses may encode otherwise). A float's ``repr``
    reads back as the same float, so the copy is equal value for value; anything else
    raises :class:`_NotPlain` (the caller then takes the text round trip, errors included)."""
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return value
    if kind is int:
        if value.bit_length() > _COPY_BITS:
            raise _NotPlain
        return value
    if kind is float:
        if value != value or value == _INFINITY or value == -_INFINITY:
            raise _NotPlain
        return value
    if depth <= 0:
        raise _NotPlain
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain  # JSON writes other keys as strings: the encoder decides
            out[key] = _plain_copy(item, depth - 1)
        return out
    if kind is list or kind is tuple:
        return [_plain_copy(item, depth - 1) for item in value]
    raise _NotPlain
