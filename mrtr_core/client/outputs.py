"""Tools' output schemas, learned from ``tools/list`` and checked on ``tools/call`` results.

A tool may declare an ``outputSchema``; the server MUST then return structured results that
conform to it, and clients SHOULD validate them (server/tools.mdx § Output Schema).
:class:`OutputSchemas` remembers the schemas of the tools the latest listing named (a listing
is a first page and the pages its ``nextCursor`` leads to; the one completed last replaces
them all, once its last page is in, and listings running at once keep their pages apart; a
tool that one neither gives a schema nor refuses one takes the schema the pages so far of a
listing begun after it gave, as a caller may never fetch the last page), and
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
are remembered. A result nested deeper than the check of a recursive schema can follow
fails its call (the schema stays: the next result may be fine).
"""

from __future__ import annotations

import itertools
import marshal
from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from mrtr_core._checks import positive_int
from mrtr_core._memo import remember
from mrtr_core.client.flow import ResultCheck
from mrtr_core.errors import StructuredContentError
from mrtr_core.server.schemas import (
    REFERENCES,
    SUBSCHEMA,
    SUBSCHEMA_LISTS,
    SUBSCHEMA_MAPS,
    CompiledSchema,
    reference_problem,
)
from mrtr_core.wire.models import CALL_TOOL, JsonObject

__all__ = ["LIST_TOOLS", "MAX_LISTINGS", "MAX_TOOLS", "OutputSchemas"]

LIST_TOOLS: Final = "tools/list"
MAX_TOOLS: Final = 10_000
"""Most output schemas remembered (a paginated listing's oldest go first)."""
MAX_LISTINGS: Final = 8
"""Most paged listings remembered while they wait for their next page (the oldest go first)."""


class _Tables:
    """The schemas one listing names, and the tools whose schema it refuses, each in the
    order the listing gave them (the oldest first); ``begun`` orders listings by their first
    page.

    A page fills tables of its own, and nothing else sees them until they are published (as
    the latest, or as the pages so far of a listing that goes on). Published ones change only
    by :func:`_drop`, one atomic dict operation at a time, so a reader copies them (one
    atomic ``dict()``) before going through them.
    """

    __slots__ = ("begun", "rejected", "schemas")

    def __init__(
        self,
        begun: int,
        schemas: dict[str, tuple[bytes, CompiledSchema]] | None = None,
        rejected: OrderedDict[str, str] | None = None,
    ) -> None:
        self.begun = begun
        # Tool name -> (the schema's marshal bytes, its compiled form).
        self.schemas: dict[str, tuple[bytes, CompiledSchema]] = schemas or {}
        # Tool name -> why: an OrderedDict, whose oldest entry goes in one atomic popitem
        # when a call finds a published schema unusable (see _drop).
        self.rejected: OrderedDict[str, str] = rejected or OrderedDict()

    def copy(self, begun: int) -> _Tables:
        """Tables for the next page of a listing begun at ``begun``, starting with these
        entries."""
        return _Tables(begun, dict(self.schemas), OrderedDict(self.rejected))

    def entry(self, tool: str) -> tuple[bytes, CompiledSchema] | str | None:
        """``tool``'s schema, why the listing refuses it, or ``None`` (it names neither)."""
        return self.schemas.get(tool) or self.rejected.get(tool)


