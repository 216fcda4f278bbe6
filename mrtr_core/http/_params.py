"""``x-mcp-header``: tool arguments mirrored into ``Mcp-Param-{Name}`` headers (digest §3.3
item 6; streamable-http.mdx § Custom Headers from Tool Parameters).

A tool's ``inputSchema`` may mark primitive properties, reachable from the root through
``properties`` keys only, with ``"x-mcp-header": "<Name>"``. HTTP clients MUST send the
argument's value as ``Mcp-Param-<Name>`` (Base64 sentinel when unsafe) and MUST drop tools
whose annotations are invalid from ``tools/list``; servers MUST check that each such header
matches the body (-32020 otherwise), comparing integers numerically.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from mrtr_core._checks import positive_int
from mrtr_core._memo import remember
from mrtr_core.http._headers import (
    HeaderMismatchError,
    decode_header_value,
    encode_header_value,
)
from mrtr_core.jsonrpc import RequestId

__all__ = [
    "PARAM_HEADER_PREFIX",
    "ParamHeaderRegistry",
    "cached_param_header_paths",
    "check_param_headers",
    "param_header_paths",
    "param_header_value",
    "param_headers",
    "validate_param_headers",
]

PARAM_HEADER_PREFIX: Final = "Mcp-Param-"
_ANNOTATION: Final = "x-mcp-header"
# RFC 9110 § 5.6.2 token (tchar).
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_PRIMITIVES: Final = frozenset({"string", "integer", "boolean"})
_MAX_SAFE_INTEGER: Final = 2**53 - 1
# A JSON number (RFC 8259 §6): what a header compared numerically may hold. Decimal alone
# would also read digit groups ("4_2"), a leading "+" or zeros, and bare points ("42.").
_JSON_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
# Schema keywords whose values map *names* (not keywords) to subschemas.
_NAME_MAPS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)


def _count_annotations(schema: Any) -> int:
    """Every ``x-mcp-header`` keyword anywhere in the schema (an iterative walk; the schema
    came in a message whose size is already bounded)."""
    count = 0
    stack: list[tuple[Any, bool]] = [(schema, False)]
    while stack:
        node, is_name_map = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if not is_name_map and key == _ANNOTATION:
                    count += 1
                stack.append((value, not is_name_map and key in _NAME_MAPS))
        elif isinstance(node, list):
            stack.extend((item, False) for item in node)
    return count


def param_header_paths(input_schema: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The ``x-mcp-header`` annotations of a tool: header name part -> argument path.

    Raises:
        ValueError: An annotation breaks a rule of § Schema Extension: empty or not an HTTP
            token, a duplicate (case-insensitively), on a non-primitive property (``number``
            included), or somewhere not reachable through ``properties`` keys alone.
    """
    found: dict[str, tuple[str, ...]] = {}
    lowered: set[str] = set()
    stack: list[tuple[Any, tuple[str, ...]]] = [(input_schema, ())]
    while stack:
        schema, path = stack.pop()
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict):
            continue
        for prop, spec in properties.items():
            if not isinstance(spec, dict):
                continue
            here = (*path, prop)
            if _ANNOTATION in spec:
                name = spec[_ANNOTATION]
                if not isinstance(name, str) or _TOKEN.fullmatch(name) is None:
                    raise ValueError(f"x-mcp-header of {'.'.join(here)!r} is not an HTTP token")
                if name.lower() in lowered:
                    raise ValueError(f"x-mcp-header {name!r} is used twice")
                kind = spec.get("type")
                if not isinstance(kind, str) or kind not in _PRIMITIVES:
                    raise ValueError(
                        f"x-mcp-header on {'.'.join(here)!r} needs type string, integer or boolean"
                    )
                lowered.add(name.lower())
                found[name] = here
            stack.append((spec, here))
    if _count_annotations(input_schema) != len(found):
        raise ValueError("x-mcp-header is only allowed on properties reachable via 'properties'")
    return found


# A server checks the same few tool schemas on every tools/call: their annotations are read
# once. Entries keep the schema itself, so an id is never reused while it is cached.
_PATHS: dict[int, tuple[Mapping[str, Any], dict[str, tuple[str, ...]] | None]] = {}
_PATHS_MAX: Final = 1024


def cached_param_header_paths(
    input_schema: Mapping[str, Any],
) -> dict[str, tuple[str, ...]] | None:
    """:func:`param_header_paths` of a registered tool's schema, read once per schema object
    (the schema must not change afterwards); ``None`` when its annotations are invalid."""
    entry = _PATHS.get(id(input_schema))
    if entry is not None and entry[0] is input_schema:
        return entry[1]
    try:
        paths: dict[str, tuple[str, ...]] | None = param_header_paths(input_schema)
    except ValueError:
        paths = None
    if len(_PATHS) >= _PATHS_MAX:
        _PATHS.clear()
    _PATHS[id(input_schema)] = (input_schema, paths)
    return paths


