"""Server processes the tests start: reading what they announce, and stopping them.

A server started by a test prints a line such as ``READY <url>`` once it listens; the test
reads up to that line, uses the server, then stops it.
"""

from __future__ import annotations

import subprocess

__all__ = ["stop", "wait_line"]


def wait_line(proc: subprocess.Popen[str], prefix: str) -> str:
    """The rest of the first stdout line starting with ``prefix``. Reads until that line (or
    end of output: the process died); a process that hangs silently is stopped by the test
    timeout."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    proc.wait()
    raise AssertionError(f"process {proc.args!r} exited with {proc.returncode} before "
                         f"announcing {prefix!r}")


def stop(proc: subprocess.Popen[str]) -> None:
    """Stop a process (SIGTERM, then SIGKILL after 15 s) and close its output."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
