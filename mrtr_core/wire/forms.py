"""Elicitation form schemas: parse a ``requestedSchema`` into typed fields, and check
answers against it with ``jsonschema`` (format checking on).

A form-mode ``requestedSchema`` is a flat object of primitive properties (digest §1.5): strings
(with ``format`` email, uri, date or date-time), numbers and integers (``minimum``/``maximum``),
booleans, single selects (``enum``, ``oneOf`` of ``const``/``title``, legacy ``enumNames``) and
multi selects (``array`` of ``items.enum`` or ``items.anyOf``). Both sides use this parser: a
client on the schema the server sent, before showing it to anyone, and a server on each form
its handlers ask, before sending it. Anything outside that vocabulary is refused with
:class:`FormSchemaError`, sizes are bounded, and answers are validated against a copy that
keeps only the known keywords (no ``$ref``, no ``pattern``: nothing a peer could use to make
validation fetch or spin).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias

import attrs
import jsonschema
from referencing import Registry

from mrtr_core.errors import MrtrError

__all__ = [
    "MAX_CHOICES",
    "MAX_FIELDS",
    "NO_DEFAULT",
    "Choice",
    "FieldKind",
    "FormAnswerError",
    "FormField",
    "FormSchemaError",
    "FormSpec",
    "Value",
    "check_requested_schema",
]

MAX_FIELDS: Final = 64
"""Most properties one form may have."""
MAX_CHOICES: Final = 256
"""Most options one select may offer."""
MAX_TEXT: Final = 4096
"""Longest title, description or option accepted from the server (characters)."""

FORMATS: Final = frozenset({"email", "uri", "date", "date-time"})
"""String formats a form may use (digest §1.5, ``StringSchema.format``)."""

FieldKind: TypeAlias = Literal["string", "number", "integer", "boolean", "select", "multiselect"]
Value: TypeAlias = str | int | float | bool | list[str]
"""One answer value (``ElicitResult.content`` values, digest §1.6)."""


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Final = _NoDefault()
"""Marks a field without a (valid) default."""


class FormSchemaError(MrtrError):
    """The server's ``requestedSchema`` is not a form this client can render.

    Attributes:
        field: The property at fault (``""`` for the schema as a whole).
        problem: What is wrong with it, without the field's name.
    """

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(f"requestedSchema.properties.{field}: {message}" if field else
                         f"requestedSchema: {message}")
        self.field = field
        self.problem = message


class FormAnswerError(MrtrError):
    """Answers do not satisfy the form's schema.

    Attributes:
        problems: One readable line per violation, naming the field.
    """

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@attrs.frozen
class Choice:
    """One option of a select: the value sent and the label shown."""

    value: str
    title: str


@attrs.frozen(kw_only=True)
class FormField:
    """One property of a form, checked and typed."""

    name: str
    kind: FieldKind
    required: bool
    title: str | None = None
    description: str | None = None
    default: Any = NO_DEFAULT
    format: str | None = None
    choices: tuple[Choice, ...] = ()
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_length: int | None = None
    max_length: int | None = None
    min_items: int | None = None
    max_items: int | None = None
    schema: dict[str, Any] = attrs.field(factory=dict)
    """The property's schema, reduced to the known validation keywords."""

    @property
    def label(self) -> str:
        """What to call the field when talking to a person."""
        return self.title or self.name

    @property
    def has_default(self) -> bool:
        """Whether the server gave a default that passes the field's own schema."""
        return self.default is not NO_DEFAULT

    def problems(self, value: Any) -> list[str]:
        """Readable violations of this field's schema by ``value`` (empty when valid)."""
        validator = _validator(self.schema)
        return [_describe(self.name, err) for err in validator.iter_errors(value)]

    def title_of(self, value: str) -> str:
        """The label of a select option (the value itself when it has none)."""
        for choice in self.choices:
            if choice.value == value:
                return choice.title
        return value


@attrs.frozen(kw_only=True)
class FormSpec:
    """A form: its fields in the server's order, and the schema answers are checked against."""

    fields: tuple[FormField, ...]
    schema: dict[str, Any]

    @classmethod
    def from_schema(cls, requested_schema: Any) -> FormSpec:
        """Check a ``requestedSchema`` and type its fields.

        Raises:
            FormSchemaError: the schema is not a flat form of the spec's primitive kinds, or
                is too large.
        """
        fields = _read_fields(requested_schema, defaults=True)
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {f.name: f.schema for f in fields},
            "required": [f.name for f in fields if f.required],
        }
        return cls(fields=fields, schema=schema)

    def problems(self, content: Mapping[str, Any]) -> list[str]:
        """Readable violations of the form's schema by ``content`` (empty when valid)."""
        validator = _validator(self.schema)
        return [_describe("", err) for err in validator.iter_errors(dict(content))]

    def check(self, content: Mapping[str, Any]) -> dict[str, Value]:
        """Return ``content`` restricted to the form's fields, or raise if it is invalid.

        Unknown keys are an error too: an answers file naming a field the form lacks is a
        typo more often than not.

        Raises:
            FormAnswerError: listing every violation.
        """
        names = {f.name for f in self.fields}
        problems = [f"{key}: not a field of this form" for key in content if key not in names]
        problems += self.problems(content)
        if problems:
            raise FormAnswerError(problems)
        return {key: value for key, value in content.items() if key in names}


