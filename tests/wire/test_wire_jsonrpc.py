"""The JSON-RPC envelope: decoding limits, classification, builders."""

from __future__ import annotations

import json
import math

import pytest
from deep_values import too_deep
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_core import jsonrpc
from mrtr_core.errors import JsonRpcError, LocalProtocolError, RemoteProtocolError
from mrtr_core.jsonrpc import (
    InvalidRequestError,
    Notification,
    ParseError,
    Request,
    Response,
)


def test_decode_reads_utf8_json():
    assert jsonrpc.decode('{"a": "é"}'.encode()) == {"a": "é"}


@pytest.mark.parametrize(
    "data",
    [b"{", b"", b"\xff\xfe{}", b"NaN", b'{"a": Infinity}', b"[-Infinity]", b"1" * 5000, b"{} {}"],
)
def test_decode_refuses_what_is_not_one_json_value(data):
    with pytest.raises(ParseError) as info:
        jsonrpc.decode(data)
    assert info.value.jsonrpc_code == -32700
    assert isinstance(info.value, RemoteProtocolError)


@pytest.mark.parametrize("data", [b"1e400", b'{"a": -1E999}', b"[" + b"9" * 400 + b".5]"])
def test_decode_refuses_numbers_too_large_to_be_finite(data):
    # They would decode to Infinity, which no reply can carry back.
    with pytest.raises(ParseError, match="out of range"):
        jsonrpc.decode(data)


def test_decode_keeps_large_finite_numbers():
    assert jsonrpc.decode(b"[1e308, -2.5E-400, 1" + b"0" * 400 + b"]") == [1e308, -0.0, 10**400]


def test_decode_refuses_oversize_input_before_parsing():
    with pytest.raises(ParseError, match="exceeds the limit of 10"):
        jsonrpc.decode(b'"' + b"a" * 20 + b'"', max_bytes=10)


def test_decode_refuses_deep_nesting():
    assert jsonrpc.decode(b"[[[1]]]", max_depth=3) == [[[1]]]
    with pytest.raises(ParseError, match="deeper than 3"):
        jsonrpc.decode(b"[[[[1]]]]", max_depth=3)
    with pytest.raises(ParseError, match="deeper"):
        jsonrpc.decode(b'{"a":{"a":{"a":1}}}', max_depth=2)


@pytest.mark.parametrize(
    ("data", "name"),
    [
        (b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', "'id'"),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",'
         b'"requestState":"a","requestState":"b"}}', "'requestState'"),
        (b'[{"k":1}, {"k":2, "k" : 3}]', "'k'"),
        (b'{"\\u0061":1,"a":2}', "'a'"),  # the same name, once escaped
    ],
)
def test_decode_refuses_duplicate_member_names(data, name):
    # Two members with one name are read differently by different parsers (first or last
    # wins): a parser differential between a router and a server, so refused outright.
    with pytest.raises(ParseError, match=f"duplicate member name {name}") as info:
        jsonrpc.decode(data)
    assert info.value.jsonrpc_code == -32700


def test_decode_keeps_one_name_in_different_objects():
    assert jsonrpc.decode(b'{"a":{"a":1},"b":[{"a":2},{"a":3}]}') == {
        "a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]
    }


def test_decode_survives_nesting_deeper_than_the_interpreter_stack():
    with pytest.raises(ParseError, match="deeper"):
        jsonrpc.decode(b"[" * 100_000 + b"]" * 100_000)


def test_parse_request_and_notification():
    req = jsonrpc.parse_request({"jsonrpc": "2.0", "id": "a", "method": "m", "params": {"x": 1}})
    assert req == Request(id="a", method="m", params={"x": 1}, raw=req.raw)
    note = jsonrpc.parse_request({"jsonrpc": "2.0", "method": "n"})
    assert isinstance(note, Notification) and note.params is None


