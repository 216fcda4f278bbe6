"""The server engine: resumable handlers over stateless rounds.

Theory of operation. A ``tools/call``, ``prompts/get`` or ``resources/read`` arrives
(S1). :meth:`ServerEngine.begin` verifies its ``requestState`` (binding, expiry, key; any
failure is ``-32602`` and the handler never runs), bounds ``inputResponses`` (count and
size), reads the answers to the keys the previous round asked (wrong shapes and schema
mismatches are ``-32602`` naming the key, S13, S18; missing keys are simply asked again,
S15), and builds the handler's :class:`~mrtr_core.server.context.Context`. An answer
under a key the state does not record (a first call that already carries answers, or a
retry of a round that sealed no state, digest §4.2) is read when the handler asks that
key: it is checked against the question asked then, the same way, and used and recorded
like any other answer. Keys the handler never asks are ignored (S14). The driver claims the
token with its replay guard when the handler is single-use (S12), runs the handler, and
hands what happened to :meth:`Run.finish`: a value (``Completed``), an unanswered
question (``NeedsInput``: an ``input_required`` result with a freshly sealed state, S5), or
an error. Nothing is kept in server memory between rounds, so the retry may reach any
instance that shares the key ring.

Example (sync driver; see ``mrtr_sync.server_engine.run_handler``)::

    run = engine.begin(params, spec, now=now, principal=user)
    if run.claim and not guard.claim(*run.claim, now):
        raise run.replayed()
    try:
        value = spec.invoke(run.context)
    except BaseException as exc:
        outcome = run.finish(now, raised=exc)
    else:
        outcome = run.finish(now, returned=value)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
from jsonschema.exceptions import best_match

from mrtr_core import jsontext
from mrtr_core.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CodecError,
    JsonRpcError,
    LocalProtocolError,
    StateSizeLimitError,
)
from mrtr_core.server.capabilities import (
    MissingCapabilityError,
    merge_capabilities,
    missing_capabilities,
)
from mrtr_core.server.carried import Asked, Carried, Recorded, payload
from mrtr_core.server.context import (
    Context,
    InputPending,
    InputRequired,
    bad_key_message,
    invalid_question,
    question_digest,
)
from mrtr_core.server.limits import ServerLimits
from mrtr_core.server.schemas import CompiledSchema, SchemaCache
from mrtr_core.state.binding import Binding
from mrtr_core.state.codec import StateCodec
from mrtr_core.state.errors import StateRejectedError
from mrtr_core.wire.converter import (
    structure_input_response,
    unstructure,
    unstructure_input_request,
)
from mrtr_core.wire.forms import FormSchemaError, FormSpec
from mrtr_core.wire.models import (
    ELICITATION_CREATE,
    READ_RESOURCE,
    RESULT_TYPE_INPUT_REQUIRED,
    CallToolParams,
    ElicitFormRequest,
    ElicitResult,
    GetPromptParams,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    JsonObject,
    MrtrParams,
    ReadResourceParams,
)

__all__ = ["Completed", "HandlerSpec", "NeedsInput", "Run", "ServerEngine"]

_MISSING: Final = object()
_VALIDATOR_CACHE_SIZE: Final = 256
# NaN and the infinities are not JSON (RFC 8259 §6): refused here, so they never reach
# the sealed state (whose codec would write them as null).
_ENCODE: Final = jsontext.reusable(
    json.JSONEncoder(separators=(",", ":"), allow_nan=False, check_circular=False)
)
_MRTR_PARAMS: Final = (CallToolParams, GetPromptParams, ReadResourceParams)


@attrs.frozen(kw_only=True)
class HandlerSpec:
    """A handler and how the engine treats it.

    Attributes:
        handler: ``handler(ctx, **arguments)``; a plain function or a coroutine function
            (the driver awaits it). It may ``ctx.ask``, or return ``ctx.input_required(...)``
            / an ``InputRequiredResult`` (explicit mode), or return its final value.
        single_use: Every ``requestState`` sealed for this handler can be used once: the
            driver must claim ``run.claim`` with a replay guard before running it (S12).
        name: For logs.
    """

    handler: Callable[..., Any]
    single_use: bool = False
    name: str = ""

    def invoke(self, ctx: Context) -> Any:
        """Call the handler: ``handler(ctx, **ctx.arguments)`` (``handler(ctx)`` for
        ``resources/read``). Returns its value, or the coroutine for async handlers."""
        if ctx.method == READ_RESOURCE:
            return self.handler(ctx)
        return self.handler(ctx, **ctx.arguments)


@attrs.frozen
class Completed:
    """The handler finished. ``value`` is what it returned; the app turns it into the
    method's result (with ``resultType: "complete"``). ``rounds`` counts the
    ``input_required`` results that came before."""

    value: Any
    rounds: int = 0


@attrs.frozen
class NeedsInput:
    """The round ends with ``input_required``.

    Attributes:
        result: The full result object: ``resultType``, ``inputRequests`` (left out for a
            state-only round) and the freshly sealed ``requestState``.
        rounds: ``input_required`` results in this operation so far, this one included.
    """

    result: JsonObject
    rounds: int

    @property
    def request_state(self) -> str:
        """The sealed state the client must echo."""
        return str(self.result["requestState"])

    @property
    def keys(self) -> tuple[str, ...]:
        """The ``inputRequests`` keys, in the order asked."""
        return tuple(self.result.get("inputRequests", {}))


class ServerEngine:
    """Runs MRTR handlers round by round. Pure: time, principal and randomness come in.

    Args:
        codec: Seals and opens ``requestState`` (instances that share its key ring and
            audience can serve each other's rounds).
        limits: Bounds on rounds, sizes and counts.

    Raises:
        TypeError: ``codec`` is not a :class:`StateCodec` or ``limits`` not
            :class:`ServerLimits`.
    """

    def __init__(self, codec: StateCodec, *, limits: ServerLimits | None = None) -> None:
        if not isinstance(codec, StateCodec):
            raise TypeError(f"codec must be a StateCodec, not {type(codec).__name__}")
        if limits is not None and not isinstance(limits, ServerLimits):
            raise TypeError(f"limits must be ServerLimits or None, not {type(limits).__name__}")
        self._codec = codec
        self._limits = limits if limits is not None else ServerLimits()
        codec_max = codec.max_bytes
        own = self._limits.max_state_bytes
        self._max_state_bytes = codec_max if own is None else min(own, codec_max)
        # Requested schemas checked and compiled once, by the digest of the question that
        # holds them. A form is a flat object of primitive fields (digest §1.5), and its
        # answers are checked with ``format`` asserting (S18): a form's author asking for an
        # email means one.
        self._schemas = SchemaCache(
            _VALIDATOR_CACHE_SIZE, formats=True, check=FormSpec.from_schema
        )

    @property
    def codec(self) -> StateCodec:
        """The state codec."""
        return self._codec

    @property
    def limits(self) -> ServerLimits:
        """The limits in force."""
        return self._limits

    def begin(
        self, params: MrtrParams, spec: HandlerSpec, *, now: float, principal: str | None = None
    ) -> Run:
        """Start one round: verify state and answers; nothing of the handler runs yet.

        Args:
            params: Params of ``tools/call``, ``prompts/get`` or ``resources/read`` (only
                these may answer ``input_required``, S1/S2).
            spec: The handler for ``params.target``.
            now: The current time on the clock the codec uses (Unix seconds).
            principal: The authenticated user, or ``None``.

        Raises:
            StateRejectedError: Bad ``requestState`` (``-32602``, fixed message).
            JsonRpcError: ``-32602`` for bad or oversized ``inputResponses``, or a bad
                answer to a question the previous round asked (key named). Answers under
                keys the state does not record are checked later, when the handler asks
                them (see :meth:`Context.ask`); :meth:`Run.finish` raises that error.
        """
        if not isinstance(params, _MRTR_PARAMS):
            raise LocalProtocolError(
                f"only tools/call, prompts/get and resources/read run MRTR handlers, "
                f"not {type(params).__name__}"
            )
        binding = Binding.for_params(params, principal)
        claim: tuple[str, float] | None = None
        token = params.request_state
        if token is None:
            carried = Carried()
        else:
            if len(token) > self._max_state_bytes:  # before any crypto
                raise StateRejectedError("too_large", f"{len(token)} > {self._max_state_bytes}")
            opened = self._codec.open(token, binding, now)
            carried = Carried.from_payload(opened.payload)
            if spec.single_use:
                # The codec accepts the token until exp + skew on the opening instance's
                # clock, and instance clocks differ by up to skew: the guard (pruned by
                # whichever instance claims next) must remember it until exp + 2 * skew.
                claim = (opened.token_id, opened.expires_at + 2 * self._codec.skew)
        fresh, recorded, offered = self._read_responses(params.input_responses, carried)
        answers = dict(carried.answers)
        answers.update(recorded)
        context = Context._adopt(  # every dict below is this context's alone
            params=params,
            principal=principal,
            round=carried.rounds + 1,
            answers=answers,
            fresh=fresh,
            offered=offered,
            read_offered=self._read_offered,
            memo=dict(carried.memo),  # run.carried keeps what the state held
            once=dict(carried.once),
            request_state=carried.user,
        )
        return Run(self, params, spec, binding, carried, context, claim)

    # --- inputResponses ----------------------------------------------------------------

    def _read_responses(
        self, raw: Mapping[str, Any] | None, carried: Carried
    ) -> tuple[dict[str, InputResponse], dict[str, Recorded], dict[str, Any]]:
        """Bound ``inputResponses`` and read the answers the state expects.

        Returns the answers to the previous round's questions (structured, and recorded
        pinned to those questions) and the raw entries under keys the state does not know
        at all, for :meth:`Context.ask` to read against the question it asks.
        """
        if raw is None:  # `inputResponses: null` counts as absent
            return {}, {}, {}
        if type(raw) is not dict and not isinstance(raw, Mapping):  # (dict: no ABC check)
            raise _invalid_params("inputResponses must be an object", reason="malformed")
        limits = self._limits
        # The limits apply to the whole object, before any handler runs.
        if len(raw) > limits.max_input_responses:
            raise _invalid_params(
                f"inputResponses has {len(raw)} entries; at most "
                f"{limits.max_input_responses} are accepted",
                reason="too_many",
            )
        try:
            size = len(_ENCODE(raw))
        except (TypeError, ValueError):
            raise _invalid_params("inputResponses is not JSON", reason="malformed") from None
        if size > limits.max_input_responses_bytes:
            raise _invalid_params(
                f"inputResponses is {size} bytes; at most "
                f"{limits.max_input_responses_bytes} are accepted",
                reason="too_large",
            )
        fresh: dict[str, InputResponse] = {}
        recorded: dict[str, Recorded] = {}
        # Keys the previous round asked are read now, against the question asked (its
        # digest pins the answer: a question changed since is asked again). Keys left out
        # will simply be asked again (S15).
        for key, question in carried.asked.items():
            if key not in raw:
                continue
            fresh[key], recorded[key] = self._read_answer(key, question, raw[key])
        # Keys the state knows nothing about wait for the handler to ask them (a round
        # that sealed no state, digest §4.2); keys it never asks are ignored (S14). A key
        # with a recorded answer is never re-read: that answer stays pinned to its question.
        offered = {
            key: value
            for key, value in raw.items()
            if key not in carried.asked and key not in carried.answers
        }
        return fresh, recorded, offered

    def _read_offered(
        self, key: str, request: InputRequest, digest: str, value: Any
    ) -> tuple[InputResponse, Recorded]:
        """Read an answer the state did not expect against the question now asked."""
        return self._read_answer(key, _asked_for(request, digest), value)

    def _read_answer(self, key: str, question: Asked, value: Any) -> tuple[InputResponse, Recorded]:
        path = f"inputResponses.{key}"
        try:
            answer = structure_input_response(question.kind, value, path=path)
        except CodecError as exc:
            raise _invalid_params(
                f"invalid inputResponses entry {key!r}: {exc}", key=key, reason="malformed"
            ) from exc
        self._check_elicitation(key, question, answer)
        try:
            data = unstructure(answer)
        except RecursionError:
            # The converter writes a sampling or roots answer level by level: one nested
            # deeper than it recurses (a transport with a raised max_depth lets it in).
            raise _invalid_params(
                f"invalid inputResponses entry {key!r}: nested too deeply to read",
                key=key, reason="malformed",
            ) from None
        return answer, Recorded(question.digest, question.kind, data)

    def _check_elicitation(self, key: str, question: Asked, answer: InputResponse) -> None:
        if question.kind != ELICITATION_CREATE or not isinstance(answer, ElicitResult):
            return
        if question.schema is None:  # a URL-mode question (a form one always has a schema)
            # Digest §1.6: content accompanies accept in form mode only. What a URL-mode
            # request asks for goes to the URL out of band (S17), never to the handler.
            if answer.content is not None:
                raise _invalid_params(
                    f"invalid inputResponses entry {key!r}: a URL-mode elicitation answer "
                    "carries no content (content accompanies accept in form mode only)",
                    key=key,
                    reason="malformed",
                )
            return
        # S18: elicitation answers should match the requested schema.
        if answer.action != "accept":
            return
        schema = self._form_schema(key, question.schema, question.digest)
        instance = answer.content or {}
        if schema.is_valid(instance):
            return
        error = best_match(schema.validator.iter_errors(instance))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            raise _invalid_params(
                f"inputResponses entry {key!r} does not match the requested schema"
                f"{' at ' + where if where else ''}: {error.message}",
                key=key,
                reason="schema_mismatch",
            )

    def _form_schema(self, key: str, schema: Any, digest: str) -> CompiledSchema:
        try:
            return self._schemas.get(schema, digest)
        except FormSchemaError as exc:  # the handler's mistake, not the client's
            raise JsonRpcError(
                INTERNAL_ERROR,
                f"The form asked under {key!r} is not one the protocol allows: {exc}",
                {"key": key, "reason": "invalid_form"},
            ) from exc

    # --- sealing the next round ---------------------------------------------------------

    def _needs_input(
        self,
        run: Run,
        now: float,
        questions: Mapping[str, tuple[InputRequest, JsonObject, str]],
        user: Any,
    ) -> NeedsInput:
        limits = self._limits
        rounds = run.carried.rounds + 1
        if rounds > limits.max_rounds:
            raise _too_many_rounds(run, questions, limits.max_rounds)
        if len(questions) > limits.max_input_requests:
            raise JsonRpcError(
                INTERNAL_ERROR,
                f"Too many input requests in one round ({len(questions)} > "
                f"{limits.max_input_requests})",
                {"limit": "max_input_requests", "value": limits.max_input_requests},
            )
        for key, (request, wire, digest) in questions.items():
            if isinstance(request, ElicitFormRequest):
                self._form_schema(key, request.requested_schema, digest)
            # The digest's canonical text lets NaN and the infinities through; the wire
            # must not carry them (RFC 8259 §6): never send a question that is not JSON.
            try:
                _ENCODE(wire)
            except (TypeError, ValueError) as exc:
                raise invalid_question(key, exc) from exc
        ctx = run.context
        # What Carried(...).to_payload() writes, without building the Carried (it is
        # sealed at once and never read here).
        asked = {
            key: [
                request.method,
                digest,
                request.requested_schema if isinstance(request, ElicitFormRequest) else None,
            ]
            for key, (request, _, digest) in questions.items()
        }
        state = payload(rounds, asked, ctx.answers, ctx.memo_values, ctx.once_values, user)
        try:
            token = self._codec.seal(state, run.binding, now)
        except StateSizeLimitError as exc:
            raise JsonRpcError(
                INTERNAL_ERROR,
                "The requestState for this round exceeds the size limit",
                {"limit": "max_state_bytes", "value": exc.value},
            ) from exc
        if len(token) > self._max_state_bytes:
            raise JsonRpcError(
                INTERNAL_ERROR,
                "The requestState for this round exceeds the size limit",
                {"limit": "max_state_bytes", "value": self._max_state_bytes},
            )
        result: JsonObject = {"resultType": RESULT_TYPE_INPUT_REQUIRED}
        if questions:
            result["inputRequests"] = {key: wire for key, (_, wire, _) in questions.items()}
        result["requestState"] = token
        return NeedsInput(result, rounds)

    def _explicit(
        self, run: Run, now: float, requests: Mapping[str, InputRequest], user: Any
    ) -> NeedsInput:
        if type(requests) is not dict and not isinstance(requests, Mapping):
            raise TypeError(
                "an explicit input_required takes a mapping of key to question, not "
                f"{type(requests).__name__}"
            )
        caps = run.context.capabilities
        needed = [
            r for req in requests.values() if (r := missing_capabilities(caps, req)) is not None
        ]
        if needed:  # S6/S7 apply to hand-built results too
            raise MissingCapabilityError(merge_capabilities(needed))
        questions: dict[str, tuple[InputRequest, JsonObject, str]] = {}
        for key, request in requests.items():
            if not isinstance(key, str) or not key:
                raise ValueError(bad_key_message(key))
            wire = unstructure_input_request(request)
            try:
                questions[key] = (request, wire, question_digest(wire))
            except (TypeError, ValueError) as exc:
                raise invalid_question(key, exc) from exc
        try:
            _ENCODE(user)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"explicit request state is not JSON-able: {exc}") from exc
        return self._needs_input(run, now, questions, user)


class Run:
    """One round of one handler: created by :meth:`ServerEngine.begin`.

    Attributes:
        claim: ``(token_id, expires_at)`` when the handler is single-use and the request
            carried a state: the driver must ``guard.claim(*run.claim, now)`` before running
            the handler, and raise :meth:`replayed` when that returns ``False``.
        context: The handler's context.
        spec: The handler spec.
        params: The request's params.
        binding: What this request's state is bound to.
    """

    def __init__(
        self,
        engine: ServerEngine,
        params: MrtrParams,
        spec: HandlerSpec,
        binding: Binding,
        carried: Carried,
        context: Context,
        claim: tuple[str, float] | None,
    ) -> None:
        self._engine = engine
        self.params = params
        self.spec = spec
        self.binding = binding
        self.carried = carried
        self.context = context
        self.claim = claim
        self._finished = False

    def replayed(self) -> StateRejectedError:
        """The error for a token the replay guard has seen before (``-32602`` on the wire)."""
        return StateRejectedError("replayed", "single-use requestState used again")

    def finish(
        self, now: float, *, returned: Any = _MISSING, raised: BaseException | None = None
    ) -> Completed | NeedsInput:
        """Turn what the handler did into the round's outcome.

        Pass exactly one of ``returned`` (its return value, awaited if it was a coroutine)
        or ``raised`` (the exception it raised).

        Returns:
            ``Completed(value)``, or ``NeedsInput(result)`` when a question is unanswered or
            the handler returned ``ctx.input_required(...)`` / an ``InputRequiredResult``.

        Raises:
            MissingCapabilityError: ``-32021`` (S7).
            TypeError: The handler returned an :class:`InputRequired` whose ``requests``
                is not a mapping of key to question.
            JsonRpcError: ``-32602`` when an answer the handler asked for (under a key the
                state did not record) did not fit its question, whatever the handler did
                after that; ``-32603`` when a limit stops the round (rounds, input
                requests, state size), or when the handler returned an explicit
                ``input_required`` while a ``ctx.ask`` question had no answer.
            BaseException: Any other exception the handler raised, re-raised as is.
        """
        if self._finished:
            raise LocalProtocolError("this run has already finished")
        if (returned is _MISSING) == (raised is None):
            raise LocalProtocolError("pass exactly one of returned= or raised=")
        self._finished = True
        rejected = self.context.rejected
        if rejected is not None:
            # A bad answer ends the round with -32602 even if the handler caught the stop
            # (or it arrived wrapped in an exception group): nothing is sealed.
            raise rejected
        pending = self.context.pending
        if raised is not None:
            if pending and _only_pending(raised):
                return self._engine._needs_input(self, now, _questions(pending), None)
            raise raised
        if pending and isinstance(returned, InputRequired | InputRequiredResult):
            raise _mixed_modes(pending)
        if isinstance(returned, InputRequired):
            return self._engine._explicit(self, now, returned.requests, returned.state)
        if isinstance(returned, InputRequiredResult):
            return self._engine._explicit(
                self, now, returned.input_requests or {}, returned.request_state
            )
        if pending:
            # The handler swallowed InputPending: an unanswered question still ends the run.
            return self._engine._needs_input(self, now, _questions(pending), None)
        return Completed(returned, self.carried.rounds)


def _mixed_modes(pending: Mapping[str, Any]) -> JsonRpcError:
    """The ``-32603`` for a handler that returned an explicit ``input_required`` while a
    question it asked with ``ctx.ask`` had no answer (it caught the stop ``ask`` raises).
    Sending either set alone would drop the other's question without a word, and one round
    cannot carry both modes' state."""
    keys = sorted(pending)
    return JsonRpcError(
        INTERNAL_ERROR,
        f"The handler returned an explicit input_required while {', '.join(map(repr, keys))} "
        "asked with ctx.ask had no answer (it caught the stop ctx.ask raises): ask one way "
        "in a run",
        {"reason": "mixed_input_modes", "pending": keys},
    )


