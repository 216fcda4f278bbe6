"""What the adapters' client transports share, without I/O: ``HttpTransportBase``,
``AsyncHttpTransportBase`` (mrtr_core.http), ``StdioTransportBase`` and
``StdioClientConnection.send_request`` (mrtr_core.stdio).

The coroutines here never suspend, so they are run with ``run_inline``: no event loop.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from wire_helpers import call_tool

from mrtr_core.app import run_inline
from mrtr_core.errors import (
    LocalProtocolError,
    MrtrError,
    RemoteProtocolError,
    TransportClosedError,
)
from mrtr_core.http import (
    AsyncHttpTransportBase,
    Endpoint,
    HttpClientConfig,
    HttpTransportBase,
    NotificationAccepted,
    ParamHeaderRegistry,
    ResponseReceived,
)
from mrtr_core.stdio import (
    DEFAULT_MAX_LINE_BYTES,
    ServerExitedError,
    StdioClientConnection,
    StdioTransportBase,
)


class _Tls:
    """A TLS context as far as the base can tell (it only stores it)."""


class _Factory:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> _Tls:
        self.calls += 1
        return _Tls()


# -- HttpTransportBase ---------------------------------------------------------------------


def test_http_base_parses_the_endpoint_and_defaults_the_config():
    base: HttpTransportBase[object, _Tls] = HttpTransportBase(
        "http://127.0.0.1:8000/mcp", None, None, _Factory()
    )
    assert base.endpoint == Endpoint(scheme="http", host="127.0.0.1", port=8000, target="/mcp")
    assert base.config == HttpClientConfig()
    assert isinstance(base.param_headers, ParamHeaderRegistry)


def test_http_base_keeps_the_given_config():
    config = HttpClientConfig(headers=(("Authorization", "Bearer t"),))
    base: HttpTransportBase[object, _Tls] = HttpTransportBase(
        "http://127.0.0.1:8000/mcp", config, None, _Factory()
    )
    assert base.config is config


def test_http_base_rejects_a_bad_url():
    with pytest.raises(LocalProtocolError):
        HttpTransportBase("ftp://127.0.0.1/mcp", None, None, _Factory())


def test_http_base_makes_the_default_tls_context_for_https_only():
    factory = _Factory()
    https: HttpTransportBase[object, _Tls] = HttpTransportBase(
        "https://example.test/mcp", None, None, factory
    )
    assert isinstance(https._ssl, _Tls)
    assert factory.calls == 1
    plain: HttpTransportBase[object, _Tls] = HttpTransportBase(
        "http://example.test/mcp", None, None, factory
    )
    assert plain._ssl is None
    assert factory.calls == 1


def test_http_base_uses_a_given_tls_context_whatever_the_scheme():
    factory = _Factory()
    given = _Tls()
    for url in ("https://example.test/mcp", "http://example.test/mcp"):
        base: HttpTransportBase[object, _Tls] = HttpTransportBase(url, None, given, factory)
        assert base._ssl is given
    assert factory.calls == 0


def test_http_base_starts_with_an_empty_open_pool():
    base: HttpTransportBase[object, _Tls] = HttpTransportBase(
        "http://127.0.0.1:8000/mcp", None, None, _Factory()
    )
    assert base._idle == []
    assert base._closed is False


# -- AsyncHttpTransportBase ----------------------------------------------------------------


class _Conn:
    def __init__(self) -> None:
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True


class _Scripted(AsyncHttpTransportBase[_Conn, _Tls]):
    """Answers every exchange with the next scripted event and records the messages."""

    def __init__(self, *answers: ResponseReceived | NotificationAccepted) -> None:
        super().__init__("http://127.0.0.1:8000/mcp", None, None, _Factory())
        self.answers = list(answers)
        self.sent: list[dict[str, Any]] = []

    async def _exchange(self, message: Any) -> ResponseReceived | NotificationAccepted:
        self.sent.append(dict(message))
        return self.answers.pop(0)


def test_async_http_base_request_returns_the_response_message():
    response = {"jsonrpc": "2.0", "id": 1, "result": {}}
    transport = _Scripted(ResponseReceived(message=response, status=200))
    assert run_inline(transport.request(call_tool("echo", 1))) == response
    assert transport.sent == [call_tool("echo", 1)]


def test_async_http_base_request_answered_as_a_notification_is_a_connection_error():
    transport = _Scripted(NotificationAccepted(status=202))
    with pytest.raises(ConnectionError, match="accepted a request as a notification"):
        run_inline(transport.request(call_tool("echo", 1)))


def test_async_http_base_notify_sends_through_the_exchange():
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    transport = _Scripted(NotificationAccepted(status=202))
    assert run_inline(transport.notify(note)) is None
    assert transport.sent == [note]


def test_async_http_base_aclose_closes_every_idle_connection():
    transport = _Scripted()
    conns = [_Conn(), _Conn()]
    transport._idle.extend(conns)
    run_inline(transport.aclose())
    assert all(conn.closed for conn in conns)
    assert transport._idle == []
    assert transport._closed is True


def test_async_http_base_context_manager_closes_on_exit():
    async def body(transport: _Scripted) -> None:
        async with transport as entered:
            assert entered is transport
            transport._idle.append(conn)

    conn = _Conn()
    transport = _Scripted()
    run_inline(body(transport))
    assert conn.closed
    assert transport._closed is True


def test_async_http_base_without_an_exchange_is_abstract():
    with pytest.raises(TypeError, match="_exchange"):
        AsyncHttpTransportBase(  # type: ignore[abstract]
            "http://127.0.0.1:8000/mcp", None, None, _Factory()
        )


# -- StdioClientConnection.send_request ----------------------------------------------------


@pytest.mark.parametrize("request_id", [1, 0, -5, "a", ""])
def test_send_request_returns_the_id_and_the_line(request_id):
    message = call_tool("echo", request_id)
    got_id, line = StdioClientConnection().send_request(message)
    assert got_id == request_id
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == message


@pytest.mark.parametrize("request_id", [None, True, False, 1.5, [1], {"a": 1}])
def test_send_request_refuses_an_id_that_cannot_be_matched(request_id):
    message = call_tool("echo", 1)
    message["id"] = request_id
    with pytest.raises(LocalProtocolError, match="a request needs a string or integer id"):
        StdioClientConnection().send_request(message)


def test_send_request_refuses_a_notification():
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    with pytest.raises(LocalProtocolError, match="a request needs a string or integer id"):
        StdioClientConnection().send_request(note)


def test_send_request_refuses_a_response_with_an_id():
    response = {"jsonrpc": "2.0", "id": 1, "result": {}}
    with pytest.raises(LocalProtocolError, match="not a sendable message"):
        StdioClientConnection().send_request(response)


def test_send_request_refuses_a_message_that_is_not_json():
    message = call_tool("echo", 1)
    message["params"]["arguments"]["x"] = object()
    with pytest.raises(LocalProtocolError):
        StdioClientConnection().send_request(message)


# -- StdioTransportBase --------------------------------------------------------------------


class _Process:
    def __init__(self, stdin: object, stdout: object) -> None:
        self.stdin = stdin
        self.stdout = stdout


class _Base(StdioTransportBase[_Process, object]):
    """The base with the one method each runtime adds: failing what is in flight."""

    def _fail(self, error: MrtrError) -> None:
        if self._failure is None:
            self._failure = error


def test_stdio_base_keeps_the_process_and_its_pipes():
    stdin, stdout = object(), object()
    process = _Process(stdin, stdout)
    base = _Base(process, close_timeout=3.0)
    assert base.process is process
    assert base.close_timeout == 3.0
    assert base._stdin is stdin and base._stdout is stdout
    assert base._pending == {}
    assert base._failure is None


@pytest.mark.parametrize("pipes", [(None, object()), (object(), None), (None, None)])
def test_stdio_base_needs_both_pipes(pipes):
    with pytest.raises(ValueError, match="needs stdin and stdout pipes"):
        _Base(_Process(*pipes))


def test_stdio_base_connection_honours_max_line_bytes():
    base = _Base(
        _Process(object(), object()), max_line_bytes=64
    )
    base._conn.receive_data(
        b'{"jsonrpc": "2.0", "id": 1, "result": {"pad": "' + b"x" * 64 + b'"}}\n'
    )
    with pytest.raises(RemoteProtocolError, match="longer than 64 bytes"):
        base._conn.next_event()


def test_stdio_base_defaults_to_the_default_line_limit():
    base = _Base(_Process(object(), object()))
    assert base._conn._lines.framer.max_line_bytes == DEFAULT_MAX_LINE_BYTES
    assert base.close_timeout == 2.0


def test_stdio_base_closed_on_purpose_says_so_whatever_failed_first():
    base = _Base(_Process(object(), object()))
    base._fail(ServerExitedError("the server exited", returncode=0))
    base._fail_closed()
    assert isinstance(base._failure, TransportClosedError)
