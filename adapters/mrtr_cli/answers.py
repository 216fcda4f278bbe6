"""Answers without a person: an answers file (``--answers``), ``--yes``, and the demo's filler.

An answers file is JSON mapping each ``inputRequests`` key to either the form's content
(``{"confirm": true}``, sent as ``accept``) or a whole ``ElicitResult``
(``{"action": "decline"}``, ``{"action": "accept", "content": {...}}``). An object whose only
keys are ``action`` (one of accept, decline, cancel) and ``content`` is read as an
``ElicitResult``. Every answer is checked against the form's schema before it is sent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from mrtr_cli.jsoninput import JsonInputError, read_json
from mrtr_core.errors import MrtrError
from mrtr_core.wire.forms import FormAnswerError, FormField, FormSpec, Value
from mrtr_core.wire.models import ElicitResult

__all__ = [
    "MAX_ANSWERS_BYTES",
    "AnswersFileError",
    "auto_content",
    "load_answers",
    "scripted_result",
]

MAX_ANSWERS_BYTES: Final = 1024 * 1024
_ACTIONS: Final = frozenset({"accept", "decline", "cancel"})


class AnswersFileError(MrtrError):
    """The answers file cannot be read or is not a JSON object of objects."""


def load_answers(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read an answers file: ``{key: content}`` or ``{key: ElicitResult}``.

    Raises:
        AnswersFileError: unreadable, too large, not JSON, or not an object of objects.
    """
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_ANSWERS_BYTES:
            raise AnswersFileError(f"{file}: {size} bytes; at most {MAX_ANSWERS_BYTES} allowed")
        data = read_json(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AnswersFileError(f"{file}: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, JsonInputError) as exc:
        raise AnswersFileError(f"{file}: not JSON ({exc})") from exc
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise AnswersFileError(f"{file}: must be a JSON object mapping keys to objects")
    return data


def _is_elicit_result(entry: Mapping[str, Any]) -> bool:
    return entry.get("action") in _ACTIONS and set(entry) <= {"action", "content"}


def scripted_result(spec: FormSpec | None, entry: Mapping[str, Any]) -> ElicitResult:
    """The ``ElicitResult`` an answers-file entry stands for, checked against ``spec``.

    ``spec`` is ``None`` for URL mode, where only an ``action`` makes sense.

    Raises:
        FormAnswerError: the content does not satisfy the form (every problem listed).
    """
    action: Literal["accept", "decline", "cancel"]
    if _is_elicit_result(entry):
        action = entry["action"]
        content = entry.get("content")
    else:
        action, content = "accept", dict(entry)
    if action != "accept":
        return ElicitResult(action=action)
    if spec is None:  # URL mode: accept carries no content (digest §1.6)
        if content:
            raise FormAnswerError(["a URL-mode answer carries no content"])
        return ElicitResult(action="accept")
    if content is None:  # ElicitResult.content is optional: an accept of an empty form
        content = {}
    if not isinstance(content, Mapping):
        raise FormAnswerError(["content must be an object"])
    return ElicitResult(action="accept", content=spec.check(content))


_SAMPLES: Final[dict[str, str]] = {
    "email": "ops@example.com",
    "uri": "https://example.com/",
    "date": "2026-07-28",
    "date-time": "2026-07-28T09:30:00Z",
}


def _sample_string(field: FormField) -> str:
    if field.format in _SAMPLES:
        return _SAMPLES[field.format]
    text = f"demo-{field.name}"
    if field.max_length is not None:
        text = text[: field.max_length]
    if field.min_length is not None and len(text) < field.min_length:
        text = text + "x" * (field.min_length - len(text))
    return text


def _sample_number(field: FormField) -> int | float:
    low, high = field.minimum, field.maximum
    if low is not None:
        # The least integer at or above a fractional minimum.
        return math.ceil(low) if field.kind == "integer" else low
    if high is not None:
        value = min(high, 0)
        # The greatest integer at or below a fractional maximum.
        return math.floor(value) if field.kind == "integer" else value
    return 0


def auto_content(spec: FormSpec, *, fill: bool = False) -> dict[str, Value]:
    """Answer a form without asking: defaults, and ``true`` for booleans (``--yes``).

    With ``fill`` (the demo), every required field without a default gets a plausible value
    too: the first options of a select, the minimum of a number, a sample string that fits
    the format and length. Without ``fill``, such a field is an error.

    Raises:
        FormAnswerError: a required field has no answer, or the result fails the schema.
    """
    content: dict[str, Value] = {}
    missing: list[str] = []
    for field in spec.fields:
        if field.has_default:
            content[field.name] = field.default
        elif field.kind == "boolean":
            content[field.name] = True
        elif not field.required:
            continue
        elif not fill:
            missing.append(f"{field.name}: required, no default (give it in --answers)")
        elif field.kind == "select":
            content[field.name] = field.choices[0].value
        elif field.kind == "multiselect":
            content[field.name] = [c.value for c in field.choices[: field.min_items or 0]]
        elif field.kind in ("number", "integer"):
            content[field.name] = _sample_number(field)
        else:
            content[field.name] = _sample_string(field)
    if missing:
        raise FormAnswerError(missing)
    return spec.check(content)
