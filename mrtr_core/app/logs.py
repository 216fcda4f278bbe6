"""What an mrtr server logs, on which loggers (the stdlib :mod:`logging` module).

The library only emits records; it never configures logging (no handlers, no levels, no
``basicConfig``): the application does, or ``mrtr serve`` (``--log-level``). With nothing
configured, Python's last-resort handler still prints WARNING and above on stderr.

``mrtr.server`` (:data:`server_log`), ERROR with the exception as ``exc_info``:
    * a tool, prompt, resource or completion handler raised an ordinary exception (the
      client still gets what it always got: a tool result with ``isError``, or -32603);
    * the server failed by its own fault: an engine limit or a driver mistake
      (:class:`~mrtr_core.errors.MrtrError`), a -32603 the engine or a handler raised
      (too many rounds, an oversized ``requestState``, an invalid result or form);
    * a driver or transport hit an unexpected exception and answered
      :func:`~mrtr_core.app.reply.internal_error_reply` (-32603, HTTP 500).

    The message names the method, the tool or prompt name or the resource URI, and the
    request id; never the arguments, the answers or the ``requestState``.

``mrtr.server.state`` (:data:`state_log`), INFO without a traceback:
    a ``requestState`` refused (``malformed``, ``bad_mac``, ``unknown_key``, ``expired``,
    ``binding_mismatch``, ``replayed``, ``too_large``), naming the reason code, the method,
    the target and the request id; never the token. For security monitoring.

The client's own mistakes (malformed messages, unknown methods or tools, bad params or
answers, a missing client capability: the errors other than -32603) are not the server's
errors and are not logged. A successful round logs nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from mrtr_core.app.reply import RequestId

__all__ = [
    "SERVER_LOGGER",
    "STATE_LOGGER",
    "handler_failed",
    "internal_error",
    "server_failed",
    "server_log",
    "state_log",
    "state_refused",
]

SERVER_LOGGER: Final = "mrtr.server"
STATE_LOGGER: Final = "mrtr.server.state"

server_log: Final = logging.getLogger(SERVER_LOGGER)
state_log: Final = logging.getLogger(STATE_LOGGER)


def handler_failed(method: str, target: str, request_id: RequestId | None,
                   exc: BaseException) -> None:
    """Log (ERROR, with its traceback) that the handler behind ``method``/``target`` raised
    ``exc`` while answering ``request_id``."""
    server_log.error("%s %r: the handler raised (request id %r)", method, target, request_id,
                     exc_info=exc)


def server_failed(method: str, target: str, request_id: RequestId | None,
                  exc: BaseException) -> None:
    """Log (ERROR, with its traceback) that the server itself failed answering
    ``method``/``target`` for ``request_id``: a limit or a driver mistake."""
    server_log.error("%s %r: the server failed (request id %r)", method, target, request_id,
                     exc_info=exc)


def internal_error(request_id: RequestId | None, exc: BaseException) -> None:
    """Log (ERROR, with its traceback) that a driver or transport answered ``request_id``
    with an internal error because of ``exc``."""
    server_log.error("internal error answering request id %r", request_id, exc_info=exc)


def state_refused(method: str, target: str, request_id: RequestId | None, reason: str) -> None:
    """Log (INFO, no traceback) that the ``requestState`` of ``request_id`` was refused for
    ``reason`` (a rejection reason code; the token itself is never logged)."""
    state_log.info("%s %r: requestState refused (%s) (request id %r)", method, target, reason,
                   request_id)
