"""Making the server's text safe to show in a terminal.

Every string that comes from the peer (messages, titles, URLs, results) is shown as a rich
``Text`` (never parsed as markup) after control characters are made visible, so a server
cannot move the cursor, change colours, or hide part of a URL.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Final

from rich.highlighter import JSONHighlighter
from rich.text import Text

__all__ = ["clean", "plain", "plain_json"]

_KEEP: Final = frozenset("\n\t")


def clean(value: object, *, limit: int | None = None) -> str:
    """``value`` as a string with every control or format character, line or paragraph
    separator and lone surrogate (which no terminal encoding can write) shown as ``\\uXXXX``.

    Newlines and tabs are kept. ``limit`` cuts the text to that many characters (adding "…").
    """
    text = value if isinstance(value, str) else str(value)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    out = []
    for ch in text:
        if ch in _KEEP:
            out.append(ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def plain(value: object, style: str = "", *, limit: int | None = None) -> Text:
    """A rich ``Text`` of the cleaned value (never interpreted as markup)."""
    return Text(clean(value, limit=limit), style=style)


def plain_json(value: object) -> Text:
    """``value`` as indented JSON, highlighted, with its strings cleaned as :func:`clean`
    cleans them: each character it escapes is written as the JSON escape of itself, so the
    text still reads as the same JSON value."""
    return _JSON_HIGHLIGHTER(plain(json.dumps(value, indent=2, ensure_ascii=False)))


_JSON_HIGHLIGHTER: Final = JSONHighlighter()
