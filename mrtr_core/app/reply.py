"""What the app hands back to a driver: a finished :class:`Reply`, or a :class:`RunHandler`.

A driver (sync, trio or asyncio adapter; the simulator) feeds :meth:`App.receive` one decoded
JSON-RPC message and gets either a reply to send, or a handler to run: it runs
``step.invoke()`` (awaiting the result when it is awaitable) and passes the outcome to
:meth:`App.complete`, which returns the reply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Protocol

import attrs

from mrtr_core.app import logs
from mrtr_core.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    JsonRpcError,
    LocalProtocolError,
)
from mrtr_core.http import HttpServerConnection
from mrtr_core.stdio import encode_line
from mrtr_core.wire.models import JsonObject

__all__ = [
    "STATUS_ACCEPTED",
    "STATUS_BAD_REQUEST",
    "STATUS_NOT_FOUND",
    "STATUS_OK",
    "EngineRun",
    "Reply",
    "RequestId",
    "RunHandler",
    "error_message",
    "http_status_for",
    "internal_error_reply",
    "reply_lines",
    "send_http_reply",
]

RequestId = str | int

STATUS_OK: Final = 200
STATUS_ACCEPTED: Final = 202
STATUS_BAD_REQUEST: Final = 400
STATUS_NOT_FOUND: Final = 404

# Streamable HTTP statuses (digest §1.8, §3.3). -32601 -> 404 and -32020/-32021/-32022 and a
# missing _meta -> 400 are MUSTs; the rest follows the Python SDK convention (400 for the
# client's own mistakes, 200 for everything else).
_STATUS_BY_CODE: Final = {
    PARSE_ERROR: STATUS_BAD_REQUEST,
    INVALID_REQUEST: STATUS_BAD_REQUEST,
    INVALID_PARAMS: STATUS_BAD_REQUEST,
    HEADER_MISMATCH: STATUS_BAD_REQUEST,
    MISSING_REQUIRED_CLIENT_CAPABILITY: STATUS_BAD_REQUEST,
    UNSUPPORTED_PROTOCOL_VERSION: STATUS_BAD_REQUEST,
    METHOD_NOT_FOUND: STATUS_NOT_FOUND,
}


def http_status_for(code: int) -> int:
    """The HTTP status a JSON-RPC error with this code travels with."""
    return _STATUS_BY_CODE.get(code, STATUS_OK)


def error_message(request_id: RequestId | None, error: JsonRpcError) -> JsonObject:
    """A JSON-RPC error response; ``id`` is left out only when it could not be read (§1.8)."""
    out: JsonObject = {"jsonrpc": "2.0"}
    if request_id is not None:
        out["id"] = request_id
    out["error"] = error.to_error_object()
    return out


def internal_error_reply(request_id: RequestId | None, exc: BaseException) -> Reply:
    """The reply when the app itself failed (a bug): -32603 and HTTP 500, naming the
    exception's type but not its text (which may hold anything).

    The exception and its traceback are logged on ``mrtr.server`` at ERROR first
    (:mod:`mrtr_core.app.logs`): the client learns only the type, the operator learns why.
    """
    logs.internal_error(request_id, exc)
    error = JsonRpcError(INTERNAL_ERROR, f"internal error ({type(exc).__name__})")
    return Reply(message=error_message(request_id, error), status=500)


def reply_lines(reply: Reply, request_id: RequestId | None) -> list[bytes]:
    """``reply`` as stdio lines (digest §3.4): its notifications, then its message.

    A reply that cannot be encoded (a value the JSON encoder refuses) is a failure of the app
    itself: the request is answered with :func:`internal_error_reply` alone instead (a
    notification gets nothing), so the server goes on serving.
    """
    try:
        lines = [encode_line(note) for note in reply.notifications]
        if reply.message is not None:
            lines.append(encode_line(reply.message))
    except Exception as exc:  # a bug in the app must not take the server down
        fallback = internal_error_reply(request_id, exc).message
        return [] if request_id is None or fallback is None else [encode_line(fallback)]
    return lines


def send_http_reply(
    conn: HttpServerConnection, reply: Reply, request_id: RequestId | None
) -> None:
    """Answer the request ``conn`` waits on with ``reply`` (the HTTP twin of
    :func:`reply_lines`).

    A reply whose message cannot be encoded (a value the JSON encoder refuses) is a failure
    of the app itself: the request is answered with :func:`internal_error_reply` instead, so
    the connection goes on serving the requests behind it.

    Raises:
        LocalProtocolError: ``conn`` waits on no request.
    """
    try:
        conn.send_reply(reply.message, reply.status, notifications=reply.notifications)
    except LocalProtocolError as exc:
        if reply.message is None:
            raise  # nothing was encoded: no request waits for this reply
        # send_reply encodes before it writes anything: the request still waits.
        fallback = internal_error_reply(request_id, exc)
        conn.send_reply(fallback.message, fallback.status)


class EngineRun(Protocol):
    """What the app uses of the server engine's run of one round (``engine.begin(...)``)."""

    @property
    def claim(self) -> tuple[str, float] | None:
        """``(token_id, expires_at)`` to claim on the replay guard first, or ``None``."""

    @property
    def context(self) -> Any:
        """The handler's context (``ctx``)."""

    def finish(
        self, now: float, *, returned: Any = None, raised: BaseException | None = None
    ) -> Any:
        """Turn the handler's outcome into ``Completed`` or ``NeedsInput``."""

    def replayed(self) -> JsonRpcError:
        """The error to answer when the replay guard refused the claim."""


