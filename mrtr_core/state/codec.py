"""Sealing and opening ``requestState`` tokens.

The client must echo ``requestState`` byte for byte and the server must treat it as
attacker-controlled (S9): integrity protection is mandatory when the state steers logic
(S10), and the token is bound to the principal, to a short expiry and to the originating
request (S11). AES-256-GCM (encrypted and authenticated) is the default; HMAC-SHA256
(signed only: the client can read the payload) is the option.

Token format (ASCII only)::

    v1.<kid>.<base64(nonce[12] || AES-GCM(claims) || tag[16])>      mode "aead"
    v1s.<kid>.<base64(nonce[12] || claims || HMAC-SHA256[32])>      mode "hmac"

``<kid>`` names the ring key. The token header ``v1.<kid>.`` (or ``v1s.<kid>.``) is the
AEAD associated data (or the start of the MAC input), so no token can be moved to another
version, mode or key. base64 is the standard alphabet with padding and must be canonical
(one text per byte string). The 12 random bytes from the injected nonce source are the
AES-GCM nonce and also the token id a replay guard remembers. The claims are a fixed
binary header followed by the payload as compact JSON::

    version (1 byte) | iat (float64) | exp (float64) | audience tag (16) | binding tag (16) | JSON

The version byte also names the JSON profile of the payload, so each token is read back
exactly as it was written: ``2`` is UTF-8 JSON written by orjson (the usual case: strings,
finite floats, integers within 64 bits, string keys), ``1`` is ASCII JSON written by the
standard library, used for what orjson does not write (integers beyond 64 bits, non-string
keys, lone surrogates, nesting deeper than 255) and read by the standard library, which
keeps big integers whole where orjson would turn them into floats. Tokens sealed before
profile ``2`` existed are version ``1`` and still open.

Keys are derived once per ring key (HKDF-SHA256, one sub-key per mode) and cipher objects
are cached, so sealing and opening cost one JSON dump or load, one AEAD (or HMAC) call and
one base64 step (SIMD base64 from pybase64). The size limit is checked before any
cryptographic work.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import struct
from collections.abc import Callable
from typing import Any, Final, Literal, TypeAlias

import attrs
import orjson
import pybase64
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mrtr_core import jsontext
from mrtr_core._checks import MAX_SECONDS
from mrtr_core.errors import StateSizeLimitError
from mrtr_core.state.binding import Binding
from mrtr_core.state.errors import StateRejectedError
from mrtr_core.state.keys import KeyRing
from mrtr_core.wire.records import record_maker

__all__ = ["DEFAULT_MAX_STATE_BYTES", "NonceSource", "OpenedState", "StateCodec", "StateMode"]

StateMode: TypeAlias = Literal["aead", "hmac"]
NonceSource: TypeAlias = Callable[[int], bytes]
"""``n -> n random bytes`` (``os.urandom`` in production, a seeded source in tests)."""

DEFAULT_MAX_STATE_BYTES: Final = 65536

_VERSION_STDLIB_JSON: Final = 1
_VERSION_ORJSON: Final = 2
_NONCE_BYTES: Final = 12
_GCM_TAG_BYTES: Final = 16
_HMAC_TAG_BYTES: Final = 32
_PREFIX: Final[dict[str, str]] = {"aead": "v1.", "hmac": "v1s."}
_KDF_INFO: Final = b"mrtr/requestState/v1/"
_AUDIENCE_LABEL: Final = b"mrtr/requestState/audience:"
_CLAIMS = struct.Struct(">Bdd16s16s")

_ENCODE = jsontext.reusable(json.JSONEncoder(separators=(",", ":"), check_circular=False))
_DECODE = json.JSONDecoder().decode
# orjson would write dataclasses, dates, UUIDs and the like as strings; the standard
# library refuses them, and so does the codec: such values go to ``_not_json``.
_ORJSON_OPTIONS: Final = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def _not_json(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

_B64_VALUE: Final = {
    c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
}


@attrs.frozen
class OpenedState:
    """A verified ``requestState``.

    Attributes:
        payload: What was sealed.
        token_id: The token's unique id (for a replay guard).
        issued_at: When it was sealed (the ``now`` given to :meth:`StateCodec.seal`).
        expires_at: ``issued_at + ttl``; the codec still accepts it for ``skew`` seconds
            after that on each instance's own clock, and instance clocks may differ by up
            to ``skew`` too, so a replay guard should remember the id until
            ``expires_at + 2 * skew`` (what the server engine asks of it).
        key_id: The ring key that sealed it.
        binding_digest: The sealed binding tag as base64url text (compare with
            :attr:`Binding.digest`); filled in by :meth:`StateCodec.inspect`.
    """

    payload: dict[str, Any]
    token_id: str
    issued_at: float
    expires_at: float
    key_id: str
    binding_digest: str = ""


# Every field is given, from values _unseal has checked, on every round: no __init__.
_opened: Final[Callable[..., OpenedState]] = record_maker(OpenedState)


def _b64encode(raw: bytes) -> str:
    return pybase64.b64encode_as_string(raw)


def _b64decode(text: str) -> bytes:
    """Strict padded base64: only the canonical encoding of some bytes decodes."""
    if len(text) % 4:
        raise StateRejectedError("malformed", "bad base64 length")
    try:
        raw = pybase64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):  # bad characters or padding; non-ASCII
        raise StateRejectedError("malformed", "bad base64") from None
    # Unused low bits of the last data character must be zero, or two texts would decode
    # to the same bytes (and a changed token would still be accepted).
    if text.endswith("=="):
        if _B64_VALUE[text[-3]] & 0x0F:
            raise StateRejectedError("malformed", "non-canonical base64")
    elif text.endswith("=") and _B64_VALUE[text[-2]] & 0x03:
        raise StateRejectedError("malformed", "non-canonical base64")
    return raw


def _derive(secret: bytes, mode: StateMode) -> bytes:
    return HKDF(
        algorithm=SHA256(), length=32, salt=None, info=_KDF_INFO + mode.encode("ascii")
    ).derive(secret)


def _is_number(value: object) -> bool:
    """An ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, int | float) and not isinstance(value, bool)


