"""JSON Schema (2020-12) validators, built once per schema.

Tool arguments and form answers are checked on every round, so each schema's
``jsonschema`` validator is built once: :class:`CompiledSchema` holds it, and
:class:`SchemaCache` finds it again by the schema's content (bounded). A cache may also run a
check on each schema it compiles (the engine's checks that a form is one the protocol
allows), so a schema is checked once too.

Every retry of an MRTR request carries the same ``arguments`` as its first round (the
state is bound to them, S11c), and many answers repeat (``{"confirm": true}``). So a
schema also remembers, in one bounded process-wide memo, the small instances it accepted:
by their exact :mod:`marshal` bytes, so only the very same value of the very same types
is found again. Validation is a pure function of schema and instance; a found entry is
the answer ``jsonschema`` gave for that value before.
"""

from __future__ import annotations

import contextlib
import itertools
import marshal
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry
from referencing.exceptions import InvalidAnchor, NoSuchAnchor, PointerToNowhere, Unresolvable
from referencing.jsonschema import DRAFT202012

from mrtr_core import jsontext
from mrtr_core._memo import remember

__all__ = ["ACCEPTED_MAX_BYTES", "ACCEPTED_MAX_ENTRIES", "IN_PLACE", "IN_PLACE_LISTS",
           "IN_PLACE_MAPS", "PROBLEM_MAX_CHARS", "REFERENCES", "SUBSCHEMA", "SUBSCHEMA_LISTS",
           "SUBSCHEMA_MAPS", "CompiledSchema", "SchemaCache", "forget_accepted",
           "reference_problem"]

_CANONICAL: Final = jsontext.canonical
_SERIALS: Final = itertools.count(1)
# What every validator here resolves references with: nothing in it, and nothing retrieved
# (jsonschema adds the meta-schemas it carries). A Registry is immutable: one serves all.
_NO_RETRIEVAL: Final = Registry()
ACCEPTED_MAX_ENTRIES: Final = 4096
"""Most accepted instances remembered by all schemas together (the least recently found
goes first)."""
ACCEPTED_MAX_BYTES: Final = 1024
"""Largest instance (its :mod:`marshal` bytes) remembered as accepted: the memo holds at
most ``ACCEPTED_MAX_ENTRIES * ACCEPTED_MAX_BYTES`` bytes of keys."""
_ACCEPTED: OrderedDict[tuple[int, bytes], None] = OrderedDict()


class CompiledSchema:
    """A schema and its ``jsonschema`` validator (built the first time it is needed).

    A ``$ref`` resolves only inside the schema itself (and to the JSON Schema
    meta-schemas, which ``jsonschema`` carries), never by retrieving its URI: ``jsonschema``
    would fetch it over the network, with no time limit, on every thread or event loop that
    checks a value. A reference that resolves nowhere raises
    :class:`~referencing.exceptions.Unresolvable` from the checks that meet it.

    Args:
        schema: A JSON Schema (2020-12). It is not copied: do not change it afterwards.
        formats: Whether ``format`` asserts (``jsonschema``'s format checker) instead of
            only annotating, the JSON Schema default.
    """

    __slots__ = ("_formats", "_serial", "_validator", "schema")

    def __init__(self, schema: Any, *, formats: bool = False) -> None:
        self.schema = schema
        self._formats = formats
        self._validator: Draft202012Validator | None = None
        self._serial = next(_SERIALS)  # this schema's entries in the memo, never reused

    @property
    def validator(self) -> Draft202012Validator:
        """The ``jsonschema`` validator."""
        if self._validator is None:
            checker = Draft202012Validator.FORMAT_CHECKER if self._formats else None
            self._validator = Draft202012Validator(
                self.schema, format_checker=checker, registry=_NO_RETRIEVAL)
        return self._validator

    def is_valid(self, instance: Any) -> bool:
        """``Draft202012Validator(schema).is_valid(instance)``; an instance this schema
        accepted before (the same value, see the module docstring) costs one lookup."""
        key = _instance_key(self._serial, instance)
        if key is not None and key in _ACCEPTED:
            with contextlib.suppress(KeyError):  # another thread may have evicted it
                _ACCEPTED.move_to_end(key)  # the arguments of a flow still going stay
            return True
        valid = bool(self.validator.is_valid(instance))
        if valid and key is not None:
            remember(_ACCEPTED, key, None, ACCEPTED_MAX_ENTRIES)
        return valid

    def iter_errors(self, instance: Any) -> Iterator[ValidationError]:
        """Every error ``jsonschema`` finds in ``instance``."""
        return iter(self.validator.iter_errors(instance))

    def problem(self, instance: Any) -> str | None:
        """Why ``instance`` does not fit this schema, or ``None``: the message of the first
        error by path, and where it is (``(at properties/n)``) unless at the root.

        Each is cut to its first and last :data:`PROBLEM_MAX_CHARS` characters (joined by
        ``...``): ``jsonschema`` quotes the instance whole, and it may be a peer's (a tool's
        arguments; a server's ``structuredContent``), as long as its message.
        """
        if self.is_valid(instance):
            return None
        # One violation at a time: a peer's long array of wrong items is as many of them.
        first = min(self.iter_errors(instance), key=lambda e: list(e.path), default=None)
        if first is None:
            return None
        where = _clip("/".join(str(p) for p in first.absolute_path))
        return _clip(first.message) + (f" (at {where})" if where else "")