@attrs.frozen(kw_only=True)
class Reply:
    """One finished answer.

    Attributes:
        message: The JSON-RPC response object to send, or ``None`` for a notification (nothing
            is sent back; on HTTP the answer is an empty 202).
        status: The HTTP status the spec wants for it (stdio ignores it).
        notifications: Request-scoped notifications (``notifications/progress``) the handler
            emitted, to be delivered before ``message`` (on HTTP this makes the answer an SSE
            stream; digest §3.3).
    """

    message: JsonObject | None
    status: int
    notifications: tuple[JsonObject, ...] = ()

    @classmethod
    def result(
        cls,
        request_id: RequestId,
        result: JsonObject,
        notifications: tuple[JsonObject, ...] = (),
    ) -> Reply:
        """A 200 reply carrying ``result``."""
        message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "result": result}
        return cls(message=message, status=STATUS_OK, notifications=notifications)

    @classmethod
    def error(
        cls,
        request_id: RequestId | None,
        error: JsonRpcError,
        notifications: tuple[JsonObject, ...] = (),
    ) -> Reply:
        """A reply carrying a JSON-RPC error, with the status that code travels with."""
        return cls(
            message=error_message(request_id, error),
            status=http_status_for(error.code),
            notifications=notifications,
        )

    @classmethod
    def accepted(cls) -> Reply:
        """The answer to a notification: nothing to send (HTTP 202, empty body)."""
        return cls(message=None, status=STATUS_ACCEPTED)

    @property
    def is_error(self) -> bool:
        """Whether ``message`` is a JSON-RPC error response."""
        return self.message is not None and "error" in self.message


@attrs.define(kw_only=True, eq=False)
class RunHandler:
    """A handler the driver must run before the app can reply.

    Attributes:
        run: The engine's run of this round; ``run.claim`` (when set) is a
            ``(token_id, expires_at)`` the driver MUST claim on its replay guard *before*
            calling ``invoke`` (refused: reply with :meth:`App.replayed`).
        invoke: Calls the user's handler with the engine's context and the request's
            arguments. Returns the handler's value, or an awaitable of it for a coroutine
            function. May raise; whatever it raises goes to ``App.complete(raised=...)``.
        request_id: The JSON-RPC id being answered.
        method: ``tools/call``, ``prompts/get`` or ``resources/read``.
        target: The tool or prompt name, or the resource URI.
        may_suspend: ``False`` when the handler is a plain (non-async) function, so running
            it never yields to an event loop: an async driver may then skip watching the
            connection while it runs. ``True`` for coroutine functions and for any other
            callable (which may return an awaitable).
    """

    run: EngineRun
    invoke: Callable[[], Any]
    request_id: RequestId
    method: str
    target: str
    # What the app needs to turn the outcome into a result (set by the app, private).
    _finish: Callable[[Any], JsonObject] = attrs.field(alias="finish", repr=False)
    _notifications: list[JsonObject] = attrs.field(
        alias="notifications", factory=list, repr=False
    )
    may_suspend: bool = True
    done: bool = attrs.field(default=False, init=False)

    @property
    def notifications(self) -> tuple[JsonObject, ...]:
        """Notifications the handler emitted so far (``notifications/progress``)."""
        return tuple(self._notifications)
