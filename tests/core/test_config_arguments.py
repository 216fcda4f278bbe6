"""Bad configuration from the developer is refused where it is given, naming the argument.

A limit of 0, a path without its slash, a bool where a count belongs or a decorator used
without its parentheses would otherwise hang a call, answer every request with 404, never
enforce a limit, or register nothing, long after the line that got it wrong.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from mrtr_core import App, KeyRing, StateCodec
from mrtr_core.http import HttpClientConfig, HttpServerConfig
from mrtr_core.server import ServerEngine, ServerLimits

KEY = bytes(range(32))
RING = KeyRing({"k1": KEY}, active="k1")


def codec(**kwargs: Any) -> StateCodec:
    return StateCodec(RING, **{"audience": "srv", "nonce": os.urandom, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"path": "mcp"}, "path must be a path starting with '/'"),
        ({"path": ""}, "path must be a path starting with '/'"),
        ({"path": "/mcp?x=1"}, "path must be a path starting with '/'"),
        ({"max_body_bytes": 0}, "max_body_bytes must be an integer >= 1, got 0"),
        ({"max_header_bytes": -1}, "max_header_bytes must be an integer >= 1"),
        ({"max_depth": True}, "max_depth must be an integer >= 1, got True"),
        ({"max_body_bytes": float("nan")}, "max_body_bytes must be an integer >= 1"),
        ({"allowed_origins": {"https://app.example/"}}, "allowed_origins holds 'https://app.example/'"),
    ],
)
def test_http_server_config_refuses_bad_values(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("?", r"\?")):
        HttpServerConfig(**kwargs)


def test_http_server_config_refuses_a_string_of_origins() -> None:
    # A string would be searched by substring, letting in origins never listed.
    with pytest.raises(TypeError, match="allowed_origins must be a set of origins, not str"):
        HttpServerConfig(allowed_origins="https://app.example")  # type: ignore[arg-type]


def test_http_server_config_keeps_good_values() -> None:
    config = HttpServerConfig(
        path="/v1/mcp", allowed_origins=frozenset({"https://app.example:8443", "null"})
    )
    assert config.origin_allowed("https://app.example:8443")
    assert not config.origin_allowed("https://app.example")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_response_bytes": 0}, ValueError, "max_response_bytes must be an integer >= 1"),
        ({"max_stream_bytes": -1}, ValueError, "max_stream_bytes must be an integer >= 1"),
        ({"max_header_bytes": 1.5}, ValueError, "max_header_bytes must be an integer >= 1"),
        ({"max_depth": 0}, ValueError, "max_depth must be an integer >= 1"),
        ({"headers": {"Authorization": "Bearer x"}}, TypeError, "headers must be a tuple"),
        ({"headers": (("X-A", "1\r\nX-B: 2"),)}, ValueError, "headers holds an invalid header"),
    ],
)
def test_http_client_config_refuses_bad_values(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        HttpClientConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_rounds": True}, {"max_rounds": 2.5}, {"max_rounds": float("nan")},
        {"max_rounds": "3"}, {"max_rounds": None}, {"max_input_requests": 0},
        {"max_state_bytes": float("inf")}, {"max_input_responses_bytes": 1.5},
    ],
)
def test_server_limits_must_be_integers(kwargs: dict[str, Any]) -> None:
    (name,) = kwargs
    with pytest.raises(ValueError, match=f"{name} must be an integer >= 1"):
        ServerLimits(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"ttl": True}, ValueError, "ttl must be a positive finite number"),
        ({"ttl": "600"}, ValueError, "ttl must be a positive finite number"),
        ({"skew": True}, ValueError, "skew must be a non-negative finite number"),
        ({"skew": None}, ValueError, "skew must be a non-negative finite number"),
        ({"max_bytes": float("nan")}, ValueError, "max_bytes must be an integer of at least 64"),
        ({"max_bytes": 1e6}, ValueError, "max_bytes must be an integer of at least 64"),
        ({"max_bytes": "4096"}, ValueError, "max_bytes must be an integer of at least 64"),
        ({"audience": ""}, ValueError, "audience must not be empty"),
        ({"nonce": None}, TypeError, "nonce must be a callable"),
    ],
)
def test_state_codec_refuses_bad_values(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        codec(**kwargs)


def test_state_codec_needs_a_key_ring() -> None:
    with pytest.raises(TypeError, match="ring must be a KeyRing, not dict"):
        StateCodec({"k1": KEY}, audience="srv", nonce=os.urandom)  # type: ignore[arg-type]


def test_key_ring_needs_a_mapping_and_drops_only_keys_it_has() -> None:
    with pytest.raises(TypeError, match="keys must map key ids to secrets, not list"):
        KeyRing([("k1", KEY)], active="k1")  # type: ignore[arg-type]
    ring = KeyRing({"k1": KEY, "k2": KEY}, active="k1")
    # A mistyped id in the last rotation step would leave the old key verifying.
    with pytest.raises(ValueError, match="key 'k3' is not in the ring"):
        ring.without("k3")
    assert ring.without("k2").ids == {"k1"}


def test_engine_and_app_refuse_a_codec_or_limits_of_the_wrong_type() -> None:
    with pytest.raises(TypeError, match="codec must be a StateCodec, not NoneType"):
        App("srv", "1", codec=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="limits must be ServerLimits or None, not dict"):
        ServerEngine(codec(), limits={"max_rounds": 3})  # type: ignore[arg-type]


def test_tool_and_prompt_decorators_used_without_parentheses_are_refused() -> None:
    app = App("srv", "1", codec=codec())

    def greet(ctx: Any) -> str:
        return "hi"

    with pytest.raises(TypeError, match=r"write @app.tool\(\), not @app.tool"):
        app.tool(greet)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"write @app.prompt\(\), not @app.prompt"):
        app.prompt(greet)  # type: ignore[arg-type]
    assert app.tools == () and app.prompts == ()


@pytest.mark.parametrize("name", ["", "greet\n", 5])
def test_a_tool_name_given_must_itself_be_valid(name: Any) -> None:
    app = App("srv", "1", codec=codec())

    def greet(ctx: Any) -> str:
        return "hi"

    with pytest.raises(ValueError, match="must be 1-128 characters"):
        app.tool(name)(greet)
    assert app.tools == ()
