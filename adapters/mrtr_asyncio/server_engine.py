"""Drive one server-engine round under asyncio.

``run_handler`` awaits a coroutine handler (and an async replay guard such as
``AsyncRedisReplayGuard``) and calls nothing of asyncio itself, so it is the one the trio
adapter uses too: :func:`mrtr_core.app.drive_async.run_handler`.
"""

from mrtr_core.app.drive_async import run_handler

__all__ = ["run_handler"]