def _read_fields(requested_schema: Any, *, defaults: bool) -> tuple[FormField, ...]:
    """The fields of a ``requestedSchema`` (see :meth:`FormSpec.from_schema`); ``defaults``:
    check each default against its field (one ``jsonschema`` run per default) and keep it."""
    if not isinstance(requested_schema, Mapping) or requested_schema.get("type") != "object":
        raise FormSchemaError("must be an object schema")
    properties = requested_schema.get("properties")
    if not isinstance(properties, Mapping):
        raise FormSchemaError("properties must be an object")
    if len(properties) > MAX_FIELDS:
        raise FormSchemaError(f"has {len(properties)} fields; at most {MAX_FIELDS} are shown")
    required_raw = requested_schema.get("required", [])
    if not isinstance(required_raw, list) or not all(isinstance(r, str) for r in required_raw):
        raise FormSchemaError("required must be an array of strings")
    for name in required_raw:
        if name not in properties:
            raise FormSchemaError(f"required names {name!r}, which is not a property")
    required = set(required_raw)
    return tuple(
        _parse_field(str(name), prop, name in required, defaults=defaults)
        for name, prop in properties.items()
    )


_BARE_TYPES: Final = frozenset({"string", "number", "integer", "boolean"})


def _bare_form(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` is a form :meth:`FormSpec.from_schema` takes, seen without building
    it: within the size limits, every property a bare ``{"type": ...}`` of a primitive kind
    (what ``form(name=bool)`` asks), ``required`` naming properties. ``False`` says nothing."""
    properties = schema.get("properties")
    if type(properties) is not dict or len(properties) > MAX_FIELDS:
        return False
    for prop in properties.values():
        if type(prop) is not dict or len(prop) != 1:
            return False
        kind = prop.get("type")
        # Exact strings only: an unhashable "type" must not reach the set.
        if type(kind) is not str or kind not in _BARE_TYPES:
            return False
    if properties and max(map(len, properties)) > MAX_TEXT:
        return False
    required = schema.get("required")
    if required is None:
        return "required" not in schema and schema.get("type") == "object"
    if type(required) is not list:
        return False
    for name in required:
        if type(name) is not str or name not in properties:
            return False
    return schema.get("type") == "object"


def check_requested_schema(requested_schema: Any) -> None:
    """Check that a form-mode ``requestedSchema`` is one :meth:`FormSpec.from_schema` takes.

    A client checks every form a server sends before any handler sees it (digest §1.5 a:
    a flat object of primitive properties); the common bare fields are checked without
    building the form.

    Raises:
        FormSchemaError: as :meth:`FormSpec.from_schema`.
    """
    if type(requested_schema) is dict and _bare_form(requested_schema):
        return
    # Defaults are not checked: one that fails its field is dropped, never refused, and
    # checking each (64 fields in each of thousands of forms) would cost seconds.
    _read_fields(requested_schema, defaults=False)


# A $ref resolves inside the schema only (nothing is retrieved: jsonschema would fetch its
# URI over the network, with no time limit); the meta-schemas jsonschema carries are found.
_NO_RETRIEVAL: Final = Registry()


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """A validator of ``schema`` that asserts ``format`` and retrieves nothing."""
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
        registry=_NO_RETRIEVAL)


def _describe(prefix: str, err: jsonschema.ValidationError) -> str:
    path = ".".join(str(p) for p in err.absolute_path)
    where = ".".join(p for p in (prefix, path) if p)
    if err.validator == "required":
        return f"{err.message}"
    return f"{where}: {err.message}" if where else err.message


def _text(prop: Mapping[str, Any], key: str, field: str) -> str | None:
    value = prop.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise FormSchemaError(f"{key} must be a string", field=field)
    if len(value) > MAX_TEXT:
        raise FormSchemaError(f"{key} is longer than {MAX_TEXT} characters", field=field)
    return value


def _number(prop: Mapping[str, Any], key: str, field: str) -> int | float | None:
    value = prop.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or (
        isinstance(value, float) and not math.isfinite(value)
    ):
        raise FormSchemaError(f"{key} must be a finite number", field=field)
    return value


def _count(prop: Mapping[str, Any], key: str, field: str) -> int | None:
    value = prop.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FormSchemaError(f"{key} must be a non-negative integer", field=field)
    return value


def _strings(value: Any, key: str, field: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise FormSchemaError(f"{key} must be a non-empty array of strings", field=field)
    if len(value) > MAX_CHOICES:
        raise FormSchemaError(f"{key} has more than {MAX_CHOICES} options", field=field)
    if any(len(v) > MAX_TEXT for v in value):
        raise FormSchemaError(f"{key} has an option longer than {MAX_TEXT} characters",
                              field=field)
    return value


def _titled(value: Any, key: str, field: str) -> tuple[Choice, ...]:
    if not isinstance(value, list) or not value:
        raise FormSchemaError(f"{key} must be a non-empty array", field=field)
    if len(value) > MAX_CHOICES:
        raise FormSchemaError(f"{key} has more than {MAX_CHOICES} options", field=field)
    choices = []
    for option in value:
        if not isinstance(option, Mapping) or not isinstance(option.get("const"), str):
            raise FormSchemaError(f"each {key} option needs a string const", field=field)
        title = option.get("title", option["const"])
        if not isinstance(title, str):
            raise FormSchemaError(f"each {key} option's title must be a string", field=field)
        if len(option["const"]) > MAX_TEXT or len(title) > MAX_TEXT:
            raise FormSchemaError(f"a {key} option is longer than {MAX_TEXT} characters",
                                  field=field)
        choices.append(Choice(option["const"], title))
    return tuple(choices)


def _parse_field(name: str, prop: Any, required: bool, *, defaults: bool) -> FormField:
    if len(name) > MAX_TEXT:
        raise FormSchemaError("property name too long", field=name[:40])
    if not isinstance(prop, Mapping):
        raise FormSchemaError("must be an object", field=name)
    kind_raw = prop.get("type")
    common: dict[str, Any] = {
        "name": name,
        "required": required,
        "title": _text(prop, "title", name),
        "description": _text(prop, "description", name),
    }
    schema: dict[str, Any] = {"type": kind_raw}
    kind: FieldKind
    if kind_raw == "string":
        if "enum" in prop or "oneOf" in prop:
            kind = "select"
            if "oneOf" in prop:
                choices = _titled(prop["oneOf"], "oneOf", name)
            else:
                values = _strings(prop["enum"], "enum", name)
                names = prop.get("enumNames")
                if names is not None:  # LegacyTitledEnumSchema
                    titles = _strings(names, "enumNames", name)
                    if len(titles) != len(values):
                        raise FormSchemaError("enumNames must match enum in length", field=name)
                else:
                    titles = values
                choices = tuple(Choice(v, t) for v, t in zip(values, titles, strict=True))
            schema["enum"] = [c.value for c in choices]
            common["choices"] = choices
        else:
            kind = "string"
            fmt = _text(prop, "format", name)
            if fmt is not None and fmt not in FORMATS:
                raise FormSchemaError(f"unknown format {fmt!r}", field=name)
            common["format"] = fmt
            common["min_length"] = _count(prop, "minLength", name)
            common["max_length"] = _count(prop, "maxLength", name)
            for key, attr in (("format", "format"), ("minLength", "min_length"),
                              ("maxLength", "max_length")):
                if common[attr] is not None:
                    schema[key] = common[attr]
    elif kind_raw in ("number", "integer"):
        kind = "integer" if kind_raw == "integer" else "number"
        common["minimum"] = _number(prop, "minimum", name)
        common["maximum"] = _number(prop, "maximum", name)
        for key in ("minimum", "maximum"):
            if common[key] is not None:
                schema[key] = common[key]
    elif kind_raw == "boolean":
        kind = "boolean"
    elif kind_raw == "array":
        kind = "multiselect"
        items = prop.get("items")
        if not isinstance(items, Mapping):
            raise FormSchemaError("a multi select needs items", field=name)
        if "anyOf" in items:
            choices = _titled(items["anyOf"], "items.anyOf", name)
        elif "enum" in items:
            if items.get("type", "string") != "string":
                raise FormSchemaError("multi select items must be strings", field=name)
            choices = tuple(Choice(v, v) for v in _strings(items["enum"], "items.enum", name))
        else:
            raise FormSchemaError("a multi select needs items.enum or items.anyOf", field=name)
        common["choices"] = choices
        common["min_items"] = _count(prop, "minItems", name)
        common["max_items"] = _count(prop, "maxItems", name)
        schema["items"] = {"type": "string", "enum": [c.value for c in choices]}
        schema["uniqueItems"] = True
        for key, attr in (("minItems", "min_items"), ("maxItems", "max_items")):
            if common[attr] is not None:
                schema[key] = common[attr]
    else:
        raise FormSchemaError(f"unsupported type {kind_raw!r}", field=name)
    field = FormField(kind=kind, schema=schema, **common)
    default = prop.get("default", NO_DEFAULT) if defaults else NO_DEFAULT
    if default is not NO_DEFAULT and not field.problems(default):
        # A default that fails its own field's schema is dropped rather than offered.
        field = attrs.evolve(field, default=default)
    return field
