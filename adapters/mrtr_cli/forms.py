"""Asking a person, in the terminal, for what an elicitation request wants.

Form mode (digest §1.5, C10): the form says which server is asking, shows every field with its
type, bounds and default, checks each answer against the field's schema (``jsonschema``, formats
included) and asks again when it is wrong, then shows the answers for review before they are
sent. Decline and cancel are offered at every prompt (``:d`` / ``:c``).

URL mode (C10, C11): the whole URL is shown, its domain highlighted, and the person is asked for
consent. This client never opens or fetches the URL: ``accept`` means the person consents to
open it themselves.

Input comes from ``console.input`` (stdin, or the ``stream`` given, which is how tests script it).
End of input cancels the form. Each line is read through the reader set for the calling thread
(:meth:`Prompter.reading_through`): :class:`~mrtr_cli.inputs.Inputs` routes it through the
client's :class:`~mrtr_cli.terminal.Turns` while an input holds the terminal, so a read is given
up when the client cancels that input.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final, Literal, TextIO
from urllib.parse import urlsplit

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from mrtr_cli.safe import clean, plain
from mrtr_core.wire.forms import FormField, FormSpec, Value
from mrtr_core.wire.models import ElicitFormRequest, ElicitResult, ElicitUrlRequest

__all__ = ["Action", "Prompter", "describe_url"]

Action = Literal["accept", "decline", "cancel"]

_DECLINE: Final = frozenset({":d", ":decline"})
_CANCEL: Final = frozenset({":c", ":cancel"})
_OMIT: Final = frozenset({":none", ":skip"})
_YES: Final = frozenset({"y", "yes", "true", "t", "1", "on"})
_NO: Final = frozenset({"n", "no", "false", "f", "0", "off"})
_FORMAT_HINTS: Final = {
    "email": "email address",
    "uri": "URI, e.g. https://example.com/x",
    "date": "date, YYYY-MM-DD",
    "date-time": "date and time, e.g. 2026-07-28T09:30:00Z",
}


class _Leave(Exception):
    """The person declined or cancelled the form."""

    def __init__(self, action: Action) -> None:
        super().__init__(action)
        self.action: Action = action


class _Invalid(ValueError):
    """The typed text could not be read as the field's type."""


_OMITTED: Final = object()


def _read_here(read: Callable[[], str]) -> str:
    return read()


