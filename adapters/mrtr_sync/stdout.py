"""The process's stdout kept for MCP messages while a stdio server runs (digest §3.4).

A stdio server's stdout carries nothing but MCP messages; a handler's ``print()``, a library
logging to stdout, C code or a child process would otherwise put a stray line into the
protocol and break the client's framing. :func:`protocol_stdout` gives the server a private
copy of file descriptor 1 to write its messages to and points descriptor 1 at stderr while it
serves. Every runtime's stdio server uses it when it serves the real stdout.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["protocol_stdout"]


@contextlib.contextmanager
def protocol_stdout() -> Iterator[int]:
    """Yield a private duplicate of descriptor 1 (the caller owns and closes it), with
    descriptor 1 pointed at stderr until the block ends; then descriptor 1 is restored."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    private = os.dup(1)
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield private
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
