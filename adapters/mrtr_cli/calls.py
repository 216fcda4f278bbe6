"""``mrtr call``, ``mrtr prompt`` and ``mrtr read``: one MRTR operation against any server.

The sync client (``mrtr_sync.Client``) drives the flow; this module decides how its inputs are
answered (:class:`~mrtr_cli.inputs.Inputs`), prints one line per round, prints the result, and
turns every failure into a message that says what happened and what to do.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, Final

import attrs
from mrtr_sync import Client, Transport
from rich.console import Console
from rich.text import Text

from mrtr_cli.answers import AnswersFileError
from mrtr_cli.inputs import Inputs, InputUnavailableError
from mrtr_cli.keys import KeyFileError
from mrtr_cli.progress import RoundReporter
from mrtr_cli.render import print_result
from mrtr_cli.safe import clean, plain
from mrtr_cli.terminal import TurnClock, Turns
from mrtr_core.client.commands import InputNeeded
from mrtr_core.client.limits import ClientLimits
from mrtr_core.errors import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    HandlerFailedError,
    JsonRpcError,
    LimitExceededError,
    MrtrError,
    TransportError,
    UnsupportedInputError,
)
from mrtr_core.http import HttpStatusError
from mrtr_core.wire.forms import FormAnswerError, FormSchemaError
from mrtr_core.wire.models import CALL_TOOL, READ_RESOURCE, Implementation

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_TOOL_ERROR",
    "CallSpec",
    "connect",
    "explain",
    "run_call",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_TOOL_ERROR: Final = 3

CLIENT_INFO: Final = Implementation(name="mrtr-cli", version="0.1.0")


@attrs.frozen(kw_only=True)
class CallSpec:
    """What to ask for: ``method`` and its params (``name``/``arguments`` or ``uri``)."""

    method: str
    target: str
    arguments: dict[str, Any] | None = None

    @property
    def params(self) -> dict[str, Any]:
        """The request params, without ``_meta`` (the client adds it)."""
        if self.method == READ_RESOURCE:
            return {"uri": self.target}
        params: dict[str, Any] = {"name": self.target}
        if self.arguments is not None:
            params["arguments"] = self.arguments
        return params


def connect(url: str | None, stdio: str | None) -> Transport:
    """A sync transport: Streamable HTTP to ``url``, or a stdio server started by ``stdio``."""
    if stdio is not None:
        from mrtr_sync.stdio_client import StdioTransport

        # The server's own process group: a Ctrl-C at the terminal interrupts this command
        # only, which says so once and closes the server's stdin (digest §3.4 "Shutdown"),
        # instead of the server reporting (or tracing back) the interrupt on the shared stderr.
        return StdioTransport.spawn(stdio, process_group=0)
    if url is None:
        raise ValueError("give a server URL or --stdio COMMAND")
    from mrtr_sync.http_client import HttpTransport

    return HttpTransport(url)


def build_client(
    transport: Transport,
    inputs: Inputs,
    *,
    on_event: Callable[[object], object] | None,
    limits: ClientLimits,
) -> Client:
    """A sync client whose handlers are ``inputs``.

    The client runs a round's handlers concurrently (C1); they take turns in the server's
    order through the client's own :class:`~mrtr_cli.terminal.Turns` (a person answers one
    form after another even when a round asks several at once). Each round is announced to
    it from the client's ``InputNeeded`` notice, and the client's cancellation of an input
    wakes it (:class:`~mrtr_cli.terminal.TurnClock`), so an abandoned prompt never blocks;
    closing the client abandons whatever input of its operations is still waiting.
    """
    turns = Turns()

    # The client's handler threads leave Ctrl-C to the main thread (mrtr_sync.threads).
    def handler(request: Any, key: str, cancel: threading.Event) -> Any:
        return inputs.answer(key, request, turns=turns, cancel=cancel)

    def notice(cmd: object) -> None:
        if isinstance(cmd, InputNeeded):
            turns.begin_round(cmd.result.input_requests or {})
        if on_event is not None:
            on_event(cmd)

    kinds = inputs.handled_kinds
    return _Client(
        turns,
        transport,
        client_info=CLIENT_INFO,
        elicitation=handler,
        elicitation_form=True,
        elicitation_url=inputs.url_mode,
        sampling=handler if "sampling/createMessage" in kinds else None,
        roots=handler if "roots/list" in kinds else None,
        limits=limits,
        on_event=notice,
        clock=TurnClock(turns),
    )


class _Client(Client):
    """The sync client, whose close also abandons the inputs still waiting on the terminal
    (an input the client never got to cancel, an interrupt having cut its bookkeeping short,
    must not keep the command alive)."""

    def __init__(self, turns: Turns, transport: Transport, **kwargs: Any) -> None:
        super().__init__(transport, **kwargs)
        self._turns = turns

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._turns.close()


def run_call(
    client: Client,
    call: CallSpec,
    *,
    out: Console,
    ui: Console,
    reporter: RoundReporter,
    raw: bool = False,
) -> int:
    """Run one operation to its end; print the result on ``out`` and problems on ``ui``.

    Returns the exit status: 0 done, 3 the tool reported ``isError``, 1 the flow failed.
    """
    try:
        if call.method == CALL_TOOL and getattr(client.transport, "param_headers", None):
            with reporter.quiet():
                _learn_tools(client)
        result = client.request(call.method, call.params)
    except MrtrError as exc:
        ui.print(explain(exc))
        return EXIT_FAILED
    reporter.completed()
    print_result(out, call.method, result, raw=raw)
    if call.method == CALL_TOOL and result.get("isError") is True:
        return EXIT_TOOL_ERROR
    return EXIT_OK


def _learn_tools(client: Client, *, max_pages: int = 20) -> None:
    """List the server's tools, so that the HTTP transport knows which arguments it must
    mirror into ``Mcp-Param-*`` headers (``x-mcp-header``); a server whose tools/list fails
    is called without them.

    A cursor is an opaque string (server/utilities/pagination.mdx): each ``nextCursor`` is
    sent back as it came, ``""`` too (the client MUST NOT assume a format or modify one), and
    only a missing one ends the listing. A cursor already followed names a position already
    listed (servers SHOULD keep cursors stable), so the listing stops there too.
    """
    params: dict[str, str] = {}
    followed: set[str] = set()
    for _ in range(max_pages):
        try:
            page = client.request("tools/list", params)
        except JsonRpcError:
            return
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str) or cursor in followed:
            return
        followed.add(cursor)
        params = {"cursor": cursor}


# What gives this client each capability a server may require (-32021, digest S7).
_CAPABILITY_OPTIONS: Final = {
    "sampling": "--sampling-reply TEXT or --sampling-command CMD",
    "roots": "--root PATH",
    "elicitation": "URL mode is declared without --no-url-mode",
}


def _capability_hint(exc: JsonRpcError) -> str:
    """For ``-32021``, the options that declare what ``data.requiredCapabilities`` names."""
    if exc.code != MISSING_REQUIRED_CLIENT_CAPABILITY or not isinstance(exc.data, dict):
        return ""
    required = exc.data.get("requiredCapabilities")
    if not isinstance(required, dict):
        return ""
    known = [f"{name} ({_CAPABILITY_OPTIONS[name]})" for name in required
             if name in _CAPABILITY_OPTIONS]
    if not known:
        return ""
    return f"This call needs {', '.join(known)}: add the option and run it again."


def explain(exc: BaseException) -> Text:
    """A message for a person: what stopped the flow and what can be done."""
    text = Text("✗ ", style="bold red")
    if isinstance(exc, HandlerFailedError):
        cause = exc.cause
        if isinstance(cause, InputUnavailableError):
            text.append(plain(f"Stopped: {cause.reason} (input {cause.key}, {cause.kind}).\n"))
            if cause.kind == "elicitation/create":
                text.append("Nothing was sent for this round; the server holds nothing for "
                            "this call, so it can simply be run again.", style="dim")
            else:
                text.append(
                    "MRTR has no way to tell the server that an input cannot be given (only "
                    "forms can be declined), so no retry was sent; the server holds nothing "
                    "for this call.", style="dim")
            return text
        if isinstance(cause, FormSchemaError):
            text.append(plain(f"The server sent a form this client cannot show (input "
                              f"{exc.key}): {cause}"))
            return text
        if isinstance(cause, FormAnswerError):
            text.append(plain(f"The answers for input {exc.key} do not fit its form:\n"))
            for problem in cause.problems:
                text.append(plain(f"  - {problem}\n"))
            return text
        text.append(plain(f"Answering input {exc.key} failed: {cause}"))
        return text
    if isinstance(exc, JsonRpcError):
        text.append(plain(f"The server answered error {exc.code}: {exc.message}"))
        if exc.data is not None:
            text.append(plain(f"\n  data: {json.dumps(exc.data)}", "dim", limit=2000))
        hint = _capability_hint(exc)
        if hint:
            text.append(plain(f"\n{hint}"))
        return text
    if isinstance(exc, UnsupportedInputError):
        text.append(plain(f"The server asked for input {exc.key} ({exc.kind}), which this "
                          f"client did not declare: {exc.reason}. Configure it (--root, "
                          f"--sampling-reply) and try again."))
        return text
    if isinstance(exc, HttpStatusError):
        text.append(plain(f"The server answered HTTP {exc.status} without a JSON-RPC response"
                          f" (is the URL the MCP endpoint, such as http://host:port/mcp?)"))
        return text
    if isinstance(exc, TransportError):
        text.append(plain(f"The connection failed: {exc.cause}"))
        return text
    if isinstance(exc, LimitExceededError):
        text.append(plain(f"Stopped by the {exc.limit} limit ({exc.value}): {exc}"))
        return text
    if isinstance(exc, AnswersFileError | KeyFileError):
        text.append(plain(str(exc)))
        return text
    text.append(plain(f"{type(exc).__name__}: {clean(exc)}"))
    return text
