"""What the engine carries from round to round inside the sealed ``requestState``.

No server memory is held between rounds (digest §2.1): everything a later round needs
travels in the state, sealed. The payload is compact JSON::

    {"n": <input_required results so far>,
     "q": {key: [kind, question digest, form schema or null]},   # asked in the last round
     "a": {key: [question digest, kind, answer]},                # every answer recorded
     "m": {name: value},                                         # ctx.memo
     "o": {name: value},                                         # ctx.once
     "u": <the handler's own state, explicit mode>}

Empty members are left out. The payload is only ever read after the codec has verified
the token, but its shape is still checked: a bad shape is refused as ``malformed``.
"""

from __future__ import annotations

from typing import Any

import attrs

from mrtr_core.state.errors import StateRejectedError
from mrtr_core.wire.models import INPUT_REQUEST_KINDS, JsonObject

__all__ = ["Asked", "Carried", "Recorded"]


@attrs.frozen
class Asked:
    """A question put to the client in the previous round."""

    kind: str
    digest: str
    schema: JsonObject | None = None


@attrs.frozen
class Recorded:
    """An answer, pinned to the digest of the exact question it answers."""

    digest: str
    kind: str
    data: JsonObject


def _empty_asked() -> dict[str, Asked]:
    return {}


def _empty_recorded() -> dict[str, Recorded]:
    return {}


def _empty_values() -> dict[str, Any]:
    return {}


@attrs.frozen
class Carried:
    """The decoded engine state of one operation."""

    rounds: int = 0
    asked: dict[str, Asked] = attrs.field(factory=_empty_asked)
    answers: dict[str, Recorded] = attrs.field(factory=_empty_recorded)
    memo: dict[str, Any] = attrs.field(factory=_empty_values)
    once: dict[str, Any] = attrs.field(factory=_empty_values)
    user: Any = None

    def to_payload(self) -> JsonObject:
        """The JSON payload to seal."""
        out: JsonObject = {"n": self.rounds}
        if self.asked:
            out["q"] = {k: [a.kind, a.digest, a.schema] for k, a in self.asked.items()}
        if self.answers:
            out["a"] = {k: [r.digest, r.kind, r.data] for k, r in self.answers.items()}
        if self.memo:
            out["m"] = self.memo
        if self.once:
            out["o"] = self.once
        if self.user is not None:
            out["u"] = self.user
        return out

    @classmethod
    def from_payload(cls, payload: JsonObject) -> Carried:
        """Decode a verified payload; ``StateRejectedError("malformed")`` if its shape is wrong."""
        try:
            rounds = payload["n"]
            if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 0:
                raise ValueError("n")
            asked = {_key(k): _asked(v) for k, v in _mapping(payload.get("q", {})).items()}
            answers = {_key(k): _recorded(v) for k, v in _mapping(payload.get("a", {})).items()}
            memo = dict(_mapping(payload.get("m", {})))
            once = dict(_mapping(payload.get("o", {})))
        except (KeyError, ValueError, TypeError):
            raise StateRejectedError("malformed", "engine state has the wrong shape") from None
        return cls(rounds, asked, answers, memo, once, payload.get("u"))


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("not an object")
    return value


def _key(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("key")
    return value


def _asked(value: Any) -> Asked:
    if not isinstance(value, list) or len(value) != 3:
        raise TypeError("asked entry")
    kind, digest, schema = value
    if kind not in INPUT_REQUEST_KINDS or not isinstance(digest, str):
        raise ValueError("asked entry")
    if schema is not None and not isinstance(schema, dict):
        raise TypeError("asked schema")
    return Asked(kind, digest, schema)


def _recorded(value: Any) -> Recorded:
    if not isinstance(value, list) or len(value) != 3:
        raise TypeError("answer entry")
    digest, kind, data = value
    if not isinstance(digest, str) or kind not in INPUT_REQUEST_KINDS or not isinstance(data, dict):
        raise ValueError("answer entry")
    return Recorded(digest, kind, data)