class Prompter:
    """Asks a person for elicitation answers on a rich console.

    Args:
        console: Where forms are shown (a ``Console(file=StringIO())`` in tests).
        stream: Where answers are read from; ``None`` reads stdin.
        server: How to name the server that is asking (C10: show which server asks).
    """

    def __init__(
        self, console: Console, *, stream: TextIO | None = None, server: str = "the server"
    ) -> None:
        self.console = console
        self.stream = stream
        self.server = server
        self._local = threading.local()

    @contextlib.contextmanager
    def reading_through(self, reader: Callable[[Callable[[], str]], str]) -> Iterator[None]:
        """Within the block, this thread's prompts read each line as ``reader(read_line)``
        (outside it, ``read_line()`` right here)."""
        before = getattr(self._local, "reader", _read_here)
        self._local.reader = reader
        try:
            yield
        finally:
            self._local.reader = before

    # --- reading --------------------------------------------------------------------------

    def _read(self, prompt: Text) -> str:
        prompt = prompt.copy()
        prompt.append(" > ", style="bold")
        reader = getattr(self._local, "reader", _read_here)
        line = reader(lambda: self.console.input(prompt, stream=self.stream))
        if self.stream is not None and line == "":
            raise EOFError
        return line.strip()

    def _choose(self, prompt: Text, options: dict[str, str], default: str | None) -> str:
        while True:
            raw = self._read(prompt).lower()
            if not raw and default is not None:
                return default
            if raw in options:
                return options[raw]
            self.console.print(Text(f"  choose one of: {', '.join(sorted(options))}",
                                    style="yellow"))

    # --- form mode ------------------------------------------------------------------------

    def form(self, key: str, request: ElicitFormRequest) -> ElicitResult:
        """Ask for one form. Returns the ``ElicitResult`` to send (accept, decline or cancel).

        Raises:
            FormSchemaError: the form's schema is outside what a form may ask (nothing shown).
        """
        spec = FormSpec.from_schema(request.requested_schema)
        self.console.print(Panel(
            plain(request.message),
            title=Text.assemble((clean(self.server), "bold cyan"), " asks"),
            subtitle=plain(f"input {key}", "dim"),
            title_align="left", subtitle_align="right",
        ))
        required = sum(1 for f in spec.fields if f.required)
        self.console.print(Text(
            f"{len(spec.fields)} field(s), {required} required. Blank keeps the default; "
            ":none leaves an optional field out; :d declines, :c cancels.", style="dim"))
        try:
            content: dict[str, Value] = {}
            while True:
                content = self._fill(spec, content)
                problems = spec.problems(content)
                if problems:
                    for problem in problems:
                        self.console.print(plain(f"  ✗ {problem}", "red"))
                    continue
                self._review(spec, content)
                action = self._choose(
                    Text("Send these answers? [a]ccept, [e]dit, [d]ecline, [c]ancel (a)"),
                    {"a": "accept", "accept": "accept", "e": "edit", "edit": "edit",
                     "d": "decline", "decline": "decline", "c": "cancel", "cancel": "cancel"},
                    "accept",
                )
                if action == "accept":
                    return ElicitResult(action="accept", content=content)
                if action == "decline":
                    return ElicitResult(action="decline")
                if action == "cancel":
                    return ElicitResult(action="cancel")
        except _Leave as leave:
            return ElicitResult(action=leave.action)
        except EOFError:
            self.console.print(Text("(end of input: form cancelled)", style="yellow"))
            return ElicitResult(action="cancel")

    def _fill(self, spec: FormSpec, previous: dict[str, Value]) -> dict[str, Value]:
        content: dict[str, Value] = {}
        for field in spec.fields:
            value = self._field(field, previous.get(field.name, _OMITTED))
            if value is not _OMITTED:
                content[field.name] = value
        return content

    def _field(self, field: FormField, previous: Any) -> Any:
        default = previous if previous is not _OMITTED else (
            field.default if field.has_default else _OMITTED)
        header = Text.assemble(
            (clean(field.name), "bold"), " ",
            (f"({_kind_text(field)}, {'required' if field.required else 'optional'})", "dim"),
        )
        if field.title and field.title != field.name:
            header.append(" ")
            header.append(plain(field.title))
        self.console.print(header)
        if field.description:
            self.console.print(plain(f"  {field.description}", "dim"))
        for index, choice in enumerate(field.choices, 1):
            line = Text(f"  {index}) ")
            line.append(plain(choice.title))
            if choice.title != choice.value:
                line.append(plain(f" [{choice.value}]", "dim"))
            self.console.print(line)
        prompt = Text("  ")
        prompt.append(_prompt_hint(field), style="cyan")
        if default is not _OMITTED:
            prompt.append(" (default: ")
            prompt.append(plain(_show(field, default), "green"))
            prompt.append(")")
        while True:
            raw = self._read(prompt)
            lowered = raw.lower()
            if lowered in _DECLINE:
                raise _Leave("decline")
            if lowered in _CANCEL:
                raise _Leave("cancel")
            if lowered in _OMIT:
                if field.required:
                    self.console.print(Text("  ✗ this field is required", style="red"))
                    continue
                return _OMITTED
            if raw == "":
                if default is not _OMITTED:
                    return default
                if not field.required:
                    return _OMITTED
                if field.kind != "multiselect":
                    self.console.print(Text("  ✗ this field is required", style="red"))
                    continue
            try:
                value = _parse(field, raw)
            except _Invalid as exc:
                self.console.print(plain(f"  ✗ {exc}", "red"))
                continue
            problems = field.problems(value)
            if problems:
                for problem in problems:
                    self.console.print(plain(f"  ✗ {problem}", "red"))
                continue
            return value

    def _review(self, spec: FormSpec, content: dict[str, Value]) -> None:
        table = Table(title="Your answers", title_justify="left", show_header=True)
        table.add_column("field")
        table.add_column("value")
        for field in spec.fields:
            shown = (plain(_show(field, content[field.name])) if field.name in content
                     else Text("(left out)", style="dim"))
            table.add_row(plain(field.label), shown)
        self.console.print(table)

    # --- URL mode -------------------------------------------------------------------------

    def url(self, key: str, request: ElicitUrlRequest) -> ElicitResult:
        """Show the whole URL (domain highlighted) and ask for consent (C10, C11)."""
        shown, notes = describe_url(request.url)
        body = Group(plain(request.message), Text(""), Text.assemble("URL: ", shown),
                     *[Text(f"⚠ {note}", style="yellow") for note in notes])
        self.console.print(Panel(
            body,
            title=Text.assemble((clean(self.server), "bold cyan"), " asks you to open a URL"),
            subtitle=plain(f"input {key}", "dim"),
            title_align="left", subtitle_align="right",
        ))
        self.console.print(Text(
            "mrtr does not open or fetch this URL. Accept only if you will open it yourself "
            "in your browser and you trust the highlighted domain.", style="dim"))
        try:
            action = self._choose(
                Text("Consent? [a]ccept, [d]ecline, [c]ancel"),
                {"a": "accept", "accept": "accept", "d": "decline", "decline": "decline",
                 "c": "cancel", "cancel": "cancel"},
                None,
            )
        except EOFError:
            self.console.print(Text("(end of input: cancelled)", style="yellow"))
            return ElicitResult(action="cancel")
        if action == "accept":
            return ElicitResult(action="accept")
        return ElicitResult(action="decline" if action == "decline" else "cancel")

    # --- yes / no -------------------------------------------------------------------------

    def confirm(self, question: Text, *, default: bool | None = None) -> bool:
        """Ask a yes/no question; end of input answers no."""
        hint = {True: " [Y/n]", False: " [y/N]", None: " [y/n]"}[default]
        prompt = question.copy()
        prompt.append(hint)
        while True:
            try:
                raw = self._read(prompt).lower()
            except EOFError:
                return False
            if not raw and default is not None:
                return default
            if raw in _YES:
                return True
            if raw in _NO:
                return False
            self.console.print(Text("  answer y or n", style="yellow"))


