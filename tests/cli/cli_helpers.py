"""What CLI tests that run ``mrtr`` as a child process share."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A safety net for a step that takes a second or two: a failure that can be seen (a process
# that exits, an error line) ends the wait at once; only a hang waits this long.
START_TIMEOUT = 120.0


def cli(*args: str, stdin: str = "",
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``mrtr ARGS`` in a child process; it reads ``stdin`` (never this process's stdin) and
    runs with this process's environment plus ``env``."""
    return subprocess.run([sys.executable, "-m", "mrtr_cli", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=START_TIMEOUT, check=False,
                          env={**os.environ, **(env or {})})


class StderrLines:
    """The lines a child process writes to its ``stderr`` pipe (text mode), read to the end
    of the pipe on a daemon thread: the end comes once every process sharing it has ended."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        self._stream = proc.stderr
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with self._stream:  # closed at its end, which every reader waits for
            for line in self._stream:
                with self._changed:
                    self._lines.append(line)
                    self._changed.notify_all()

    @property
    def text(self) -> str:
        """Everything read so far."""
        with self._changed:
            return "".join(self._lines)

    def wait_for(self, text: str, timeout: float) -> None:
        """Block until a line contains ``text``; fail (showing what came) after ``timeout``."""
        with self._changed:
            assert self._changed.wait_for(
                lambda: any(text in line for line in self._lines), timeout
            ), "".join(self._lines)

    def wait_for_end(self, timeout: float) -> bool:
        """Block until the pipe ends; whether it did within ``timeout``."""
        self._reader.join(timeout)
        return not self._reader.is_alive()
