"""The error tree shared by every part of mrtr.

Every error the core raises or emits derives from :class:`MrtrError`. Errors carry what a
caller needs to recover: the last result seen, the key that failed, the JSON-RPC code a
server should answer with. No error ever wraps an ``ExceptionGroup``.
"""

from __future__ import annotations

from typing import Any

from mrtr_core._pickling import PicklableError

__all__ = [
    "CodecError",
    "FlowCancelledError",
    "FlowDeadlineError",
    "HandlerFailedError",
    "HandlerTimeoutError",
    "InputRequestsLimitError",
    "JsonRpcError",
    "LegTimeoutError",
    "LimitExceededError",
    "LocalProtocolError",
    "MrtrError",
    "ProtocolError",
    "RemoteProtocolError",
    "RoundLimitError",
    "StateSizeLimitError",
    "StructuredContentError",
    "TransportClosedError",
    "TransportError",
    "UnsupportedInputError",
]

# JSON-RPC codes (spec basic/index.mdx § Error Codes; digest §1.8).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022


class MrtrError(PicklableError, Exception):
    """Root of every error mrtr raises or emits.

    Every one pickles and copies as it is (same class, message and attributes), so it can
    cross to and from worker processes.
    """


class ProtocolError(MrtrError):
    """Someone broke the MRTR or JSON-RPC rules.

    Attributes:
        jsonrpc_code: The JSON-RPC error code a server would answer this with.
    """

    jsonrpc_code: int = INVALID_REQUEST

    def __init__(self, message: str, *, jsonrpc_code: int | None = None) -> None:
        super().__init__(message)
        if jsonrpc_code is not None:
            self.jsonrpc_code = jsonrpc_code


class LocalProtocolError(ProtocolError):
    """The caller fed the core something illegal in its current state."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids (an unknown ``resultType``, ...).

    Attributes:
        result: The offending result object as received, when there is one.
    """

    def __init__(
        self,
        message: str,
        *,
        jsonrpc_code: int | None = None,
        result: Any = None,
    ) -> None:
        super().__init__(message, jsonrpc_code=jsonrpc_code)
        self.result = result


class CodecError(RemoteProtocolError):
    """A wire value did not have the shape its type requires.

    Attributes:
        path: Where in the value the problem is, e.g. ``"inputRequests.confirm.params"``.
    """

    jsonrpc_code = INVALID_PARAMS

    def __init__(self, message: str, *, path: str = "", result: Any = None) -> None:
        super().__init__(f"{path}: {message}" if path else message, result=result)
        self.path = path


class StructuredContentError(RemoteProtocolError):
    """A complete ``tools/call`` result that is not an error carries no ``structuredContent``,
    or one the tool's ``outputSchema`` (as listed by ``tools/list``) does not accept.

    Clients SHOULD validate structured results against the output schema (server/tools.mdx
    § Output Schema); the server MUST conform to it.

    Attributes:
        tool: The tool's name.
        problem: What is wrong: no ``structuredContent``, or the first violation and its path.
        last_result: The result as received (also ``result``).
    """

    def __init__(self, tool: str, problem: str, *, result: Any = None) -> None:
        super().__init__(f"tool {tool!r}: {problem}", result=result)
        self.tool = tool
        self.problem = problem
        self.last_result = result


