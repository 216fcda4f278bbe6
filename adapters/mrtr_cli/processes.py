"""Starting ``mrtr serve`` instances as child processes and knowing when they listen.

An instance prints one ready line (:data:`mrtr_cli.serve.READY_PREFIX`) once its socket is
bound; :class:`ServerProcess` reads its stdout on a thread and sets an event at that line, so
callers wait on the event (with a deadline) instead of polling ports. Instances are stopped by
their own pid.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Final

from mrtr_sync.threads import leave_signals_to_main_thread

from mrtr_cli.serve import READY_PREFIX
from mrtr_core.errors import MrtrError

__all__ = ["InstanceError", "ServerProcess", "serve_argv"]

_URL: Final = re.compile(re.escape(READY_PREFIX) + r"(\S+)")


class InstanceError(MrtrError):
    """An instance did not come up (the message quotes the end of its log)."""


def serve_argv(app: str, *, port: int = 0, host: str = "127.0.0.1", runtime: str = "sync",
               keys: str | Path | None = None, redis: str | None = None,
               python: str | None = None) -> list[str]:
    """The command line of one ``mrtr serve`` instance."""
    argv = [python or sys.executable, "-m", "mrtr_cli", "serve", app, "--host", host,
            "--port", str(port), "--runtime", runtime]
    if keys is not None:
        argv += ["--keys", str(keys)]
    if redis is not None:
        argv += ["--redis", redis]
    return argv


class ServerProcess:
    """One ``mrtr serve`` child process.

    Args:
        name: What to call it in logs and transcripts.
        argv: Its command line (see :func:`serve_argv`).
        log: File that receives its stderr.
        env: Its environment (default: this process's).

    As a context manager, it is stopped (:meth:`stop`) on the way out.
    """

    def __init__(self, name: str, argv: Sequence[str], *, log: Path,
                 env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> None:
        self.name = name
        self.log = log
        self.url: str | None = None
        self.urls: list[str] = []
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._ended = False
        self._log_file: IO[bytes] = open(log, "wb")  # noqa: SIM115 - closed in stop()
        try:
            self.proc = subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=self._log_file, env=dict(env) if env is not None else None, cwd=cwd,
                text=True, errors="replace",
            )
        except BaseException:
            self._log_file.close()
            raise
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        """The instance's process id."""
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        leave_signals_to_main_thread()  # Ctrl-C must reach the command's main thread
        try:
            for line in self.proc.stdout:
                with self._changed:
                    self.lines.append(line.rstrip("\n"))
                    match = _URL.match(line)
                    if match:
                        self.urls.append(match.group(1))
                        self.url = self.url or match.group(1)
                    self._changed.notify_all()
        finally:
            self.proc.stdout.close()
            with self._changed:
                self._ended = True  # end of output: it exited (or cannot be read)
                self._changed.notify_all()

    def wait_ready(self, timeout: float) -> str:
        """Block until the instance listens; return its URL.

        Raises:
            InstanceError: it exited first, or ``timeout`` seconds passed.
        """
        return self.wait_listening(1, timeout)[0]

    def wait_listening(self, count: int, timeout: float) -> list[str]:
        """Block until ``count`` ready lines came (``--workers``: one per worker).

        Raises:
            InstanceError: it exited first, or ``timeout`` seconds passed.
        """
        with self._changed:
            self._changed.wait_for(lambda: len(self.urls) >= count or self._ended, timeout)
            urls = list(self.urls)
            ended = self._ended
        if len(urls) >= count:
            return urls[:count]
        if not ended:
            raise InstanceError(f"{self.name} did not listen within {timeout} s{self._tail()}")
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise InstanceError(f"{self.name} closed its output without listening or "
                                f"exiting{self._tail()}") from None
        raise InstanceError(
            f"{self.name} exited ({self.proc.returncode}) before listening{self._tail()}")

    def _tail(self) -> str:
        self._log_file.flush()
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        tail = "\n".join(text.strip().splitlines()[-15:])
        return f"; its log ({self.log}):\n{tail}" if tail else ""

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit status.

        Closes its log file on every path out (an interrupt while waiting too); the reader
        closes the pipe from its stdout at the end of the output.
        """
        try:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self._reader.join(timeout)
        finally:
            self._log_file.close()
        return int(self.proc.returncode)
