"""``-32022`` (unsupported protocol version): when the server's ``data.supported`` lists the
version the flow sends, the flow sends the same leg again on a new id, once (digest §3.2,
Versioning: the client picks a common version and retries); otherwise the flow fails with
the error."""

from __future__ import annotations

from typing import Any

import pytest
from client_helpers import (
    META,
    Ids,
    answer_all,
    done,
    error,
    form,
    last_send,
    make_flow,
    names,
    ok,
    to_handlers,
)

from mrtr_core.client import Complete, Fail, FlowState, RoundStarted
from mrtr_core.client.flow import ClientFlow
from mrtr_core.client.limits import ClientLimits
from mrtr_core.errors import JsonRpcError, LocalProtocolError
from mrtr_core.wire import PROTOCOL_VERSION, RequestMeta

OURS = {"supported": [PROTOCOL_VERSION], "requested": PROTOCOL_VERSION}


def refused(request_id: Any, data: Any = None) -> Any:
    return error(request_id, -32022, "Unsupported protocol version", OURS if data is None else data)


def test_the_first_leg_is_sent_again_on_a_new_id_as_the_same_round() -> None:
    flow = make_flow()
    first = last_send(flow.start(0.0))
    commands = flow.handle(refused(first.request_id), 1.0)
    assert names(commands) == ["RoundStarted", "SendRequest"]
    started, again = commands[0], last_send(commands)
    assert isinstance(started, RoundStarted) and started.round == 1
    assert again.request_id != first.request_id
    expected = dict(first.message, id=again.request_id)
    assert again.message == expected  # the same request, byte for byte but the id
    assert flow.state is FlowState.AWAITING_RESPONSE
    done_commands = flow.handle(ok(again.request_id, done()), 2.0)
    complete = done_commands[-1]
    assert isinstance(complete, Complete) and complete.rounds == 1


def test_a_retry_leg_is_sent_again_with_its_answers_and_state() -> None:
    flow = make_flow()
    retry = last_send(answer_all(flow, to_handlers(flow, {"a": form()}, state="s1"), 2.0))
    params = retry.message["params"]
    assert params["requestState"] == "s1" and "a" in params["inputResponses"]
    again = last_send(flow.handle(refused(retry.request_id), 3.0))
    assert again.request_id != retry.request_id
    assert again.message == dict(retry.message, id=again.request_id)
    # The answers are copies: changing one message changes nothing in the other.
    assert again.message["params"]["inputResponses"] is not params["inputResponses"]
    finished = flow.handle(ok(again.request_id, done()), 4.0)[-1]
    assert isinstance(finished, Complete) and finished.rounds == 2


def test_a_resend_does_not_count_against_max_rounds() -> None:
    flow = make_flow(limits=ClientLimits(max_rounds=2, pacing_jitter=0.0))
    first = last_send(flow.start(0.0))
    again = last_send(flow.handle(refused(first.request_id), 1.0))
    retry = last_send(answer_all(flow, flow.handle(
        ok(again.request_id, {"resultType": "input_required",
                              "inputRequests": {"a": form()}}), 2.0), 3.0))
    finished = flow.handle(ok(retry.request_id, done()), 4.0)[-1]
    assert isinstance(finished, Complete) and finished.rounds == 2


def test_only_one_resend_per_flow() -> None:
    flow = make_flow()
    first = last_send(flow.start(0.0))
    again = last_send(flow.handle(refused(first.request_id), 1.0))
    failed = flow.handle(refused(again.request_id), 2.0)[-1]
    assert isinstance(failed, Fail) and isinstance(failed.error, JsonRpcError)
    assert failed.error.code == -32022
    assert flow.state is FlowState.FAILED


@pytest.mark.parametrize(
    "data",
    [
        {"supported": ["2099-01-01"], "requested": PROTOCOL_VERSION},  # not ours
        {"supported": [], "requested": PROTOCOL_VERSION},
        {"supported": PROTOCOL_VERSION},  # not a list
        {"requested": PROTOCOL_VERSION},
        "2026-07-28",
        [PROTOCOL_VERSION],
    ],
    ids=["other-version", "empty", "string", "missing", "data-string", "data-list"],
)
def test_without_our_version_in_supported_the_flow_fails_with_the_error(data: Any) -> None:
    flow = make_flow()
    first = last_send(flow.start(0.0))
    failed = flow.handle(refused(first.request_id, data), 1.0)[-1]
    assert isinstance(failed, Fail) and isinstance(failed.error, JsonRpcError)
    assert failed.error.code == -32022 and failed.error.data == data


def test_another_error_code_is_not_retried() -> None:
    flow = make_flow()
    first = last_send(flow.start(0.0))
    failed = flow.handle(error(first.request_id, -32602, "Invalid params", OURS), 1.0)[-1]
    assert isinstance(failed, Fail) and failed.error.code == -32602  # type: ignore[attr-defined]


def test_a_next_id_that_repeats_the_refused_id_raises_and_changes_nothing() -> None:
    ids = Ids()
    flow = make_flow(ids=ids)
    first = last_send(flow.start(0.0))
    ids.next = first.request_id  # type: ignore[assignment]  # the same id again (C4)
    with pytest.raises(LocalProtocolError, match="repeated the previous id"):
        flow.handle(refused(first.request_id), 1.0)
    assert flow.state is FlowState.AWAITING_RESPONSE
    again = last_send(flow.handle(refused(first.request_id), 1.0))  # still allowed once
    assert again.request_id != first.request_id


def test_a_flow_sending_another_version_retries_only_for_that_version() -> None:
    meta = RequestMeta(client_capabilities=META.client_capabilities,
                       protocol_version="2099-01-01")
    flow = ClientFlow("tools/call", {"name": "t"}, meta=meta, handled_kinds=(), next_id=Ids(),
                      limits=ClientLimits(pacing_jitter=0.0))
    first = last_send(flow.start(0.0))
    failed = flow.handle(refused(first.request_id), 1.0)[-1]  # lists 2026-07-28 only
    assert isinstance(failed, Fail) and failed.error.code == -32022  # type: ignore[attr-defined]
    flow = ClientFlow("tools/call", {"name": "t"}, meta=meta, handled_kinds=(), next_id=Ids(),
                      limits=ClientLimits(pacing_jitter=0.0))
    first = last_send(flow.start(0.0))
    data = {"supported": ["2099-01-01"], "requested": "2099-01-01"}
    again = last_send(flow.handle(refused(first.request_id, data), 1.0))
    assert again.message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == (
        "2099-01-01")
