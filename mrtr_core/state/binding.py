"""What a sealed ``requestState`` is bound to, and the canonical JSON digests behind it.

A token is only good for the request that minted it: the same method, the same tool or
prompt name (or resource URI), the same arguments, the same principal (S11a, S11c, S16);
the codec adds the audience (the server's identity) and the expiry (S11b).
"""

from __future__ import annotations

import binascii
import hashlib
import json
from collections import OrderedDict
from typing import Any, Final

import attrs

from mrtr_core import jsontext
from mrtr_core._memo import fingerprint, remember
from mrtr_core.wire.models import MrtrParams

__all__ = ["BINDINGS_MAX_ENTRIES", "BINDING_KEY_MAX_SIZE", "Binding", "canonical_json",
           "digest_arguments", "digest_json", "forget_bindings"]

_CANONICAL: Final = jsontext.canonical
_STRING: Final = json.encoder.encode_basestring_ascii  # what the canonical encoder writes
_URLSAFE: Final = bytes.maketrans(b"+/", b"-_")


def _b64url_16(raw: bytes) -> str:
    """16 bytes as base64url without padding (22 characters)."""
    return binascii.b2a_base64(raw, newline=False)[:22].translate(_URLSAFE).decode("ascii")


def _identity_json(identity: list[Any]) -> str:
    """:func:`canonical_json` of a list of strings and ``None`` (the binding identity),
    written directly; anything else goes through the encoder."""
    parts = []
    for item in identity:
        if type(item) is str:
            parts.append(_STRING(item))
        elif item is None:
            parts.append("null")
        else:
            return _CANONICAL(identity)
    return "[" + ",".join(parts) + "]"


def canonical_json(value: Any) -> str:
    """Canonical JSON text: sorted keys, no whitespace, ASCII only.

    ASCII escaping keeps the encoding total (a lone surrogate from a peer escapes instead of
    raising). Used for digests only; sealed payloads are written without sorting.
    """
    return _CANONICAL(value)


def digest_json(value: Any) -> str:
    """SHA-256 of :func:`canonical_json`, first 16 bytes, base64url without padding."""
    return _b64url_16(hashlib.sha256(_CANONICAL(value).encode("ascii")).digest()[:16])


def digest_arguments(arguments: dict[str, Any] | None) -> str:
    """Digest of a request's ``arguments``; absent arguments digest like ``{}``."""
    return digest_json(arguments if arguments is not None else {})


@attrs.frozen(kw_only=True)
class Binding:
    """The request a ``requestState`` belongs to (S11).

    Attributes:
        method: ``tools/call``, ``prompts/get`` or ``resources/read``.
        target: The tool or prompt name, or the resource URI.
        arguments_digest: :func:`digest_arguments` of the request's arguments.
        principal: The authenticated user, or ``None`` for an unauthenticated request.
        tag: SHA-256 over all four (16 bytes, computed once; what the codec seals).
        digest: ``tag`` as base64url text.
    """

    method: str
    target: str
    arguments_digest: str
    principal: str | None = None
    tag: bytes = attrs.field(init=False, repr=False)
    digest: str = attrs.field(init=False)

    @tag.default
    def _tag(self) -> bytes:
        identity = [self.method, self.target, self.arguments_digest, self.principal]
        return hashlib.sha256(_identity_json(identity).encode("ascii")).digest()[:16]

    @digest.default
    def _digest(self) -> str:
        return _b64url_16(self.tag)

    @classmethod
    def for_params(cls, params: MrtrParams, principal: str | None = None) -> Binding:
        """The binding of one incoming (or outgoing) MRTR request.

        Every round of an operation carries the same method, target and arguments, from
        the same principal: a binding built before for the very same values (see
        :data:`BINDINGS_MAX_ENTRIES`) is given again instead of digesting them anew.
        """
        arguments = getattr(params, "arguments", None)
        method: str = params.method  # widened from its Literal: its exact type is checked
        target: str = params.target
        key: tuple[str, str, str | None, bytes | None] | None = None
        if (
            cls is Binding
            and type(method) is str
            and type(target) is str
            and (principal is None or type(principal) is str)
        ):
            key = _memo_key(method, target, principal, arguments)
            if key is not None:
                found = _BINDINGS.get(key)
                if found is not None:
                    return found
        binding = cls(
            method=method,
            target=target,
            arguments_digest=digest_arguments(arguments),
            principal=principal,
        )
        if key is not None:
            remember(_BINDINGS, key, binding, BINDINGS_MAX_ENTRIES)
        return binding


BINDINGS_MAX_ENTRIES: Final = 4096
"""Most bindings :meth:`Binding.for_params` remembers (the oldest goes first): an operation's
later rounds come back after the rounds of every other operation in flight."""
BINDING_KEY_MAX_SIZE: Final = 1024
"""Largest binding remembered: characters of its target and principal and bytes of its
arguments' :mod:`marshal` form together; a larger one is digested every time."""
_BINDINGS: OrderedDict[tuple[str, str, str | None, bytes | None], Binding] = OrderedDict()


def _memo_key(
    method: str, target: str, principal: str | None, arguments: Any
) -> tuple[str, str, str | None, bytes | None] | None:
    """What finds a remembered binding: the strings as they are, and the arguments by their
    :func:`~mrtr_core._memo.fingerprint`; ``None`` for arguments it cannot take and for a
    key too large to keep."""
    room = BINDING_KEY_MAX_SIZE - len(target) - (0 if principal is None else len(principal))
    if arguments is None:
        return (method, target, principal, None) if room >= 0 else None
    raw = fingerprint(arguments, room)
    return None if raw is None else (method, target, principal, raw)


def forget_bindings() -> None:
    """Empty the memo of bindings (benchmarks start from nothing)."""
    _BINDINGS.clear()
