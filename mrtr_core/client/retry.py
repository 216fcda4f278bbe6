"""Building each leg's JSON-RPC request, and turning handler answers into wire values.

Every leg of a flow is a new, self-contained request (digest §1.3, §2.1): the same method,
the caller's original params, a full ``_meta`` built anew, and, on a retry, the answers of
the round just fulfilled in ``inputResponses`` plus the ``requestState`` echoed exactly.
"""

from __future__ import annotations

import contextlib
import json
import marshal
import math
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

from mrtr_core import jsontext
from mrtr_core._checks import shown
from mrtr_core.errors import CodecError, LocalProtocolError
from mrtr_core.wire.converter import converter, structure_input_response, unstructure
from mrtr_core.wire.models import (
    ELICITATION_CREATE,
    ROOTS_LIST,
    SAMPLING_CREATE_MESSAGE,
    CreateMessageResult,
    ElicitResult,
    ElicitUrlRequest,
    InputRequest,
    JsonObject,
    ListRootsResult,
    RequestMeta,
    Root,
)

__all__ = [
    "RETRY_KEYS", "LegBuilder", "answer_for", "answer_to_wire", "copy_json", "meta_to_wire"
]

RETRY_KEYS: Final = frozenset({"_meta", "inputResponses", "requestState"})
"""Params keys the flow owns: rebuilt on every leg, never taken from the caller."""


