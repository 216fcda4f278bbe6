"""The things an app serves: tools, prompts, resources, resource templates, a completer.

Each definition is built once, by a decorator on :class:`~mrtr_core.app.App`, and checks
everything it can at that moment (names, schemas, handler signatures) so that a mistake shows
up at import time, not in front of a client. Definitions also know how to check a request's
arguments against themselves; the app turns those findings into ``-32602`` errors.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal

import attrs
import jsonschema
from referencing.exceptions import Unresolvable

from mrtr_core import jsontext
from mrtr_core._checks import flag, instance_of, optional_text, shown
from mrtr_core.app._members import (
    ANNOTATIONS,
    ICON,
    LINK,
    TOOL_ANNOTATIONS,
    Member,
    failing_member,
    of_kind,
)
from mrtr_core.app.results import tool_result, unusable_schema
from mrtr_core.http import param_header_paths
from mrtr_core.server.schemas import CompiledSchema, reference_problem
from mrtr_core.wire.formats import URI_FORMAT, is_uri
from mrtr_core.wire.models import JsonObject

__all__ = [
    "CacheScope",
    "CallPlan",
    "Completer",
    "PromptArgument",
    "PromptDef",
    "ResourceDef",
    "ResourceTemplateDef",
    "ToolDef",
    "check_resource_handler",
    "declared_annotations",
    "declared_icons",
    "declared_meta",
    "declared_size",
    "derive_input_schema",
    "derive_prompt_arguments",
    "first_paragraph",
    "is_template",
    "resource_uri_problem",
    "template_variables",
]

CacheScope = Literal["public", "private"]

# Tool names SHOULD be 1-128 characters of [A-Za-z0-9_.-] (server/tools.mdx § Tool names).
_TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_TEMPLATE_VAR: Final = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

_SIMPLE_TYPES: Final[Mapping[Any, JsonObject]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    list: {"type": "array"},
    tuple: {"type": "array"},
    dict: {"type": "object"},
}


def _tool_annotations(tool: str, annotations: Any) -> JsonObject | None:
    """A copy of the ``annotations`` given to ``@app.tool`` (``None`` for none), each member
    a ``ToolAnnotations`` member of its type; ``ValueError``/``TypeError`` naming it."""
    if annotations is None:
        return None
    return _declared_members(f"tool {tool!r}: annotations", annotations, TOOL_ANNOTATIONS,
                             "a mapping of ToolAnnotations members or None")


def _declared_members(
    where: str, value: Any, members: Mapping[str, Member], what: str
) -> JsonObject:
    """A copy of ``value`` (named ``where``), a mapping of ``members`` given when a definition
    is declared (its lists copied too): ``TypeError`` when it is not a mapping or a member is
    not of its JSON type, ``ValueError`` for another member (a misspelt one would be dropped
    by every client without a word) or a value its test refuses."""
    instance_of(where, value, Mapping, what)
    for member in value:
        if not isinstance(member, str) or member not in members:
            raise ValueError(f"{where} member {shown(member)} is not one of {', '.join(members)}")
    failed = failing_member(value, members)
    if failed is not None:
        spec, given = members[failed], value[failed]
        if not of_kind(given, spec):
            raise TypeError(f"{where} {failed} must be {spec.what}, not {type(given).__name__}")
        raise ValueError(f"{where} {failed} must be {spec.what}, got {shown(given)}")
    return {member: list(item) if isinstance(item, list) else item
            for member, item in value.items()}


def declared_icons(owner: str, icons: Any) -> list[JsonObject] | None:
    """A copy of the ``icons`` given to a decorator (``None`` for none), each an ``Icon``
    (schema.ts: a ``src`` URI; ``mimeType``, ``sizes`` and ``theme`` when given, checked as
    in a result's resource link); ``TypeError``/``ValueError`` naming ``owner`` and the
    member."""
    if icons is None:
        return None
    if isinstance(icons, str | bytes) or not isinstance(icons, Sequence):
        raise TypeError(f"{owner}: icons must be a list of icons or None,"
                        f" not {type(icons).__name__}")
    out: list[JsonObject] = []
    for index, icon in enumerate(icons):
        where = f"{owner}: icons[{index}]"
        item = _declared_members(where, icon, ICON, "a mapping of Icon members")
        if "src" not in item:
            raise ValueError(f"{where} needs a src")
        out.append(item)
    return out


def declared_annotations(owner: str, annotations: Any) -> JsonObject | None:
    """A copy of the ``Annotations`` given to ``@app.resource`` (``None`` for none):
    ``audience``, ``priority`` and ``lastModified``, checked as in a result's content
    block; ``TypeError``/``ValueError`` naming ``owner`` and the member."""
    if annotations is None:
        return None
    return _declared_members(f"{owner}: annotations", annotations, ANNOTATIONS,
                             "a mapping of Annotations members or None")


def declared_meta(owner: str, meta: Any) -> JsonObject | None:
    """A copy of the ``_meta`` given to a decorator (``None`` for none): a mapping with
    string keys that JSON can write (RFC 8259: no sets, bytes or NaN anywhere), copied as a
    client reads it; ``TypeError``/``ValueError`` naming ``owner``."""
    if meta is None:
        return None
    instance_of(f"{owner}: meta", meta, Mapping, "a mapping or None")
    for key in meta:
        # JSON would write another key as a string: the object listed is not the one given.
        instance_of(f"{owner}: meta key {shown(key)}", key, str, "a string")
    out: JsonObject = _json_copy(f"{owner}: meta", dict(meta))
    return out


def declared_size(owner: str, size: Any) -> int | None:
    """The ``size`` given to ``@app.resource`` (``None`` for none): an integer, as in a
    result's resource link (a bool is not one); ``TypeError`` naming ``owner``, or
    ``ValueError`` for one too long to write (``resources/list`` writes it as JSON: every
    listing would fail)."""
    if size is not None and not LINK["size"].test(size):
        raise TypeError(f"{owner}: size must be an integer or None, not {type(size).__name__}")
    try:
        repr(size)  # str() of an int has a digit limit (sys.set_int_max_str_digits)
    except ValueError:
        raise ValueError(f"{owner}: size is an integer too long to write") from None
    return typing.cast("int | None", size)


_STRICT_JSON: Final = jsontext.reusable(json.JSONEncoder(allow_nan=False))


def _json_copy(where: str, value: Any) -> Any:
    """``value`` written as JSON and read back, as a client reads it; ``ValueError`` naming
    ``where`` for a value JSON cannot write (RFC 8259: no set, bytes or nan), one nested
    deeper than the interpreter recurses included (:data:`~mrtr_core.jsontext.TOO_DEEP`)."""
    try:
        return json.loads(_STRICT_JSON(value))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{where} is not JSON ({exc})") from None


def _schema_copy(tool: str, member: str, schema: Mapping[str, Any]) -> JsonObject:
    """A copy of the schema given as ``member`` of ``tool``, whole, as a client reads it:
    nothing the caller changes afterwards, however deep, changes what ``tools/list`` shows or
    what is checked against it (nor gets past :func:`_check_schema`). ``ValueError`` naming
    the tool and ``member`` for a value JSON cannot write (a set, bytes, nan: RFC 8259 has
    no such value, and tools/list sends the schema as it is: every listing would fail
    instead of this one tool)."""
    copied: JsonObject = _json_copy(f"tool {tool!r}: {member}", dict(schema))
    return copied


def _check_schema(tool: str, member: str, schema: JsonObject) -> None:
    """Refuse (``ValueError`` naming the tool and ``member``) a schema (a JSON value, as
    :func:`_schema_copy` gives) that is not a valid JSON Schema 2020-12 (or is nested too
    deeply to be checked as one), or has references that cannot be used
    (:func:`~mrtr_core.server.schemas.reference_problem`)."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        path = "/".join(str(p) for p in exc.absolute_path)
        raise ValueError(
            f"tool {tool!r}: {member} is not a valid JSON Schema 2020-12:"
            f" {exc.message}" + (f" (at {path})" if path else "")
        ) from None
    except RecursionError:  # the meta-schema is checked a few frames per level
        raise ValueError(
            f"tool {tool!r}: {member} is nested too deeply to check as a JSON Schema") from None
    # Every call checks its arguments (and its result) against the schema: a reference that
    # resolves nowhere, or a loop of them, would fail each call instead of this one tool.
    problem = reference_problem(schema)
    if problem is not None:
        raise ValueError(f"tool {tool!r}: {member} cannot be used: {problem}")


def _given(members: JsonObject) -> JsonObject:
    """A definition's wire object: ``members`` without those not given (``None``), in order."""
    return {name: value for name, value in members.items() if value is not None}


def _check_not_generator(handler: Callable[..., Any], what: str) -> None:
    """Refuse a generator function: calling it runs none of its code, and the generator it
    gives is no result (a resumable handler is re-run from the top, it never yields)."""
    if inspect.isgeneratorfunction(handler) or inspect.isasyncgenfunction(handler):
        raise TypeError(
            f"{what} handler {handler!r} is a generator function: a handler returns its "
            "result (return, not yield)"
        )


def _handler_params(handler: Callable[..., Any], what: str) -> list[inspect.Parameter]:
    """The handler's parameters after the leading ``ctx``."""
    _check_not_generator(handler, what)
    params = list(inspect.signature(handler).parameters.values())
    if not params or params[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise TypeError(f"{what} handler {handler!r} must take the context as its first parameter")
    return params[1:]


def _type_schema(annotation: Any) -> JsonObject:
    """A JSON Schema for a Python annotation (the common cases; ``{}`` otherwise)."""
    if annotation in _SIMPLE_TYPES:
        return dict(_SIMPLE_TYPES[annotation])
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal and all(isinstance(a, str | int | bool) for a in args):
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            return _type_schema(members[0])
        return {}
    if origin in (list, tuple, Sequence):
        out: JsonObject = {"type": "array"}
        if origin is list and len(args) == 1:
            item = _type_schema(args[0])
            if item:
                out["items"] = item
        return out
    if origin in (dict, Mapping):
        return {"type": "object"}
    return {}


def derive_input_schema(handler: Callable[..., Any]) -> JsonObject:
    """An ``inputSchema`` (``type: object`` at the root, as 2026-07-28 requires) from the
    handler's keyword parameters after ``ctx``: annotations give the types, parameters without
    a default are required, and unknown arguments are refused unless it takes ``**kwargs``."""
    hints = typing.get_type_hints(handler)
    properties: JsonObject = {}
    required: list[str] = []
    open_ended = False
    for param in _handler_params(handler, "tool"):
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            open_ended = True
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            raise TypeError(f"tool handler {handler!r}: arguments are passed by keyword only")
        properties[param.name] = _type_schema(hints.get(param.name, Any))
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
    schema: JsonObject = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if not open_ended:
        schema["additionalProperties"] = False
    return schema


@attrs.frozen(kw_only=True)
class PromptArgument:
    """One declared prompt argument (``prompts/list``)."""

    name: str
    description: str | None = None
    required: bool = False
    title: str | None = None

    def to_wire(self) -> JsonObject:
        """The ``PromptArgument`` wire object (``title`` only when given)."""
        return _given({"name": self.name, "title": self.title,
                       "description": self.description, "required": self.required})


def derive_prompt_arguments(handler: Callable[..., Any]) -> tuple[PromptArgument, ...]:
    """Prompt arguments from the handler's parameters after ``ctx`` (no default: required)."""
    out: list[PromptArgument] = []
    for param in _handler_params(handler, "prompt"):
        if param.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL):
            continue
        out.append(PromptArgument(name=param.name,
                                  required=param.default is inspect.Parameter.empty))
    return tuple(out)


def _accepts_any_keyword(handler: Callable[..., Any]) -> bool:
    return any(p.kind is inspect.Parameter.VAR_KEYWORD
               for p in inspect.signature(handler).parameters.values())


def first_paragraph(doc: str | None) -> str | None:
    """The first paragraph of a docstring, on one line (a default description)."""
    if not doc:
        return None
    text = inspect.cleandoc(doc).strip()
    return text.split("\n\n", 1)[0].replace("\n", " ") or None


@attrs.frozen
class CallPlan:
    """What binding ``handler(ctx, **arguments)`` needs, read from the signature once.

    :meth:`problem` answers exactly what ``inspect.signature(handler).bind(None,
    **arguments)`` would: ``None`` when it binds, else the ``TypeError`` text. The common
    case (keyword parameters after ``ctx``) is decided from sets of names; anything else
    (positional-only parameters after ``ctx``, a binding that fails) asks the signature.
    """

    signature: inspect.Signature
    names: frozenset[str]
    """Parameters after ``ctx`` that take a keyword argument."""
    required: tuple[str, ...]
    """Of those, the ones without a default."""
    var_keyword: bool
    """The handler takes ``**kwargs``."""
    reserved: frozenset[str]
    """Names that clash with ``ctx`` even with ``**kwargs``."""
    simple: bool
    """No positional-only parameter after ``ctx`` (the sets decide the happy path)."""

    @classmethod
    def of(cls, handler: Callable[..., Any]) -> CallPlan:
        """The plan of ``handler``."""
        signature = inspect.signature(handler)
        params = list(signature.parameters.values())
        keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        first, rest = (params[0], params[1:]) if params else (None, [])
        return cls(
            signature=signature,
            names=frozenset(p.name for p in rest if p.kind in keyword),
            required=tuple(
                p.name for p in rest if p.kind in keyword and p.default is p.empty
            ),
            var_keyword=any(p.kind is inspect.Parameter.VAR_KEYWORD for p in rest),
            reserved=frozenset(
                [first.name] if first is not None and first.kind in keyword else []
            ),
            simple=first is not None
            and first.kind in (inspect.Parameter.POSITIONAL_ONLY,
                               inspect.Parameter.POSITIONAL_OR_KEYWORD)
            and not any(p.kind is inspect.Parameter.POSITIONAL_ONLY for p in rest),
        )

    def _fits(self, arguments: Mapping[str, Any]) -> bool:
        """The shortcut's test: every required name given, and no key the handler cannot
        take (plain loops and set operations: no generator per call)."""
        for name in self.required:
            if name not in arguments:
                return False
        keys = arguments.keys()
        if self.var_keyword:
            return keys.isdisjoint(self.reserved) and all(isinstance(key, str) for key in keys)
        return self.names.issuperset(keys)

    def problem(self, arguments: Mapping[str, Any]) -> str | None:
        """Why ``handler(ctx, **arguments)`` cannot be called, or ``None``."""
        if self.simple and self._fits(arguments):
            return None
        try:
            self.signature.bind(None, **arguments)
        except TypeError as exc:
            return str(exc)
        return None


@attrs.frozen(kw_only=True)
class ToolDef:
    """A tool: its ``tools/list`` entry and its handler ``(ctx, **arguments)``."""

    name: str
    description: str | None
    input_schema: JsonObject
    handler: Callable[..., Any] = attrs.field(repr=False)
    single_use: bool = False
    title: str | None = None
    annotations: JsonObject | None = None
    """The ``ToolAnnotations`` members given, or ``None``."""
    output_schema: JsonObject | None = None
    icons: list[JsonObject] | None = None
    """The ``Icon`` objects given, or ``None``."""
    meta: JsonObject | None = None
    """The ``_meta`` given, or ``None``."""
    _schema: CompiledSchema = attrs.field(alias="schema", repr=False, eq=False)
    _output: CompiledSchema | None = attrs.field(alias="output", default=None, repr=False,
                                                 eq=False)
    _plan: CallPlan = attrs.field(alias="plan", repr=False, eq=False)

    @classmethod
    def build(
        cls,
        handler: Callable[..., Any],
        *,
        name: str | None,
        description: str | None,
        input_schema: JsonObject | None,
        single_use: bool,
        title: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        output_schema: JsonObject | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> ToolDef:
        """Check and build a tool definition (raises ``ValueError``/``TypeError``)."""
        tool_name = name if name is not None else handler.__name__
        if not isinstance(tool_name, str) or not _TOOL_NAME.fullmatch(tool_name):
            raise ValueError(
                f"tool name {shown(tool_name)} must be 1-128 characters of [A-Za-z0-9_.-]")
        optional_text(f"tool {tool_name!r}: description", description)
        optional_text(f"tool {tool_name!r}: title", title)
        tool_annotations = _tool_annotations(tool_name, annotations)
        tool_icons = declared_icons(f"tool {tool_name!r}", icons)
        tool_meta = declared_meta(f"tool {tool_name!r}", meta)
        flag(f"tool {tool_name!r}: single_use", single_use)
        instance_of(f"tool {tool_name!r}: input_schema", input_schema, (Mapping, type(None)),
                    "a JSON Schema mapping or None")
        _handler_params(handler, "tool")
        instance_of(f"tool {tool_name!r}: output_schema", output_schema, (Mapping, type(None)),
                    "a JSON Schema mapping or None")
        # Both schemas are copied whole before they are checked: the checks hold for good.
        schema = (derive_input_schema(handler) if input_schema is None
                  else _schema_copy(tool_name, "inputSchema", input_schema))
        # server/tools.mdx: inputSchema may use any 2020-12 keyword but has type object at root.
        if schema.get("type") != "object":
            raise ValueError(f"tool {tool_name!r}: inputSchema must have type 'object' at its root")
        _check_schema(tool_name, "inputSchema", schema)
        # outputSchema is any 2020-12 schema object (schema.ts Tool; server/tools.mdx shows
        # one of type array): no type is required at its root.
        output = (None if output_schema is None
                  else _schema_copy(tool_name, "outputSchema", output_schema))
        if output is not None:
            _check_schema(tool_name, "outputSchema", output)
        # The x-mcp-header rules bind the server's own definitions (server/tools.mdx
        # § x-mcp-header): an HTTP client MUST drop a tool that breaks them, so it is refused
        # here instead of being served to clients that cannot call it.
        try:
            param_header_paths(schema)
        except ValueError as exc:
            raise ValueError(f"tool {tool_name!r}: {exc}") from None
        return cls(
            name=tool_name,
            description=(description if description is not None
                         else first_paragraph(handler.__doc__)),
            input_schema=schema,
            handler=handler,
            single_use=single_use,
            title=title,
            annotations=tool_annotations,
            output_schema=output,
            icons=tool_icons,
            meta=tool_meta,
            schema=CompiledSchema(schema),
            output=None if output is None else CompiledSchema(output),
            plan=CallPlan.of(handler),
        )

    def to_wire(self) -> JsonObject:
        """The ``Tool`` wire object (``title``, ``icons``, ``outputSchema``,
        ``annotations`` and ``_meta`` only when given)."""
        return _given({
            "name": self.name, "title": self.title, "icons": self.icons,
            "description": self.description, "inputSchema": self.input_schema,
            "outputSchema": self.output_schema, "annotations": self.annotations,
            "_meta": self.meta,
        })

    def check_arguments(self, arguments: JsonObject) -> str | None:
        """Why these arguments do not fit the schema or the handler, or ``None``.

        Raises:
            JsonRpcError: -32603, the ``inputSchema`` itself cannot be used (a ``$ref``
                that resolves nowhere: :func:`~mrtr_core.app.results.unusable_schema`).
        """
        try:
            problem = self._schema.problem(arguments)
        except RecursionError:
            # A recursive schema spends several frames on each level of the arguments: within
            # the nesting a transport decodes, it may still recurse deeper than Python does.
            return "nested too deeply to check against the tool's inputSchema"
        except Unresolvable:
            raise unusable_schema("inputSchema") from None
        return problem or self._plan.problem(arguments)

    def finish(self, value: Any) -> JsonObject:
        """The ``CallToolResult`` of what the handler returned (:func:`tool_result`), its
        ``structuredContent`` checked against the ``outputSchema`` when the tool has one."""
        return tool_result(value, output_schema=self._output)


@attrs.frozen(kw_only=True)
class PromptDef:
    """A prompt: its ``prompts/list`` entry and its handler ``(ctx, **string_arguments)``."""

    name: str
    description: str | None
    arguments: tuple[PromptArgument, ...]
    handler: Callable[..., Any] = attrs.field(repr=False)
    single_use: bool = False
    title: str | None = None
    icons: list[JsonObject] | None = None
    """The ``Icon`` objects given, or ``None``."""
    meta: JsonObject | None = None
    """The ``_meta`` given, or ``None``."""

    @classmethod
    def build(
        cls,
        handler: Callable[..., Any],
        *,
        name: str | None,
        description: str | None,
        arguments: Sequence[PromptArgument | Mapping[str, Any] | str] | None,
        single_use: bool,
        title: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> PromptDef:
        """Check and build a prompt definition (raises ``ValueError``/``TypeError``, the
        latter also for declared arguments the handler cannot be called with)."""
        prompt_name = name if name is not None else handler.__name__
        if not isinstance(prompt_name, str):
            raise TypeError(f"prompt name must be a string, not {type(prompt_name).__name__}")
        if not prompt_name:
            raise ValueError("a prompt needs a name")
        optional_text(f"prompt {prompt_name!r}: description", description)
        optional_text(f"prompt {prompt_name!r}: title", title)
        prompt_icons = declared_icons(f"prompt {prompt_name!r}", icons)
        prompt_meta = declared_meta(f"prompt {prompt_name!r}", meta)
        flag(f"prompt {prompt_name!r}: single_use", single_use)
        _handler_params(handler, "prompt")
        if arguments is None:
            args = derive_prompt_arguments(handler)
        else:
            # A string is a sequence too: "abc" would declare arguments a, b and c.
            if isinstance(arguments, str | bytes) or not isinstance(arguments, Sequence):
                raise TypeError(f"prompt {prompt_name!r}: arguments must be a list of"
                                f" arguments, not {type(arguments).__name__}")
            args = tuple(_prompt_argument(prompt_name, a) for a in arguments)
        names = [a.name for a in args]
        if len(set(names)) != len(names):
            raise ValueError(f"prompt {prompt_name!r}: argument names must be unique")
        _check_prompt_call(prompt_name, handler, args)
        return cls(
            name=prompt_name,
            description=(description if description is not None
                         else first_paragraph(handler.__doc__)),
            arguments=args,
            handler=handler,
            single_use=single_use,
            title=title,
            icons=prompt_icons,
            meta=prompt_meta,
        )

    def to_wire(self) -> JsonObject:
        """The ``Prompt`` wire object (``title``, ``icons`` and ``_meta`` only when
        given)."""
        return _given({
            "name": self.name, "title": self.title, "icons": self.icons,
            "description": self.description,
            "arguments": [a.to_wire() for a in self.arguments], "_meta": self.meta,
        })

    def select_arguments(self, arguments: Mapping[str, str]) -> dict[str, str] | str:
        """The keyword arguments for the handler, or why the request's arguments are wrong
        (a required one missing). Undeclared arguments are dropped unless the handler takes
        ``**kwargs``."""
        missing = [a.name for a in self.arguments if a.required and a.name not in arguments]
        if missing:
            return f"missing required argument(s): {', '.join(missing)}"
        if _accepts_any_keyword(self.handler):
            return dict(arguments)
        declared = {a.name for a in self.arguments}
        return {k: v for k, v in arguments.items() if k in declared}


def _check_prompt_call(
    prompt: str, handler: Callable[..., Any], arguments: tuple[PromptArgument, ...]
) -> None:
    """Refuse a handler that ``prompts/get`` could not call: it is called with the declared
    arguments a request gives, by keyword (see :meth:`PromptDef.select_arguments`). Binding
    the required ones alone and all of them covers every request that passes that check."""
    signature = inspect.signature(handler)
    required = {a.name: "" for a in arguments if a.required}
    every = {a.name: "" for a in arguments}
    for given in (required, every):
        try:
            signature.bind(None, **given)
        except TypeError as exc:
            raise TypeError(
                f"prompt {prompt!r}: handler {handler!r} cannot be called with its declared "
                f"arguments ({', '.join(every) or 'none'}): {exc}"
            ) from None


# PromptArgument (schema.ts): BaseMetadata's name and title, description, required.
_ARGUMENT_MEMBERS: Final = ("name", "title", "description", "required")


def _prompt_argument(
    prompt: str, value: PromptArgument | Mapping[str, Any] | str
) -> PromptArgument:
    """One declared argument of ``prompt``: a ``PromptArgument``, a name (required), or a
    ``{"name", "title", "description", "required"}`` mapping (no other member); anything
    else is refused. A ``PromptArgument`` is checked as the mapping of its fields is: they
    go on the wire as they are (``prompts/list``)."""
    if isinstance(value, PromptArgument):
        value = {"name": value.name, "title": value.title,
                 "description": value.description, "required": value.required}
    if isinstance(value, str):
        return PromptArgument(name=value, required=True)
    if not isinstance(value, Mapping):
        raise TypeError(f"prompt {prompt!r}: an argument must be a name, a mapping or a"
                        f" PromptArgument, not {type(value).__name__}")
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"prompt {prompt!r}: an argument needs a non-empty string name,"
                         f" got {shown(value)}")
    for member in value:
        # A misspelt member would be dropped without a word ("requried": the argument would
        # be listed as optional), as a misspelt tool annotation would.
        if member not in _ARGUMENT_MEMBERS:
            raise ValueError(f"prompt {prompt!r}: argument {name!r} member {shown(member)} is not"
                             f" one of {', '.join(_ARGUMENT_MEMBERS)}")
    optional_text(f"prompt {prompt!r}: argument {name!r} title", value.get("title"))
    optional_text(f"prompt {prompt!r}: argument {name!r} description", value.get("description"))
    flag(f"prompt {prompt!r}: argument {name!r} required", value.get("required", False))
    return PromptArgument(
        name=name,
        description=value.get("description"),
        required=value.get("required", False),
        title=value.get("title"),
    )


@attrs.frozen(kw_only=True)
class ResourceDef:
    """A direct resource: its ``resources/list`` entry and its handler ``(ctx, uri)``."""

    uri: str
    name: str
    description: str | None
    mime_type: str | None
    handler: Callable[..., Any] = attrs.field(repr=False)
    ttl_ms: int = 0
    cache_scope: CacheScope = "private"
    single_use: bool = False
    title: str | None = None
    icons: list[JsonObject] | None = None
    """The ``Icon`` objects given, or ``None``."""
    annotations: JsonObject | None = None
    """The ``Annotations`` members given, or ``None``."""
    size: int | None = None
    """The size of the raw content in bytes, or ``None``."""
    meta: JsonObject | None = None
    """The ``_meta`` given, or ``None``."""

    def to_wire(self) -> JsonObject:
        """The ``Resource`` wire object (``title``, ``icons``, ``annotations``, ``size``
        and ``_meta`` only when given)."""
        return _given({
            "uri": self.uri, "name": self.name, "title": self.title, "icons": self.icons,
            "description": self.description, "mimeType": self.mime_type,
            "annotations": self.annotations, "size": self.size, "_meta": self.meta,
        })


@attrs.frozen(kw_only=True)
class ResourceTemplateDef:
    """A resource template (RFC 6570 level 1: ``{name}`` matches one path segment); its
    handler is ``(ctx, uri, **variables)``."""

    uri_template: str
    name: str
    description: str | None
    mime_type: str | None
    handler: Callable[..., Any] = attrs.field(repr=False)
    ttl_ms: int = 0
    cache_scope: CacheScope = "private"
    single_use: bool = False
    title: str | None = None
    icons: list[JsonObject] | None = None
    """The ``Icon`` objects given, or ``None``."""
    annotations: JsonObject | None = None
    """The ``Annotations`` members given, or ``None``."""
    meta: JsonObject | None = None
    """The ``_meta`` given, or ``None``."""
    _pattern: re.Pattern[str] = attrs.field(alias="pattern", repr=False, eq=False)

    @staticmethod
    def compile(uri_template: str) -> re.Pattern[str]:
        """The regular expression a concrete URI must match for this template."""
        pieces: list[str] = []
        last = 0
        for match in _TEMPLATE_VAR.finditer(uri_template):
            pieces.append(re.escape(uri_template[last:match.start()]))
            pieces.append(f"(?P<{match.group(1)}>[^/?#]+)")
            last = match.end()
        pieces.append(re.escape(uri_template[last:]))
        return re.compile("".join(pieces))

    def match(self, uri: str) -> dict[str, str] | None:
        """The template variables if ``uri`` is an instance of this template."""
        found = self._pattern.fullmatch(uri)
        return None if found is None else found.groupdict()

    def to_wire(self) -> JsonObject:
        """The ``ResourceTemplate`` wire object (``title``, ``icons``, ``annotations`` and
        ``_meta`` only when given)."""
        return _given({
            "uriTemplate": self.uri_template, "name": self.name, "title": self.title,
            "icons": self.icons, "description": self.description, "mimeType": self.mime_type,
            "annotations": self.annotations, "_meta": self.meta,
        })


def resource_uri_problem(uri: str) -> str | None:
    """What is wrong with a URI given to ``@app.resource``, or ``None``.

    Templates are RFC 6570 level 1 (``{name}``, each name once: it becomes a keyword
    argument). Any other brace (``{+path}``, ``{?q}``, ``{1x}``, a lone ``{``) would make
    a URI no read can name (RFC 3986 does not allow braces), so it is refused rather than
    registered as a direct resource.
    """
    if not isinstance(uri, str) or not uri:
        return f"a resource URI must be a non-empty string, not {shown(uri)}"
    rest = _TEMPLATE_VAR.sub("", uri)
    if "{" in rest or "}" in rest:
        return (
            f"resource URI {uri!r}: only {{name}} template variables (RFC 6570 level 1, "
            "names of [A-Za-z0-9_] not starting with a digit) are supported"
        )
    names = template_variables(uri)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        return f"resource template {uri!r} names {', '.join(repeated)} more than once"
    # Resource.uri has format "uri" and ResourceTemplate.uriTemplate "uri-template"
    # (schema.json): clients refuse a listing of one that is not, and a read naming what a
    # template expands to is refused unless it is a URI, its scheme written out.
    if not names:
        return None if is_uri(uri) else f"resource URI {shown(uri)} is not {URI_FORMAT}"
    if ":" not in uri[:uri.index("{")] or not is_uri(_TEMPLATE_VAR.sub("v", uri)):
        return (f"resource template {shown(uri)} does not expand to {URI_FORMAT} (its scheme "
                "is written out, not a variable)")
    return None


def check_resource_handler(handler: Callable[..., Any], uri: str) -> None:
    """Check that ``handler(ctx, uri, **variables)`` can be called for this (template) URI,
    as a read will call it; ``TypeError`` naming the parameters it must take."""
    _check_not_generator(handler, "resource")
    variables = template_variables(uri)
    try:
        inspect.signature(handler).bind(None, None, **dict.fromkeys(variables, ""))
    except TypeError as exc:
        wanted = ", ".join(["ctx", "uri", *variables])
        raise TypeError(
            f"resource handler {handler!r} for {uri!r} must take ({wanted}): {exc}"
        ) from None


def is_template(uri: str) -> bool:
    """Whether a resource URI given to ``@app.resource`` is a template (has ``{var}``)."""
    return _TEMPLATE_VAR.search(uri) is not None


def template_variables(uri_template: str) -> list[str]:
    """The variable names of a URI template, in order."""
    return _TEMPLATE_VAR.findall(uri_template)


@attrs.frozen(kw_only=True)
class Completer:
    """The ``completion/complete`` handler: ``(ref, argument, context) -> values``."""

    handler: Callable[[JsonObject, JsonObject, JsonObject | None], Any] = attrs.field(repr=False)
