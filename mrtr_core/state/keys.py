"""The key ring: every key verifies, the active key seals.

Rotation without failed flows, in three steps, each rolled out to every instance before
the next: add the new key (old one still active), make the new key active (old one kept so
tokens it sealed still open), drop the old key once ``ttl + 2 * skew`` of the codec has passed
(a token is accepted until ``skew`` past its expiry, on instance clocks that may differ by up to
``skew``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["MIN_KEY_BYTES", "KeyRing"]

MIN_KEY_BYTES: Final = 32
_KID = re.compile(r"[A-Za-z0-9_-]{1,32}")


class KeyRing:
    """An immutable set of secret keys, by key id, one of them active.

    Args:
        keys: Key id -> secret (at least 32 random bytes). Ids are 1-32 characters of
            ``A-Z a-z 0-9 _ -`` (they appear in every token, in clear).
        active: The id of the key that seals new tokens.

    Raises:
        ValueError: No keys, a bad id, a short key, or an active id not in ``keys``.
        TypeError: ``keys`` is not a mapping, or a key is not ``bytes``.
    """

    __slots__ = ("_active", "_keys")

    def __init__(self, keys: Mapping[str, bytes], *, active: str) -> None:
        if not isinstance(keys, Mapping):
            raise TypeError(f"keys must map key ids to secrets, not {type(keys).__name__}")
        if not keys:
            raise ValueError("a key ring needs at least one key")
        checked: dict[str, bytes] = {}
        for kid, key in keys.items():
            if not isinstance(kid, str) or not _KID.fullmatch(kid):
                raise ValueError(f"key id {kid!r} must be 1-32 characters of A-Za-z0-9_-")
            if not isinstance(key, bytes | bytearray):
                raise TypeError(f"key {kid!r} must be bytes, not {type(key).__name__}")
            if len(key) < MIN_KEY_BYTES:
                raise ValueError(f"key {kid!r} has {len(key)} bytes; at least 32 are required")
            checked[kid] = bytes(key)
        if active not in checked:
            raise ValueError(f"active key {active!r} is not in the ring")
        self._keys: Mapping[str, bytes] = MappingProxyType(checked)
        self._active = active

    @property
    def active(self) -> str:
        """The id of the key that seals."""
        return self._active

    @property
    def ids(self) -> frozenset[str]:
        """Every key id that verifies."""
        return frozenset(self._keys)

    def key(self, kid: str) -> bytes:
        """The secret for ``kid`` (``KeyError`` when it is not in the ring)."""
        return self._keys[kid]

    def items(self) -> list[tuple[str, bytes]]:
        """``(key id, secret)`` pairs."""
        return list(self._keys.items())

    def with_key(self, kid: str, key: bytes, *, activate: bool = False) -> KeyRing:
        """A new ring with ``kid`` added (and made active when ``activate``)."""
        return KeyRing({**self._keys, kid: key}, active=kid if activate else self._active)

    def activate(self, kid: str) -> KeyRing:
        """A new ring with the same keys and ``kid`` active."""
        return KeyRing(self._keys, active=kid)

    def without(self, kid: str) -> KeyRing:
        """A new ring without ``kid`` (which must be in the ring and not the active key)."""
        if kid not in self._keys:
            # Dropping a mistyped id would otherwise leave the old key verifying, unnoticed.
            raise ValueError(f"key {kid!r} is not in the ring")
        if kid == self._active:
            raise ValueError("cannot remove the active key; activate another first")
        return KeyRing({k: v for k, v in self._keys.items() if k != kid}, active=self._active)

    def __repr__(self) -> str:
        return f"KeyRing(ids={sorted(self._keys)!r}, active={self._active!r})"