def _lookup(arguments: Any, path: tuple[str, ...]) -> Any:
    value = arguments
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def param_header_value(value: Any) -> str | None:
    """The header text for an argument value (§ Value Encoding, type conversion), before
    Base64: strings as they are, integers in decimal, booleans ``true``/``false``;
    ``None`` (omit the header) for a missing or null value or any other type."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) <= _MAX_SAFE_INTEGER else None
    if isinstance(value, float) and value.is_integer() and abs(value) <= _MAX_SAFE_INTEGER:
        return str(int(value))
    if isinstance(value, str):
        return value
    return None


def param_headers(input_schema: Mapping[str, Any], arguments: Any) -> list[tuple[str, str]]:
    """The ``Mcp-Param-*`` headers a client sends for a ``tools/call`` (§ Client Behavior).

    Raises:
        ValueError: The schema's annotations are invalid (see :func:`param_header_paths`).
    """
    out: list[tuple[str, str]] = []
    for name, path in param_header_paths(input_schema).items():
        text = param_header_value(_lookup(arguments, path))
        if text is not None:
            out.append((PARAM_HEADER_PREFIX + name, encode_header_value(text)))
    return out


def _same(header: str, body: Any) -> bool:
    if isinstance(body, int | float) and not isinstance(body, bool):
        # Integers compare numerically (SHOULD): "42.0" matches 42.
        numeral = header.strip()
        if _JSON_NUMBER.fullmatch(numeral) is None:
            return False
        try:
            return Decimal(numeral) == Decimal(body)
        except (InvalidOperation, ValueError):
            return False
    return header == param_header_value(body)


def validate_param_headers(
    input_schema: Mapping[str, Any],
    arguments: Any,
    headers: Mapping[str, list[bytes]],
    *,
    request_id: RequestId | None = None,
) -> None:
    """Check a ``tools/call``'s ``Mcp-Param-*`` headers against its arguments (§ Server
    Behavior for Custom Headers).

    A value in the body needs its header, equal after Base64 decoding; a header whose body
    value is absent is a mismatch too; headers for names the tool does not annotate are
    ignored. A tool whose own annotations are invalid has no headers to check.

    Raises:
        HeaderMismatchError: The first problem found (-32020).
    """
    try:
        paths = param_header_paths(input_schema)
    except ValueError:
        return
    check_param_headers(paths, arguments, headers, request_id=request_id)


def check_param_headers(
    paths: Mapping[str, tuple[str, ...]],
    arguments: Any,
    headers: Mapping[str, list[bytes]],
    *,
    request_id: RequestId | None = None,
) -> None:
    """:func:`validate_param_headers` with the annotations already read
    (:func:`param_header_paths`, or :func:`cached_param_header_paths`)."""
    for name, path in paths.items():
        header = PARAM_HEADER_PREFIX + name
        values = headers.get(header.lower(), [])
        body = _lookup(arguments, path)
        expected = param_header_value(body)
        if len(values) > 1:
            raise HeaderMismatchError(
                f"{header} header appears {len(values)} times", header=header, request_id=request_id
            )
        if not values:
            if expected is not None:
                raise HeaderMismatchError(
                    f"{header} header is missing", header=header, request_id=request_id
                )
            continue
        try:
            text = decode_header_value(values[0], header=header)
        except HeaderMismatchError as exc:
            exc.request_id = request_id
            raise
        if expected is None or not _same(text, body):
            raise HeaderMismatchError(
                f"{header} header value {text!r} does not match body value {body!r}",
                header=header,
                request_id=request_id,
            )


class ParamHeaderRegistry:
    """What a client learned from ``tools/list``: which tools mirror which arguments.

    Feed it every request/response pair (:meth:`observe`); it remembers the annotations of
    listed tools and drops tools with invalid annotations from the result (MUST, § Schema
    Extension). :meth:`headers_for` gives the ``Mcp-Param-*`` headers of a ``tools/call``.

    What it learns is kept tool by tool, each from the latest page that named the tool: a
    page adds to it, whatever listing the page belongs to, and never forgets the tools it
    does not name. So listings running at once cannot mix (a tool's annotations all come
    from one page), and the pages of a listing whose last page is never fetched count.

    Shared by the connections of one client, in any threads: each change is one atomic
    operation (a ``pop``, an assignment, a ``popitem``), so no lock is held.

    Args:
        max_tools: Most tools remembered, and most tools remembered as dropped (the oldest
            are forgotten first).

    Raises:
        ValueError: ``max_tools`` is not a positive integer.
    """

    def __init__(self, *, max_tools: int = 10_000) -> None:
        positive_int("max_tools", max_tools)
        self.max_tools = max_tools
        self._schemas: OrderedDict[str, Mapping[str, Any]] = OrderedDict()
        self.rejected: OrderedDict[str, str] = OrderedDict()
        """Tools dropped from ``tools/list`` and why (for logging): the last ``max_tools``,
        the oldest first."""

    def observe(self, request: Mapping[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        """Learn from a ``tools/list`` response; returns it with invalid tools removed."""
        result = response.get("result")
        if request.get("method") != "tools/list" or not isinstance(result, dict):
            return response
        tools = result.get("tools")
        if not isinstance(tools, list):
            return response
        kept: list[Any] = []
        for tool in tools:
            name = tool.get("name") if isinstance(tool, dict) else None
            schema = tool.get("inputSchema") if isinstance(tool, dict) else None
            if not isinstance(name, str) or not isinstance(schema, dict):
                kept.append(tool)
                continue
            try:
                paths = param_header_paths(schema)
            except ValueError as exc:
                self._schemas.pop(name, None)
                self.rejected.pop(name, None)  # dropped again: the newest
                remember(self.rejected, name, str(exc), self.max_tools)
                continue
            self._remember(name, schema if paths else None)
            kept.append(tool)
        if len(kept) == len(tools):
            return response
        return {**response, "result": {**result, "tools": kept}}

    def headers_for(self, message: Mapping[str, Any]) -> list[tuple[str, str]]:
        """The ``Mcp-Param-*`` headers for ``message`` (none unless it calls a known tool)."""
        if message.get("method") != "tools/call":
            return []
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        schema = self._schemas.get(name) if isinstance(name, str) else None
        if schema is None or not isinstance(params, dict):
            return []
        try:
            return param_headers(schema, params.get("arguments"))
        except ValueError:
            return []

    def _remember(self, name: str, schema: Mapping[str, Any] | None) -> None:
        self._schemas.pop(name, None)
        self.rejected.pop(name, None)
        if schema is not None:
            remember(self._schemas, name, schema, self.max_tools)
