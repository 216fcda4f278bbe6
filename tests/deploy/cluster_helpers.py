"""Processes for the deployment tests: started here, watched line by line, stopped by pid."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ensure_installed(binary: str, setup: Sequence[str]) -> str:
    """The path of ``binary``, installing it with the project's setup script if missing."""
    found = shutil.which(binary) or (f"/usr/sbin/{binary}"
                                     if Path(f"/usr/sbin/{binary}").exists() else None)
    if found is None:
        subprocess.run(["bash", *setup], cwd=ROOT, check=True, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, timeout=900)
        found = shutil.which(binary) or f"/usr/sbin/{binary}"
    assert Path(found).exists(), f"{binary} could not be installed"
    return found


class Watched:
    """A child process whose output lines are read on a thread, so a test can wait for a line.

    Args:
        argv: The command.
        stream: ``"stdout"`` or ``"stderr"``: which stream to watch (the other is discarded).
    """

    def __init__(self, argv: Sequence[str], *, stream: str = "stdout",
                 env: dict[str, str] | None = None) -> None:
        pipe = {"stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
        if stream == "stderr":
            pipe = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
        self.proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, text=True, env=env,
                                     errors="replace", cwd=ROOT,
                                     **pipe)  # type: ignore[call-overload]
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._ended = False
        source = self.proc.stdout if stream == "stdout" else self.proc.stderr
        self._thread = threading.Thread(target=self._read, args=(source,), daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self, source: object) -> None:
        try:
            for line in source:  # type: ignore[attr-defined]
                with self._changed:
                    self.lines.append(line.rstrip("\n"))
                    self._changed.notify_all()
        finally:
            source.close()  # type: ignore[attr-defined]  # end of output: the pipe is done
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        """Block until a line matches ``pattern``; fail if the process ends or time runs out."""
        regex = re.compile(pattern)
        seen = 0

        def found() -> re.Match[str] | None:
            nonlocal seen
            for line in self.lines[seen:]:
                match = regex.search(line)
                if match:
                    return match
            seen = len(self.lines)
            return None

        with self._changed:
            match = self._changed.wait_for(lambda: found() or self._ended, timeout)
            result = found()
        if result is None:
            tail = "\n".join(self.lines[-20:])
            state = "ended" if self._ended else f"no match within {timeout} s"
            raise AssertionError(f"{pattern!r}: {state} ({match!r}); output:\n{tail}")
        return result

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._thread.join(timeout)
