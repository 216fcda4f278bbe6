"""The threads of the sync adapter leave SIGINT and SIGTERM to the main thread.

Python runs signal handlers in the main thread only, and a process-directed signal that the
kernel hands to another thread does not wake the main thread from a blocking wait
(``time.sleep``, ``Event.wait``): a server whose main thread sleeps while a serving thread
happens to take the SIGTERM would not stop. So every thread mrtr_sync starts (the HTTP
server's accept and connection threads, the client's handler pool threads, the stdio
transport's reader and the stdio server's workers) blocks SIGINT and SIGTERM as its first
act, and such signals always land on the main thread.

Threads started elsewhere (an application's own, or the pool of a custom
:class:`~mrtr_sync.clock.Clock`) can do the same with :func:`leave_signals_to_main_thread`,
e.g. as a ``ThreadPoolExecutor`` ``initializer``.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

__all__ = ["leave_signals_to_main_thread", "signal_safe_thread"]

_MAIN_THREAD_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


def leave_signals_to_main_thread() -> None:
    """Block SIGINT and SIGTERM in the calling thread, unless it is the main thread.

    Only the calling thread's signal mask changes. Nothing happens on platforms without
    ``signal.pthread_sigmask`` (Windows, where signals reach the main thread anyway).
    """
    if threading.current_thread() is not threading.main_thread() and hasattr(
        signal, "pthread_sigmask"
    ):
        signal.pthread_sigmask(signal.SIG_BLOCK, _MAIN_THREAD_SIGNALS)


def signal_safe_thread(
    target: Callable[..., object], *args: object, name: str
) -> threading.Thread:
    """A daemon thread (not started yet) that blocks SIGINT and SIGTERM, then runs
    ``target(*args)``."""
    return threading.Thread(
        target=_leave_signals_then, args=(target, *args), name=name, daemon=True
    )


def _leave_signals_then(target: Callable[..., object], *args: object) -> None:
    leave_signals_to_main_thread()
    target(*args)
