"""Tools' output schemas, learned from ``tools/list`` and checked on ``tools/call`` results.

A tool may declare an ``outputSchema``; the server MUST then return structured results that
conform to it, and clients SHOULD validate them (server/tools.mdx § Output Schema).
:class:`OutputSchemas` remembers the schemas of the tools the latest listing named (a listing
without a ``cursor`` replaces them all; a page fetched with a ``cursor`` adds its tools), and
judges each complete ``tools/call`` result of such a tool that is not an error
(``isError: true``): it must carry ``structuredContent`` the schema accepts, else the call
fails with :class:`~mrtr_core.errors.StructuredContentError`. Nothing is listed on the
caller's behalf: a client that never listed its tools checks nothing.

The schemas come from the peer. One that is not a valid JSON Schema 2020-12 (or one that cannot
be used: a ``$ref`` that resolves nowhere or loops forever) is a fault of the listing, not of a
call: that tool's schema is not remembered (:attr:`OutputSchemas.rejected` says why) and its
results are not checked. No URI a ``$ref`` names is fetched (the server would choose what the
client opens, and it would wait for it): a ``$ref`` or ``$dynamicRef`` that is not a fragment of
the schema itself (``#...``) is not used either. Nor is a schema whose check the peer could make
spin, since it chooses the ``structuredContent`` too: a ``pattern`` or ``patternProperties`` (a
regular expression that backtracks, and Python's ``re`` has no time limit) or ``uniqueItems``
(pairwise comparisons over a long array of objects) anywhere a reference could lead would hold
the client's thread or event loop past every time limit (forms keep no ``pattern`` either,
:mod:`mrtr_core.wire.forms`).
Their size and depth are those of the listing message, which
the transport already bounds (``max_bytes``, ``max_depth``); at most ``max_tools`` schemas
are remembered.
"""

from __future__ import annotations

import itertools
import marshal
from collections.abc import Mapping
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from mrtr_core.client.flow import ResultCheck
from mrtr_core.errors import StructuredContentError
from mrtr_core.server.schemas import CompiledSchema
from mrtr_core.wire.models import CALL_TOOL, JsonObject

__all__ = ["LIST_TOOLS", "MAX_TOOLS", "OutputSchemas"]

LIST_TOOLS: Final = "tools/list"
MAX_TOOLS: Final = 10_000
"""Most output schemas remembered (a paginated listing's oldest go first)."""


class OutputSchemas:
    """The ``outputSchema`` of each tool of the latest ``tools/list``, compiled once each.

    Shared by the calls of one client, in any threads: a listing builds new tables and
    swaps them in.

    Args:
        max_tools: Most schemas remembered (and tools whose schema is refused): a listing
            checks only the last ``max_tools`` schemas it declares; the oldest go first.
    """

    def __init__(self, *, max_tools: int = MAX_TOOLS) -> None:
        self.max_tools = max_tools
        # Tool name -> (the schema's marshal bytes, its compiled form).
        self._schemas: dict[str, tuple[bytes, CompiledSchema]] = {}
        self.rejected: dict[str, str] = {}
        """Tools of the latest listing whose ``outputSchema`` is not used, and why."""

    def __len__(self) -> int:
        return len(self._schemas)

    def schema_for(self, tool: str) -> Any:
        """The remembered ``outputSchema`` of ``tool`` (as listed), or ``None``."""
        entry = self._schemas.get(tool)
        return None if entry is None else entry[1].schema

    def result_check(self, method: object, params: object) -> ResultCheck | None:
        """What a flow of ``method`` with ``params`` runs on its complete result (see
        :class:`~mrtr_core.client.flow.ClientFlow`): a listing is learned, a tool's result
        checked; ``None`` for any other request."""
        if method == CALL_TOOL and isinstance(params, Mapping):
            name = params.get("name")
            if type(name) is str:
                return lambda result: self.check(name, result)
        elif method == LIST_TOOLS:
            page = isinstance(params, Mapping) and params.get("cursor") is not None

            def learn(result: JsonObject) -> None:
                self.learn(result, page=page)

            return learn
        return None

    def learn(self, result: Mapping[str, Any], *, page: bool = False) -> None:
        """Remember the output schemas a ``tools/list`` result lists.

        Args:
            result: The complete result. Entries that are not tools with a string ``name``
                are passed over; a result without a ``tools`` array lists no tools.
            page: The result answered a request with a ``cursor``: its tools join those
                remembered instead of replacing them.
        """
        tools = result.get("tools")
        listed = tools if isinstance(tools, list) else []
        old = self._schemas
        known = {key: compiled for key, compiled in old.values()}
        schemas = dict(old) if page else {}
        rejected = dict(self.rejected) if page else {}
        declared: dict[str, Any] = {}  # name -> its last listed outputSchema, in list order
        for tool in listed:
            name = tool.get("name") if isinstance(tool, dict) else None
            if type(name) is not str:
                continue
            assert isinstance(tool, dict)
            schemas.pop(name, None)
            rejected.pop(name, None)
            declared.pop(name, None)
            if "outputSchema" in tool:
                declared[name] = tool["outputSchema"]
        # Only the last max_tools can be kept (the oldest go first): a listing of many tools
        # costs the check of that many schemas, not one per tool.
        for name in itertools.islice(declared, max(0, len(declared) - self.max_tools), None):
            entry = _compile(declared[name], known)
            if isinstance(entry, str):
                rejected[name] = entry
                continue
            schemas[name] = entry
            known[entry[0]] = entry[1]
        for table in (schemas, rejected):
            while len(table) > self.max_tools:
                del table[next(iter(table))]
        self._schemas, self.rejected = schemas, rejected

    def check(self, tool: str, result: JsonObject) -> StructuredContentError | None:
        """Why a complete ``tools/call`` result of ``tool`` breaks its output schema, or
        ``None`` (no schema remembered, an error result, or a result that conforms)."""
        entry = self._schemas.get(tool)
        if entry is None or result.get("isError") is True:
            return None
        if "structuredContent" not in result:
            return StructuredContentError(
                tool, "the tool declares an outputSchema, but the result carries no "
                "structuredContent", result=result,
            )
        try:
            problem = entry[1].problem(result["structuredContent"])
        except Exception as exc:  # the peer's schema fails only when used (see module doc)
            self._drop(tool, entry, f"outputSchema cannot be used: {type(exc).__name__}")
            return None
        if problem is None:
            return None
        return StructuredContentError(
            tool, f"structuredContent does not match the tool's outputSchema: {problem}",
            result=result,
        )

    def _drop(self, tool: str, entry: tuple[bytes, CompiledSchema], reason: str) -> None:
        """Stop using ``tool``'s schema (unless a listing replaced it meanwhile): in place, as
        a listing made meanwhile swapped in tables of its own."""
        schemas = self._schemas
        if schemas.get(tool) is entry:
            schemas.pop(tool, None)
            self.rejected[tool] = reason


