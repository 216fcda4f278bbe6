"""The requestState codec: format, modes, key ring, expiry, binding, size, wire error."""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json
import struct
from dataclasses import dataclass
from typing import Any

import pytest
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from server_helpers import KEY1, KEY2, T0, make_codec, seeded_nonce

from mrtr_core.errors import StateSizeLimitError
from mrtr_core.state import (
    Binding,
    KeyRing,
    StateCodec,
    StateRejectedError,
    canonical_json,
    digest_arguments,
)
from mrtr_core.wire import structure_params

BINDING = Binding(method="tools/call", target="deploy", arguments_digest=digest_arguments({"v": 1}))


@dataclass
class Point:
    x: int
    y: int


B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _raw(token: str) -> bytes:
    """Lenient decoding of a token's body (what a sloppy decoder would accept)."""
    return base64.b64decode(token.split(".", 2)[2])


@pytest.mark.parametrize("mode", ["aead", "hmac"])
def test_seal_then_open_round_trips(mode: str) -> None:
    codec = make_codec(mode=mode)
    payload = {"n": 1, "text": "héllo \ud800", "nested": {"list": [1, 2.5, None, True]}}
    token = codec.seal(payload, BINDING, T0)
    assert token.isascii()
    opened = codec.open(token, BINDING, T0 + 1)
    assert opened.payload == payload
    assert opened.issued_at == T0 and opened.expires_at == T0 + 600
    assert opened.key_id == "k1"


def test_token_format() -> None:
    aead = make_codec().seal({"a": 1}, BINDING, T0)
    hmac_token = make_codec(mode="hmac").seal({"a": 1}, BINDING, T0)
    assert aead.startswith("v1.k1.") and hmac_token.startswith("v1s.k1.")
    for token in (aead, hmac_token):
        body = token.split(".", 2)[2]
        assert set(body) <= set(B64 + "=") and len(body) % 4 == 0
    # aead: nonce(12) + ciphertext + tag(16), payload unreadable
    assert b'"a"' not in _raw(aead)
    assert len(_raw(aead)) == 12 + 49 + len(b'{"a":1}') + 16
    # hmac: nonce(12) + claims header(49) + payload JSON + tag(32), readable but signed
    raw = _raw(hmac_token)
    version, iat, exp, audience_tag, binding_tag = struct.unpack(">Bdd16s16s", raw[12:61])
    assert (version, iat, exp, binding_tag) == (2, T0, T0 + 600, BINDING.tag)
    assert audience_tag == hashlib.sha256(b"mrtr/requestState/audience:deploy-server").digest()[:16]
    assert json.loads(raw[61:-32]) == {"a": 1}


def _profile(token: str) -> int:
    """The claims version byte of an HMAC-mode token (it names the payload's JSON profile)."""
    return _raw(token)[12]


@pytest.mark.parametrize(
    ("payload", "profile"),
    [
        ({"text": "héllo", "n": [1, 2.5, None, True, -(2**63)], "d": {"e": {}}}, 2),
        ({"big": 2**70}, 1),  # beyond 64 bits: written and read by the standard library
        ({"neg": -(2**64)}, 1),
        ({"lone": "\ud800"}, 1),
        ({1: "int key", "s": (1, 2)}, 1),  # non-string keys: as json.dumps writes them
        ({"deep": json.loads("[" * 300 + "]" * 300)}, 1),
    ],
)
def test_each_payload_comes_back_exactly_as_json_would_give_it(
    payload: dict[str, Any], profile: int
) -> None:
    codec = make_codec(mode="hmac")
    token = codec.seal(payload, BINDING, T0)
    assert _profile(token) == profile
    opened = codec.open(token, BINDING, T0)
    assert opened.payload == json.loads(json.dumps(payload))
    big = opened.payload.get("big")
    assert big is None or (type(big) is int and big == 2**70)  # never turned into a float


@pytest.mark.parametrize("value", [datetime.datetime(2026, 1, 1), Point(1, 2), {1, 2}, object()])
def test_values_json_cannot_write_are_refused(value: object) -> None:
    with pytest.raises(TypeError):
        make_codec().seal({"v": value}, BINDING, T0)