class JsonRpcError(MrtrError):
    """The peer answered with a JSON-RPC error response.

    Attributes:
        code: The JSON-RPC error code.
        message: The error message.
        data: The optional ``data`` member, as received.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"JSON-RPC error {code}: {message}")
        self.code = code
        self.message = message
        self.data = data

    def to_error_object(self) -> dict[str, Any]:
        """The ``error`` member of a JSON-RPC response carrying this error."""
        obj: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            obj["data"] = self.data
        return obj


class UnsupportedInputError(MrtrError):
    """The server asked for an input kind the client did not declare or cannot handle.

    Raised before anything is sent for that round.

    Attributes:
        key: The ``inputRequests`` key.
        kind: The input request method, e.g. ``"sampling/createMessage"``.
        reason: ``"not declared"``, ``"no handler"`` or ``"unknown kind"``.
        last_result: The ``input_required`` result that asked for it.
    """

    def __init__(self, key: str, kind: str, reason: str, last_result: Any = None) -> None:
        super().__init__(f"input request {key!r} of kind {kind!r}: {reason}")
        self.key = key
        self.kind = kind
        self.reason = reason
        self.last_result = last_result


class HandlerFailedError(MrtrError):
    """A user handler failed while fulfilling an input request.

    The first failure cancels the rest of its round; later failures of the same round are
    kept on ``others`` (never as an ``ExceptionGroup``).

    Attributes:
        key: The ``inputRequests`` key whose handler failed first.
        cause: The exception that handler raised (also ``__cause__``).
        others: Further ``(key, exception)`` failures from the same round.
        last_result: The ``input_required`` result being fulfilled.
    """

    def __init__(
        self,
        key: str,
        cause: BaseException,
        *,
        others: tuple[tuple[str, BaseException], ...] = (),
        last_result: Any = None,
    ) -> None:
        super().__init__(f"handler for input request {key!r} failed: {cause!r}")
        self.key = key
        self.cause = cause
        self.others = others
        self.last_result = last_result
        self.__cause__ = cause

    def add_other(self, key: str, error: BaseException) -> None:
        """Keep a further failure of the same round (one that raced the cancellation)."""
        self.others = (*self.others, (key, error))


class FlowCancelledError(MrtrError):
    """The caller cancelled the flow.

    Attributes:
        last_result: The last ``input_required`` result seen, if any.
    """

    def __init__(self, message: str = "flow cancelled", *, last_result: Any = None) -> None:
        super().__init__(message)
        self.last_result = last_result


class LimitExceededError(MrtrError):
    """A configured limit stopped the flow.

    Attributes:
        limit: The limit's name, e.g. ``"max_rounds"``.
        value: The configured value of that limit.
        last_result: The last ``input_required`` result seen, so the caller can resume
            (``None`` when the limit hit before any arrived).
    """

    def __init__(self, message: str, *, limit: str, value: Any, last_result: Any = None) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value
        self.last_result = last_result


class RoundLimitError(LimitExceededError):
    """The server kept answering ``input_required`` past the round limit."""


class FlowDeadlineError(LimitExceededError, TimeoutError):
    """The whole-flow time budget ran out."""


class LegTimeoutError(LimitExceededError, TimeoutError):
    """One request leg got no response in time."""


class HandlerTimeoutError(LimitExceededError, TimeoutError):
    """A handler (a person thinking, a model sampling) took longer than allowed.

    Attributes:
        key: The ``inputRequests`` key whose handler ran out of time.
    """

    def __init__(
        self, message: str, *, key: str, limit: str, value: Any, last_result: Any = None
    ) -> None:
        super().__init__(message, limit=limit, value=value, last_result=last_result)
        self.key = key


class StateSizeLimitError(LimitExceededError):
    """A ``requestState`` was larger than allowed."""


class InputRequestsLimitError(LimitExceededError):
    """An ``input_required`` result carried more ``inputRequests`` entries than allowed.

    A response is refused on its count alone, before any entry is read, so ``last_result``
    is then that result as received (a mapping, which ``ClientFlow.resume`` also takes).
    """


class TransportError(MrtrError):
    """The connection under a flow broke (reset, closed, refused) before a response arrived.

    Only the call that was using the connection fails; the client stays usable.

    Attributes:
        cause: The transport's own exception (also ``__cause__``).
        last_result: The last ``input_required`` result seen, if any.
    """

    def __init__(self, cause: BaseException, *, last_result: Any = None) -> None:
        super().__init__(f"transport failed: {cause!r}")
        self.cause = cause
        self.last_result = last_result
        self.__cause__ = cause


class TransportClosedError(MrtrError, ConnectionError):
    """The client transport was closed: a request in flight, one waiting for a connection,
    and any request made afterwards fail with this.

    It is a ``ConnectionError``, so a client reports it as it reports any broken connection
    (a :class:`TransportError` whose ``cause`` is this error). Nothing is retried: the
    transport was closed on purpose.
    """
