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

from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from mrtr_core.state.errors import StateRejectedError
from mrtr_core.wire.models import INPUT_REQUEST_KINDS, JsonObject
from mrtr_core.wire.records import record_maker

__all__ = ["Asked", "Carried", "Recorded", "payload"]


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


_NONE: dict[str, Any] = {}  # an absent member (only ever read)


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
        return payload(
            self.rounds,
            {k: [a.kind, a.digest, a.schema] for k, a in self.asked.items()},
            self.answers,
            self.memo,
            self.once,
            self.user,
        )

    @classmethod
    def from_payload(cls, payload: JsonObject) -> Carried:
        """Decode a verified payload; ``StateRejectedError("malformed")`` if its shape is wrong."""
        try:
            rounds = payload["n"]
            if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 0:
                raise ValueError("n")
            # Every entry's shape, checked inline: this runs on every round.
            asked: dict[str, Asked] = {}
            table = payload.get("q", _NONE)
            if not isinstance(table, dict):
                raise TypeError("not an object")
            for k, v in table.items():
                if not isinstance(k, str) or not isinstance(v, list) or len(v) != 3:
                    raise TypeError("asked entry")
                kind, digest, schema = v
                if kind not in INPUT_REQUEST_KINDS or not isinstance(digest, str):
                    raise ValueError("asked entry")
                if schema is not None and not isinstance(schema, dict):
                    raise TypeError("asked schema")
                asked[k] = _asked(kind, digest, schema)
            answers: dict[str, Recorded] = {}
            table = payload.get("a", _NONE)
            if not isinstance(table, dict):
                raise TypeError("not an object")
            for k, v in table.items():
                if not isinstance(k, str) or not isinstance(v, list) or len(v) != 3:
                    raise TypeError("answer entry")
                digest, kind, data = v
                if (
                    not isinstance(digest, str)
                    or kind not in INPUT_REQUEST_KINDS
                    or not isinstance(data, dict)
                ):
                    raise ValueError("answer entry")
                answers[k] = _recorded(digest, kind, data)
            memo = dict(_mapping(payload.get("m", {})))
            once = dict(_mapping(payload.get("o", {})))
        except (KeyError, ValueError, TypeError):
            raise StateRejectedError("malformed", "engine state has the wrong shape") from None
        if cls is not Carried:  # a subclass gets its own __init__
            return cls(rounds, asked, answers, memo, once, payload.get("u"))
        return _carried(rounds, asked, answers, memo, once, payload.get("u"))


def payload(
    rounds: int,
    asked: dict[str, list[Any]],
    answers: Mapping[str, Recorded],
    memo: Mapping[str, Any],
    once: Mapping[str, Any],
    user: Any,
) -> JsonObject:
    """The payload of ``Carried(rounds, asked, answers, memo, once, user).to_payload()``,
    written without building the :class:`Carried` first; ``asked`` is already in payload
    form (``{key: [kind, digest, schema]}``). The values are not copied: seal at once."""
    out: JsonObject = {"n": rounds}
    if asked:
        out["q"] = asked
    if answers:
        out["a"] = {k: [r.digest, r.kind, r.data] for k, r in answers.items()}
    if memo:
        out["m"] = memo
    if once:
        out["o"] = once
    if user is not None:
        out["u"] = user
    return out


# Built from values from_payload has already checked, on every round: no __init__.
_asked: Final[Callable[[str, str, JsonObject | None], Asked]] = record_maker(Asked)
_recorded: Final[Callable[[str, str, JsonObject], Recorded]] = record_maker(Recorded)
_carried: Final[Callable[..., Carried]] = record_maker(Carried)


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("not an object")
    return value
