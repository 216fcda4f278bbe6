"""One progress line per round, from the client's round notices."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.text import Text

from mrtr_cli.safe import clean
from mrtr_core.client.commands import InputNeeded, RoundFulfilled, RoundStarted
from mrtr_core.wire.models import (
    CreateMessageRequest,
    ElicitFormRequest,
    ElicitUrlRequest,
    InputRequest,
)

__all__ = ["RoundReporter", "kind_label"]


def kind_label(request: InputRequest) -> str:
    """A one-word name for an input request's kind."""
    if isinstance(request, ElicitFormRequest):
        return "form"
    if isinstance(request, ElicitUrlRequest):
        return "url"
    if isinstance(request, CreateMessageRequest):
        return "sampling"
    return "roots"


class RoundReporter:
    """Prints the rounds of one flow as they happen (pass it as the client's ``on_event``).

    Args:
        console: Where lines go.
        where: Optional ``request id -> text`` naming where a request was served (the demo
            names the instance the balancer chose).
    """

    def __init__(self, console: Console, *, where: Callable[[Any], str | None] | None = None):
        self.console = console
        self.where = where
        self.rounds = 0
        self.last_request_id: Any = None
        self.state_sizes: list[int] = []
        self._quiet = False

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """Within the block, notices are not printed (a helper request such as tools/list)."""
        self._quiet = True
        try:
            yield
        finally:
            self._quiet = False

    def __call__(self, notice: object) -> None:
        if self._quiet:
            return
        if isinstance(notice, RoundStarted):
            self.rounds = notice.round
            self.last_request_id = notice.request_id
            line = Text.assemble(
                (f"round {notice.round}", "bold"), f" → request id {notice.request_id}")
            if notice.state_only:
                line.append(" (state only: requestState echoed, no new input)", style="dim")
            elif notice.round > 1:
                line.append(" (inputResponses + requestState echoed)", style="dim")
            self.console.print(line)
        elif isinstance(notice, InputNeeded):
            requests = notice.result.input_requests or {}
            state = notice.result.request_state
            # Counted as the client's state limit counts it: a lone surrogate (JSON's
            # "\ud800" escape) has no strict UTF-8 form.
            size = len(state.encode("utf-8", "surrogatepass")) if state is not None else 0
            self.state_sizes.append(size)
            keys = ", ".join(f"{clean(k)} ({kind_label(r)})" for k, r in requests.items())
            line = Text.assemble((f"round {notice.round}", "bold"), " ← ",
                                 ("input_required", "yellow"))
            self._where(line)
            line.append(f": {keys or 'no input (state only)'}; ")
            line.append("requestState " + (f"{size} bytes" if state is not None else "absent"))
            self.console.print(line)
        elif isinstance(notice, RoundFulfilled):
            self.console.print(Text(
                f"round {notice.round} answered: {', '.join(clean(k) for k in notice.keys)}",
                style="dim"))

    def _where(self, line: Text) -> None:
        if self.where is not None:
            served = self.where(self.last_request_id)
            if served:
                line.append(f" from {served}", style="cyan")

    def completed(self) -> None:
        """Print the closing line once the flow completed."""
        line = Text.assemble((f"round {self.rounds}", "bold"), " ← ", ("complete", "green"))
        self._where(line)
        self.console.print(line)
