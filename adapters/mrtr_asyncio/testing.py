"""A virtual-time event loop for deterministic asyncio tests.

:class:`VirtualEventLoop` is a selector event loop whose ``time()`` is virtual. When no
callback is ready, instead of blocking in ``select`` until the next timer, it polls its file
descriptors without blocking and jumps the clock straight to that timer. ``asyncio.sleep``,
``asyncio.timeout_at`` and ``loop.call_at`` then cost no wall-clock time, and a test sees
exact virtual times (like trio's ``MockClock`` with ``autojump_threshold=0``).

When nothing is ready and no timer is scheduled the loop would block forever; it raises
:class:`VirtualDeadlockError` instead. Work handed to threads (``asyncio.to_thread``) needs
real time and does not belong on this loop.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["VirtualDeadlockError", "VirtualEventLoop", "run"]

T = TypeVar("T")


class VirtualDeadlockError(RuntimeError):
    """The loop has nothing ready, nothing scheduled, and nothing that could wake it."""


class _JumpingSelector(selectors.DefaultSelector):
    """Never blocks: polls, and when idle moves the loop's virtual clock by ``timeout``."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualEventLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        ready: list[tuple[Any, int]] = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            raise VirtualDeadlockError("nothing is ready and no timer is scheduled")
        assert self.loop is not None
        self.loop.advance(timeout)
        return []


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time that jumps to the next timer when idle.

    Args:
        start: The virtual time the loop starts at.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._virtual_now = start
        selector = _JumpingSelector()
        super().__init__(selector)
        selector.loop = self

    def time(self) -> float:
        """The virtual time."""
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        """Move virtual time forward (never backward)."""
        if seconds > 0:
            self._virtual_now += seconds


def run(main: Coroutine[Any, Any, T], *, start: float = 0.0) -> T:
    """Run ``main`` to completion on a fresh :class:`VirtualEventLoop`, then close it."""
    loop = VirtualEventLoop(start)
    try:
        return loop.run_until_complete(main)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
