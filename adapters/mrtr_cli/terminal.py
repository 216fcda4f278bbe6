"""One person, one terminal: the inputs of a round take turns, in the server's order.

The client fulfils every entry of a round's ``inputRequests`` concurrently (digest C1), but a
person answers one form at a time and a terminal has one stdin: two prompts reading it at
once take each other's lines. :class:`Turns` makes the inputs of a round run one after
another in the order the server listed them, so prompts, notes and answers always come in
that order, whatever the client's thread pool does.

A turn ends when its input is answered or fails. After a failure the later inputs of the
round are not asked: they wait for the cancellation the flow then sends. Waiting for a turn
and waiting for a typed line both end when the client cancels the input
(:class:`TurnClock` turns the client's cancellation into a wake-up) or the operation ends
(:meth:`Turns.close`), and the line is read on a daemon thread, so a flow that ended (failed,
timed out, interrupted) never leaves the command blocked on the terminal.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from mrtr_sync.clock import SystemClock
from mrtr_sync.threads import leave_signals_to_main_thread

from mrtr_core.errors import MrtrError

__all__ = ["InputAbandoned", "TurnClock", "Turns", "pending_reads"]

T = TypeVar("T")

# Reader threads blocked on the terminal right now (see Turns.read).
_readers: set[threading.Thread] = set()
_readers_lock = threading.Lock()


def pending_reads() -> int:
    """How many reads of the terminal are still blocked (see :meth:`Turns.read`).

    Once every :class:`Turns` of the command is closed, no read starts any more, so a
    non-zero count stays so: those threads cannot be stopped, and the interpreter must not
    shut down around them (one holds stdin's lock; finalising stdin would abort), so the
    command then ends its process without that shutdown.
    """
    with _readers_lock:
        return sum(1 for thread in _readers if thread.is_alive())


class InputAbandoned(MrtrError):
    """The client cancelled this input (its round is over) before it was answered."""

    def __init__(self, key: str) -> None:
        super().__init__(f"input {key!r} abandoned: its round is over")
        self.key = key


def _cancelled(cancel: threading.Event | None) -> bool:
    return cancel is not None and cancel.is_set()


class Turns:
    """Lets the inputs of a round use the terminal one at a time, in the server's order.

    Attributes:
        changed: Notified whenever an input starts waiting, finishes, or is cancelled.
        waiting: The keys waiting for their turn right now.
    """

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.waiting: list[str] = []
        self._order: tuple[str, ...] = ()
        self._finished: set[str] = set()
        self._failed = False
        self._round = 0
        self._holder: str | None = None
        self._closed = False

    def begin_round(self, keys: Iterable[str]) -> None:
        """A new round asks for ``keys``, in this order; inputs of earlier rounds are over."""
        with self.changed:
            self._round += 1
            self._order = tuple(keys)
            self._finished = set()
            self._failed = False
            self.changed.notify_all()

    def close(self) -> None:
        """The operation is over: every input still waiting (for a turn or a line) is
        abandoned now, and later ones at once, whether or not the client cancelled them."""
        with self.changed:
            self._closed = True
            self.changed.notify_all()

    def wake(self) -> None:
        """Let waiting inputs look at their cancellation events again."""
        with self.changed:
            self.changed.notify_all()

    def _over(self, round_no: int, cancel: threading.Event | None) -> bool:
        return self._closed or self._round != round_no or _cancelled(cancel)

    def _my_turn(self, key: str) -> bool:
        if self._holder is not None:
            return False
        if key not in self._order:  # not announced by a round: only one at a time
            return True
        if self._failed:  # an earlier input failed: the flow is cancelling this round
            return False
        earlier = self._order[: self._order.index(key)]
        return all(k in self._finished for k in earlier)

    @contextlib.contextmanager
    def turn(self, key: str, cancel: threading.Event | None = None) -> Iterator[None]:
        """Hold the terminal for input ``key`` once every earlier input of its round is done.

        Raises:
            InputAbandoned: ``cancel`` was set, a new round began, or :meth:`close` was
                called, before the turn came.
        """
        with self.changed:
            round_no = self._round
            self.waiting.append(key)
            self.changed.notify_all()
            try:
                self.changed.wait_for(lambda: self._over(round_no, cancel)
                                      or self._my_turn(key))
            finally:
                self.waiting.remove(key)
            if self._over(round_no, cancel):
                raise InputAbandoned(key)
            self._holder = key
        answered = False
        try:
            yield
            answered = True
        finally:
            with self.changed:
                self._holder = None
                if self._round == round_no and key in self._order:
                    self._finished.add(key)
                    self._failed = self._failed or not answered
                self.changed.notify_all()

    def read(self, key: str, read: Callable[[], T], cancel: threading.Event | None) -> T:
        """``read()`` (a blocking read of the terminal), given up when ``cancel`` is set.

        The read runs on a daemon thread, so an abandoned read never keeps the process
        alive (:func:`pending_reads` counts those still blocked). Without ``cancel`` it runs
        in the calling thread.

        Raises:
            InputAbandoned: ``cancel`` was set (or :meth:`close` called) before a line came.
        """
        if cancel is None:
            return read()
        outcome: list[tuple[bool, object]] = []

        def run() -> None:
            try:
                leave_signals_to_main_thread()  # Ctrl-C must wake the waiting main thread
                result: tuple[bool, object] = (True, read())
            except BaseException as exc:  # handed to the waiting input below
                result = (False, exc)
            with _readers_lock:
                _readers.discard(threading.current_thread())
            with self.changed:
                outcome.append(result)
                self.changed.notify_all()

        with self.changed:
            # Checked and registered under the lock close() takes: after close(), no read
            # starts, and every read started before is counted by pending_reads().
            if cancel.is_set() or self._closed:
                raise InputAbandoned(key)
            reader = threading.Thread(target=run, name=f"mrtr-cli-read-{key}", daemon=True)
            with _readers_lock:
                _readers.add(reader)
            reader.start()
            self.changed.wait_for(lambda: bool(outcome) or cancel.is_set() or self._closed)
            if not outcome:
                raise InputAbandoned(key)
        ok, value = outcome[0]
        if not ok:
            assert isinstance(value, BaseException)
            raise value
        return value  # type: ignore[return-value]


class TurnClock(SystemClock):
    """The client's real clock, whose cancellation of an input also wakes :class:`Turns`."""

    def __init__(self, turns: Turns) -> None:
        self.turns = turns

    def cancel(self, event: threading.Event) -> None:
        """Set the input's cancellation event and wake inputs waiting on the terminal."""
        super().cancel(event)
        self.turns.wake()
