"""Saving a paused flow as plain JSON data and reading it back.

A manual-mode flow waiting for answers (or any flow that is idle or pacing) holds nothing
that cannot be written down: the request it repeats, the last ``input_required`` result,
the answers given so far, its counters and its timers. :func:`snapshot_to_data` writes that
as JSON-able data; :func:`snapshot_from_data` checks every field before trusting it
(stored data can be stale or edited) and raises :class:`LocalProtocolError` naming the
field that is wrong.

The data is clock-independent: a timer is saved as the seconds it had left when the flow
was saved (``flow_time_left``, ``pacing_time_left``), never as a time on the saving
process's clock, so it can be restored in a process whose clock counts from elsewhere (two
monotonic clocks, a virtual clock). Restoring rebases each timer onto the new clock: its
deadline is the restore time plus the seconds left.

Format versions: ``mrtr.client-flow/1`` saved absolute deadlines in the saving process's
clock; it is refused (:class:`SavedFlowVersionError`), as is any version this code does not
know.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from mrtr_core.client.limits import ClientLimits
from mrtr_core.client.retry import RETRY_KEYS, answer_for, copy_json
from mrtr_core.client.states import FlowState
from mrtr_core.errors import CodecError, LocalProtocolError
from mrtr_core.jsontext import TOO_DEEP
from mrtr_core.wire.converter import (
    structure_input_required,
    structure_request_meta,
    unstructure,
    unstructure_input_required,
)
from mrtr_core.wire.models import MRTR_METHODS, InputRequiredResult, JsonObject, RequestMeta

__all__ = [
    "FORMAT",
    "FORMAT_FAMILY",
    "SAVABLE_STATES",
    "FlowSnapshot",
    "SavedFlowVersionError",
    "snapshot_from_data",
    "snapshot_to_data",
]

FORMAT_FAMILY: Final = "mrtr.client-flow/"
"""What every ``format`` tag of saved flows starts with; the version follows."""

FORMAT: Final = FORMAT_FAMILY + "2"
"""The ``format`` tag of saved data; bumped when the layout changes."""

_INF: Final = float("inf")

SAVABLE_STATES: Final = frozenset({FlowState.IDLE, FlowState.AWAITING_ANSWERS, FlowState.PACING})


class SavedFlowVersionError(LocalProtocolError):
    """Saved flow data of a format version this code cannot read.

    Attributes:
        found: The ``format`` tag of the data.
        supported: The one tag this code reads (:data:`FORMAT`).
    """

    def __init__(self, found: str) -> None:
        hint = (
            " (version 1 saved deadlines on the saving process's clock; it cannot be"
            " rebased)" if found == FORMAT_FAMILY + "1" else ""
        )
        super().__init__(
            f"saved flow: format: version {found!r} is not supported, only {FORMAT!r}{hint}"
        )
        self.found = found
        self.supported = FORMAT


@attrs.frozen(kw_only=True)
class FlowSnapshot:
    """Everything a paused flow needs to carry on (no ``next_id``, no ``random``).

    Timers are durations, in seconds, counted from the moment of the snapshot:
    ``flow_time_left`` is what is left of the whole-flow budget (``None``: no budget runs,
    because the flow has not started or has no ``flow_timeout``), ``pacing_time_left`` the
    wait before the retry of a state-only round (``None`` unless pacing).
    """

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
    flow_time_left: float | None
    pacing_time_left: float | None


def snapshot_to_data(snap: FlowSnapshot) -> JsonObject:
    """Write a snapshot as JSON-able data (dicts, lists, strings, numbers, booleans, null).

    Raises:
        LocalProtocolError: the params are nested deeper than the copy recurses (a leg's
            copy takes more: such a flow runs, but cannot be saved).
    """
    try:
        return _snapshot_data(snap)
    except RecursionError:
        raise LocalProtocolError(f"the flow cannot be saved: not JSON: {TOO_DEEP}") from None


def _snapshot_data(snap: FlowSnapshot) -> JsonObject:
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
        "flow_time_left": snap.flow_time_left,
        "pacing_time_left": snap.pacing_time_left,
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


def _seconds_or_none(data: Mapping[str, Any], field: str) -> float | None:
    value = _get(data, field, (int, float, type(None)))
    if value is None:
        return None
    if not 0.0 <= value < _INF:  # also refuses NaN
        raise _bad(field, f"must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def _check_format(data: Mapping[str, Any]) -> None:
    found = data.get("format")
    if found == FORMAT:
        return
    if isinstance(found, str) and found.startswith(FORMAT_FAMILY):
        raise SavedFlowVersionError(found)
    raise _bad("format", f"expected {FORMAT!r}, got {found!r}")


def snapshot_from_data(data: Mapping[str, Any]) -> FlowSnapshot:
    """Read data written by :func:`snapshot_to_data`, checking every field.

    Raises:
        SavedFlowVersionError: the data is a saved flow of another format version.
        LocalProtocolError: the data is not a saved flow, or a field is missing, of the
            wrong type, or inconsistent with the others.
    """
    if not isinstance(data, Mapping):
        raise _bad("data", "not a mapping")
    _check_format(data)
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
    except RecursionError:  # a message quoting the value
        raise _bad("limits", f"not JSON: {TOO_DEEP}") from None
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
    flow_time_left = _seconds_or_none(data, "flow_time_left")
    pacing_time_left = _seconds_or_none(data, "pacing_time_left")
    answers = _check_answers(raw_answers, last_result, state)
    # The state must agree with what it rests on.
    if state is FlowState.IDLE and (rounds or raw_answers or (seeded != (last_result is not None))):
        raise _bad("state", "an idle flow has sent nothing and rests on a seeded result only")
    if state is FlowState.AWAITING_ANSWERS and (
        not manual or last_result is None or not last_result.input_requests
    ):
        raise _bad("state", "awaiting answers needs manual mode and a result with inputRequests")
    if state is FlowState.PACING and (
        last_result is None or last_result.input_requests or pacing_time_left is None
    ):
        raise _bad("state", "pacing needs a state-only result and the time left to wait")
    if state is not FlowState.IDLE and seeded:
        raise _bad("seeded", "only an idle flow is seeded")
    if last_result is not None and method not in MRTR_METHODS:
        raise _bad("method", f"{method} cannot answer input_required (digest §1.4)")
    if state is not FlowState.IDLE and rounds >= limits.max_rounds:
        raise _bad("rounds", f"{rounds} legs sent: no retry is left under max_rounds "
                             f"{limits.max_rounds}")
    _check_timers(state, limits, flow_time_left, pacing_time_left)
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
        flow_time_left=flow_time_left,
        pacing_time_left=pacing_time_left,
    )


def _check_timers(
    state: FlowState,
    limits: ClientLimits,
    flow_time_left: float | None,
    pacing_time_left: float | None,
) -> None:
    """The timers must be those a flow in ``state`` under ``limits`` can have."""
    budget = limits.flow_timeout
    if state is FlowState.IDLE:
        if flow_time_left is not None:
            raise _bad("flow_time_left", "an idle flow has not started its budget")
    elif (flow_time_left is None) != (budget is None):
        raise _bad("flow_time_left", "must be set exactly when limits.flow_timeout is")
    if flow_time_left is not None and budget is not None and flow_time_left > budget:
        raise _bad("flow_time_left", f"more than limits.flow_timeout ({budget})")
    if pacing_time_left is not None:
        if state is not FlowState.PACING:
            raise _bad("pacing_time_left", "only a pacing flow waits to retry")
        if pacing_time_left > limits.pacing_max:
            raise _bad("pacing_time_left", f"more than limits.pacing_max ({limits.pacing_max})")


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
            answers[key] = answer_for(requests[key], value, key=key)
        except LocalProtocolError as exc:
            raise _bad("answers", str(exc)) from exc
    if len(answers) >= len(requests):
        raise _bad("answers", "every key is answered: the round would be over")
    return answers
