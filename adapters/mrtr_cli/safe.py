"""Making the server's text safe to show in a terminal.

Every string that comes from the peer (messages, titles, URLs, results) is shown as a rich
``Text`` (never parsed as markup) after control characters are made visible, so a server
cannot move the cursor, change colours, or hide part of a URL.
"""

from __future__ import annotations

import unicodedata
from typing import Final

from rich.text import Text

__all__ = ["clean", "plain"]

_KEEP: Final = frozenset("\n\t")


def clean(value: object, *, limit: int | None = None) -> str:
    """``value`` as a string with every control or format character shown as ``\\uXXXX``.

    Newlines and tabs are kept. ``limit`` cuts the text to that many characters (adding "…").
    """
    text = value if isinstance(value, str) else str(value)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    out = []
    for ch in text:
        if ch in _KEEP:
            out.append(ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def plain(value: object, style: str = "", *, limit: int | None = None) -> Text:
    """A rich ``Text`` of the cleaned value (never interpreted as markup)."""
    return Text(clean(value, limit=limit), style=style)
