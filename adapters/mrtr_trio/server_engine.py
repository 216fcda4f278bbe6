"""Drive one server-engine round under trio.

``run_handler`` awaits a trio coroutine handler (and an async replay guard such as
``TrioRedisReplayGuard``) and calls nothing of trio itself, so it is the one the asyncio
adapter uses too: :func:`mrtr_core.app.drive_async.run_handler`.
"""

from mrtr_core.app.drive_async import run_handler

__all__ = ["run_handler"]
