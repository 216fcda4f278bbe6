"""Question digests, memoised by exact content.

A handler runs again from the top on every round, so it builds and asks the same questions
again: the ``confirm`` of round 1 is asked once more in rounds 2 and 3 to find its recorded
answer. Each ask needs the question's digest (SHA-256 of its canonical JSON), which pins an
answer to the exact question it answers. :class:`QuestionDigests` remembers the digests of
recent form and sampling questions so that asking an unchanged one again costs a dictionary
lookup and one equality test instead of an encoding and a hash.

Exactness. An entry is found by the question's scalar fields (the form's message; the
sampling request's ``maxTokens`` and system prompt), which must be of their exact types,
and a fingerprint of its structured part (``requestedSchema``; sampling ``messages``): its
:mod:`marshal` bytes (format 2, which writes no back-references, so the bytes depend on
content alone). Those bytes tell ``1``, ``1.0`` and ``True`` apart, and ``dict``, ``list``,
``str``, numbers and ``None`` of the built-in types only (anything else, a ``str`` subclass
say, cannot be marshalled and is digested every time), so equal bytes mean equal canonical
JSON and a hit gives the digest :func:`question_digest` computes. Questions with ``extra``
members, questions of other kinds, and questions too large to keep are digested every time.

Size. A question is asked again in its operation's later rounds, seconds apart (a person
answers in between), and a server interleaves the rounds of every operation in flight: the
memo keeps the questions of about a thousand such operations. Each entry's key holds at
most 1 KiB of text and bytes, so the memo stays within a few MiB.

On a miss the canonical text of the question is put together from the canonical text of its
structured part (which the memo needs anyway) instead of encoding the question again: the
members of these two shapes are few and fixed, so their sorted order is known. That part
text is itself remembered by the part's fingerprint (equal bytes, equal canonical JSON) for
forms: a handler asks the same form of every operation with a message naming the operation,
so the question is new but its schema is not (sampling messages carry the text that
changes, so theirs is not kept).
"""

from __future__ import annotations

import binascii
import hashlib
import json
from collections import OrderedDict
from typing import Any, Final

from mrtr_core import jsontext
from mrtr_core._memo import fingerprint as content_fingerprint
from mrtr_core._memo import remember
from mrtr_core.state.binding import digest_json
from mrtr_core.wire.converter import unstructure_input_request
from mrtr_core.wire.models import (
    CreateMessageRequest,
    ElicitFormRequest,
    InputRequest,
    JsonObject,
)

__all__ = ["SHARED_DIGESTS", "QuestionDigests", "question_digest"]

# A question that names its operation comes back only in that operation's later rounds, and
# the server keeps nothing per operation between them (digest §2.1): the memo must hold the
# questions of every operation still being answered, a few each.
_DEFAULT_SIZE: Final = 4096
# Most characters of a question's text (the form's message, the system prompt) and bytes of
# its structured part's marshal form, together, that an entry's key holds: a larger question
# is digested every time.
_MAX_KEY_SIZE: Final = 1024
_CANONICAL: Final = jsontext.canonical
_STRING: Final = json.encoder.encode_basestring_ascii  # how the canonical encoder writes str
_URLSAFE: Final = bytes.maketrans(b"+/", b"-_")

_FORM_HEAD: Final = '{"method":"elicitation/create","params":{"message":'
_FORM_MID: Final = ',"mode":"form","requestedSchema":'
_SAMPLE_HEAD: Final = '{"method":"sampling/createMessage","params":{"maxTokens":'
_TAIL: Final = "}}"


def question_digest(wire: JsonObject) -> str:
    """The digest an answer is pinned to: canonical JSON of the exact question."""
    return digest_json(wire)


def _digest_text(text: str) -> str:
    """:func:`~mrtr_core.state.binding.digest_json` of a value whose canonical JSON is
    ``text``."""
    raw = hashlib.sha256(text.encode("ascii")).digest()[:16]
    return binascii.b2a_base64(raw, newline=False)[:22].translate(_URLSAFE).decode("ascii")


class QuestionDigests:
    """A bounded memo ``question -> digest`` by exact content (see the module docstring).

    Args:
        max_entries: Most questions remembered; the oldest goes first.

    Attributes:
        hits: Digests found in the memo.
        misses: Digests computed.
    """

    __slots__ = ("_entries", "_max", "_parts", "hits", "misses")

    def __init__(self, max_entries: int = _DEFAULT_SIZE) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max = max_entries
        self._entries: OrderedDict[tuple[Any, ...], str] = OrderedDict()
        self._parts: OrderedDict[bytes, str] = OrderedDict()  # fingerprint -> part's text
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()
        self._parts.clear()

    def digest(self, request: InputRequest) -> tuple[str, JsonObject | None]:
        """``(digest, wire)`` of ``request``, the same as ``question_digest(wire)`` for
        ``wire = unstructure_input_request(request)``. ``wire`` is ``None`` when it was not
        needed to find the digest (build it when the question is to be sent)."""
        kind = type(request)
        key: tuple[Any, ...] | None = None
        part: Any = None
        text = ""  # the key's text member, counted in its size
        if kind is ElicitFormRequest:
            assert isinstance(request, ElicitFormRequest)
            extra = request.extra
            if type(request.message) is str and type(extra) is dict and not extra:
                key = ("form", request.message)
                part = request.requested_schema
                text = request.message
        elif kind is CreateMessageRequest:
            assert isinstance(request, CreateMessageRequest)
            prompt = request.system_prompt
            extra = request.extra
            if (
                type(request.max_tokens) is int
                and (prompt is None or type(prompt) is str)
                and type(extra) is dict
                and not extra
            ):
                key = ("sample", request.max_tokens, prompt)
                part = request.messages
                text = prompt or ""
        if key is None:
            self.misses += 1
            wire = unstructure_input_request(request)
            return digest_json(wire), wire
        # Not of the built-in types, nested too deep or too large to keep: not remembered.
        fingerprint = content_fingerprint(part, _MAX_KEY_SIZE - len(text))
        entries = self._entries
        if fingerprint is not None:
            key = (*key, fingerprint)
            found = entries.get(key)
            if found is not None:
                self.hits += 1
                return found, None
        self.misses += 1
        # Only form schemas repeat across questions often enough to be worth keeping.
        part_key = fingerprint if key[0] == "form" else None
        part_text = None if part_key is None else self._parts.get(part_key)
        if part_text is None:
            try:
                part_text = _CANONICAL(part)
            except (TypeError, ValueError):  # not JSON: the usual path raises as it always did
                wire = unstructure_input_request(request)
                return digest_json(wire), wire
            if part_key is not None:
                remember(self._parts, part_key, part_text, self._max)
        if key[0] == "form":
            text = _FORM_HEAD + _STRING(key[1]) + _FORM_MID + part_text + _TAIL
        else:
            text = _SAMPLE_HEAD + repr(key[1]) + ',"messages":' + part_text
            if key[2] is not None:
                text += ',"systemPrompt":' + _STRING(key[2])
            text += _TAIL
        digest = _digest_text(text)
        if fingerprint is not None:
            remember(entries, key, digest, self._max)
        return digest, None


SHARED_DIGESTS: Final = QuestionDigests()
"""The memo every :class:`~mrtr_core.server.Context` uses (a pure function's memo, shared
by every engine in the process; ``SHARED_DIGESTS.clear()`` empties it)."""