class StateCodec:
    """Seals payloads into ``requestState`` tokens and opens them again.

    Args:
        ring: The keys (the active one seals; all of them open).
        audience: This server's identity; tokens sealed for another audience are refused.
        nonce: ``n -> n random bytes``. The core draws no randomness itself: pass
            ``os.urandom`` (or a seeded source in tests).
        mode: ``"aead"`` (AES-256-GCM, default) or ``"hmac"`` (HMAC-SHA256, signed only:
            the client can read the payload and the times, and the binding hash is
            unkeyed, so whoever holds a token can test guesses of its principal and
            arguments against it). Keep secrets out of the state in either mode, and use
            ``"aead"`` when principals must not be guessable from tokens.
        ttl: Seconds a token lives after it is sealed (re-sealed every round); at most 1e9.
        skew: Clock-skew allowance in seconds between instances: a token issued more than
            ``skew`` in the future is refused, and one is accepted until ``exp + skew``;
            at most 1e9.
        max_bytes: Largest token accepted or produced (checked before any crypto).

    Raises:
        ValueError: A bad ``mode``, ``ttl``, ``skew`` or ``max_bytes``, or an empty ``audience``.
        TypeError: ``ring`` is not a :class:`KeyRing`, ``audience`` not a string, or
            ``nonce`` not callable.

    Times are seconds on a clock every instance shares (Unix time in production).
    """

    def __init__(
        self,
        ring: KeyRing,
        *,
        audience: str,
        nonce: NonceSource,
        mode: StateMode = "aead",
        ttl: float = 600.0,
        skew: float = 60.0,
        max_bytes: int = DEFAULT_MAX_STATE_BYTES,
    ) -> None:
        if not isinstance(ring, KeyRing):
            raise TypeError(f"ring must be a KeyRing, not {type(ring).__name__}")
        if mode not in _PREFIX:
            raise ValueError(f"mode must be 'aead' or 'hmac', not {mode!r}")
        # Bounded so that every time derived from them (``exp + 2 * skew``, a replay guard's
        # expiry in milliseconds) stays finite, exact and within a 64-bit integer.
        if not (_is_number(ttl) and 0 < ttl <= MAX_SECONDS):
            raise ValueError(
                f"ttl must be a positive finite number of seconds up to {MAX_SECONDS:g}, "
                f"got {ttl!r}"
            )
        if not (_is_number(skew) and 0 <= skew <= MAX_SECONDS):
            raise ValueError(
                f"skew must be a non-negative finite number of seconds up to {MAX_SECONDS:g}, "
                f"got {skew!r}"
            )
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 64:
            raise ValueError(f"max_bytes must be an integer of at least 64, got {max_bytes!r}")
        if not isinstance(audience, str):
            raise TypeError("audience must be a string")
        if not audience:
            # Every server would share the empty audience: tokens must name the one they are for.
            raise ValueError("audience must not be empty; use this server's identity")
        if not callable(nonce):
            raise TypeError(f"nonce must be a callable n -> n random bytes, got {nonce!r}")
        self._ring = ring
        self._audience = audience
        self._nonce = nonce
        self._mode: StateMode = mode
        self._ttl = float(ttl)
        self._skew = float(skew)
        self._max_bytes = max_bytes
        self._prefix = _PREFIX[mode]
        self._aead: dict[str, AESGCM] = {}
        self._mac_keys: dict[str, bytes] = {}
        self._headers: dict[str, bytes] = {}  # kid -> its token header, the AEAD's AAD
        for kid, secret in ring.items():
            derived = _derive(secret, mode)
            if mode == "aead":
                self._aead[kid] = AESGCM(derived)
            else:
                self._mac_keys[kid] = derived
            self._headers[kid] = f"{self._prefix}{kid}.".encode("ascii")
        self._active = ring.active
        self._active_header = f"{self._prefix}{ring.active}."
        self._active_header_bytes = self._active_header.encode("ascii")
        self._audience_tag = hashlib.sha256(
            _AUDIENCE_LABEL + audience.encode("utf-8", "surrogatepass")
        ).digest()[:16]

    # --- configuration -----------------------------------------------------------------

    @property
    def ring(self) -> KeyRing:
        """The key ring in use."""
        return self._ring

    @property
    def audience(self) -> str:
        """The audience sealed into (and required of) every token."""
        return self._audience

    @property
    def mode(self) -> StateMode:
        """``"aead"`` or ``"hmac"``."""
        return self._mode

    @property
    def ttl(self) -> float:
        """Token lifetime in seconds."""
        return self._ttl

    @property
    def skew(self) -> float:
        """Clock-skew allowance in seconds."""
        return self._skew

    @property
    def max_bytes(self) -> int:
        """Largest token accepted or produced."""
        return self._max_bytes

    def with_ring(self, ring: KeyRing) -> StateCodec:
        """The same codec over another key ring (for rotation)."""
        return StateCodec(
            ring,
            audience=self._audience,
            nonce=self._nonce,
            mode=self._mode,
            ttl=self._ttl,
            skew=self._skew,
            max_bytes=self._max_bytes,
        )

    # --- sealing -------------------------------------------------------------------------

    def sealed_size(self, payload_bytes: int) -> int:
        """Length of the token that sealing ``payload_bytes`` of payload JSON would give."""
        tag = _GCM_TAG_BYTES if self._mode == "aead" else _HMAC_TAG_BYTES
        raw = _NONCE_BYTES + _CLAIMS.size + payload_bytes + tag
        return len(self._active_header) + 4 * ((raw + 2) // 3)

    def seal(self, payload: dict[str, Any], binding: Binding, now: float) -> str:
        """Seal ``payload`` (JSON-able) for the request ``binding`` describes.

        Every call gives a new token (fresh nonce, token id, ``iat`` and ``exp``).
        ``payload`` must be JSON (RFC 8259): NaN and the infinities are not, and come back
        as ``null`` (the server engine refuses them before they reach the codec).

        Raises:
            StateSizeLimitError: The token would be longer than ``max_bytes`` (checked
                before any cryptographic work).
            TypeError, ValueError: ``payload`` is not JSON-able.
        """
        version = _VERSION_ORJSON
        try:
            body = orjson.dumps(payload, option=_ORJSON_OPTIONS, default=_not_json)
        except TypeError:  # beyond orjson's profile (or not JSON at all): the stdlib decides
            version = _VERSION_STDLIB_JSON
            body = _ENCODE(payload).encode("ascii")  # circular or too deep: ValueError
        size = self.sealed_size(len(body))
        if size > self._max_bytes:
            raise StateSizeLimitError(
                f"requestState would be {size} bytes; the limit is {self._max_bytes}",
                limit="max_state_bytes",
                value=self._max_bytes,
            )
        plain = _CLAIMS.pack(version, now, now + self._ttl, self._audience_tag, binding.tag) + body
        nonce = self._nonce(_NONCE_BYTES)
        if len(nonce) != _NONCE_BYTES:
            raise ValueError(f"nonce source returned {len(nonce)} bytes, not {_NONCE_BYTES}")
        header = self._active_header_bytes
        if self._mode == "aead":
            raw = nonce + self._aead[self._active].encrypt(nonce, plain, header)
        else:
            signed = nonce + plain
            raw = signed + hmac.digest(self._mac_keys[self._active], header + signed, "sha256")
        return self._active_header + _b64encode(raw)

    # --- opening -------------------------------------------------------------------------

    def open(self, token: object, binding: Binding, now: float) -> OpenedState:
        """Verify ``token`` for the request ``binding`` describes and return its payload.

        Raises:
            StateRejectedError: With ``reason`` ``too_large``, ``malformed``, ``unknown_key``,
                ``bad_mac``, ``expired`` or ``binding_mismatch``.
        """
        return self._unseal(token, binding.tag, now)

    def inspect(self, token: object, now: float) -> OpenedState:
        """Verify everything but the binding, for operators (``mrtr state inspect``).

        Integrity, key, expiry and audience are checked exactly as :meth:`open` checks
        them; the binding is reported in ``binding_digest`` instead of compared. Never use
        this to serve a request: only :meth:`open` checks what the token is bound to (S11).

        Raises:
            StateRejectedError: As :meth:`open`, except ``binding_mismatch`` for the request.
        """
        return self._unseal(token, None, now)

    def _unseal(self, token: object, binding_tag: bytes | None, now: float) -> OpenedState:
        if not isinstance(token, str):
            raise StateRejectedError("malformed", "requestState is not a string")
        if len(token) > self._max_bytes:  # before any decoding or crypto
            raise StateRejectedError("too_large", f"{len(token)} > {self._max_bytes} bytes")
        prefix = self._prefix
        if not token.startswith(prefix):
            raise StateRejectedError("malformed", "unknown version or mode")
        start = len(prefix)
        dot = token.find(".", start)
        if dot < 0:
            raise StateRejectedError("malformed", "no key id")
        kid = token[start:dot]
        header = self._headers.get(kid)
        if header is None:
            raise StateRejectedError("unknown_key", f"key id {kid[:40]!r}")
        raw = _b64decode(token[dot + 1 :])
        if self._mode == "aead":
            if len(raw) < _NONCE_BYTES + _GCM_TAG_BYTES:
                raise StateRejectedError("malformed", "too short")
            nonce = raw[:_NONCE_BYTES]
            try:
                plain = self._aead[kid].decrypt(nonce, raw[_NONCE_BYTES:], header)
            except InvalidTag:
                raise StateRejectedError("bad_mac", "authentication failed") from None
        else:
            if len(raw) < _NONCE_BYTES + _HMAC_TAG_BYTES:
                raise StateRejectedError("malformed", "too short")
            signed, tag = raw[:-_HMAC_TAG_BYTES], raw[-_HMAC_TAG_BYTES:]
            expected = hmac.digest(self._mac_keys[kid], header + signed, "sha256")
            if not hmac.compare_digest(tag, expected):
                raise StateRejectedError("bad_mac", "signature mismatch")
            nonce = signed[:_NONCE_BYTES]
            plain = signed[_NONCE_BYTES:]
        # Everything below was sealed by a ring key: its shape is still checked.
        if len(plain) < _CLAIMS.size:
            raise StateRejectedError("malformed", "claims too short")
        version, iat, exp, audience_tag, sealed_binding = _CLAIMS.unpack_from(plain)
        if version != _VERSION_ORJSON and version != _VERSION_STDLIB_JSON:
            raise StateRejectedError("malformed", f"claims version {version}")
        # Accept-conditions stated positively so a NaN never passes.
        if not iat <= now + self._skew:
            raise StateRejectedError("expired", "issued in the future beyond the skew")
        if not now < exp + self._skew:
            raise StateRejectedError("expired", "past its expiry")
        # Digests compared in constant time, as the MAC is (the binding covers the principal
        # and arguments).
        if not hmac.compare_digest(audience_tag, self._audience_tag):
            raise StateRejectedError("binding_mismatch", "audience")
        if binding_tag is not None and not hmac.compare_digest(sealed_binding, binding_tag):
            raise StateRejectedError("binding_mismatch", "method, target, arguments or principal")
        try:
            if version == _VERSION_ORJSON:
                payload = orjson.loads(plain[_CLAIMS.size :])
            else:
                payload = _DECODE(plain[_CLAIMS.size :].decode("ascii"))
        except (UnicodeDecodeError, ValueError, RecursionError):  # JSONDecodeError is a ValueError
            raise StateRejectedError("malformed", "payload is not JSON") from None
        if not isinstance(payload, dict):
            raise StateRejectedError("malformed", "payload is not an object")
        digest = "" if binding_tag is not None else (
            base64.urlsafe_b64encode(sealed_binding).rstrip(b"=").decode("ascii")
        )
        return _opened(payload, _b64encode(nonce), iat, exp, kid, digest)
