"""A virtual clock for deterministic tests of the sync client and its handler threads.

:class:`VirtualClock` is an autojump clock for threads, as trio's ``MockClock`` with
``autojump_threshold=0`` is for tasks. Its *participants* are the thread that created it
and every piece of work submitted through one of its :meth:`~VirtualClock.executor` pools.
Virtual time stands still while any participant is running; once every participant is
blocked in the clock (:meth:`~VirtualClock.sleep`, :meth:`~VirtualClock.wait`), time jumps
straight to the earliest wake-up. A test therefore sees exact virtual times (two handlers
that each sleep 10 s, run concurrently, both finish at ``t = 10``) and never waits on the
wall clock.

Only participants may block in the clock; when all of them wait and no wake-up is scheduled,
the clock raises :class:`VirtualDeadlockError` instead of hanging.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Collection
from concurrent.futures import Executor, Future
from typing import Any

import attrs

from mrtr_sync.threads import leave_signals_to_main_thread

__all__ = ["VirtualClock", "VirtualDeadlockError"]


class VirtualDeadlockError(RuntimeError):
    """Every participant waits on the virtual clock and nothing is scheduled to wake them."""


@attrs.define(eq=False)
class _Park:
    """One participant blocked in the clock, and what wakes it."""

    wake: float | None = None
    futures: tuple[Future[Any], ...] = ()
    interrupt: threading.Event | None = None
    woken: bool = False
    interrupted: bool = False


class VirtualClock:
    """Autojumping virtual time for threads (see the module docstring).

    Implements the :class:`~mrtr_sync.clock.Clock` protocol.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._cond = threading.Condition()
        self._now = start
        self._busy = 1  # the creating thread runs
        self._parked: list[_Park] = []
        self._failure: VirtualDeadlockError | None = None

    def now(self) -> float:
        """The current virtual time."""
        with self._cond:
            return self._now

    def sleep(self, seconds: float, *, interrupt: threading.Event | None = None) -> bool:
        """Block for ``seconds`` of virtual time.

        A handler that receives a cancellation event may pass it as ``interrupt``: the sleep
        ends as soon as :meth:`cancel` sets it. Returns ``False`` when interrupted.
        """
        with self._cond:
            park = _Park(wake=self._now + max(0.0, seconds), interrupt=interrupt)
            self._block(park)
            return not park.interrupted

    def wait(self, futures: Collection[Future[Any]], deadline: float | None) -> None:
        """Block until one of ``futures`` is done or virtual time reaches ``deadline``."""
        with self._cond:
            self._block(_Park(wake=deadline, futures=tuple(futures)))

    def cancel(self, event: threading.Event) -> None:
        """Set ``event`` and wake at once every sleep it interrupts."""
        with self._cond:
            event.set()
            for park in list(self._parked):
                if park.interrupt is event:
                    park.interrupted = True
                    self._wake(park)
            self._cond.notify_all()

    def settle(self) -> None:
        """Block, without moving time, until every other participant is blocked or done.

        For tests: after a call returns, handlers it stopped waiting for may still be
        running; once settled, what they recorded can be inspected.
        """
        with self._cond:
            while self._busy > 1 and self._failure is None:
                self._cond.wait()

    def executor(self, max_workers: int) -> Executor:
        """A thread pool whose submitted work counts as participants."""
        return _TrackedExecutor(self, max_workers)

    # --- bookkeeping (all under self._cond) -------------------------------------------------

    def _ready(self, park: _Park) -> bool:
        return (
            (park.wake is not None and self._now >= park.wake)
            or any(f.done() for f in park.futures)
            or (park.interrupt is not None and park.interrupt.is_set())
        )

    def _block(self, park: _Park) -> None:
        if self._failure is not None:
            raise self._failure
        if park.interrupt is not None and park.interrupt.is_set():
            park.interrupted = True
            return
        if self._ready(park):
            return
        self._parked.append(park)
        self._busy -= 1
        self._advance_while_idle()
        while not park.woken:
            if self._failure is not None:
                raise self._failure
            self._cond.wait()

    def _wake(self, park: _Park) -> None:
        park.woken = True
        self._parked.remove(park)
        self._busy += 1

    def _advance_while_idle(self) -> None:
        while self._busy == 0:
            wakes = [p.wake for p in self._parked if p.wake is not None]
            if not wakes:
                self._failure = VirtualDeadlockError(
                    f"at t={self._now}: every participant waits and nothing is scheduled"
                )
                self._cond.notify_all()
                raise self._failure
            self._now = max(self._now, min(wakes))
            for park in list(self._parked):
                if self._ready(park):
                    self._wake(park)
        self._cond.notify_all()

    def _submitted(self) -> None:
        with self._cond:
            self._busy += 1

    def _finished(self, future: Future[Any]) -> None:
        with self._cond:
            for park in list(self._parked):
                # The work may have settled futures of its own (the client's handler futures)
                # before its pool future: a waiter on any done future wakes.
                if any(f is future or f.done() for f in park.futures):
                    self._wake(park)
            self._busy -= 1
            if self._failure is None:
                # A deadlock is recorded in self._failure; every waiter raises it.
                with contextlib.suppress(VirtualDeadlockError):
                    self._advance_while_idle()
            self._cond.notify_all()


class _TrackedExecutor(concurrent.futures.ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` that counts each submitted work item as a participant."""

    def __init__(self, clock: VirtualClock, max_workers: int) -> None:
        super().__init__(
            max_workers=max_workers,
            thread_name_prefix="mrtr-virtual",
            initializer=leave_signals_to_main_thread,
        )
        self._clock = clock

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Submit ``fn``; the clock counts it as running until its future is done."""
        self._clock._submitted()
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            with self._clock._cond:
                self._clock._busy -= 1
            raise
        future.add_done_callback(self._clock._finished)
        return future
