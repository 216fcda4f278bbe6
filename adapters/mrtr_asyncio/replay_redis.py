"""A replay guard shared by every server instance, on Redis (asyncio, ``redis.asyncio``)."""

from __future__ import annotations

from typing import Any

from mrtr_sync.replay_redis import DEFAULT_PREFIX, set_nx_won, ttl_ms

__all__ = ["DEFAULT_PREFIX", "AsyncRedisReplayGuard"]


class AsyncRedisReplayGuard:
    """An async replay guard over a ``redis.asyncio.Redis`` client (``SET NX PX``).

    Args:
        client: A ``redis.asyncio.Redis`` shared by the instances that must agree.
        prefix: Key prefix for the remembered ids.
    """

    def __init__(self, client: Any, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._client = client
        self._prefix = prefix

    async def claim(self, token_id: str, expires_at: float, now: float) -> bool:
        """``True`` the first time ``token_id`` is claimed anywhere, ``False`` after."""
        stored = await self._client.set(
            self._prefix + token_id, b"1", nx=True, px=ttl_ms(expires_at, now)
        )
        return set_nx_won(stored)