def _only_pending(raised: BaseException) -> bool:
    """``raised`` is the stop signal, bare or inside exception groups (a handler that asks
    from tasks of a trio nursery or an asyncio TaskGroup gets it back wrapped)."""
    if isinstance(raised, InputPending):
        return True
    if isinstance(raised, BaseExceptionGroup):
        _, rest = raised.split(InputPending)
        return rest is None
    return False


def _too_many_rounds(
    run: Run, questions: Mapping[str, tuple[InputRequest, JsonObject, str]], limit: int
) -> JsonRpcError:
    """The ``-32603`` for one round too many, naming the keys asked again because their
    question changed after the client answered it (an answer is pinned to the exact
    question: one built from something that changes every round, such as the clock, is
    never answered, and the operation runs out of rounds)."""
    asked = run.carried.asked
    answered = run.context.input_responses
    changed = [
        key
        for key, (_, _, digest) in questions.items()
        if key in answered and key in asked and asked[key].digest != digest
    ]
    message = f"Too many rounds: this request may ask for input at most {limit} times"
    data: JsonObject = {"limit": "max_rounds", "value": limit}
    if changed:
        names = ", ".join(repr(key) for key in changed)
        message += (
            f"; the question under {names} changed after the client answered it, so it "
            "was asked again (build a question the same way on every round: from the "
            "arguments, earlier answers or ctx.memo, not from the clock)"
        )
        data["changed"] = changed
    return JsonRpcError(INTERNAL_ERROR, message, data)


def _asked_for(request: InputRequest, digest: str) -> Asked:
    schema = request.requested_schema if isinstance(request, ElicitFormRequest) else None
    return Asked(request.method, digest, schema)


def _questions(pending: Mapping[str, Any]) -> dict[str, tuple[InputRequest, JsonObject, str]]:
    return {key: (p.request, p.wire, p.digest) for key, p in pending.items()}


def _invalid_params(message: str, *, key: str | None = None, reason: str) -> JsonRpcError:
    data: JsonObject = {"reason": reason}
    if key is not None:
        data["key"] = key
    return JsonRpcError(INVALID_PARAMS, message, data)