def copy_json(value: Any) -> Any:
    """A deep copy of plain JSON data (dicts and lists copied, everything else shared)."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [copy_json(item) for item in value]
    return value


# --- copy plans --------------------------------------------------------------------------------
#
# Every leg needs its own deep copy of the same params and ``_meta`` (no two messages share a
# mutable value). Their shapes never change once the flow holds its private copy, so the
# copy is planned once: for each container, where the containers inside it are (the
# immutable leaves are shared). That is cheaper per leg than any general copier.
#
# Planning is also where the values are checked to be JSON (no transport could send anything
# else, or it would send NaN, which is no JSON): a plan covers only values that are, with the
# checks the walk makes anyway and one C pass over each object's keys. Whatever it does not
# cover is checked, and named, by _checked.

Plan: TypeAlias = tuple[tuple[Any, "Plan"], ...]
"""``(key or index, plan of the container there)`` for each container inside a container."""

# A float is no leaf here: NaN and the infinities are floats (RFC 8259 §6 has no such
# number), so each float is looked at, in the containers that hold one.
_LEAVES: Final = frozenset({str, int, bool, type(None)})
# An int is looked at too, when longer than _INT_BITS: int's str() refuses more digits than
# sys.get_int_max_str_digits() (4300 by default), so no encoder could write it.
_SHORT_LEAVES: Final = frozenset({str, bool, type(None)})
_MAX_PLAN_DEPTH: Final = 32
_isfinite: Final = math.isfinite
_INT_BITS: Final = 4000  # longer integers take the encoder's check (it limits their digits)


class _NotPlain(Exception):
    """A value a copy plan does not cover (another type, a key that is not a string, a float
    that is no JSON number, or nested too deep)."""


def _copy_planned(value: Any, plan: Plan) -> Any:
    """A deep copy of the dict or list ``value``, whose containers ``plan`` locates."""
    out = value.copy()
    for at, inner in plan:
        item = value[at]
        out[at] = _copy_planned(item, inner) if inner else item.copy()
    return out


_NO_PLAN: Final[Plan] = ()
_all_leaves: Final = _SHORT_LEAVES.issuperset
_all_strings: Final = frozenset({str}).issuperset


def _plan_into(value: Any, out: Any, depth: int) -> Plan:
    """Make ``out``, a shallow copy of the dict, list or tuple ``value`` (a list for a
    tuple), a deep copy; its plan.

    Covers exact dicts with string keys, lists and tuples (copied as lists: JSON has arrays
    only), and the JSON scalars, a float only when finite; anything else raises
    :class:`_NotPlain`.
    """
    if depth >= _MAX_PLAN_DEPTH:
        raise _NotPlain
    plan = _NO_PLAN
    for at, item in value.items() if type(value) is dict else enumerate(value):
        kind = type(item)
        if kind in _LEAVES:
            if kind is int and item.bit_length() > _INT_BITS:
                raise _NotPlain  # _checked names it when it is too long to write
            continue
        if kind is float:
            if _isfinite(item):
                continue
            raise _NotPlain
        if kind is dict:
            if not _all_strings(map(type, item)):
                raise _NotPlain
            copy = out[at] = item.copy()
            # A container of leaves only (the common case) is checked in one C pass.
            leaves = _all_leaves(map(type, item.values()))
        elif kind is list:
            copy = out[at] = item.copy()
            leaves = _all_leaves(map(type, item))
        elif kind is tuple:
            copy = out[at] = list(item)
            leaves = _all_leaves(map(type, item))
        else:
            raise _NotPlain
        plan += ((at, _NO_PLAN if leaves else _plan_into(item, copy, depth + 1)),)
    return plan


def _plan(value: dict[str, Any]) -> tuple[Any, Plan]:
    """A private deep copy of the dict ``value``, and its :data:`Plan`."""
    if not _all_strings(map(type, value)):
        raise _NotPlain
    out = value.copy()  # the leaves, shared; containers replaced by their copies
    return out, _plan_into(value, out, 0)


_META_CACHE_SIZE: Final = 32
# Wire form (and its copy plan) of recent RequestMeta objects, by identity (a client reuses
# one per connection). Holding the object keeps its id from being reused while it lives.
_meta_cache: dict[int, tuple[RequestMeta, JsonObject, Plan | None]] = {}


def _meta_entry(meta: RequestMeta) -> tuple[RequestMeta, JsonObject, Plan | None]:
    entry = _meta_cache.get(id(meta))
    if entry is not None and entry[0] is meta:
        return entry
    wire: JsonObject = unstructure(meta)
    try:
        plan: Plan | None = _plan(wire)[1]
    except _NotPlain:
        plan = None
    if len(_meta_cache) >= _META_CACHE_SIZE:
        _meta_cache.clear()  # one step, safe against concurrent flows in threads
    entry = _meta_cache[id(meta)] = (meta, wire, plan)
    return entry


def meta_to_wire(meta: RequestMeta) -> JsonObject:
    """The wire form of ``meta`` (cached by identity; the caller must not mutate it)."""
    return _meta_entry(meta)[1]


# Where a part of a value is: its key or index, and where the container holding it is
# (``None``: the value itself).
_Place: TypeAlias = "tuple[str | int, _Place] | None"
_MAX_COPY_DEPTH: Final = 2000
"""Deepest nesting :func:`_json_copy` copies: as deep as marshal (each leg's copier)
writes. A deeper value, or a circular one, is refused as nested too deeply."""
_PLACE_CHARS: Final = 100  # of each end of a place named in a message


class _NotJson(Exception):
    """A part of a value JSON cannot write: why, and where it is."""

    def __init__(self, why: str, place: _Place) -> None:
        super().__init__(why)
        self.why = why
        self.place = place


def _json_copy(value: Any) -> Any:
    """A deep copy of ``value`` as JSON reads it back: dicts with string keys and lists, a
    tuple as a list, a subclass of a JSON type as that type (its value is what the encoder
    writes). :class:`_NotJson` for anything else (a set, bytes, an object), a key that is
    not a string (the encoder would write ``1`` as ``"1"``, or fail), NaN or an infinity
    (RFC 8259 §6), and nesting deeper than :data:`_MAX_COPY_DEPTH` (no recursion: any
    depth gets its answer)."""
    # Each container still to fill: its copy, the original, its depth and place.
    todo: list[tuple[Any, Any, int, _Place]] = []

    def copied(item: Any, place: _Place, depth: int) -> Any:
        kind = type(item)
        if kind is str or kind is bool or item is None:
            return item
        if kind is int:
            return item if item.bit_length() <= _INT_BITS else _writable(item, place)
        if isinstance(item, str):
            return str.__str__(item)
        if isinstance(item, int):
            return _writable(int.__int__(item), place)
        if isinstance(item, float):
            if _isfinite(item):
                return float.__float__(item)
            raise _NotJson(f"{item!r} (RFC 8259 §6 has no NaN or infinity)", place)
        if not isinstance(item, dict | list | tuple):
            raise _NotJson(f"a {kind.__name__}", place)
        if depth >= _MAX_COPY_DEPTH:
            raise _NotJson(jsontext.TOO_DEEP, None)
        copy: Any = {} if isinstance(item, dict) else []
        todo.append((copy, item, depth + 1, place))
        return copy

    out = copied(value, None, 0)
    while todo:
        copy, source, depth, place = todo.pop()
        if isinstance(source, dict):
            for key, item in source.items():
                if not isinstance(key, str):
                    raise _NotJson(f"the key {shown(key)} ({type(key).__name__}) is not a"
                                   " string", place)
                copy[str.__str__(key)] = copied(item, (key, place), depth)
        else:
            for index, item in enumerate(source):
                copy.append(copied(item, (index, place), depth))
    return out


def _writable(number: int, place: _Place) -> int:
    """``number`` when the encoder can write it (see :data:`_SHORT_LEAVES`)."""
    if number.bit_length() > _INT_BITS:
        try:
            int.__repr__(number)
        except ValueError:
            raise _NotJson("an integer too long to write", place) from None
    return number


def _checked(what: str, value: Any) -> Any:
    """:func:`_json_copy` of ``value``; :class:`LocalProtocolError` naming ``what`` and the
    place in it (``params.arguments.tags[2]``) of a part JSON cannot write."""
    try:
        return _json_copy(value)
    except _NotJson as exc:
        steps: list[str] = []
        place = exc.place
        while place is not None:
            at, place = place
            steps.append(f"[{at}]" if isinstance(at, int) else
                         f".{at}" if at.isidentifier() else f"[{shown(at)}]")
        where = "".join(reversed(steps))
        if len(where) > 2 * _PLACE_CHARS + 3:  # deep inside: its two ends
            where = f"{where[:_PLACE_CHARS]}...{where[-_PLACE_CHARS:]}"
        raise LocalProtocolError(f"{what}{where}: not JSON: {exc.why}") from None


class LegBuilder:
    """Builds the request of each leg from a clean base (digest §1.3, C2-C5).

    The caller's params are deep-copied once; ``inputResponses`` and ``requestState`` found
    in them are dropped (stale values of an earlier flow must never leak into this one), and
    ``_meta`` is refused: the per-request ``_meta`` comes from ``meta`` and is rebuilt,
    as a fresh object, on every leg (capabilities are per request, digest §1.7). Every leg
    gets its own copies, so no two messages share a mutable value.
    """

    __slots__ = ("_base", "_base_plan", "_blob", "_meta", "_meta_plan", "method")

    def __init__(self, method: str, params: Mapping[str, Any], meta: RequestMeta) -> None:
        """Prepare the legs of ``method`` with ``params`` and ``meta``.

        Raises:
            LocalProtocolError: ``params`` is not a mapping or carries ``_meta``, or it or
                ``meta`` is not JSON (naming where: a set, bytes or another object, a key
                that is not a string, NaN or an infinity) or is nested too deeply to copy.
                A tuple is JSON's array: every leg carries it as a list.
        """
        if type(params) is not dict and not isinstance(params, Mapping):
            raise LocalProtocolError(f"params must be a mapping, got {type(params).__name__}")
        if "_meta" in params:
            raise LocalProtocolError("params must not carry _meta: pass meta=RequestMeta(...)")
        self.method = method
        own: Any = params  # read only: every path below copies it
        if "inputResponses" in params or "requestState" in params:
            own = {key: value for key, value in params.items() if key not in RETRY_KEYS}
        elif type(params) is not dict:
            own = dict(params)
        try:
            _, self._meta, self._meta_plan = _meta_entry(meta)
        except RecursionError:  # the converter writes a model's members level by level
            raise LocalProtocolError(f"meta: not JSON: {jsontext.TOO_DEEP}") from None
        # Plain JSON values get copy plans, which check them as they are made (the meta's
        # once per RequestMeta). Anything else is checked and copied as JSON reads it back,
        # naming what is not JSON (or too deep); then a fresh deep copy per leg is one C call
        # when marshal takes the copies (it serves as an in-memory copier only), and that
        # same copy otherwise.
        self._blob: bytes | None = None
        self._base_plan: Plan | None = None
        try:
            self._base, self._base_plan = _plan(own)
        except _NotPlain:
            self._base = _checked("params", own)
        if self._base_plan is None or self._meta_plan is None:
            self._base_plan = None  # both are copied alike (see _copies)
            if self._meta_plan is None:
                self._meta = _checked("meta", self._meta)
            with contextlib.suppress(ValueError):  # nested deeper than marshal writes
                self._blob, self._base = marshal.dumps((self._base, self._meta)), {}

    def _copies(self) -> tuple[JsonObject, JsonObject]:
        """Fresh deep copies of the base params and of the ``_meta`` wire form."""
        base_plan, meta_plan = self._base_plan, self._meta_plan
        if base_plan is not None and meta_plan is not None:
            return _copy_planned(self._base, base_plan), _copy_planned(self._meta, meta_plan)
        if self._blob is not None:
            base, meta = marshal.loads(self._blob)
            return base, meta
        return _json_copy(self._base), _json_copy(self._meta)

    @property
    def base_params(self) -> JsonObject:
        """A copy of the params every leg starts from (no ``_meta`` or retry keys)."""
        return self._copies()[0]

    def build(
        self,
        request_id: str | int,
        input_responses: JsonObject | None,
        request_state: str | None,
    ) -> JsonObject:
        """The whole JSON-RPC request of one leg.

        Args:
            request_id: This leg's id (new for every leg, C4).
            input_responses: This round's answers (wire form) under the server's keys, or
                ``None`` for the first leg and after a state-only round.
            request_state: The server's ``requestState`` exactly as received, or ``None``
                when it sent none (then the key is absent, C3; ``""`` is sent as ``""``).
        """
        base_plan, meta_plan = self._base_plan, self._meta_plan
        if base_plan is not None and meta_plan is not None:
            # _copies, with the first level of each _copy_planned inlined.
            base = self._base
            params = base.copy()
            for at, inner in base_plan:
                item = base[at]
                params[at] = _copy_planned(item, inner) if inner else item.copy()
            wire = self._meta
            meta = wire.copy()
            for at, inner in meta_plan:
                item = wire[at]
                meta[at] = _copy_planned(item, inner) if inner else item.copy()
        else:
            params, meta = self._copies()
        if input_responses is not None:
            params["inputResponses"] = input_responses
        if request_state is not None:
            params["requestState"] = request_state  # C2: the same str object, never re-encoded
        params["_meta"] = meta
        return {"jsonrpc": "2.0", "id": request_id, "method": self.method, "params": params}


# --- answers ---------------------------------------------------------------------------------

_ANSWER_TYPES: Final[dict[str, type]] = {
    ELICITATION_CREATE: ElicitResult,
    SAMPLING_CREATE_MESSAGE: CreateMessageResult,
    ROOTS_LIST: ListRootsResult,
}
# Precomputed unstructure functions: no dispatch per answer on the hot path.
_UNSTRUCTURE: Final[dict[type, Callable[[Any], Any]]] = {
    cls: converter.get_unstructure_hook(cls) for cls in _ANSWER_TYPES.values()
}
_ELICIT_ACTIONS: Final = frozenset({"accept", "decline", "cancel"})
_STRICT_JSON: Final = jsontext.reusable(json.JSONEncoder(allow_nan=False))


class _Unusable(ValueError):
    """An answer model holds a value its wire type does not allow."""


def _json_only(wire: JsonObject) -> JsonObject:
    """``wire`` once it is known to be JSON (digest §1.6: an ``inputResponses`` value is a
    JSON object): no NaN or infinity, no integer too long to write, no other types.

    Raises:
        _Unusable: it is not, so no transport could send the retry.
    """
    try:
        _STRICT_JSON(wire)
    except (TypeError, ValueError) as exc:
        raise _Unusable(f"not JSON: {exc}") from None
    return wire


def _is_elicit_value(value: Any) -> bool:
    if isinstance(value, str | int | float | bool):
        return True
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _elicit_to_wire(answer: ElicitResult) -> JsonObject:
    """Check an ``ElicitResult`` and write it, in one pass.

    The fast path handles exact builtin value types and gives what the converter gives
    (a test holds the two equal); anything else (subclasses, odd values) goes through the
    full check and the converter.
    """
    action: Any = answer.action
    if action not in _ELICIT_ACTIONS:
        raise _Unusable(f"unknown action {action!r}")
    content: Any = answer.content
    if content is None:
        return {"action": action}
    if type(content) is dict:
        out: JsonObject = {}
        for name, value in content.items():
            kind = type(value)
            if type(name) is not str:
                break
            if kind is str or kind is bool or (
                kind is int and value.bit_length() <= _INT_BITS
            ) or (kind is float and math.isfinite(value)):
                out[name] = value
            elif kind is list and all(type(item) is str for item in value):
                out[name] = value[:]
            else:
                break
        else:
            return {"action": action, "content": out}
    if not (
        isinstance(content, dict)
        and all(isinstance(k, str) and _is_elicit_value(v) for k, v in content.items())
    ):
        raise _Unusable("content must map names to strings, numbers, booleans or string arrays")
    return _json_only(_UNSTRUCTURE[ElicitResult](answer))


def _model_to_wire(answer: Any) -> JsonObject:
    """Check a ``CreateMessageResult`` or ``ListRootsResult`` and write it."""
    # Handlers are user code: the annotations of a model are not a promise.
    if isinstance(answer, CreateMessageResult):
        fields: tuple[Any, Any, Any] = (answer.role, answer.model, answer.content)
        if fields[0] not in ("user", "assistant"):
            raise _Unusable(f"unknown role {fields[0]!r}")
        if not isinstance(fields[1], str):
            raise _Unusable("model must be a string")
        if not isinstance(fields[2], dict | list):
            raise _Unusable("content must be a block or an array of blocks")
    else:
        roots: Any = answer.roots
        if not isinstance(roots, list) or not all(
            isinstance(root, Root) and isinstance(root.uri, str) for root in roots
        ):
            raise _Unusable("roots must be a list of Root with string uris")
    return _json_only(_UNSTRUCTURE[type(answer)](answer))


def answer_to_wire(kind: str, answer: object, *, key: str) -> JsonObject:
    """Check one answer against the kind it answers and return its wire form.

    The answer may be the model (``ElicitResult``, ``CreateMessageResult``,
    ``ListRootsResult``) or a plain JSON object, which is read with the converter.

    Args:
        kind: The input request's method (digest §1.5); responses carry no discriminator,
            so the kind comes from the request issued under ``key`` (digest §1.6).
        answer: What the handler (or the manual caller) produced.
        key: The ``inputRequests`` key, for the error message.

    Raises:
        LocalProtocolError: the answer is not of the type ``kind`` needs, is malformed, or
            holds what JSON cannot carry (NaN, an infinity, an integer too long to write,
            nesting deeper than the interpreter recurses).
    """
    cls = _ANSWER_TYPES[kind]
    if type(answer) is not cls:
        if not isinstance(answer, dict):
            raise LocalProtocolError(
                f"answer for {key!r} ({kind}) must be a {cls.__name__} or a JSON object, "
                f"got {type(answer).__name__}"
            )
        try:
            answer = structure_input_response(kind, answer, path=f"inputResponses.{key}")
        except CodecError as exc:
            raise LocalProtocolError(f"answer for {key!r} ({kind}): {exc}") from exc
    try:
        if cls is ElicitResult:
            return _elicit_to_wire(answer)  # type: ignore[arg-type]
        return _model_to_wire(answer)
    except _Unusable as exc:
        raise LocalProtocolError(f"answer for {key!r} ({kind}): {exc}") from exc
    except RecursionError:  # the converter writes a model's members level by level
        raise LocalProtocolError(
            f"answer for {key!r} ({kind}): not JSON: {jsontext.TOO_DEEP}"
        ) from None


def answer_for(request: InputRequest, answer: object, *, key: str) -> JsonObject:
    """:func:`answer_to_wire` for the answer to ``request``, with what depends on the
    request itself and not only on its kind.

    A URL-mode elicitation's answer carries no ``content`` (digest §1.6: content only
    accompanies accept in form mode): the data a URL-mode request asks for goes to the
    URL, out of band (S17), so content a handler returns is refused, not sent.

    Raises:
        LocalProtocolError: as :func:`answer_to_wire`, or content for a URL-mode request.
    """
    wire = answer_to_wire(request.method, answer, key=key)
    if "content" in wire and type(request) is ElicitUrlRequest:
        raise LocalProtocolError(
            f"answer for {key!r} ({request.method}): a URL-mode answer carries no content"
        )
    return wire