def _forge(codec_key: bytes, version: int, body: bytes) -> str:
    """An HMAC-mode token signed with the ring's own key (what only a key holder can make)."""
    derived = HKDF(SHA256(), 32, None, b"mrtr/requestState/v1/hmac").derive(codec_key)
    audience = hashlib.sha256(b"mrtr/requestState/audience:deploy-server").digest()[:16]
    signed = bytes(12) + struct.pack(">Bdd16s16s", version, T0, T0 + 600, audience, BINDING.tag)
    signed += body
    header = b"v1s.k1."
    raw = signed + hmac.digest(derived, header + signed, "sha256")
    return header.decode() + base64.b64encode(raw).decode()


def test_forging_helper_matches_the_codec() -> None:
    opened = make_codec(mode="hmac").open(_forge(KEY1, 2, b'{"a":1}'), BINDING, T0)
    assert opened.payload == {"a": 1}
    assert make_codec(mode="hmac").open(_forge(KEY1, 1, b'{"a":1}'), BINDING, T0).payload == {
        "a": 1
    }


@pytest.mark.parametrize(
    ("version", "body"),
    [
        (3, b'{"a":1}'),  # unknown profile
        (0, b'{"a":1}'),
        (2, b'{"a":\xff}'),  # not UTF-8
        (2, b'{"a":NaN}'),  # not JSON
        (2, b'[1]'),  # not an object
        (1, b'{"a":"\xc3\xa9"}'),  # profile 1 is ASCII only
        (2, b""),
    ],
)
def test_signed_but_malformed_claims_are_refused(version: int, body: bytes) -> None:
    with pytest.raises(StateRejectedError) as info:
        make_codec(mode="hmac").open(_forge(KEY1, version, body), BINDING, T0)
    assert info.value.reason == "malformed"


def test_every_seal_is_a_new_token_with_a_new_id() -> None:
    codec = make_codec()
    t1, t2 = codec.seal({"a": 1}, BINDING, T0), codec.seal({"a": 1}, BINDING, T0)
    assert t1 != t2
    assert codec.open(t1, BINDING, T0).token_id != codec.open(t2, BINDING, T0).token_id


def test_modes_do_not_open_each_other() -> None:
    aead, hmac_codec = make_codec(), make_codec(mode="hmac")
    with pytest.raises(StateRejectedError) as info:
        hmac_codec.open(aead.seal({}, BINDING, T0), BINDING, T0)
    assert info.value.reason == "malformed"
    with pytest.raises(StateRejectedError) as info:
        aead.open(hmac_codec.seal({}, BINDING, T0), BINDING, T0)
    assert info.value.reason == "malformed"


def test_key_ring_rotation_and_retirement() -> None:
    ring1 = KeyRing({"k1": KEY1}, active="k1")
    old = make_codec(ring1).seal({"x": 1}, BINDING, T0)
    ring12 = ring1.with_key("k2", KEY2, activate=True)
    rotated = make_codec(ring12)
    assert rotated.open(old, BINDING, T0).payload == {"x": 1}  # old key still verifies
    new = rotated.seal({"x": 2}, BINDING, T0)
    assert new.startswith("v1.k2.")
    retired = make_codec(ring12.without("k1"))
    with pytest.raises(StateRejectedError) as info:
        retired.open(old, BINDING, T0)
    assert info.value.reason == "unknown_key"
    assert retired.open(new, BINDING, T0).payload == {"x": 2}


def test_same_kid_with_another_secret_is_bad_mac() -> None:
    token = make_codec().seal({}, BINDING, T0)
    other = make_codec(KeyRing({"k1": KEY2}, active="k1"))
    with pytest.raises(StateRejectedError) as info:
        other.open(token, BINDING, T0)
    assert info.value.reason == "bad_mac"


