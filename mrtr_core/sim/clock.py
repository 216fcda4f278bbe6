"""Virtual time: a clock that only moves when the next event is taken off the queue.

Events are ``(time, seq, action, argument)`` tuples on a heap; ``seq`` breaks ties in the
order events were scheduled, so two runs with the same inputs take events in the same order.
Nothing here sleeps, reads a wall clock or starts a thread.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

__all__ = ["EventBudgetExceeded", "Scheduler"]


class EventBudgetExceeded(Exception):
    """The run took more events than its budget: something loops without end."""


class Scheduler:
    """A virtual clock (``now``) and a queue of timed actions.

    Attributes:
        now: The current virtual time in seconds (starts at ``start``).
        events: How many events have run.
    """

    __slots__ = ("_heap", "_seq", "events", "now")

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.events = 0
        self._seq = 0
        self._heap: list[tuple[float, int, Callable[[Any], None], Any]] = []

    def at(self, when: float, action: Callable[[Any], None], argument: Any = None) -> None:
        """Run ``action(argument)`` at virtual time ``when`` (never earlier than now)."""
        if when < self.now:
            when = self.now
        self._seq += 1
        heappush(self._heap, (when, self._seq, action, argument))

    def after(self, delay: float, action: Callable[[Any], None], argument: Any = None) -> None:
        """Run ``action(argument)`` ``delay`` seconds from now."""
        # at(), inlined: most events are scheduled from now.
        when = self.now + delay
        if when < self.now:
            when = self.now
        self._seq += 1
        heappush(self._heap, (when, self._seq, action, argument))

    def __len__(self) -> int:
        return len(self._heap)

    def run(self, max_events: int) -> None:
        """Take events in time order until the queue is empty.

        Raises:
            EventBudgetExceeded: more than ``max_events`` events ran.
        """
        heap = self._heap
        pop = heappop
        events = self.events
        try:
            while heap:
                if events >= max_events:
                    raise EventBudgetExceeded(f"more than {max_events} events")
                when, _, action, argument = pop(heap)
                self.now = when
                events += 1
                action(argument)
        finally:
            self.events = events