def _compile(
    schema: Any, known: Mapping[bytes, CompiledSchema]
) -> tuple[bytes, CompiledSchema] | str:
    """A listed schema's content key and compiled form (reused when ``known`` has it), or
    why it is not used."""
    if not isinstance(schema, dict):
        return f"outputSchema must be an object, not {type(schema).__name__}"
    try:
        key = marshal.dumps(schema, 2)  # equal bytes: equal values of the same types
    except ValueError:  # a decoded JSON value marshals unless it nests too deeply
        return "outputSchema nests too deeply to be checked"
    found = known.get(key)
    if found is not None:
        return key, found
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return (f"outputSchema is not a valid JSON Schema 2020-12: {exc.message}"
                + (f" (at {where})" if where else ""))
    except RecursionError:
        return "outputSchema nests too deeply to be checked"
    except Exception as exc:  # whatever else the peer's schema makes the check raise
        return f"outputSchema cannot be checked: {type(exc).__name__}"
    spinning = _spinning_keyword(schema)
    if spinning is not None:
        return (f"outputSchema uses {spinning}, whose check the server could make spin "
                "(see mrtr_core.client.outputs)")
    return key, CompiledSchema(schema, peer=True)


_SPINNING: Final = ("pattern", "patternProperties", "uniqueItems")
# Keywords whose value is a schema, a list of schemas, or a map of names to schemas
# (JSON Schema 2020-12 Core §10 and Validation §6-7); anything else holds no subschema.
_SUBSCHEMA: Final = frozenset({
    "additionalProperties", "contains", "else", "if", "items", "not", "propertyNames",
    "then", "unevaluatedItems", "unevaluatedProperties",
})
_SUBSCHEMA_LISTS: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SUBSCHEMA_MAPS: Final = frozenset({
    "$defs", "definitions", "dependentSchemas", "patternProperties", "properties",
})


def _spinning_keyword(schema: JsonObject) -> str | None:
    """The first of :data:`_SPINNING` that a (valid) schema uses as a keyword anywhere in
    its subschemas (a property merely named ``pattern`` is no keyword), or ``None``.

    A ``$ref`` or ``$dynamicRef`` may lead anywhere in the schema (under a keyword no
    validator reads, to a map of properties), so a schema that has one counts every object
    in it as a subschema; and it may lead out of it by URI, to the JSON Schema meta-schemas
    (which use ``uniqueItems``): a reference that is not a fragment of the schema itself
    (``#...``), or an ``$id`` below the root (which would give such a fragment another
    document), is named instead.
    """
    refs = False
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue  # a boolean schema
        for keyword in _SPINNING:
            if keyword in node and node[keyword] is not False:
                return keyword
        for keyword, value in node.items():
            if keyword in _REFS:
                if not (isinstance(value, str) and value.startswith("#")):
                    return str(keyword)
                refs = True
            elif keyword in _SUBSCHEMA:
                stack.append(value)
            elif keyword in _SUBSCHEMA_LISTS and isinstance(value, list):
                stack.extend(value)
            elif keyword in _SUBSCHEMA_MAPS and isinstance(value, dict):
                stack.extend(value.values())
    return _referable_keyword(schema) if refs else None


_REFS: Final = ("$ref", "$dynamicRef")


def _referable_keyword(schema: JsonObject) -> str | None:
    """What :func:`_spinning_keyword` finds in a schema with a reference: a keyword of
    :data:`_SPINNING` (with a value that would run) in any object of it, or an ``$id`` in any
    object but the root."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        if (isinstance(node.get("pattern"), str) or node.get("uniqueItems") is True
                or node.get("patternProperties")):
            for keyword in _SPINNING:
                if keyword in node:
                    return keyword
        if node is not schema and "$id" in node:
            return "$id"
        stack.extend(node.values())
    return None