def test_expiry_and_skew() -> None:
    codec = make_codec(ttl=100.0, skew=5.0)
    token = codec.seal({}, BINDING, T0)
    assert codec.open(token, BINDING, T0 + 104.999).payload == {}
    with pytest.raises(StateRejectedError) as info:
        codec.open(token, BINDING, T0 + 105)
    assert info.value.reason == "expired"
    # Issued in the future: fine within the skew, refused beyond it.
    assert codec.open(token, BINDING, T0 - 5).payload == {}
    with pytest.raises(StateRejectedError) as info:
        codec.open(token, BINDING, T0 - 5.001)
    assert info.value.reason == "expired"


@pytest.mark.parametrize(
    "other",
    [
        Binding(method="prompts/get", target="deploy", arguments_digest=BINDING.arguments_digest),
        Binding(method="tools/call", target="undeploy", arguments_digest=BINDING.arguments_digest),
        Binding(method="tools/call", target="deploy", arguments_digest=digest_arguments({"v": 2})),
        Binding(
            method="tools/call",
            target="deploy",
            arguments_digest=BINDING.arguments_digest,
            principal="alice",
        ),
    ],
)
def test_binding_mismatch(other: Binding) -> None:
    codec = make_codec()
    with pytest.raises(StateRejectedError) as info:
        codec.open(codec.seal({}, BINDING, T0), other, T0)
    assert info.value.reason == "binding_mismatch"


def test_audience_mismatch() -> None:
    token = make_codec(audience="a").seal({}, BINDING, T0)
    with pytest.raises(StateRejectedError) as info:
        make_codec(audience="b").open(token, BINDING, T0)
    assert info.value.reason == "binding_mismatch"


def test_binding_for_params_digests_arguments_canonically() -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    a = structure_params(
        "tools/call", {"name": "t", "arguments": {"x": 1, "y": [1, 2]}, "_meta": meta}
    )
    b = structure_params(
        "tools/call", {"name": "t", "arguments": {"y": [1, 2], "x": 1}, "_meta": meta}
    )
    none = structure_params("tools/call", {"name": "t", "_meta": meta})
    empty = structure_params("tools/call", {"name": "t", "arguments": {}, "_meta": meta})
    assert Binding.for_params(a) == Binding.for_params(b)
    assert Binding.for_params(none) == Binding.for_params(empty)
    assert Binding.for_params(a, "p").digest != Binding.for_params(a).digest
    assert canonical_json({"b": 1, "a": "\ud800"}) == '{"a":"\\ud800","b":1}'


def test_size_limit_is_checked_before_any_crypto() -> None:
    calls: list[int] = []

    def nonce(n: int) -> bytes:
        calls.append(n)
        return bytes(n)

    ring = KeyRing({"k1": KEY1}, active="k1")
    codec = StateCodec(ring, audience="s", nonce=nonce, max_bytes=512)
    with pytest.raises(StateSizeLimitError):
        codec.seal({"blob": "x" * 600}, BINDING, T0)
    assert calls == []  # refused before drawing a nonce or encrypting
    with pytest.raises(StateRejectedError) as info:
        codec.open("v1.k1." + "A" * 600, BINDING, T0)
    assert info.value.reason == "too_large"
    with pytest.raises(StateRejectedError) as info:
        codec.open("not even a token" * 100, BINDING, T0)
    assert info.value.reason == "too_large"
    token = codec.seal({"blob": "x" * 200}, BINDING, T0)
    assert len(token) <= 512


def test_sealed_size_predicts_the_token_length() -> None:
    for mode in ("aead", "hmac"):
        codec = make_codec(mode=mode)
        for n in range(40):
            payload = {"p": "x" * n}
            token = codec.seal(payload, BINDING, T0)
            assert codec.sealed_size(len(json.dumps(payload, separators=(",", ":")))) == len(token)


def test_wire_error_never_shows_the_reason() -> None:
    error = StateRejectedError("bad_mac", "secret detail")
    assert error.to_error_object() == {
        "code": -32602,
        "message": "Invalid or expired requestState",
        "data": {"reason": "invalid_request_state"},
    }
    assert error.reason == "bad_mac"
    assert "secret detail" in str(error)


@pytest.mark.parametrize("value", [None, 42, b"v1.k1.AAAA", ["v1"]])
def test_non_string_state_is_malformed(value: Any) -> None:
    with pytest.raises(StateRejectedError) as info:
        make_codec().open(value, BINDING, T0)
    assert info.value.reason == "malformed"


