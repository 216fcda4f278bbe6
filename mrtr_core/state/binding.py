"""What a sealed ``requestState`` is bound to, and the canonical JSON digests behind it.

A token is only good for the request that minted it: the same method, the same tool or
prompt name (or resource URI), the same arguments, the same principal (S11a, S11c, S16);
the codec adds the audience (the server's identity) and the expiry (S11b).
"""

from __future__ import annotations

import binascii
import hashlib
import json
from typing import Any, Final

import attrs

from mrtr_core import jsontext
from mrtr_core.wire.models import MrtrParams

__all__ = ["Binding", "canonical_json", "digest_arguments", "digest_json"]

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
        """The binding of one incoming (or outgoing) MRTR request."""
        arguments = getattr(params, "arguments", None)
        return cls(
            method=params.method,
            target=params.target,
            arguments_digest=digest_arguments(arguments),
            principal=principal,
        )
