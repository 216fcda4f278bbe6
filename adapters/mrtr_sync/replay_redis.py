"""A replay guard shared by every server instance, on Redis (sync, redis-py).

One ``SET key 1 NX PX ttl`` per claim: the first instance to claim a token id wins, every
later claim (on any instance) is refused until the token would have expired anyway.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

__all__ = ["DEFAULT_PREFIX", "RedisReplayGuard", "set_nx_won", "ttl_ms"]

DEFAULT_PREFIX = "mrtr:replay:"


def ttl_ms(expires_at: float, now: float) -> int:
    """Milliseconds to remember a token id (at least 1)."""
    return max(1, math.ceil((expires_at - now) * 1000))


def set_nx_won(reply: object) -> bool:
    """Whether a redis-py ``SET ... NX`` reply says this claim stored the key.

    redis-py answers ``True`` when the key was stored and ``None`` when it existed. Any
    other reply is no verdict, and is refused rather than read as true: a ``redis.asyncio``
    client handed to a sync guard answers with an un-awaited coroutine, which is truthy and
    would let every replay through (S12 requires at-most-once; digest §2.10).

    Raises:
        TypeError: The reply is neither ``True`` nor ``None``/``False`` (the client is not
            one this guard can use).
    """
    if reply is True:
        return True
    if reply is None or reply is False:
        return False
    if inspect.iscoroutine(reply):
        reply.close()  # never awaited: no command was sent
        raise TypeError(
            "the Redis client returned a coroutine: RedisReplayGuard and TrioRedisReplayGuard "
            "need a sync redis.Redis (use AsyncRedisReplayGuard for redis.asyncio)"
        )
    raise TypeError(f"SET NX answered {type(reply).__name__}, not True or None")


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
        """``True`` the first time ``token_id`` is claimed anywhere, ``False`` after.

        Raises:
            TypeError: The client is not a sync redis-py client (see :func:`set_nx_won`).
            redis.exceptions.RedisError: Redis could not record the claim; the handler
                must not run (the drivers answer ``-32603``).
        """
        stored = self._client.set(
            self._prefix + token_id, b"1", nx=True, px=ttl_ms(expires_at, now)
        )
        return set_nx_won(stored)
