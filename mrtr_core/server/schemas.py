"""JSON Schema (2020-12) checks compiled once per schema.

Tool arguments and form answers are checked on every round, so the checks are built once:
:class:`CompiledSchema` holds the ``jsonschema`` validator of a schema and, for the keywords
that forms and tool signatures use (``type``, ``properties``, ``required``,
``additionalProperties``, string ``enum``/``const``, lengths, bounds, ``items``, ``allOf``,
``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else``, ``pattern``), a plain predicate with
the same meaning as ``Draft202012Validator`` (its type rules, ``bool`` is not a number, an
integral float is an integer, keywords it does not know are ignored). The predicate only
answers the happy path: an instance it does not accept (and every schema with a keyword
outside that list, such as ``$ref``) goes to ``jsonschema`` itself, which has the last word
and gives the error messages. So a fast "valid" is the only answer that does not come from
``jsonschema``, and it is given only where the keyword semantics are reproduced exactly.

:class:`SchemaCache` keeps compiled schemas by their canonical JSON (bounded).
"""

from __future__ import annotations

import contextlib
import marshal
import numbers
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from mrtr_core import jsontext

__all__ = ["CompiledSchema", "SchemaCache", "compile_predicate"]

Predicate = Callable[[Any], bool]

_KEYWORDS: Final = frozenset(Draft202012Validator.VALIDATORS)
_CANONICAL: Final = jsontext.canonical


class _Unsupported(Exception):
    """The schema uses a keyword (or a keyword value) the predicate does not reproduce."""


def _is_number(value: Any) -> bool:
    # jsonschema: numbers.Number except bool.
    cls = type(value)
    if cls is int or cls is float:
        return True
    return not isinstance(value, bool) and isinstance(value, numbers.Number)


def _is_integer(value: Any) -> bool:
    # jsonschema (draft 6 and later): int except bool, or a float with an integral value.
    cls = type(value)
    if cls is int:
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int)


_TYPES: Final[dict[str, Predicate]] = {
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "integer": _is_integer,
    "null": lambda v: v is None,
    "number": _is_number,
    "object": lambda v: isinstance(v, dict),
    "string": lambda v: isinstance(v, str),
}


def _always(_: Any) -> bool:
    return True