class OutputSchemas:
    """The ``outputSchema`` of each tool of the latest ``tools/list``, compiled once each.

    A listing is a first page (a request without a ``cursor``) and the pages each
    ``nextCursor`` leads to; its tools are used once its last page (one without a
    ``nextCursor``) is in, and the listing completed last wins. Listings may run at the same
    time: a page continues the listing that waits for its ``cursor`` (the one that has waited
    longest, when several do), so their pages never mix. A page no listing waits for (one
    forgotten, or begun elsewhere) adds its tools to the latest listing's.

    A caller may never fetch a listing's last page. A tool the latest completed listing
    gives no schema and refuses none is checked against the schema the pages so far of the
    listing begun last that names it gave, among those begun after the completed one (a
    listing begun before it is older than the whole it gave).

    Shared by the calls of one client, in any threads: a listing fills tables of its own and
    swaps them in; each step that other threads could see is one atomic operation (a
    ``dict.pop``, an assignment), so no lock is held, and checking one listing's schemas
    holds no other up.

    Args:
        max_tools: Most schemas remembered (and tools whose schema is refused): a listing
            checks only the last ``max_tools`` schemas it declares; the oldest go first.
        max_listings: Most listings remembered while they wait for their next page (a
            caller may never fetch it); the oldest go first.

    Raises:
        ValueError: ``max_tools`` or ``max_listings`` is not a positive integer.
    """

    def __init__(self, *, max_tools: int = MAX_TOOLS, max_listings: int = MAX_LISTINGS) -> None:
        positive_int("max_tools", max_tools)
        positive_int("max_listings", max_listings)
        self.max_tools = max_tools
        self.max_listings = max_listings
        self._latest = _Tables(-1)
        # Listings waiting for a page, oldest first: serial -> (the cursor it waits for, its
        # tables). The serials tell apart listings that wait for the same cursor.
        self._listings: OrderedDict[int, tuple[str, _Tables]] = OrderedDict()
        # The pages so far of the listings not completed (what checks use meanwhile): begun
        # -> tables. A page taken from _listings leaves its listing's here until it
        # publishes the next, so a check never finds the listing gone.
        self._partial: OrderedDict[int, _Tables] = OrderedDict()
        self._serials = itertools.count()

    def __len__(self) -> int:
        return len(self._latest.schemas)

    @property
    def rejected(self) -> Mapping[str, str]:
        """Tools of the latest listing whose ``outputSchema`` is not used, and why."""
        return MappingProxyType(self._latest.rejected)

    def schema_for(self, tool: str) -> Any:
        """The ``outputSchema`` ``tool``'s results are checked against (as listed), or
        ``None``."""
        found = self._used(tool)
        return None if found is None else found[1][1].schema

    def _used(self, tool: str) -> tuple[_Tables, tuple[bytes, CompiledSchema]] | None:
        """The schema ``tool``'s results are checked against, with the tables that gave it
        (see the class doc), or ``None``."""
        tables = self._latest
        entry = tables.entry(tool)
        if entry is None:
            since = tables.begun
            # Newest first: the first listing begun after the latest that names the tool.
            for partial in sorted(list(self._partial.values()), key=_begun, reverse=True):
                if partial.begun <= since:
                    break
                entry = partial.entry(tool)
                if entry is not None:
                    tables = partial
                    break
        return (tables, entry) if isinstance(entry, tuple) else None

    def result_check(self, method: object, params: object) -> ResultCheck | None:
        """What a flow of ``method`` with ``params`` runs on its complete result (see
        :class:`~mrtr_core.client.flow.ClientFlow`): a listing is learned, a tool's result
        checked; ``None`` for any other request."""
        if method == CALL_TOOL and isinstance(params, Mapping):
            name = params.get("name")
            if type(name) is str:
                return lambda result: self.check(name, result)
        elif method == LIST_TOOLS:
            cursor = params.get("cursor") if isinstance(params, Mapping) else None

            def learn(result: JsonObject) -> None:
                self.learn(result, cursor=cursor)

            return learn
        return None

    def learn(self, result: Mapping[str, Any], *, cursor: object = None) -> None:
        """Remember the output schemas a page of a ``tools/list`` listing lists.

        Args:
            result: The complete result. Entries that are not tools with a string ``name``
                are passed over; a result without a ``tools`` array lists no tools. A string
                ``nextCursor`` means the listing goes on: its tools are used once its last
                page is in.
            cursor: The ``cursor`` the request carried: ``None`` for the first page of a
                listing; else the page continues the listing that waits for it (or, if none
                does, adds to the latest listing).
        """
        tools = result.get("tools")
        listed = tools if isinstance(tools, list) else []
        tables = self._continued(cursor)  # this call's alone until stored or published
        known = {key: compiled for key, compiled in itertools.chain(
            list(self._latest.schemas.values()), tables.schemas.values())}
        declared: dict[str, Any] = {}  # name -> its last listed outputSchema, in list order
        for tool in listed:
            name = tool.get("name") if isinstance(tool, dict) else None
            if type(name) is not str:
                continue
            assert isinstance(tool, dict)
            tables.schemas.pop(name, None)
            tables.rejected.pop(name, None)
            declared.pop(name, None)
            if "outputSchema" in tool:
                declared[name] = tool["outputSchema"]
        # Only the last max_tools can be kept (the oldest go first): a listing of many tools
        # costs the check of that many schemas, not one per tool.
        for name in itertools.islice(declared, max(0, len(declared) - self.max_tools), None):
            entry = _compile(declared[name], known)
            if isinstance(entry, str):
                tables.rejected[name] = entry
                continue
            tables.schemas[name] = entry
            known[entry[0]] = entry[1]
        for table in (tables.schemas, tables.rejected):
            while len(table) > self.max_tools:
                del table[next(iter(table))]
        next_cursor = result.get("nextCursor")
        if isinstance(next_cursor, str):
            if tables.begun in self._partial:
                self._partial[tables.begun] = tables
            else:
                remember(self._partial, tables.begun, tables, self.max_listings)
            remember(self._listings, next(self._serials), (next_cursor, tables),
                     self.max_listings)
        else:
            self._latest = tables
            self._partial.pop(tables.begun, None)  # no longer begun after the latest

    def _continued(self, cursor: object) -> _Tables:
        """The tables a page fetched with ``cursor`` fills (its own: checks may be reading
        those of the pages before it), taken from whoever else could."""
        if cursor is None:
            return _Tables(next(self._serials))
        # A cursor is an opaque token (server/utilities/pagination.mdx): the one thing that
        # ties a page to the listing it continues is the string the previous page gave.
        for serial, (awaited, tables) in list(self._listings.items()):
            # Of two threads taking the same listing, the one whose pop finds it has it.
            if awaited == cursor and self._listings.pop(serial, None) is not None:
                return tables.copy(tables.begun)
        return self._latest.copy(next(self._serials))

    def check(self, tool: str, result: JsonObject) -> StructuredContentError | None:
        """Why a complete ``tools/call`` result of ``tool`` breaks its output schema, or
        ``None`` (no schema remembered, an error result, or a result that conforms)."""
        found = self._used(tool)
        if found is None or result.get("isError") is True:
            return None
        tables, entry = found
        if "structuredContent" not in result:
            return StructuredContentError(
                tool, "the tool declares an outputSchema, but the result carries no "
                "structuredContent", result=result,
            )
        try:
            problem = entry[1].problem(result["structuredContent"])
        except RecursionError:  # a recursive schema walks as deep as this result goes
            return StructuredContentError(
                tool, "structuredContent is nested too deeply to check against the tool's "
                "outputSchema", result=result,
            )
        except Exception as exc:  # the peer's schema fails only when used (see module doc)
            _drop(tables, tool, entry, f"outputSchema cannot be used: {type(exc).__name__}",
                  self.max_tools)
            return None
        if problem is None:
            return None
        return StructuredContentError(
            tool, f"structuredContent does not match the tool's outputSchema: {problem}",
            result=result,
        )


