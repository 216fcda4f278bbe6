"""A replay guard shared by every server instance, on Redis (asyncio, ``redis.asyncio``)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["DEFAULT_PREFIX", "AsyncRedisReplayGuard"]

DEFAULT_PREFIX = "mrtr:replay:"


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
        ttl = max(1, math.ceil((expires_at - now) * 1000))
        stored = await self._client.set(self._prefix + token_id, b"1", nx=True, px=ttl)
        return bool(stored)
