"""Building each leg's JSON-RPC request, and turning handler answers into wire values.

Every leg of a flow is a new, self-contained request (digest §1.3, §2.1): the same method,
the caller's original params, a full ``_meta`` built anew, and, on a retry, the answers of
the round just fulfilled in ``inputResponses`` plus the ``requestState`` echoed exactly.
"""

from __future__ import annotations

import marshal
from collections.abc import Callable, Mapping
from typing import Any, Final

from mrtr_core.errors import CodecError, LocalProtocolError
from mrtr_core.wire.converter import converter, structure_input_response, unstructure
from mrtr_core.wire.models import (
    ELICITATION_CREATE,
    ROOTS_LIST,
    SAMPLING_CREATE_MESSAGE,
    CreateMessageResult,
    ElicitResult,
    JsonObject,
    ListRootsResult,
    RequestMeta,
    Root,
)

__all__ = ["RETRY_KEYS", "LegBuilder", "answer_to_wire", "copy_json", "meta_to_wire"]

RETRY_KEYS: Final = frozenset({"_meta", "inputResponses", "requestState"})
"""Params keys the flow owns: rebuilt on every leg, never taken from the caller."""


def copy_json(value: Any) -> Any:
    """A deep copy of plain JSON data (dicts and lists copied, everything else shared)."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [copy_json(item) for item in value]
    return value


_META_CACHE_SIZE: Final = 32
# Wire form of recent RequestMeta objects, by identity (a client reuses one per connection).
# Holding the object keeps its id from being reused while the entry lives.
_meta_cache: dict[int, tuple[RequestMeta, JsonObject]] = {}


def meta_to_wire(meta: RequestMeta) -> JsonObject:
    """The wire form of ``meta`` (cached by identity; the caller must not mutate it)."""
    entry = _meta_cache.get(id(meta))
    if entry is not None and entry[0] is meta:
        return entry[1]
    wire: JsonObject = unstructure(meta)
    if len(_meta_cache) >= _META_CACHE_SIZE:
        del _meta_cache[next(iter(_meta_cache))]
    _meta_cache[id(meta)] = (meta, wire)
    return wire


class LegBuilder:
    """Builds the request of each leg from a clean base (digest §1.3, C2-C5).

    The caller's params are deep-copied once; ``inputResponses`` and ``requestState`` found
    in them are dropped (stale values of an earlier flow must never leak into this one), and
    ``_meta`` is refused: the per-request ``_meta`` comes from ``meta`` and is rebuilt,
    as a fresh object, on every leg (capabilities are per request, digest §1.7). Every leg
    gets its own copies, so no two messages share a mutable value.
    """

    __slots__ = ("_base", "_blob", "_meta", "method")

    def __init__(self, method: str, params: Mapping[str, Any], meta: RequestMeta) -> None:
        """Prepare the legs of ``method`` with ``params`` and ``meta``.

        Raises:
            LocalProtocolError: ``params`` is not a mapping or carries ``_meta``.
        """
        if type(params) is not dict and not isinstance(params, Mapping):
            raise LocalProtocolError(f"params must be a mapping, got {type(params).__name__}")
        if "_meta" in params:
            raise LocalProtocolError("params must not carry _meta: pass meta=RequestMeta(...)")
        self.method = method
        own = {key: value for key, value in params.items() if key not in RETRY_KEYS}
        self._meta: JsonObject = meta_to_wire(meta)
        # A fresh deep copy per leg is one C call when the values are plain JSON types
        # (marshal serves as an in-memory copier only); other values take copy_json.
        self._blob: bytes | None
        self._base: JsonObject
        try:
            self._blob, self._base = marshal.dumps((own, self._meta)), {}
        except ValueError:
            self._blob, self._base = None, copy_json(own)

    def _copies(self) -> tuple[JsonObject, JsonObject]:
        """Fresh deep copies of the base params and of the ``_meta`` wire form."""
        if self._blob is not None:
            base, meta = marshal.loads(self._blob)
            return base, meta
        return copy_json(self._base), copy_json(self._meta)

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
_SCALARS: Final = frozenset({str, int, float, bool})


class _Unusable(ValueError):
    """An answer model holds a value its wire type does not allow."""


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
            if kind in _SCALARS:
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
    wire: JsonObject = _UNSTRUCTURE[ElicitResult](answer)
    return wire


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
    wire: JsonObject = _UNSTRUCTURE[type(answer)](answer)
    return wire


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
        LocalProtocolError: the answer is not of the type ``kind`` needs, or is malformed.
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
