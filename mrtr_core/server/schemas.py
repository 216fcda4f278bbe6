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

from mrtr_core import jsontext
from mrtr_core._memo import remember

__all__ = ["ACCEPTED_MAX_BYTES", "ACCEPTED_MAX_ENTRIES", "PROBLEM_MAX_CHARS", "CompiledSchema",
           "SchemaCache", "forget_accepted"]

_CANONICAL: Final = jsontext.canonical
_SERIALS: Final = itertools.count(1)
ACCEPTED_MAX_ENTRIES: Final = 4096
"""Most accepted instances remembered by all schemas together (the least recently found
goes first)."""
ACCEPTED_MAX_BYTES: Final = 1024
"""Largest instance (its :mod:`marshal` bytes) remembered as accepted: the memo holds at
most ``ACCEPTED_MAX_ENTRIES * ACCEPTED_MAX_BYTES`` bytes of keys."""
_ACCEPTED: OrderedDict[tuple[int, bytes], None] = OrderedDict()


class CompiledSchema:
    """A schema and its ``jsonschema`` validator (built the first time it is needed).

    Args:
        schema: A JSON Schema (2020-12). It is not copied: do not change it afterwards.
        formats: Whether ``format`` asserts (``jsonschema``'s format checker) instead of
            only annotating, the JSON Schema default.
        peer: The schema comes from the peer: a ``$ref`` resolves only inside the schema
            itself, never by retrieving its URI (``jsonschema`` would fetch it over the
            network, with no time limit); the JSON Schema meta-schemas are still found.
    """

    __slots__ = ("_formats", "_peer", "_serial", "_validator", "schema")

    def __init__(self, schema: Any, *, formats: bool = False, peer: bool = False) -> None:
        self.schema = schema
        self._formats = formats
        self._peer = peer
        self._validator: Draft202012Validator | None = None
        self._serial = next(_SERIALS)  # this schema's entries in the memo, never reused

    @property
    def validator(self) -> Draft202012Validator:
        """The ``jsonschema`` validator."""
        if self._validator is None:
            checker = Draft202012Validator.FORMAT_CHECKER if self._formats else None
            if self._peer:
                self._validator = Draft202012Validator(
                    self.schema, format_checker=checker, registry=Registry()
                )
            else:
                self._validator = Draft202012Validator(self.schema, format_checker=checker)
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