def _never(_: Any) -> bool:
    return False


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _is_bound(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _compile(schema: Any) -> Predicate:
    if schema is True:
        return _always
    if schema is False:
        return _never
    if not isinstance(schema, dict):
        raise _Unsupported
    checks: list[Predicate] = []
    members = _object_members(schema)
    object_only = False
    for key, value in schema.items():
        if key not in _KEYWORDS or key in _OBJECT_KEYWORDS:
            continue  # annotations and unknown keywords are ignored, as jsonschema does
        build = _BUILDERS.get(key)
        if build is None:
            raise _Unsupported
        if key == "type" and value == "object" and members is not None:
            object_only = True  # folded into the members check below
            continue
        check = build(value, schema)
        if check is not None:
            checks.append(check)
    if members is not None:
        body = members
        if object_only:
            checks.append(lambda v: isinstance(v, dict) and body(v))
        else:
            checks.append(lambda v: not isinstance(v, dict) or body(v))
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    frozen = tuple(checks)

    def check_all(v: Any) -> bool:
        for check in frozen:  # noqa: SIM110 - a plain loop: no generator per call
            if not check(v):
                return False
        return True

    return check_all


_OBJECT_KEYWORDS: Final = frozenset({"properties", "required", "additionalProperties"})


def _object_members(schema: dict[str, Any]) -> Predicate | None:
    """``properties``, ``required`` and ``additionalProperties`` as one check of a dict."""
    if _OBJECT_KEYWORDS.isdisjoint(schema):
        return None
    known = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(known, dict) or "patternProperties" in schema:
        raise _Unsupported
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise _Unsupported
    compiled = [(name, _compile(sub)) for name, sub in known.items()]
    props = tuple((name, pred) for name, pred in compiled if pred is not _always)
    names = tuple(required)
    declared = frozenset(known)
    closed = extra is False
    extra_pred: Predicate | None = None
    if isinstance(extra, dict):
        extra_pred = _compile(extra)
        if extra_pred is _always:
            extra_pred = None
    elif extra is not True and extra is not False:
        raise _Unsupported

    def members(v: dict[Any, Any]) -> bool:
        for name in names:
            if name not in v:
                return False
        if closed:
            for key in v:
                if key not in declared:
                    return False
        elif extra_pred is not None:
            for key, item in v.items():
                if key not in declared and not extra_pred(item):
                    return False
        for name, pred in props:  # noqa: SIM110 - a plain loop: no generator per call
            if name in v and not pred(v[name]):
                return False
        return True

    return members


def _type(value: Any, _: dict[str, Any]) -> Predicate:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names:
        raise _Unsupported
    if not all(isinstance(name, str) and name in _TYPES for name in names):
        raise _Unsupported  # jsonschema raises UnknownType: let it
    if len(names) == 1:
        return _TYPES[names[0]]
    preds = tuple(_TYPES[name] for name in names)
    return lambda v: any(pred(v) for pred in preds)


def _enum(value: Any, _: dict[str, Any]) -> Predicate:
    # jsonschema compares with its own equality; for string members that is plain ==.
    if not isinstance(value, list) or not all(type(m) is str for m in value):
        raise _Unsupported
    members = tuple(value)
    fast = frozenset(value)

    def check(v: Any) -> bool:
        if type(v) is str:
            return v in fast
        return any(m == v for m in members)

    return check


def _const(value: Any, _: dict[str, Any]) -> Predicate:
    if type(value) is not str:
        raise _Unsupported
    return lambda v: bool(v == value)


def _min_length(value: Any, _: dict[str, Any]) -> Predicate:
    if not _is_count(value):
        raise _Unsupported
    return lambda v: not isinstance(v, str) or len(v) >= value


def _max_length(value: Any, _: dict[str, Any]) -> Predicate:
    if not _is_count(value):
        raise _Unsupported
    return lambda v: not isinstance(v, str) or len(v) <= value


def _minimum(value: Any, _: dict[str, Any]) -> Predicate:
    if not _is_bound(value):
        raise _Unsupported
    return lambda v: not _is_number(v) or not v < value


def _maximum(value: Any, _: dict[str, Any]) -> Predicate:
    if not _is_bound(value):
        raise _Unsupported
    return lambda v: not _is_number(v) or not v > value


def _exclusive_minimum(value: Any, _: dict[str, Any]) -> Predicate:
    if not _is_bound(value):
        raise _Unsupported
    return lambda v: not _is_number(v) or not v <= value


def _exclusive_maximum(value: Any, _: dict[str, Any]) -> Predicate:
    if not _is_bound(value):
        raise _Unsupported
    return lambda v: not _is_number(v) or not v >= value


def _format(value: Any, _: dict[str, Any]) -> None:
    # Validators built here have no format checker: format is an annotation only.
    return None


def _pattern(value: Any, _: dict[str, Any]) -> Predicate:
    if not isinstance(value, str):
        raise _Unsupported
    try:
        search = re.compile(value).search
    except re.error:
        raise _Unsupported from None
    return lambda v: not isinstance(v, str) or search(v) is not None


def _items(value: Any, _: dict[str, Any]) -> Predicate | None:
    pred = _compile(value)
    if pred is _always:
        return None
    return lambda v: not isinstance(v, list) or all(pred(item) for item in v)


def _min_items(value: Any, _: dict[str, Any]) -> Predicate:
    if not _is_count(value):
        raise _Unsupported
    return lambda v: not isinstance(v, list) or len(v) >= value


def _max_items(value: Any, _: dict[str, Any]) -> Predicate:
    if not _is_count(value):
        raise _Unsupported
    return lambda v: not isinstance(v, list) or len(v) <= value


def _unique_items(value: Any, _: dict[str, Any]) -> None:
    if value is not False:
        raise _Unsupported
    return None


def _subschemas(value: Any) -> tuple[Predicate, ...]:
    if not isinstance(value, list):
        raise _Unsupported
    return tuple(_compile(sub) for sub in value)


def _all_of(value: Any, _: dict[str, Any]) -> Predicate:
    preds = _subschemas(value)
    return lambda v: all(pred(v) for pred in preds)


def _any_of(value: Any, _: dict[str, Any]) -> Predicate:
    preds = _subschemas(value)
    return lambda v: any(pred(v) for pred in preds)


def _one_of(value: Any, _: dict[str, Any]) -> Predicate:
    preds = _subschemas(value)
    return lambda v: sum(1 for pred in preds if pred(v)) == 1


def _not(value: Any, _: dict[str, Any]) -> Predicate:
    pred = _compile(value)
    return lambda v: not pred(v)


def _if(value: Any, schema: dict[str, Any]) -> Predicate | None:
    condition = _compile(value)
    then = _compile(schema["then"]) if "then" in schema else _always
    otherwise = _compile(schema["else"]) if "else" in schema else _always
    if then is _always and otherwise is _always:
        return None
    return lambda v: then(v) if condition(v) else otherwise(v)


_BUILDERS: Final[dict[str, Callable[[Any, dict[str, Any]], Predicate | None]]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "minLength": _min_length,
    "maxLength": _max_length,
    "minimum": _minimum,
    "maximum": _maximum,
    "exclusiveMinimum": _exclusive_minimum,
    "exclusiveMaximum": _exclusive_maximum,
    "format": _format,
    "pattern": _pattern,
    "items": _items,
    "minItems": _min_items,
    "maxItems": _max_items,
    "uniqueItems": _unique_items,
    "allOf": _all_of,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "not": _not,
    "if": _if,
}


def compile_predicate(schema: Any) -> Predicate | None:
    """A plain ``instance -> bool`` with ``Draft202012Validator(schema).is_valid``'s answer,
    or ``None`` when the schema uses a keyword this module does not reproduce."""
    try:
        return _compile(schema)
    except (_Unsupported, RecursionError):
        return None


class CompiledSchema:
    """A schema's fast predicate (where it can be built) and its ``jsonschema`` validator
    (built the first time an instance needs it).

    Args:
        schema: A JSON Schema (2020-12). It is not copied: do not change it afterwards.
    """

    __slots__ = ("_fast", "_validator", "schema")

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self._fast = compile_predicate(schema)
        self._validator: Draft202012Validator | None = None

    @property
    def fast(self) -> bool:
        """Whether valid instances are recognised without ``jsonschema``."""
        return self._fast is not None

    @property
    def validator(self) -> Draft202012Validator:
        """The ``jsonschema`` validator (no format checker: ``format`` is an annotation)."""
        if self._validator is None:
            self._validator = Draft202012Validator(self.schema)
        return self._validator

    def _fast_accepts(self, instance: Any) -> bool:
        fast = self._fast
        if fast is None:
            return False
        try:
            return fast(instance)
        except Exception:  # jsonschema decides (and raises, if it does)
            return False

    def is_valid(self, instance: Any) -> bool:
        """``Draft202012Validator(schema).is_valid(instance)``, usually without it."""
        return self._fast_accepts(instance) or bool(self.validator.is_valid(instance))

    def iter_errors(self, instance: Any) -> Iterator[ValidationError]:
        """Every error, from ``jsonschema`` (none, at once, when the predicate accepts)."""
        if self._fast_accepts(instance):
            return iter(())
        return iter(self.validator.iter_errors(instance))


class SchemaCache:
    """Compiled schemas, found again by a caller's key or by the schema's canonical JSON.

    Args:
        max_entries: Most entries kept under each kind of key; the oldest goes first.
    """

    def __init__(self, max_entries: int = 256) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max = max_entries
        # Ordered: the oldest entry goes first in O(1) (a plain dict would scan the slots
        # its deleted front entries left behind, on every eviction).
        self._by_key: OrderedDict[str, CompiledSchema] = OrderedDict()
        self._by_content: OrderedDict[str | bytes, CompiledSchema] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_content)

    def get(self, schema: Any, key: str | None = None) -> CompiledSchema:
        """The compiled form of ``schema`` (compiled now when not seen before).

        ``key``, when given, must stand for the schema's content (e.g. the digest of a
        question that holds it): a schema seen under that key costs one lookup. Otherwise
        (and on a miss) its content finds it (see :func:`_content_key`).
        """
        if key is not None:
            found = self._by_key.get(key)
            if found is not None:
                return found
        content = _content_key(schema)
        found = self._by_content.get(content)
        if found is None:
            if type(content) is bytes:
                _CANONICAL(schema)  # a schema that is not JSON raises here, as it always did
            found = CompiledSchema(schema)
            _put(self._by_content, content, found, self._max)
        if key is not None:
            _put(self._by_key, key, found, self._max)
        return found


def _content_key(schema: Any) -> str | bytes:
    """What finds a schema by its content: its :mod:`marshal` bytes (format 2 writes no
    back-references: equal bytes are equal values of the same built-in types, ``1``,
    ``1.0`` and ``True`` told apart), cheaper to write than canonical JSON; the canonical
    JSON text for anything marshal cannot write."""
    try:
        return marshal.dumps(schema, 2)
    except ValueError:
        return _CANONICAL(schema)


def _put(
    entries: OrderedDict[Any, CompiledSchema], key: str | bytes, value: CompiledSchema, limit: int
) -> None:
    if len(entries) >= limit:
        with contextlib.suppress(KeyError):  # (another thread emptied it)
            entries.popitem(last=False)
    entries[key] = value