@pytest.mark.parametrize(
    ("value", "rid", "match"),
    [
        ([{"jsonrpc": "2.0", "id": 1, "method": "m"}], None, "batches"),
        ([], None, "batches"),
        ("x", None, "must be an object"),
        ({"id": 1, "method": "m"}, 1, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, 1, "method"),
        ({"jsonrpc": "2.0", "id": 1, "method": ""}, 1, "method"),
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, None, "id"),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "m"}, None, "id"),
        ({"jsonrpc": "2.0", "id": None, "method": "m"}, None, "id"),
        ({"jsonrpc": "2.0", "id": 2, "method": "m", "params": [1]}, 2, "params"),
        ({"jsonrpc": "2.0", "id": 3}, 3, "method"),
        ({"jsonrpc": "2.0", "id": 4, "result": {}}, 4, "responses"),
    ],
)
def test_parse_request_refusals_carry_the_readable_id(value, rid, match):
    with pytest.raises(InvalidRequestError, match=match) as info:
        jsonrpc.parse_request(value)
    assert info.value.request_id == rid
    assert info.value.jsonrpc_code == -32600
    response = info.value.to_response()
    assert response["error"]["code"] == -32600
    assert ("id" in response) == (rid is not None)


def test_parse_response_result_and_error():
    ok = jsonrpc.parse_response({"jsonrpc": "2.0", "id": 1, "result": None})
    assert isinstance(ok, Response) and not ok.is_error
    err = jsonrpc.parse_response(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "m", "data": 1}}
    )
    assert err.is_error and err.id is None
    converted = err.to_error()
    assert isinstance(converted, JsonRpcError)
    assert (converted.code, converted.message, converted.data) == (-32600, "m", 1)
    with pytest.raises(LocalProtocolError):
        ok.to_error()


@pytest.mark.parametrize(
    "value",
    [
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}},
        {"jsonrpc": "2.0", "result": {}},
        {"jsonrpc": "2.0", "id": 1, "error": "boom"},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": True, "message": "m"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": 1}},
        {"jsonrpc": "2.0", "id": [], "error": {"code": 1, "message": "m"}},
        {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create"},
    ],
)
def test_parse_response_refuses_malformed_responses_and_server_requests(value):
    with pytest.raises(InvalidRequestError):
        jsonrpc.parse_response(value)


def test_builders():
    assert jsonrpc.request(1, "m", {"a": 1}) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "m",
        "params": {"a": 1},
    }
    assert jsonrpc.notification("n") == {"jsonrpc": "2.0", "method": "n"}
    assert jsonrpc.result_response("x", {}) == {"jsonrpc": "2.0", "id": "x", "result": {}}
    assert jsonrpc.error_response(None, -32700, "bad") == {
        "jsonrpc": "2.0",
        "error": {"code": -32700, "message": "bad"},
    }
    assert jsonrpc.error_response_for(3, JsonRpcError(-32602, "m", {"k": 1}))["error"] == {
        "code": -32602,
        "message": "m",
        "data": {"k": 1},
    }


def test_encode_is_compact_utf8_on_one_line():
    data = jsonrpc.encode({"text": "a\nb", "name": "café"})
    assert b"\n" not in data
    assert data == '{"text":"a\\nb","name":"café"}'.encode()
    assert json.loads(data) == {"text": "a\nb", "name": "café"}


def test_encode_escapes_lone_surrogates():
    data = jsonrpc.encode({"s": "\ud800"})
    assert json.loads(data) == {"s": "\ud800"}


@pytest.mark.parametrize("value", [math.nan, object(), {1j: 1}, too_deep()])
def test_encode_refuses_what_json_cannot_carry(value):
    with pytest.raises(LocalProtocolError):
        jsonrpc.encode({"v": value})


# --- the quick check for common shapes ------------------------------------------------------

_IDS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=3),
    st.floats(allow_nan=False),
    st.lists(st.integers(), max_size=1),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
)
_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2.0, None]),
        "id": _IDS,
        "method": st.one_of(st.sampled_from(["", "ping", "tools/call"]), _IDS),
        "params": st.one_of(st.dictionaries(st.text(max_size=2), st.integers(), max_size=2), _IDS),
        "result": _IDS,
        "error": st.one_of(st.fixed_dictionaries({"code": _IDS, "message": _IDS}), _IDS),
    },
)


def _classify(obj: object) -> object:
    try:
        return jsonrpc.parse_message(obj)
    except jsonrpc.MessageError as exc:
        return (type(exc).__name__, str(exc), exc.request_id)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.one_of(_FIELDS, _IDS))
def test_jsonrpc_common_shapes_classify_as_the_full_checks_do(obj: object) -> None:
    fast = _classify(obj)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonrpc, "_common", lambda obj: None)
        assert _classify(obj) == fast
