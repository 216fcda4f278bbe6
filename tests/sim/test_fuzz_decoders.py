"""Fuzz targets for everything a peer can make the simulated cluster decode: random
``requestState`` tokens (both codec modes, at any time around their lifetime), random
messages into the app, random ``inputResponses`` into the engine, random results into the
client flow, and the transcript's view of any message. Each may only answer with its one
typed error (or a well-formed reply); a sealed state opens to exactly its payload."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mrtr_core.app import Reply, RunHandler
from mrtr_core.client import ClientFlow, ClientLimits, Fail, ResponseReceived, SendRequest
from mrtr_core.errors import JsonRpcError, MrtrError
from mrtr_core.server import HandlerSpec, NeedsInput, ServerEngine, form
from mrtr_core.sim import FULL_CAPABILITIES, Effects, Prng, ReferenceWorkload
from mrtr_core.sim.transcript import describe_message
from mrtr_core.state import Binding, KeyRing, StateCodec, StateRejectedError
from mrtr_core.wire import CallToolParams, RequestMeta

FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])

_PRNG = Prng(4)
RING = KeyRing({"k1": _PRNG.bytes(32), "k2": _PRNG.bytes(32)}, active="k2")
TTL, SKEW, ISSUED = 30.0, 2.0, 100.0
CODEC = StateCodec(RING, audience="mrtr-sim", nonce=_PRNG.bytes, ttl=TTL, skew=SKEW,
                   max_bytes=4096)
# Both modes a server may configure: each is a decoder a peer reaches.
CODECS = {"aead": CODEC,
          "hmac": StateCodec(RING, audience="mrtr-sim", nonce=_PRNG.bytes, mode="hmac",
                             ttl=TTL, skew=SKEW, max_bytes=4096)}
BINDING = Binding(method="tools/call", target="deploy", arguments_digest="d", principal="ann")
PAYLOAD = {"n": 1, "q": {}}
VALIDS = {mode: codec.seal(PAYLOAD, BINDING, ISSUED) for mode, codec in CODECS.items()}
VALID = VALIDS["aead"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20,
)

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _non_canonical(token: str, flip: int) -> str:
    """``token`` with unused low bits of its last base64 character set: the same bytes to a
    lax decoder, another text to the codec (which must refuse it)."""
    body = token.rstrip("=")
    pad = len(token) - len(body)
    unused = {1: 0x03, 2: 0x0F}.get(pad, 0)
    if not unused:
        return token[:-1]  # no padding, so no unused bits: drop a character instead
    last = B64[B64.index(body[-1]) ^ (flip % unused + 1)]
    return body[:-1] + last + "=" * pad


def tokens(valid: str) -> st.SearchStrategy[Any]:
    """Anything a peer might send as ``requestState``, mostly near the one valid token."""
    def changed(at: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
        return st.builds(lambda i, c: valid[:i] + c + valid[i + 1 :],
                         at, st.sampled_from([*B64, "-", "_", ".", "=", "é"]))

    return st.one_of(
        changed(st.integers(0, len(valid) - 1)),
        changed(st.integers(len(valid) - 24, len(valid) - 1)),  # the tag (MAC) is at the end
        st.builds(lambda n: valid[:n], st.integers(0, len(valid) - 1)),
        st.builds(_non_canonical, st.just(valid), st.integers(0, 15)),
        st.builds(lambda kid, body: f"{valid.split('.')[0]}.{kid}.{body}",
                  st.sampled_from(["k1", "k2", "k3", ""]), st.text(alphabet=B64, max_size=300)),
        st.text(max_size=200),
        st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
        json_values,
    )


# Mostly moments around the token's lifetime and its edges (issued - skew, exp + skew).
moments = st.one_of(
    st.floats(ISSUED - 2 * SKEW, ISSUED + TTL + 2 * SKEW),
    st.sampled_from([ISSUED - SKEW, ISSUED - SKEW - 1e-9, ISSUED + TTL + SKEW,
                     ISSUED + TTL + SKEW - 1e-9]),
    st.floats(min_value=0, max_value=1e6),
)


@pytest.mark.parametrize("mode", sorted(CODECS))
@FUZZ
@given(data=st.data(), now=moments)
def test_state_open_refuses_anything_but_a_valid_token_with_state_rejected(
    mode: str, data: st.DataObject, now: float
) -> None:
    codec, valid = CODECS[mode], VALIDS[mode]
    token = data.draw(st.one_of(st.just(valid), tokens(valid)), label="token")
    try:
        opened = codec.open(token, BINDING, now)
    except StateRejectedError as exc:
        assert exc.code == -32602
        assert exc.to_error_object()["message"] == "Invalid or expired requestState"
        return
    assert token == valid  # only the token we sealed opens, byte for byte
    assert opened.issued_at - SKEW <= now < opened.expires_at + SKEW  # and only in its time
    assert opened.payload == PAYLOAD


# Payloads within each JSON profile the codec writes (orjson, and the standard library for
# integers beyond 64 bits, lone surrogates and deep nesting).
payload_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize("mode", sorted(CODECS))
@FUZZ
@given(payload=st.dictionaries(st.text(max_size=8), payload_values, max_size=5),
       now=st.floats(0, 1e9), later=st.floats(0, TTL + SKEW, exclude_max=True))
def test_state_seal_then_open_gives_the_payload_back_exactly(
    mode: str, payload: dict[str, Any], now: float, later: float
) -> None:
    # The codec compares floats: ``now + later`` can round up onto the expiry itself
    # (1.0 + 31.999999999999996 == 33.0), which is past it. Only times before it count.
    assume(now + later < (now + TTL) + SKEW)
    codec = CODECS[mode]
    opened = codec.open(codec.seal(payload, BINDING, now), BINDING, now + later)
    # json.dumps tells apart what == does not: True from 1, 1.0 from 1, key order.
    assert json.dumps(opened.payload) == json.dumps(payload)
    assert (opened.issued_at, opened.expires_at) == (now, now + TTL)


def _app() -> Any:
    return ReferenceWorkload().build_app(CODEC, Effects())


APP = _app()
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}

messages = st.one_of(
    json_values,
    st.fixed_dictionaries({
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
        "id": st.one_of(st.integers(), st.text(max_size=5), st.none(), st.booleans()),
        "method": st.sampled_from(["tools/call", "prompts/get", "resources/read",
                                   "tools/list", "server/discover", "initialize", "nope"]),
        "params": st.one_of(json_values, st.fixed_dictionaries(
            {"_meta": st.one_of(st.just(META), json_values)},
            optional={
                "name": st.one_of(st.sampled_from(["deploy", "review"]), json_values),
                "uri": st.one_of(st.just("sim://report/op-1"), json_values),
                "arguments": st.one_of(st.just({"op": "op-1"}), json_values),
                "inputResponses": json_values,
                "requestState": st.one_of(tokens(VALID), st.just(VALID)),
            })),
    }),
)


@FUZZ
@given(message=messages)
def test_app_receive_answers_any_message_with_a_reply_or_a_handler_run(message: Any) -> None:
    step = APP.receive(message, now=100.0, principal="ann")
    assert isinstance(step, Reply | RunHandler)
    if isinstance(step, Reply) and step.message is not None:
        assert ("result" in step.message) != ("error" in step.message)
        if "error" in step.message:
            assert isinstance(step.message["error"]["code"], int)


ENGINE = ServerEngine(CODEC)


def _handler(ctx: Any, **_: Any) -> Any:
    ctx.ask("confirm", form("ok?", ok=bool))
    return "done"


SPEC = HandlerSpec(handler=_handler)


def _first_state() -> str:
    """The state the engine seals when the handler first asks (a driver's first round)."""
    run = ENGINE.begin(CallToolParams(name="deploy", meta=RequestMeta(
        client_capabilities=FULL_CAPABILITIES)), SPEC, now=100.0, principal="ann")
    try:
        SPEC.invoke(run.context)
    except BaseException as pending:  # the engine's control flow: a question to ask
        outcome = run.finish(100.0, raised=pending)
    assert isinstance(outcome, NeedsInput)
    return outcome.request_state


STATE = _first_state()


@FUZZ
@given(responses=json_values, stale=st.booleans())
def test_engine_reads_any_input_responses_or_refuses_them_with_json_rpc_errors(
    responses: Any, stale: bool
) -> None:
    params = CallToolParams(name="deploy", meta=RequestMeta(client_capabilities=FULL_CAPABILITIES),
                            input_responses=responses if isinstance(responses, dict) else
                            {"confirm": responses},
                            request_state=STATE)
    try:
        run = ENGINE.begin(params, SPEC, now=300.0 if stale else 101.0, principal="ann")
    except JsonRpcError as exc:
        assert exc.code == -32602
        return
    assert not stale
    assert set(run.context.input_responses) <= {"confirm"}


results = st.one_of(
    json_values,
    st.fixed_dictionaries({}, optional={
        "resultType": st.sampled_from(["complete", "input_required", "task", 5]),
        "inputRequests": st.one_of(json_values, st.dictionaries(
            st.text(max_size=5), st.fixed_dictionaries(
                {"method": st.sampled_from(["elicitation/create", "roots/list",
                                            "sampling/createMessage", "x"])},
                optional={"params": json_values}), max_size=3)),
        "requestState": st.one_of(st.text(max_size=30), json_values),
    }),
)


@FUZZ
@given(result=results, as_error=st.booleans())
def test_client_flow_takes_any_response_to_its_leg_without_raising(
    result: Any, as_error: bool
) -> None:
    flow = ClientFlow("tools/call", {"name": "deploy"},
                      meta=RequestMeta(client_capabilities=FULL_CAPABILITIES),
                      handled_kinds={"elicitation/create", "roots/list"},
                      next_id=iter(range(1, 100)).__next__,
                      limits=ClientLimits(pacing_jitter=0.0))
    sent = [c for c in flow.start(0.0) if isinstance(c, SendRequest)]
    message = {"jsonrpc": "2.0", "id": sent[0].request_id,
               ("error" if as_error else "result"): result}
    commands = flow.handle(ResponseReceived(message=message), 1.0)
    for command in commands:
        if isinstance(command, Fail):
            assert isinstance(command.error, MrtrError)
            assert flow.done


@FUZZ
@given(message=st.one_of(messages, st.fixed_dictionaries({"id": json_values,
                                                          "result": json_values}),
                         st.fixed_dictionaries({"error": json_values})))
def test_transcript_describes_any_peer_message(message: Any) -> None:
    assert isinstance(describe_message(message), str)
