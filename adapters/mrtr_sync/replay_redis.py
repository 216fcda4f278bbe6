"""A replay guard shared by every server instance, on Redis (sync, redis-py).

One ``SET key 1 NX PX ttl`` per claim: the first instance to claim a token id wins, every
later claim (on any instance) is refused until the token would have expired anyway.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["DEFAULT_PREFIX", "RedisReplayGuard", "ttl_ms"]

DEFAULT_PREFIX = "mrtr:replay:"


def ttl_ms(expires_at: float, now: float) -> int:
    """Milliseconds to remember a token id (at least 1)."""
    return max(1, math.ceil((expires_at - now) * 1000))


class RedisReplayGuard:
    """:class:`mrtr_core.state.ReplayGuard` over a ``redis.Redis`` client.

    Args:
        client: A connected ``redis.Redis`` (shared by the instances that must agree).
        prefix: Key prefix for the remembered ids.
    """

    def __init__(self, client: Any, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._client = client
        self._prefix = prefix

    def claim(self, token_id: str, expires_at: float, now: float) -> bool:
        """``True`` the first time ``token_id`` is claimed anywhere, ``False`` after."""
        stored = self._client.set(
            self._prefix + token_id, b"1", nx=True, px=ttl_ms(expires_at, now)
        )
        return bool(stored)