def describe_url(url: str) -> tuple[Text, list[str]]:
    """The URL as text with its host highlighted, and warnings a person should read first."""
    cleaned = clean(url)
    text = Text(cleaned, style="underline")
    notes: list[str] = []
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return text, ["this URL cannot be parsed"]
    if not host:
        notes.append("this URL names no host")
        return text, notes
    span = _host_span(cleaned, host)
    if span is not None:
        text.stylize("bold reverse", *span)
    if parts.scheme != "https" and host not in ("localhost", "127.0.0.1", "::1"):
        notes.append(f"not HTTPS ({clean(parts.scheme) or 'no scheme'})")
    if parts.username is not None:
        notes.append(f"text before '@' is not the domain; the domain is {clean(host)}")
    if "\\" in parts.netloc:
        # WHATWG URL: for http(s) a backslash ends the host like '/', so a browser may open
        # the text before it rather than the domain named here.
        notes.append("the address has a backslash; a browser may read the domain differently")
    if not host.isascii():
        try:
            notes.append(f"international domain; it is spelled {host.encode('idna').decode()}")
        except UnicodeError:
            notes.append("international domain that cannot be spelled in ASCII")
    return text, notes


def _host_span(cleaned: str, host: str) -> tuple[int, int] | None:
    """Where ``host`` (``urlsplit``'s lower-cased hostname) stands in the shown URL.

    Found the way ``urlsplit`` finds it (RFC 3986 §3.2): in the authority after ``//``, past
    the last ``@``, before any port; never a look-alike in the user info or the path. ``None``
    when that text is not the host (the URL held characters ``urlsplit`` drops).
    """
    begin = cleaned.find("//")
    if begin < 0:
        return None
    begin += 2
    end = min((at for at in (cleaned.find(sep, begin) for sep in "/?#") if at >= 0),
              default=len(cleaned))
    start = begin + cleaned[begin:end].rfind("@") + 1
    if cleaned.startswith("[", start):
        start += 1
        stop = cleaned.find("]", start, end)
    else:
        stop = cleaned.find(":", start, end)
    if stop < 0:
        stop = end
    return (start, stop) if cleaned[start:stop].lower() == host else None


