"""Saving a paused flow as plain JSON data and reading it back.

A manual-mode flow waiting for answers (or any flow that is idle or pacing) holds nothing
that cannot be written down: the request it repeats, the last ``input_required`` result,
the answers given so far, its counters and deadlines. :func:`snapshot_to_data` writes that
as JSON-able data; :func:`snapshot_from_data` checks every field before trusting it
(stored data can be stale or edited) and raises :class:`LocalProtocolError` naming the
field that is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from mrtr_core.client.limits import ClientLimits
from mrtr_core.client.retry import RETRY_KEYS, answer_to_wire, copy_json
from mrtr_core.client.states import FlowState
from mrtr_core.errors import CodecError, LocalProtocolError
from mrtr_core.wire.converter import (
    structure_input_required,
    structure_request_meta,
    unstructure,
    unstructure_input_required,
)
from mrtr_core.wire.models import InputRequiredResult, JsonObject, RequestMeta

__all__ = ["FORMAT", "SAVABLE_STATES", "FlowSnapshot", "snapshot_from_data", "snapshot_to_data"]

FORMAT: Final = "mrtr.client-flow/1"
"""The ``format`` tag of saved data; bumped when the layout changes."""

SAVABLE_STATES: Final = frozenset({FlowState.IDLE, FlowState.AWAITING_ANSWERS, FlowState.PACING})


@attrs.frozen(kw_only=True)
class FlowSnapshot:
    """Everything a paused flow needs to carry on (no ``next_id``, no ``random``)."""

    method: str
    params: JsonObject
    meta: RequestMeta
    handled_kinds: frozenset[str]
    limits: ClientLimits
    manual: bool
    state: FlowState
    rounds: int
    last_request_id: str | int | None
    last_result: InputRequiredResult | None
    seeded: bool
    answers: dict[str, JsonObject]
    streak: int
    flow_deadline: float | None
    wake_at: float | None


def snapshot_to_data(snap: FlowSnapshot) -> JsonObject:
    """Write a snapshot as JSON-able data (dicts, lists, strings, numbers, booleans, null)."""
    return {
        "format": FORMAT,
        "method": snap.method,
        "params": copy_json(snap.params),
        "meta": unstructure(snap.meta),
        "handled_kinds": sorted(snap.handled_kinds),
        "limits": attrs.asdict(snap.limits),
        "manual": snap.manual,
        "state": snap.state.value,
        "rounds": snap.rounds,
        "last_request_id": snap.last_request_id,
        "last_result": (
            None if snap.last_result is None else unstructure_input_required(snap.last_result)
        ),
        "seeded": snap.seeded,
        "answers": copy_json(snap.answers),
        "streak": snap.streak,
        "flow_deadline": snap.flow_deadline,
        "wake_at": snap.wake_at,
    }


def _bad(field: str, problem: str) -> LocalProtocolError:
    return LocalProtocolError(f"saved flow: {field}: {problem}")


def _get(data: Mapping[str, Any], field: str, types: type | tuple[type, ...]) -> Any:
    if field not in data:
        raise _bad(field, "missing")
    value = data[field]
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise _bad(field, f"wrong type {type(value).__name__}")
    if not isinstance(value, types):
        raise _bad(field, f"wrong type {type(value).__name__}")
    return value


def _number_or_none(data: Mapping[str, Any], field: str) -> float | None:
    value = _get(data, field, (int, float, type(None)))
    return None if value is None else float(value)


def snapshot_from_data(data: Mapping[str, Any]) -> FlowSnapshot:
    """Read data written by :func:`snapshot_to_data`, checking every field.

    Raises:
        LocalProtocolError: the data is not a saved flow of this format, or a field is
            missing, of the wrong type, or inconsistent with the others.
    """
    if not isinstance(data, Mapping):
        raise _bad("data", "not a mapping")
    if data.get("format") != FORMAT:
        raise _bad("format", f"expected {FORMAT!r}, got {data.get('format')!r}")
    method = _get(data, "method", str)
    params = _get(data, "params", dict)
    if RETRY_KEYS & params.keys():
        raise _bad("params", f"must not carry {sorted(RETRY_KEYS & params.keys())}")
    try:
        meta = structure_request_meta(_get(data, "meta", dict), path="meta")
    except CodecError as exc:
        raise _bad("meta", str(exc)) from exc
    kinds = _get(data, "handled_kinds", list)
    if not all(isinstance(kind, str) for kind in kinds):
        raise _bad("handled_kinds", "must be strings")
    raw_limits = _get(data, "limits", dict)
    try:
        limits = ClientLimits(**raw_limits)
    except (TypeError, ValueError) as exc:
        raise _bad("limits", str(exc)) from exc
    manual = _get(data, "manual", bool)
    try:
        state = FlowState(_get(data, "state", str))
    except ValueError as exc:
        raise _bad("state", "unknown state") from exc
    if state not in SAVABLE_STATES:
        raise _bad("state", f"{state.name} cannot be saved")
    rounds = _get(data, "rounds", int)
    if rounds < 0:
        raise _bad("rounds", "negative")
    last_request_id = _get(data, "last_request_id", (str, int, type(None)))
    raw_result = _get(data, "last_result", (dict, type(None)))
    last_result = None
    if raw_result is not None:
        if raw_result.get("resultType") != "input_required":
            raise _bad("last_result", "not an input_required result")
        try:
            last_result = structure_input_required(raw_result, path="last_result")
        except CodecError as exc:
            raise _bad("last_result", str(exc)) from exc
    seeded = _get(data, "seeded", bool)
    raw_answers = _get(data, "answers", dict)
    streak = _get(data, "streak", int)
    if streak < 0:
        raise _bad("streak", "negative")
    flow_deadline = _number_or_none(data, "flow_deadline")
    wake_at = _number_or_none(data, "wake_at")
    answers = _check_answers(raw_answers, last_result, state)
    # The state must agree with what it rests on.
    if state is FlowState.IDLE and (rounds or raw_answers or (seeded != (last_result is not None))):
        raise _bad("state", "an idle flow has sent nothing and rests on a seeded result only")
    if state is FlowState.AWAITING_ANSWERS and (
        not manual or last_result is None or not last_result.input_requests
    ):
        raise _bad("state", "awaiting answers needs manual mode and a result with inputRequests")
    if state is FlowState.PACING and (
        last_result is None or last_result.input_requests or wake_at is None
    ):
        raise _bad("state", "pacing needs a state-only result and a wake-up time")
    if state is not FlowState.IDLE and seeded:
        raise _bad("seeded", "only an idle flow is seeded")
    return FlowSnapshot(
        method=method,
        params=params,
        meta=meta,
        handled_kinds=frozenset(kinds),
        limits=limits,
        manual=manual,
        state=state,
        rounds=rounds,
        last_request_id=last_request_id,
        last_result=last_result,
        seeded=seeded,
        answers=answers,
        streak=streak,
        flow_deadline=flow_deadline,
        wake_at=wake_at,
    )


def _check_answers(
    raw: dict[str, Any], result: InputRequiredResult | None, state: FlowState
) -> dict[str, JsonObject]:
    if not raw:
        return {}
    requests = result.input_requests if result is not None else None
    if state is not FlowState.AWAITING_ANSWERS or not requests:
        raise _bad("answers", "answers belong to a round awaiting answers")
    answers: dict[str, JsonObject] = {}
    for key, value in raw.items():
        if key not in requests:
            raise _bad("answers", f"no input request {key!r}")
        try:
            answers[key] = answer_to_wire(requests[key].method, value, key=key)
        except LocalProtocolError as exc:
            raise _bad("answers", str(exc)) from exc
    if len(answers) >= len(requests):
        raise _bad("answers", "every key is answered: the round would be over")
    return answers