def _begun(tables: _Tables) -> int:
    return tables.begun


def _drop(
    tables: _Tables, tool: str, entry: tuple[bytes, CompiledSchema], reason: str, most: int
) -> None:
    """Stop using ``tool``'s schema in the tables that gave it: in place, one atomic dict
    operation at a time, refused first (a copy made between the two may show the tool in
    both tables, and then drops its schema when it fails again), and only if it is still the
    schema they hold. A listing completed meanwhile has tables of its own. The refused stay
    at ``most``, the oldest going first."""
    if tables.schemas.get(tool) is entry:
        remember(tables.rejected, tool, reason, most)
        tables.schemas.pop(tool, None)


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
    unusable = reference_problem(schema)
    if unusable is not None:
        return f"outputSchema cannot be used: {unusable}"
    return key, CompiledSchema(schema)


_SPINNING: Final = ("pattern", "patternProperties", "uniqueItems")


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
            if keyword in REFERENCES:
                if not (isinstance(value, str) and value.startswith("#")):
                    return str(keyword)
                refs = True
            elif keyword in SUBSCHEMA:
                stack.append(value)
            elif keyword in SUBSCHEMA_LISTS and isinstance(value, list):
                stack.extend(value)
            elif keyword in SUBSCHEMA_MAPS and isinstance(value, dict):
                stack.extend(value.values())
    return _referable_keyword(schema) if refs else None


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
