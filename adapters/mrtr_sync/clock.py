"""Time for the sync client: what ``now`` is, how to sleep, where handlers run.

The client asks its clock for everything time-related, so tests can pass a
:class:`~mrtr_sync.testing.VirtualClock` and production code gets :class:`SystemClock`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Collection
from concurrent.futures import Executor, Future
from typing import Any, Protocol

from mrtr_sync.threads import leave_signals_to_main_thread

__all__ = ["SIGNAL_CHECK_S", "Clock", "SystemClock"]

SIGNAL_CHECK_S = 0.2
"""Longest a :class:`SystemClock` wait blocks at once. CPython runs a signal's handler in the
main thread between bytecodes: a Ctrl-C that lands just before the thread blocks on a lock
is only acted on when the thread wakes, and a wait for a person's answer may never end by
itself. Waking this often bounds how long such a Ctrl-C goes unnoticed."""


class Clock(Protocol):
    """The time source and the thread pool of a sync client."""

    def now(self) -> float:
        """Seconds on a monotonic scale (only differences matter)."""
        ...

    def sleep(self, seconds: float, *, interrupt: threading.Event | None = None) -> bool:
        """Block the calling thread for ``seconds``, or until :meth:`cancel` sets
        ``interrupt``; return ``False`` when interrupted."""
        ...

    def executor(self, max_workers: int) -> Executor:
        """A new pool to run handlers in (shut down by the client).

        Its threads should leave SIGINT and SIGTERM to the main thread (pass
        :func:`~mrtr_sync.threads.leave_signals_to_main_thread` as the pool's initializer).
        """
        ...

    def wait(self, futures: Collection[Future[Any]], deadline: float | None) -> None:
        """Block until one of ``futures`` is done or ``now() >= deadline``."""
        ...

    def cancel(self, event: threading.Event) -> None:
        """Set a handler's cancellation event (and wake it if the clock keeps it asleep)."""
        ...


class SystemClock:
    """Real time: ``time.monotonic`` and a ``ThreadPoolExecutor``."""

    def now(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    def sleep(self, seconds: float, *, interrupt: threading.Event | None = None) -> bool:
        """``time.sleep`` (nothing for a non-positive duration); with ``interrupt``, a wait
        on that event, waking at least every :data:`SIGNAL_CHECK_S` seconds (see there).
        Returns ``False`` when ``interrupt`` was set."""
        if interrupt is None:
            if seconds > 0:
                time.sleep(seconds)
            return True
        deadline = self.now() + seconds
        while not interrupt.is_set():
            left = deadline - self.now()
            if left <= 0:
                return True
            interrupt.wait(min(left, SIGNAL_CHECK_S))
        return False

    def executor(self, max_workers: int) -> Executor:
        """A ``ThreadPoolExecutor`` with named threads that block SIGINT and SIGTERM."""
        return concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers,
            thread_name_prefix="mrtr-handler",
            initializer=leave_signals_to_main_thread,
        )

    def wait(self, futures: Collection[Future[Any]], deadline: float | None) -> None:
        """``concurrent.futures.wait(..., return_when=FIRST_COMPLETED)`` until ``deadline``,
        waking at least every :data:`SIGNAL_CHECK_S` seconds (see there)."""
        while True:
            timeout = None if deadline is None else max(0.0, deadline - self.now())
            step = SIGNAL_CHECK_S if timeout is None else min(timeout, SIGNAL_CHECK_S)
            if len(futures) == 1:
                # One handler (the usual round): wait on its own condition, without the
                # waiter objects concurrent.futures.wait installs on every future.
                (future,) = futures
                with contextlib.suppress(TimeoutError, concurrent.futures.CancelledError):
                    future.exception(step)
            else:
                concurrent.futures.wait(
                    futures, timeout=step, return_when=concurrent.futures.FIRST_COMPLETED
                )
            if (timeout is not None and timeout <= step) or any(f.done() for f in futures):
                return

    def cancel(self, event: threading.Event) -> None:
        """``event.set()``."""
        event.set()
