"""Shared helpers for the CLI tests: a scripted terminal."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from mrtr_cli.forms import Prompter
from rich.console import Console


class Terminal:
    """A fake terminal: a console writing to a buffer and a scripted input stream."""

    def __init__(self, lines: list[str]) -> None:
        self.output = io.StringIO()
        self.console = Console(file=self.output, width=120, force_terminal=False,
                               color_system=None, highlight=False)
        self.stream = io.StringIO("".join(f"{line}\n" for line in lines))
        self.prompter = Prompter(self.console, stream=self.stream, server="test-server")

    @property
    def text(self) -> str:
        """Everything shown so far."""
        return self.output.getvalue()

    @property
    def unread(self) -> str:
        """Scripted input not consumed."""
        return self.stream.read()


@pytest.fixture
def terminal() -> Callable[[list[str]], Terminal]:
    """``terminal(lines)``: a fake terminal that will type ``lines``."""
    return Terminal
