"""Random sequences of inputs, garbage included: only mrtr's own errors escape the core, and
the invariants hold (terminal is terminal, rounds <= max_rounds, requestState echoed exactly,
caller's params untouched, refused inputs change nothing)."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from client_helpers import Ids, form, roots, sampling, url_request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrtr_core.client import (
    TERMINAL_STATES,
    CancelRequested,
    ClientFlow,
    ClientLimits,
    Complete,
    Fail,
    FlowState,
    HandlerFailed,
    HandlerReturned,
    InputNeeded,
    InvokeHandler,
    ResponseReceived,
    SendRequest,
    TimerFired,
)
from mrtr_core.errors import LocalProtocolError, MrtrError
from mrtr_core.wire import (
    ClientCapabilities,
    CreateMessageResult,
    ElicitationCapability,
    ElicitResult,
    ListRootsResult,
    RequestMeta,
    Root,
    SamplingCapability,
    unstructure,
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=3),
    max_leaves=8,
)
STATES = st.text(max_size=12) | st.sampled_from(["", " ", '{"a": 1}', "ü✓🚀", "\ud800"])
KEYS = st.sampled_from(["a", "b", "c", "confirm", "ticket"])
GOOD_ENTRIES = st.sampled_from([form(), form("other"), url_request(), sampling(), roots()])
TOOL = {"name": "t", "inputSchema": {"type": "object"}}
BAD_ENTRIES = st.sampled_from([sampling(tools=[TOOL]),
                               {"method": "elicitation/create", "params": {}}, {"method": "x/y"},
                               "junk"]) | JSON
FULL = RequestMeta(client_capabilities=ClientCapabilities(
    elicitation=ElicitationCapability(form={}, url={}), sampling=SamplingCapability(), roots={}))
METAS = st.sampled_from([
    *[FULL] * 8,
    RequestMeta(client_capabilities=ClientCapabilities(elicitation=ElicitationCapability())),
    RequestMeta(client_capabilities=ClientCapabilities()),
])
ALL = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
GOOD_ANSWER = {
    "elicitation/create": st.sampled_from([ElicitResult(action="accept", content={"ok": True}),
                                           ElicitResult(action="decline"),
                                           {"action": "cancel"}]),
    "sampling/createMessage": st.just(CreateMessageResult(
        role="assistant", content={"type": "text", "text": "t"}, model="m")),
    "roots/list": st.sampled_from([ListRootsResult(roots=[Root(uri="file:///x")]),
                                   {"roots": []}]),
}
ANY_ANSWER = st.sampled_from(list(GOOD_ANSWER.values())).flatmap(lambda s: s) | JSON


def answers_for(data: st.DataObject, flow: ClientFlow, key: str) -> Any:
    """Mostly an answer of the right kind for ``key``; sometimes anything at all."""
    result = flow.last_result
    requests = (result.input_requests or {}) if result is not None else {}
    if key in requests and data.draw(st.integers(0, 9)) < 9:
        return data.draw(GOOD_ANSWER[requests[key].method])
    return data.draw(ANY_ANSWER)


# Hypothesis favours "simple" draws (small integers, the first element of sampled_from), so
# the common, well-formed choices sit at that end and the garbage at the other.


@st.composite
def results(draw: st.DrawFn, cooperative: bool = False) -> Any:
    """Mostly well-formed results (input_required with good entries, or complete)."""
    choice = draw(st.integers(0, 14 if cooperative else 19))
    if choice <= 13:
        good = True
    elif choice <= 15:
        return {"resultType": "complete", "content": []} if choice == 14 else {"content": []}
    elif choice == 16:
        good = False
    elif choice == 17:
        return {"resultType": draw(st.sampled_from(["task", None, 3])), "content": []}
    else:
        return draw(JSON)
    out: dict[str, Any] = {"resultType": "input_required"}
    entries = GOOD_ENTRIES if good else GOOD_ENTRIES | BAD_ENTRIES
    if draw(st.integers(0, 3)) < 3:
        out["inputRequests"] = draw(st.dictionaries(KEYS, entries, min_size=int(good),
                                                    max_size=3))
    if draw(st.integers(0, 3)) < 3 or not out.get("inputRequests"):
        out["requestState"] = draw(STATES) if good else draw(STATES | JSON)
    return out


@st.composite
def responses(draw: st.DrawFn, flow: ClientFlow, cooperative: bool) -> Any:
    """Mostly a well-formed response to the leg in flight; sometimes anything."""
    pick = draw(st.integers(0, 35 if cooperative else 39))
    if pick == 39:
        return draw(JSON)
    request_id = flow.outstanding_request if pick < 38 else draw(st.integers(0, 5) | st.none())
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    if pick == 37:
        message["error"] = draw(st.fixed_dictionaries(
            {"code": st.integers(-33000, 0), "message": st.text(max_size=5)}) | JSON)
    else:
        message["result"] = draw(results(cooperative))
    if pick == 36:
        del message["jsonrpc"]
    return message


ACTIONS = [
    "start", *["response"] * 6, *["returned"] * 6, "failed", *["answer"] * 4, *["timer"] * 3,
    "cancel", "save", "save",
]
# Mostly legal actions for the state, so flows get deep; the rest are anything at all.
LEGAL = {
    FlowState.IDLE: ["start"],
    FlowState.AWAITING_RESPONSE: ["response"] * 12 + ["timer", "cancel"],
    FlowState.AWAITING_HANDLERS: ["returned"] * 8 + ["failed", "timer"],
    FlowState.AWAITING_ANSWERS: ["answer"] * 6 + ["save", "timer"],
    FlowState.PACING: ["timer"] * 4 + ["save"],
    FlowState.COMPLETE: ACTIONS,
    FlowState.FAILED: ["returned", "failed", *ACTIONS],
}
LIMITS = st.builds(
    ClientLimits,
    max_rounds=st.sampled_from([6, 6, 3, 2, 1]),
    leg_timeout=st.sampled_from([1000.0, None, 1000.0, 2.0]),
    flow_timeout=st.sampled_from([5000.0, None, 5000.0, 20.0]),
    handler_timeout=st.sampled_from([1000.0, None, 1000.0, 2.0]),
    pacing_initial=st.floats(0.01, 2),
    pacing_max=st.floats(0.01, 5),
    pacing_jitter=st.floats(0, 1),
    max_state_bytes=st.sampled_from([10_000, 10_000, 4]),
    max_input_requests=st.sampled_from([64, 64, 2, 1]),
)


def _observable(flow: ClientFlow) -> tuple[Any, ...]:
    return (flow.state, flow.rounds, flow.pending_keys, flow.deadline, flow.last_result,
            flow.outstanding_request, flow.result, flow.error)


# derandomize: the same examples on every run (tests are deterministic); no example database.
@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_inputs_raise_only_mrtr_errors_and_keep_the_invariants(data: st.DataObject) -> None:
    method = data.draw(st.sampled_from(["tools/call", "prompts/get", "resources/read",
                                        "tools/call", "tools/list"]))
    params = {"name": "x", "arguments": {"deep": [1, {"k": "v"}]}, "requestState": "stale"}
    params_before = copy.deepcopy(params)
    meta = data.draw(METAS)
    limits = data.draw(LIMITS)
    manual = data.draw(st.booleans())
    # A cooperative server answers well-formed and the caller only does legal things, so
    # these examples go deep; the others mix in garbage and illegal inputs.
    cooperative = data.draw(st.booleans())
    ids = Ids()
    flow = ClientFlow(method, params, meta=meta,
                      handled_kinds=data.draw(st.sampled_from([ALL] * 4 + [
                          frozenset(), frozenset({"elicitation/create"})])),
                      next_id=ids, limits=limits,
                      random=random.Random(data.draw(st.integers(0, 99))).random, manual=manual)
    now = 0.0
    sent_ids: list[Any] = []
    echo: dict[str, Any] = {}  # what the next retry must carry
    for _ in range(data.draw(st.integers(8, 30))):
        now += data.draw(st.sampled_from([0.0, 0.0, 0.0, 0.1, 0.3, 1.0, 5.0]))
        if cooperative or data.draw(st.integers(0, 4)) < 4:
            action = data.draw(st.sampled_from(LEGAL[flow.state]))
        else:
            action = data.draw(st.sampled_from(ACTIONS))
        was_terminal = flow.state in TERMINAL_STATES
        before = _observable(flow)
        fed_state: Any = None
        try:
            if action == "start":
                commands = flow.start(now)
            elif action == "response":
                message = data.draw(responses(flow, cooperative))
                if isinstance(message, dict) and isinstance(message.get("result"), dict):
                    fed_state = message["result"].get("requestState")
                commands = flow.handle(ResponseReceived(message=message), now)
            elif action == "returned":
                key = data.draw(st.sampled_from([*flow.pending_keys, "zz"]))
                answer = answers_for(data, flow, key)
                commands = flow.handle(HandlerReturned(key=key, answer=answer), now)
            elif action == "failed":
                key = data.draw(st.sampled_from([*flow.pending_keys, "zz"]))
                commands = flow.handle(HandlerFailed(key=key, error=ValueError(key)), now)
            elif action == "answer":
                keys = data.draw(st.lists(st.sampled_from([*flow.pending_keys, "zz"]),
                                          max_size=3, unique=True))
                commands = flow.answer({k: answers_for(data, flow, k) for k in keys}, now)
            elif action == "timer":
                commands = flow.handle(TimerFired(), now)
            elif action == "cancel":
                commands = flow.handle(CancelRequested(), now)
            else:
                saved = json.loads(json.dumps(flow.to_data(now)))
                ids = Ids(start=ids.next + 1000)
                # Restored in another process, whose clock reads something else entirely.
                now += data.draw(st.sampled_from([0.0, -1000.0, 5000.0]))
                flow = ClientFlow.from_data(saved, now=now, next_id=ids,
                                            random=random.Random(0).random)
                commands = []
        except LocalProtocolError:
            # Raised (not emitted) errors are always local, and refused inputs change
            # nothing; any other exception fails the test (only MrtrError may escape, and of
            # those, only LocalProtocolError is ever raised: remote faults are emitted).
            assert _observable(flow) == before
            continue
        # Terminal is terminal: only absorbed handler outcomes are taken after the end.
        if was_terminal:
            assert commands == [] and action in ("returned", "failed")
            assert flow.state is before[0]
        assert flow.rounds <= limits.max_rounds
        ends = [c for c in commands if isinstance(c, Complete | Fail)]
        if ends:
            assert ends == [commands[-1]] and flow.done
            assert flow.deadline is None
        if flow.done:
            assert flow.state in TERMINAL_STATES
            assert (flow.result is None) != (flow.error is None)
            if flow.state is FlowState.FAILED:
                assert isinstance(flow.error, MrtrError)
        for command in commands:
            if isinstance(command, InputNeeded):
                # The state is kept as the very string received (C2).
                state = command.result.request_state
                if action == "response":
                    assert state == fed_state and type(state) is type(fed_state)
                echo = {"state": state, "keys": list(command.result.input_requests or {})}
            elif isinstance(command, InvokeHandler):
                assert command.key in flow.pending_keys
            elif isinstance(command, SendRequest):
                sent = command.message
                assert sent["id"] == command.request_id
                assert not sent_ids or sent["id"] != sent_ids[-1]  # C4
                sent_ids.append(sent["id"])
                assert sent["method"] == method
                assert sent["params"]["_meta"] == unstructure(meta)
                assert sent["params"]["arguments"] == params_before["arguments"]
                if not echo:
                    assert "requestState" not in sent["params"]
                    assert "inputResponses" not in sent["params"]
                else:
                    if echo["state"] is None:
                        assert "requestState" not in sent["params"]  # C3
                    else:
                        assert sent["params"]["requestState"] == echo["state"]  # C2
                    responses_ = sent["params"].get("inputResponses")
                    assert list(responses_ or {}) == echo["keys"]  # C6
                json.dumps(sent)  # always encodable
    assert params == params_before