PROBLEM_MAX_CHARS: Final = 100
"""How many characters of each end of a violation's message (and of its path)
:meth:`CompiledSchema.problem` keeps."""


def _clip(text: str) -> str:
    """``text``, or its first and last :data:`PROBLEM_MAX_CHARS` characters."""
    if len(text) <= 2 * PROBLEM_MAX_CHARS + 3:
        return text
    return f"{text[:PROBLEM_MAX_CHARS]}...{text[-PROBLEM_MAX_CHARS:]}"


class SchemaCache:
    """Compiled schemas, found again by a caller's key or by the schema's canonical JSON.

    Args:
        max_entries: Most entries kept under each kind of key; the oldest goes first.
        formats: Passed to each :class:`CompiledSchema`.
        check: Called with each schema before it is compiled; what it raises reaches the
            caller of :meth:`get`, and nothing is kept (the same schema is checked again
            next time).
    """

    def __init__(
        self,
        max_entries: int = 256,
        *,
        formats: bool = False,
        check: Callable[[Any], object] | None = None,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max = max_entries
        self._formats = formats
        self._check = check
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
            if self._check is not None:
                self._check(schema)
            found = CompiledSchema(schema, formats=self._formats)
            remember(self._by_content, content, found, self._max)
        if key is not None:
            remember(self._by_key, key, found, self._max)
        return found


def _instance_key(serial: int, instance: Any) -> tuple[int, bytes] | None:
    """What finds ``instance`` among those schema ``serial`` accepted: its :mod:`marshal`
    bytes (as in :func:`_content_key`); ``None`` for an instance too large to remember or
    one marshal cannot write (a subclass of a built-in type, say)."""
    try:
        raw = marshal.dumps(instance, 2)
    except ValueError:
        return None
    return (serial, raw) if len(raw) <= ACCEPTED_MAX_BYTES else None


def forget_accepted() -> None:
    """Empty the memo of accepted instances (benchmarks start from nothing)."""
    _ACCEPTED.clear()


def _content_key(schema: Any) -> str | bytes:
    """What finds a schema by its content: its :mod:`marshal` bytes (format 2 writes no
    back-references: equal bytes are equal values of the same built-in types, ``1``,
    ``1.0`` and ``True`` told apart), cheaper to write than canonical JSON; the canonical
    JSON text for anything marshal cannot write."""
    try:
        return marshal.dumps(schema, 2)
    except ValueError:
        return _CANONICAL(schema)


# Keywords whose value is a schema, a list of schemas, or a map of names to schemas (JSON
# Schema 2020-12 Core §10 and Validation §6-7; ``contentSchema`` is never applied); anything
# else holds no subschema. The in-place ones apply their subschemas to the very value the
# schema applies to (Core §10.2); the others to a part of it (an item, a property, a key)
# or to nothing at all (``$defs``).
IN_PLACE: Final = frozenset({"else", "if", "not", "then"})
"""Keywords whose value is one schema applied in place."""
IN_PLACE_LISTS: Final = frozenset({"allOf", "anyOf", "oneOf"})
"""Keywords whose value is a list of schemas applied in place."""
IN_PLACE_MAPS: Final = frozenset({"dependentSchemas"})
"""Keywords whose value maps names to schemas applied in place."""
SUBSCHEMA: Final = IN_PLACE | {
    "additionalProperties", "contains", "items", "propertyNames", "unevaluatedItems",
    "unevaluatedProperties",
}
"""Keywords whose value is one schema."""
SUBSCHEMA_LISTS: Final = IN_PLACE_LISTS | {"prefixItems"}
"""Keywords whose value is a list of schemas."""
SUBSCHEMA_MAPS: Final = IN_PLACE_MAPS | {
    "$defs", "definitions", "patternProperties", "properties",
}
"""Keywords whose value maps names to schemas."""
REFERENCES: Final = ("$ref", "$dynamicRef")
"""The keywords that apply, in place, the schema a URI reference names (Core §8.2.3)."""

_Node = tuple[Any, Any, tuple[str, ...]]  # a subschema, its resolver, its evaluation path


def reference_problem(schema: Any) -> str | None:
    """Why the references of ``schema`` (a valid JSON Schema 2020-12) cannot be used, or
    ``None``.

    Every ``$ref`` and ``$dynamicRef`` in it must resolve to a schema inside it: to a JSON
    Pointer, an anchor or an embedded ``$id`` of the schema itself. No URI is retrieved
    (a server's tool schema is checked on every call, and nothing should open a network
    connection for it), so a reference to any other document, a JSON Schema meta-schema
    included, resolves nowhere. And no chain of references and in-place applicators
    (``allOf``, ``not``, ``if``, ...: those that apply a schema to the same value) may
    come back to where it started (``{"$ref": "#"}``): checking any value would recurse
    until the interpreter stops it. A recursive schema that goes into the value on the
    way (``items``, ``properties``, ...) is fine.

    The problem names the keyword, the reference and where it is, as an evaluation path
    from the root (``properties/x/$ref``, cut as :meth:`CompiledSchema.problem` cuts one);
    ``None`` for a schema that is not an object.
    """
    if not isinstance(schema, dict):
        return None
    root = DRAFT202012.create_resource(schema)
    base = root.id() or ""
    # Crawled once: every anchor and embedded $id is found without crawling again.
    resolver = Registry().with_resource(base, root).crawl().resolver(base_uri=base)
    # Each subschema (by identity), and the in-place steps from it: the subschema a step
    # leads to, and the reference it takes (None for an applicator keyword).
    steps: dict[int, list[tuple[int, str | None]]] = {}
    dynamic: list[tuple[int, str, str]] = []  # (subschema, anchor name, its reference)
    anchors: dict[str, list[int]] = {}  # $dynamicAnchor name -> subschemas
    # Subschemas are walked where they stand before those only a reference leads to, so a
    # path names a subschema where it is written when it can.
    stack: list[_Node] = [(schema, resolver, ())]
    referred: list[_Node] = []
    while stack or referred:
        node, here, path = stack.pop() if stack else referred.pop()
        if not isinstance(node, dict) or id(node) in steps:
            continue
        out = steps[id(node)] = []
        name = node.get("$dynamicAnchor")
        if isinstance(name, str):
            anchors.setdefault(name, []).append(id(node))
        for keyword in REFERENCES:
            ref = node.get(keyword)
            if not isinstance(ref, str):
                continue
            where = _clip("/".join((*path, keyword)))
            label = f"{keyword} {ref!r} (at {where})"
            try:
                found = here.lookup(ref)
            except (PointerToNowhere, NoSuchAnchor, InvalidAnchor):
                return f"{label} resolves to nothing in the schema"
            except Unresolvable:
                return (f"{label} names a document other than the schema, and no"
                        " document is retrieved")
            target = found.contents
            if not isinstance(target, dict | bool):
                return f"{label} leads to {type(target).__name__}, not to a schema"
            out.append((id(target), label))
            referred.append((target, found.resolver, (*path, keyword)))
            fragment = ref.partition("#")[2]
            if keyword == "$dynamicRef" and fragment and not fragment.startswith("/"):
                dynamic.append((id(node), fragment, label))
        for keyword, child, inner in _subschemas(node, path):
            if isinstance(child, dict):
                stack.append((child, here.in_subresource(DRAFT202012.create_resource(child)),
                              inner))
                if keyword in IN_PLACE or keyword in IN_PLACE_LISTS or keyword in IN_PLACE_MAPS:
                    out.append((id(child), None))
    # A $dynamicRef may end at any subschema with its $dynamicAnchor (Core §8.2.3.2).
    for source, name, label in dynamic:
        steps[source].extend((target, label) for target in anchors.get(name, ()))
    return _endless(steps)


def _subschemas(node: dict[str, Any], path: tuple[str, ...]) -> Iterator[
        tuple[str, Any, tuple[str, ...]]]:
    """Each subschema of ``node`` (the schema at ``path``): its keyword, itself, its path."""
    for keyword, value in node.items():
        if keyword in SUBSCHEMA:
            yield keyword, value, (*path, keyword)
        elif keyword in SUBSCHEMA_LISTS and isinstance(value, list):
            for index, item in enumerate(value):
                yield keyword, item, (*path, keyword, str(index))
        elif keyword in SUBSCHEMA_MAPS and isinstance(value, dict):
            for name, item in value.items():
                yield keyword, item, (*path, keyword, str(name))


def _endless(steps: dict[int, list[tuple[int, str | None]]]) -> str | None:
    """The reference of an in-place cycle among ``steps`` (see :func:`reference_problem`),
    or ``None``. A JSON schema's keywords form a tree: every cycle takes a reference (only
    an object that holds itself, which JSON cannot write, needs none)."""
    done: set[int] = set()
    for start in steps:
        if start in done:
            continue
        # Depth first, without recursion: the path walked, each subschema with its steps
        # still to take and the reference that led to it.
        path: list[tuple[int, Iterator[tuple[int, str | None]], str | None]] = [
            (start, iter(steps[start]), None)]
        on_path = {start}
        while path:
            node, todo, _ = path[-1]
            for target, label in todo:
                if target in on_path:  # the steps after target on the path, and this one
                    first = next(i for i, entry in enumerate(path) if entry[0] == target)
                    cycle = [via for _, _, via in path[first + 1:]] + [label]
                    taken = next((via for via in cycle if via is not None), "a subschema")
                    return (f"{taken} is in a loop that never goes into the value: checking"
                            " any value would never end")
                if target not in done and target in steps:
                    path.append((target, iter(steps[target]), label))
                    on_path.add(target)
                    break
            else:
                done.add(node)
                on_path.discard(node)
                path.pop()
    return None