def test_non_canonical_base64_is_refused() -> None:
    codec = make_codec()
    # A payload size whose encoding ends with padding, so the last character has unused bits.
    token = next(
        t for n in range(3) if (t := codec.seal({"abc": "x" * n}, BINDING, T0)).endswith("=")
    )
    last = -3 if token.endswith("==") else -2
    twin_char = B64[B64.index(token[last]) | 1]
    assert twin_char != token[last]
    twin = token[:last] + twin_char + token[last + 1 :]
    # A lenient decoder reads both texts as the same bytes: only the canonical check refuses.
    assert _raw(twin) == _raw(token)
    with pytest.raises(StateRejectedError) as info:
        codec.open(twin, BINDING, T0)
    assert info.value.reason == "malformed"
    # Whitespace or missing padding are other aliases a lenient decoder would accept.
    for alias in (token[:20] + "\n" + token[20:], token.rstrip("=")):
        with pytest.raises(StateRejectedError):
            codec.open(alias, BINDING, T0)


def test_key_ring_validation() -> None:
    with pytest.raises(ValueError):
        KeyRing({}, active="k1")
    with pytest.raises(ValueError):
        KeyRing({"k1": b"short"}, active="k1")
    with pytest.raises(ValueError):
        KeyRing({"bad.id": KEY1}, active="bad.id")
    with pytest.raises(ValueError):
        KeyRing({"k1": KEY1}, active="k2")
    with pytest.raises(TypeError):
        KeyRing({"k1": "a string key of more than 32 chars!!"}, active="k1")  # type: ignore[dict-item]
    ring = KeyRing({"k1": KEY1, "k2": KEY2}, active="k1")
    with pytest.raises(ValueError):
        ring.without("k1")
    assert ring.activate("k2").active == "k2"
    assert ring.ids == {"k1", "k2"}
    assert "KEY" not in repr(ring) and repr(ring) == "KeyRing(ids=['k1', 'k2'], active='k1')"


def test_codec_validation() -> None:
    ring = KeyRing({"k1": KEY1}, active="k1")
    for bad in (
        {"mode": "rsa"},
        {"ttl": 0.0},
        {"ttl": float("inf")},
        {"skew": -1.0},
        {"max_bytes": 10},
    ):
        with pytest.raises(ValueError):
            StateCodec(ring, audience="s", nonce=seeded_nonce(1), **bad)  # type: ignore[arg-type]
    short = StateCodec(ring, audience="s", nonce=lambda n: b"\x00" * (n - 1))
    with pytest.raises(ValueError, match="nonce"):
        short.seal({}, BINDING, T0)
    rotated = make_codec().with_ring(ring.with_key("k2", KEY2, activate=True))
    assert rotated.seal({}, BINDING, T0).startswith("v1.k2.")


@pytest.mark.parametrize("mode", ["aead", "hmac"])
def test_inspect_reports_the_binding_without_checking_it(mode: str) -> None:
    codec = make_codec(mode=mode)
    token = codec.seal({"step": 2}, BINDING, T0)
    inspected = codec.inspect(token, T0 + 1)
    assert inspected.payload == {"step": 2}
    assert inspected.binding_digest == BINDING.digest
    assert codec.open(token, BINDING, T0 + 1).binding_digest == ""


@pytest.mark.parametrize(
    ("change", "reason"),
    [("tamper", "bad_mac"), ("expire", "expired"), ("audience", "binding_mismatch")],
)
def test_inspect_still_checks_integrity_expiry_and_audience(change: str, reason: str) -> None:
    codec = make_codec()
    token = codec.seal({"step": 2}, BINDING, T0)
    now = T0 + 1
    if change == "tamper":
        body = token.split(".", 2)[2]
        token = token[: -len(body)] + ("B" if body[0] == "A" else "A") + body[1:]
    elif change == "expire":
        now = T0 + 600 + 61
    else:
        codec = make_codec(audience="someone-else")
    with pytest.raises(StateRejectedError) as caught:
        codec.inspect(token, now)
    assert caught.value.reason == reason
