"""A replay guard shared by every server instance, on Redis, for trio.

redis-py has no trio client; each claim runs the sync ``SET NX PX`` in a worker thread
(``trio.to_thread.run_sync``), so the event loop never blocks.
"""

from __future__ import annotations

from typing import Any

import trio
from mrtr_sync.replay_redis import DEFAULT_PREFIX, RedisReplayGuard

__all__ = ["TrioRedisReplayGuard"]


class TrioRedisReplayGuard:
    """An async replay guard for trio over a sync ``redis.Redis`` client.

    Args:
        client: A ``redis.Redis`` (its connection pool is thread-safe).
        prefix: Key prefix for the remembered ids.
    """

    def __init__(self, client: Any, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._sync = RedisReplayGuard(client, prefix=prefix)

    async def claim(self, token_id: str, expires_at: float, now: float) -> bool:
        """``True`` the first time ``token_id`` is claimed anywhere, ``False`` after."""
        return await trio.to_thread.run_sync(self._sync.claim, token_id, expires_at, now)
