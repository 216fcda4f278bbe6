"""What the simulated clients ask for, how they answer, and how a result is judged.

A :class:`Workload` builds the app every server instance runs, describes each operation a
client starts, answers the app's input requests the way an honest client would, and checks
the final result. :class:`ReferenceWorkload` is the built-in one: every operation carries
its id (``op-17``) in its arguments, every answer carries the id of the operation it
answers, and every handler echoes the answers it used in its result, so that a result
holding a foreign id (or missing one of its own answers) shows a leak between operations.
:class:`AppWorkload` runs a user's own app with generic checks.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from mrtr_core import jsontext
from mrtr_core._checks import flag, instance_of, json_value
from mrtr_core.app import App
from mrtr_core.jsonrpc import DEFAULT_MAX_DEPTH
from mrtr_core.server import Context, form, sample
from mrtr_core.sim.prng import Prng
from mrtr_core.state import StateCodec
from mrtr_core.wire.models import (
    CALL_TOOL,
    ELICITATION_CREATE,
    GET_PROMPT,
    READ_RESOURCE,
    ROOTS_LIST,
    SAMPLING_CREATE_MESSAGE,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageResult,
    ElicitationCapability,
    ElicitFormRequest,
    ElicitResult,
    ElicitUrlRequest,
    InputRequest,
    InputResponse,
    JsonObject,
    ListRootsRequest,
    ListRootsResult,
    Root,
    SamplingCapability,
)

__all__ = [
    "FULL_CAPABILITIES",
    "KINDS_ALL",
    "AppWorkload",
    "Effects",
    "Operation",
    "ReferenceWorkload",
    "Workload",
    "honest_answer",
]

FULL_CAPABILITIES = ClientCapabilities(
    elicitation=ElicitationCapability(form={}),
    sampling=SamplingCapability(),
    roots={},
)
"""What a simulated client declares: form elicitation, sampling and roots (not URL mode)."""

KINDS_ALL = frozenset({ELICITATION_CREATE, SAMPLING_CREATE_MESSAGE, ROOTS_LIST})
"""The input kinds a simulated client has handlers for."""

_OP_MARK = re.compile(r"op-\d+")
# The mark honest_answer puts in a string of operation op-N's answer: "op-N:key".
_ANSWER_MARK = re.compile(r"(?<![\w-])op-\d+:")
# Strings as they are (no \u escapes, so a non-ASCII digit stays a digit to the pattern).
_TEXT = jsontext.reusable(json.JSONEncoder(ensure_ascii=False, separators=(",", ":")))


_METHODS: tuple[str, ...] = (CALL_TOOL, GET_PROMPT, READ_RESOURCE)


@attrs.frozen(kw_only=True)
class Operation:
    """One MRTR operation a simulated client starts.

    Attributes:
        op: The operation's id, e.g. ``"op-17"``: its own (a run refuses an id another
            running operation holds with a ValueError), and its flow's name in transcripts,
            so it holds no whitespace.
        method: ``tools/call``, ``prompts/get`` or ``resources/read``.
        params: The params without ``_meta`` (``{"name": ..., "arguments": ...}`` or
            ``{"uri": ...}``).
        single_use: Whether the target is single-use (every state it seals redeems once).

    Raises:
        ValueError: An id that is empty or holds whitespace, another method, params that
            do not name the target (a string ``name``, or ``uri`` to read), or params that
            hold ``NaN``, an infinity, an integer too long to write or nesting deeper than
            63 levels (their request, one level more, is as deep as a peer decodes).
        TypeError: ``params`` that are not a dict or hold anything but JSON values (a
            set, an object, a tuple, a key that is not a string), or a ``single_use`` that
            is not a bool.

    A params value that is not JSON is named by its path and the operation's id
    (``operation 'op-3': params.arguments.tags is a set, not a JSON value``): no server
    could receive it, and its text (a set's order) could differ between two runs of one
    seed. The simulated servers take params as they are, not as JSON text, so a tuple
    would reach them as a tuple, which a schema's ``array`` refuses where a client on the
    wire sends a list.
    """

    op: str
    method: str
    params: JsonObject
    single_use: bool = False

    def __attrs_post_init__(self) -> None:
        # A transcript line is split on whitespace to find its operation: an id holding
        # some would leave a failing run's shortest transcript without its lines.
        op = self.op
        if not isinstance(op, str) or op.split() != [op]:
            raise ValueError(f"op must be a non-empty string without whitespace, got {op!r}")
        if self.method not in _METHODS:
            raise ValueError(f"method must be {', '.join(_METHODS[:-1])} or {_METHODS[-1]}, "
                             f"got {self.method!r}")
        instance_of("params", self.params, dict, "a dict")
        try:
            # The params sit one level inside their request (jsonrpc.DEFAULT_MAX_DEPTH).
            json_value("params", self.params, DEFAULT_MAX_DEPTH - 1)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"operation {op!r}: {exc}") from None
        member = "uri" if self.method == READ_RESOURCE else "name"
        if not isinstance(self.params.get(member), str):
            raise ValueError(f"params of a {self.method} operation must name its target as a "
                             f"string in {member!r}, got {self.params.get(member)!r}")
        flag("single_use", self.single_use)

    @property
    def target(self) -> str:
        """The tool or prompt name, or the resource URI."""
        return str(self.params.get("uri") if self.method == READ_RESOURCE else self.params["name"])


class Effects:
    """The outside world's record of side effects: how often each ``(op, step)`` ran.

    Handlers call :meth:`record` (or :meth:`ran`) where their side effect happens, inside
    ``ctx.once``; a count above one means a step that must run once per operation ran
    twice.

    Attributes:
        serving: The operation whose request a server instance is running a handler for
            (set by the simulator around every handler run), or ``None``.
    """

    __slots__ = ("counts", "repeated", "serving")

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}
        self.repeated: list[tuple[str, str, int]] = []
        self.serving: str | None = None

    def record(self, op: str, step: str) -> int:
        """Count one run of ``step`` for ``op``; returns how often it has run now."""
        key = (op, step)
        count = self.counts.get(key, 0) + 1
        self.counts[key] = count
        if count > 1:
            self.repeated.append((op, step, count))
        return count

    def ran(self, step: str) -> int:
        """Count one run of ``step`` for the operation being served (:attr:`serving`): what
        a handler that does not know its operation's id calls; returns how often it has run.

        Raises:
            RuntimeError: no handler is running (e.g. called while building the app).
        """
        if self.serving is None:
            raise RuntimeError(f"side effect {step!r} recorded while no handler runs")
        return self.record(self.serving, step)


class Workload(Protocol):
    """What the simulation needs to know about the app under test."""

    @property
    def name(self) -> str:
        """Shown in summaries."""
        ...

    def build_app(self, codec: StateCodec, effects: Effects) -> App:
        """A fresh app for one server instance (called at start, restart and rotation)."""
        ...

    def operation(self, index: int, prng: Prng) -> Operation:
        """The ``index``-th operation, ``index`` in ``[0, flows)`` (draw only from ``prng``:
        it is the flow's own; a hostile client's swap probe asks again for another flow's
        index, with a stream of its own)."""
        ...

    def answer(self, operation: Operation, key: str, request: InputRequest) -> InputResponse:
        """What an honest client answers to ``request``."""
        ...

    def check(self, operation: Operation, result: JsonObject, answers: Mapping[str, Any]) -> str:
        """Why ``result`` is wrong for this operation given the answers its client gave
        (``""`` when it is right)."""
        ...


def _fill(schema: Mapping[str, Any], marker: str) -> dict[str, Any]:
    """A value for every property of a flat elicitation schema; strings carry ``marker``."""
    out: dict[str, Any] = {}
    properties = schema.get("properties") or {}
    for name, prop in properties.items():
        if not isinstance(prop, Mapping):
            continue
        kind = prop.get("type")
        if prop.get("enum"):
            out[name] = prop["enum"][0]
        elif prop.get("oneOf"):
            out[name] = prop["oneOf"][0].get("const")
        elif kind == "boolean":
            out[name] = True
        elif kind == "integer":
            out[name] = int(prop.get("minimum", 1))
        elif kind == "number":
            out[name] = float(prop.get("minimum", 1.0))
        elif kind == "array":
            items = prop.get("items") or {}
            options = items.get("enum") or [o.get("const") for o in items.get("anyOf", [])]
            out[name] = list(options[:1])
        else:
            out[name] = marker
    return out


def honest_answer(op: str, key: str, request: InputRequest) -> InputResponse:
    """A valid answer to any input request, every string in it marked ``op:key``."""
    marker = f"{op}:{key}"
    if isinstance(request, ElicitFormRequest):
        return ElicitResult(action="accept", content=_fill(request.requested_schema, marker))
    if isinstance(request, ElicitUrlRequest):
        return ElicitResult(action="accept")
    if isinstance(request, CreateMessageRequest):
        return CreateMessageResult(
            role="assistant", content={"type": "text", "text": marker}, model="sim-model"
        )
    if isinstance(request, ListRootsRequest):
        return ListRootsResult(roots=[Root(uri=f"file:///{op}/{key}", name=marker)])
    raise TypeError(f"no honest answer for {request!r}")


def _answer_data(answer: Any) -> Any:
    """What a handler echoes of an answer: its content, text or roots."""
    if isinstance(answer, ElicitResult):
        return {"action": answer.action, "content": answer.content}
    if isinstance(answer, CreateMessageResult):
        return {"text": answer.content.get("text") if isinstance(answer.content, dict) else None}
    if isinstance(answer, ListRootsResult):
        return {"roots": [r.uri for r in answer.roots]}
    return None


def _payload(method: str, result: JsonObject) -> Any:
    """The echo a reference handler put in its result."""
    if method == GET_PROMPT:
        return json.loads(result["messages"][0]["content"]["text"])
    if method == READ_RESOURCE:
        return json.loads(result["contents"][0]["text"])
    return result.get("structuredContent")


def _marks_of(payload: dict[str, Any]) -> set[str]:
    """Every operation id in the payload's strings (the values, at any depth).

    The payload came out of a JSON result, so it is scanned as compact JSON text: strings
    are quoted there, so a mark never runs from one into the next. Object keys are scanned
    too; the reference handlers' keys are fixed words and input keys, which hold no mark.
    Anything that is not JSON text is walked instead.
    """
    try:
        text = _TEXT(payload)
    except (TypeError, ValueError):
        marks: set[str] = set()
        _marks(payload, marks)
        return marks
    return set(_OP_MARK.findall(text))


def _marks(value: Any, out: set[str]) -> None:
    if isinstance(value, str):
        out.update(_OP_MARK.findall(value))
    elif isinstance(value, dict):
        for item in value.values():
            _marks(item, out)
    elif isinstance(value, list):
        for item in value:
            _marks(item, out)


def _mix(mix: Sequence[float], kinds: int) -> tuple[float, ...]:
    """``mix`` as a tuple, refused unless it holds one finite weight >= 0 per kind and not
    all of them 0 (a short mix silently drops kinds; a nan or all-zero one picks only the
    last kind)."""
    weights = tuple(mix)
    finite = all(
        isinstance(w, int | float) and not isinstance(w, bool) and 0 <= w < math.inf
        for w in weights
    )
    if len(weights) != kinds or not finite or not any(w > 0 for w in weights):
        raise ValueError(f"mix must be {kinds} finite weights >= 0, not all 0, got {mix!r}")
    return weights


class ReferenceWorkload:
    """Three kinds of operation over the three MRTR methods, each echoing its answers.

    - ``deploy`` (``tools/call``, single-use): asks ``confirm``; reserves once
      (``ctx.once("reserve")``, a step with a round after it); then asks ``ticket`` (a
      form) and ``summary`` (sampling) together; then runs its side effect once
      (``ctx.once("charge")``) and completes. Declining ``confirm`` completes with
      ``isError``. Three rounds.
    - ``review`` (``prompts/get``): asks ``roots``, then ``approve``. Three rounds.
    - ``report`` (``resources/read`` of ``sim://report/<op>``): sheds load with a state-only
      round, then asks ``confirm``. Three rounds, one of them paced by the client.

    The app also has a prompt named ``deploy``, which no operation asks for: a hostile
    client's ``cross_method`` probe sends a ``deploy`` tool's state to it.

    Args:
        mix: Weights of ``deploy``, ``review`` and ``report``.
        app_factory: ``codec -> App``: another implementation of these three tools to run
            under the same operations, answers and checks (its side effects are not
            counted; single-use states still are).
    """

    name = "reference"

    def __init__(
        self,
        mix: Sequence[float] = (0.6, 0.2, 0.2),
        app_factory: Callable[[StateCodec], App] | None = None,
    ) -> None:
        self.mix = _mix(mix, len(self.KINDS))
        self.app_factory = app_factory

    def build_app(self, codec: StateCodec, effects: Effects) -> App:
        """The reference app (see the class docstring), or ``app_factory(codec)``."""
        if self.app_factory is not None:
            return self.app_factory(codec)
        app = App("mrtr-sim", "1.0", codec=codec)

        @app.tool(single_use=True)
        def deploy(ctx: Context, op: str) -> Any:
            """Deploy after a confirmation, a ticket and a summary; reserve and charge once."""
            plan = ctx.memo("plan", lambda: {"op": op, "steps": 3})
            confirm = ctx.ask("confirm", form(f"{op}: deploy?", note=str, ok=bool))
            answers: dict[str, Any] = {"confirm": _answer_data(confirm)}
            if confirm.action != "accept":
                return {
                    "content": [{"type": "text", "text": f"{op} {confirm.action}"}],
                    "structuredContent": {"op": op, "outcome": confirm.action,
                                          "answers": answers},
                    "isError": True,
                }
            # A step with a round after it: every later round must get its recorded
            # result, not run it again (what ctx.once promises across rounds).
            reserved = ctx.once("reserve", lambda: effects.record(op, "reserve"))
            got = ctx.ask_all({
                "ticket": form(f"{op}: change ticket", ticket=str),
                "summary": sample(f"{op}: summarise {plan['steps']} steps", 64),
            })
            answers.update({key: _answer_data(value) for key, value in got.items()})
            charged = ctx.once("charge", lambda: effects.record(op, "charge"))
            return {"op": op, "outcome": "deployed", "reserved": reserved, "charged": charged,
                    "answers": answers}

        @app.prompt(name="deploy")
        def describe_deploy(ctx: Context, op: str) -> Any:
            """A prompt of the tool's name: no state of the tool may be used with it."""
            return [json.dumps({"op": op, "outcome": "described"})]

        @app.prompt()
        def review(ctx: Context, op: str) -> Any:
            """A review prompt built from the client's roots and an approval."""
            got = ctx.ask("roots", ListRootsRequest())
            approve = ctx.ask("approve", form(f"{op}: approve?", note=str))
            answers = {"roots": _answer_data(got), "approve": _answer_data(approve)}
            return [json.dumps({"op": op, "outcome": "reviewed", "answers": answers})]

        @app.resource("sim://report/{op}")
        def report(ctx: Context, uri: str, op: str) -> Any:
            """A report that first sheds load (state-only round), then asks to confirm."""
            if ctx.round == 1:
                return ctx.input_required(state={"shed": op})
            confirm = ctx.ask("confirm", form(f"{op}: publish report?", note=str))
            answers = {"confirm": _answer_data(confirm)}
            return json.dumps({"op": op, "outcome": "reported", "answers": answers})

        return app

    def operation(self, index: int, prng: Prng) -> Operation:
        """Draw the kind of the ``index``-th operation."""
        return self.make(prng.weighted(list(zip(self.KINDS, self.mix))), index)

    KINDS = ("deploy", "review", "report")

    def make(self, kind: str, index: int) -> Operation:
        """The ``index``-th operation, of ``kind`` (one of :attr:`KINDS`)."""
        op = f"op-{index}"
        if kind == "deploy":
            return Operation(op=op, method="tools/call", single_use=True,
                             params={"name": "deploy", "arguments": {"op": op}})
        if kind == "review":
            return Operation(op=op, method=GET_PROMPT,
                             params={"name": "review", "arguments": {"op": op}})
        if kind == "report":
            return Operation(op=op, method=READ_RESOURCE, params={"uri": f"sim://report/{op}"})
        raise ValueError(f"unknown operation kind {kind!r}")

    def answer(self, operation: Operation, key: str, request: InputRequest) -> InputResponse:
        """Answer with values marked by the operation's id."""
        return honest_answer(operation.op, key, request)

    def check(self, operation: Operation, result: JsonObject, answers: Mapping[str, Any]) -> str:
        """The result must echo this operation's id and every answer its client gave, and
        hold no other operation's id."""
        try:
            payload = _payload(operation.method, result)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            return f"result does not have the reference shape ({type(exc).__name__}: {exc})"
        if not isinstance(payload, dict) or payload.get("op") != operation.op:
            return f"result is about {payload.get('op') if isinstance(payload, dict) else '?'}"
        marks = _marks_of(payload)
        marks.discard(operation.op)
        if marks:
            return f"result holds data of {', '.join(sorted(marks))}"
        echoed = payload.get("answers") or {}
        if type(echoed) is not dict or not answers.keys() <= echoed.keys():
            missing = sorted(set(answers) - set(echoed))
            if missing:
                return f"result lacks the answers to {', '.join(missing)}"
        for key, given in answers.items():
            if key in echoed and not _same_answer(given, echoed[key]):
                return f"answer {key!r} came back as {echoed[key]!r}, the client sent {given!r}"
        return ""


def _same_answer(given: Any, echoed: Any) -> bool:
    """Whether the echo of an answer is the answer the client gave (wire form)."""
    if not isinstance(given, dict) or not isinstance(echoed, dict):
        return False
    if "action" in given:
        return bool(
            echoed.get("action") == given["action"]
            and (echoed.get("content") or None) == (given.get("content") or None)
        )
    if "roots" in given:
        return bool(echoed.get("roots") == [r.get("uri") for r in given["roots"]])
    if "content" in given:
        content = given["content"]
        return bool(isinstance(content, dict) and echoed.get("text") == content.get("text"))
    return False


@attrs.frozen(kw_only=True)
class AppWorkload:
    """A user's app under the simulator, with generic checks.

    Attributes:
        app_factory: ``codec -> App`` (called for every instance, restart and rotation);
            ``(codec, effects) -> App`` with ``pass_effects``.
        operations: ``(index, prng) -> Operation``: what the ``index``-th client asks
            (``index`` in ``[0, flows)``). One that raises (as an ``app_factory`` that
            raises) stops the run with a ``SimulationError`` naming its seed.
        answer_fn: ``(operation, key, request) -> InputResponse``; defaults to
            :func:`honest_answer`. One that raises fails its flow as a client's input
            handler that raises does (``HandlerFailedError``).
        check_fn: ``(operation, result, answers) -> problem``; defaults to no check beyond
            the simulator's own invariants.
        name: Shown in summaries.
        pass_effects: Call ``app_factory(codec, effects)`` with the run's :class:`Effects`,
            shared by every instance, restart and rotation: a handler that calls
            ``effects.ran("charge")`` where its side effect happens breaks the single-use
            invariant when that runs twice for one operation.
        check_leaks: With the default (honest) answers, which mark every string they hold
            with their operation's id (``op-17:key``), a complete result holding the mark
            of another ``op-N`` breaks the isolation invariant: one operation's answer
            leaked into another's result.
    """

    app_factory: Callable[..., App]
    operations: Callable[[int, Prng], Operation]
    answer_fn: Callable[[Operation, str, InputRequest], InputResponse] | None = None
    check_fn: Callable[[Operation, JsonObject, Mapping[str, Any]], str] | None = None
    name: str = "app"
    pass_effects: bool = False
    check_leaks: bool = True

    def build_app(self, codec: StateCodec, effects: Effects) -> App:
        """Call the user's factory (with ``effects`` when :attr:`pass_effects`)."""
        app = self.app_factory(codec, effects) if self.pass_effects else self.app_factory(codec)
        if not isinstance(app, App):
            raise TypeError(f"app_factory returned {type(app).__name__}, not an App")
        return app

    def operation(self, index: int, prng: Prng) -> Operation:
        """The user's ``index``-th operation.

        Raises:
            TypeError: ``operations`` returned something other than an :class:`Operation`.
        """
        operation = self.operations(index, prng)
        if not isinstance(operation, Operation):
            raise TypeError(f"operations returned {type(operation).__name__}, not an Operation")
        return operation

    def answer(self, operation: Operation, key: str, request: InputRequest) -> InputResponse:
        """The user's answer, or an honest one."""
        if self.answer_fn is not None:
            return self.answer_fn(operation, key, request)
        return honest_answer(operation.op, key, request)

    def check(self, operation: Operation, result: JsonObject, answers: Mapping[str, Any]) -> str:
        """No other operation's honest answer in ``result`` (see :attr:`check_leaks`), then
        the user's check, if any."""
        if self.check_leaks and self.answer_fn is None:
            foreign = {mark.removesuffix(":") for mark in _ANSWER_MARK.findall(_text_of(result))}
            foreign.discard(operation.op)
            if foreign:
                return f"result holds answers given to {', '.join(sorted(foreign))}"
        if self.check_fn is None:
            return ""
        return self.check_fn(operation, result, answers)


def _text_of(result: JsonObject) -> str:
    """``result`` as compact JSON text (its strings unescaped), to scan for marks."""
    try:
        return _TEXT(result)
    except (TypeError, ValueError):
        return repr(result)