def _range(low: float | None, high: float | None, unit: str = "") -> str:
    if low is not None and high is not None:
        return f"{low} to {high}{unit}"
    if low is not None:
        return f"≥ {low}{unit}"
    if high is not None:
        return f"≤ {high}{unit}"
    return ""


def _kind_text(field: FormField) -> str:
    if field.kind == "string":
        base = _FORMAT_HINTS.get(field.format or "", "text")
        span = _range(field.min_length, field.max_length, " chars")
        return f"{base}, {span}" if span else base
    if field.kind in ("number", "integer"):
        base = "whole number" if field.kind == "integer" else "number"
        span = _range(field.minimum, field.maximum)
        return f"{base} {span}" if span else base
    if field.kind == "boolean":
        return "yes/no"
    if field.kind == "select":
        return "choose one"
    span = _range(field.min_items, field.max_items)
    return f"choose any, {span}" if span else "choose any"


def _prompt_hint(field: FormField) -> str:
    if field.kind == "boolean":
        return "y/n"
    if field.kind == "select":
        return f"number 1-{len(field.choices)} or value"
    if field.kind == "multiselect":
        return "numbers or values, comma-separated"
    return "value"


def _show(field: FormField, value: Any) -> str:
    if field.kind == "boolean":
        return "yes" if value else "no"
    if field.kind == "select" and isinstance(value, str):
        return field.title_of(value)
    if field.kind == "multiselect" and isinstance(value, list):
        return ", ".join(field.title_of(v) for v in value) or "(none)"
    return str(value)


# What a typed number may look like: JSON's number grammar (RFC 8259 §6) with ASCII digits,
# an optional ``+`` and a bare fraction (``.5``) allowed. Python's ``int``/``float`` accept
# more: ``1_000``, ``inf``, and digits of every script, none of which a form means.
_NUMBER: Final = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_WHOLE: Final = re.compile(r"[+-]?[0-9]+")
_INDEX: Final = re.compile(r"[0-9]+")


def _pick(field: FormField, token: str) -> str:
    for choice in field.choices:
        if token == choice.value:
            return choice.value
    if _INDEX.fullmatch(token) and 1 <= int(token) <= len(field.choices):
        return field.choices[int(token) - 1].value
    for choice in field.choices:
        if token.casefold() == choice.title.casefold():
            return choice.value
    raise _Invalid(f"{token!r} is not one of the options")


def _parse(field: FormField, raw: str) -> Value:
    """Read typed text as the field's type (range and format are checked by the schema)."""
    if field.kind == "string":
        return raw
    if field.kind == "boolean":
        if raw.lower() in _YES:
            return True
        if raw.lower() in _NO:
            return False
        raise _Invalid("answer y or n")
    if field.kind in ("number", "integer"):
        if _WHOLE.fullmatch(raw):
            try:
                return int(raw)
            except ValueError:  # more digits than sys.get_int_max_str_digits() allows
                raise _Invalid("the number is too long") from None
        if not _NUMBER.fullmatch(raw):
            raise _Invalid(f"{raw!r} is not a number")
        number = float(raw)
        if not math.isfinite(number):
            raise _Invalid("the number must be finite")
        if field.kind == "integer":
            if not number.is_integer():
                raise _Invalid(f"{raw!r} is not a whole number")
            return int(number)
        return number
    if field.kind == "select":
        return _pick(field, raw)
    picked: list[str] = []
    for token in (t.strip() for t in raw.split(",")):
        if token:
            value = _pick(field, token)
            if value not in picked:
                picked.append(value)
    return picked
