"""Compact and canonical JSON text, with the encoder built once.

``json.JSONEncoder.encode`` builds a new C encoder on every call; for the small values the
core encodes several times per round (digests, sealed payloads, size checks) that setup is
most of the cost. These functions keep one C encoder each (no circular-reference markers,
so it holds no state between calls and is safe to share between threads) and give exactly
what ``json.JSONEncoder(...).encode`` gives: the same text and the same ``TypeError`` /
``ValueError``. A value that recurses too deep (or is circular) goes through
``JSONEncoder`` itself, which raises as it would have, except that a value nested deeper
than the interpreter recurses raises ``ValueError`` (:data:`TOO_DEEP`) instead of
``RecursionError``: every caller refuses a value JSON cannot write by catching ``TypeError``
and ``ValueError``, and a too deep value is one of those.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

__all__ = ["TOO_DEEP", "canonical", "compact", "reusable"]

_CANONICAL_ENCODER: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True
)
_COMPACT_ENCODER: Final = json.JSONEncoder(separators=(",", ":"))


TOO_DEEP: Final = "nested too deeply to write as JSON, or circular"
"""The message of the ``ValueError`` for a value nested deeper than the interpreter recurses
(a value that holds itself, for an encoder that does not check for that, is one)."""


def _bounded(encode: Callable[[Any], str]) -> Callable[[Any], str]:
    """``encode``, raising ``ValueError`` where it would raise ``RecursionError``."""

    def bounded(value: Any) -> str:
        try:
            return encode(value)
        except RecursionError:
            raise ValueError(TOO_DEEP) from None

    return bounded


def reusable(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """``encoder.encode`` (for ``indent=None``) with its C encoder built once; a value nested
    too deeply raises ``ValueError`` (:data:`TOO_DEEP`), not ``RecursionError``."""
    indent: Any = encoder.indent
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if indent is not None or make is None:  # indented, or no C accelerator: as it is
        return _bounded(encoder.encode)
    iterencode = make(
        None,  # no markers: a circular value recurses and falls back below
        encoder.default,
        (json.encoder.encode_basestring_ascii if encoder.ensure_ascii
         else json.encoder.encode_basestring),
        None,
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )
    slow = _bounded(encoder.encode)

    def encode(value: Any) -> str:
        try:
            return "".join(iterencode(value, 0))
        except RecursionError:
            return slow(value)  # raises as the encoder does (circular, too deep)

    return encode


canonical: Final = reusable(_CANONICAL_ENCODER)
"""``json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode``."""

compact: Final = reusable(_COMPACT_ENCODER)
"""``json.JSONEncoder(separators=(",", ":")).encode`` (ASCII only, keys in their order)."""
