"""Single-use requestState: the in-memory guard, and Redis shared by two instances."""

from __future__ import annotations

import socket
from types import SimpleNamespace
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.asyncio.retry
import redis.backoff
import redis.retry
import trio
from mrtr_asyncio.replay_redis import AsyncRedisReplayGuard
from mrtr_sync.replay_redis import RedisReplayGuard, ttl_ms
from mrtr_trio.replay_redis import TrioRedisReplayGuard
from server_helpers import KEY1, T0, Runtime, accept, make_engine, retry, tool_call

from mrtr_core.server import Completed, Context, NeedsInput, form
from mrtr_core.state import KeyRing, MemoryReplayGuard, ReplayGuard, StateRejectedError


def test_memory_guard_claims_once_and_forgets_after_expiry() -> None:
    guard = MemoryReplayGuard()
    assert isinstance(guard, ReplayGuard)
    assert guard.claim("t1", T0 + 10, T0) is True
    assert guard.claim("t1", T0 + 10, T0 + 5) is False
    assert guard.claim("t2", T0 + 20, T0 + 5) is True
    assert len(guard) == 2
    # Past t1's expiry it is pruned (the codec refuses such a token anyway).
    assert guard.claim("t3", T0 + 30, T0 + 10) is True
    assert len(guard) == 2
    assert guard.claim("t1", T0 + 40, T0 + 11) is True
    # An id whose lifetime is already over is not remembered at all.
    assert guard.claim("old", T0, T0 + 50) is True
    assert len(guard) == 0


def test_memory_guard_refuses_a_pruned_token_when_the_clock_goes_back() -> None:
    """A wall clock set back makes a token the guard pruned alive again for the codec: the
    guard must not take it for a new one (single use holds across the jump)."""
    guard = MemoryReplayGuard()
    assert guard.claim("t1", T0 + 100, T0) is True
    assert guard.claim("t2", T0 + 300, T0 + 200) is True  # the clock moves on: t1 is pruned
    assert len(guard) == 1
    assert guard.claim("t1", T0 + 100, T0 + 10) is False  # set back: t1 is no new token
    assert guard.claim("t2", T0 + 300, T0 + 10) is False
    assert guard.claim("t3", T0 + 250, T0 + 10) is True  # alive by the latest time too
    assert guard.claim("t3", T0 + 250, T0 + 20) is False


class _Meanwhile(float):
    """A ``now`` that runs ``meanwhile`` the first time the guard compares a time with it:
    another claim (a thread of the sync HTTP server) lands exactly inside this one."""

    def __new__(cls, value: float, meanwhile: Any) -> _Meanwhile:
        made = super().__new__(cls, value)
        made.meanwhile = meanwhile
        return made

    def _interleave(self) -> None:
        meanwhile, self.meanwhile = self.meanwhile, None
        if meanwhile is not None:
            meanwhile()

    def __ge__(self, other: Any) -> bool:  # ``x <= now``
        self._interleave()
        return float(self) >= other

    def __lt__(self, other: Any) -> bool:  # ``x > now``
        self._interleave()
        return float(self) < other


def test_memory_guard_lets_one_of_two_overlapping_claims_of_a_token_win() -> None:
    guard = MemoryReplayGuard()
    won: list[bool] = []
    now = _Meanwhile(T0, lambda: won.append(guard.claim("t1", T0 + 60, T0)))
    won.append(guard.claim("t1", T0 + 60, now))
    assert sorted(won) == [False, True]  # single use: never both
    assert guard.claim("t1", T0 + 60, T0 + 1) is False


def test_memory_guard_pruning_alongside_another_claim_keeps_live_tokens() -> None:
    # Both claims see the expired head; the second one to pop finds a live token there and
    # must put it back, or that token could be used again.
    guard = MemoryReplayGuard()
    assert guard.claim("old", T0 + 10, T0) is True
    assert guard.claim("live", T0 + 1000, T0) is True
    now = _Meanwhile(T0 + 50, lambda: guard.claim("other", T0 + 2000, T0 + 50))
    assert guard.claim("new", T0 + 2000, now) is True
    assert guard.claim("live", T0 + 1000, T0 + 60) is False
    assert len(guard) == 3  # live, other, new; old is gone


def test_redis_guard_sets_a_key_with_the_remaining_lifetime(redis_client: redis.Redis) -> None:
    guard = RedisReplayGuard(redis_client, prefix="test:")
    assert guard.claim("abc", T0 + 12.5, T0) is True
    assert guard.claim("abc", T0 + 12.5, T0 + 1) is False
    pttl = redis_client.pttl("test:abc")
    assert 0 < pttl <= 12_500
    assert ttl_ms(T0 + 0.0001, T0) == 1
    assert ttl_ms(T0 - 5, T0) == 1


def _single_use_flow() -> Any:
    def handler(ctx: Context) -> Any:
        ctx.ask("confirm", form("Proceed?", ok=bool))
        return ctx.ask("ticket", form("Ticket?", id=str)).content

    return handler


def test_replay_is_refused_on_every_instance_through_real_redis(
    rt: Runtime, redis_client: redis.Redis, redis_port: int
) -> None:
    runs = {"n": 0}
    flow = _single_use_flow()

    def counted(ctx: Context) -> Any:
        runs["n"] += 1
        return flow(ctx)

    spec = rt.spec(counted, single_use=True)
    ring = KeyRing({"k1": KEY1}, active="k1")
    instance_a, instance_b = make_engine(ring, seed=1), make_engine(ring, seed=2)
    with rt.redis_guard(redis_port) as guard_a, rt.redis_guard(redis_port) as guard_b:
        first = tool_call("ship")
        r1 = rt.call(instance_a, first, spec, guard=guard_a)
        assert isinstance(r1, NeedsInput)
        second = retry(first, r1, {"confirm": accept(ok=True)})
        r2 = rt.call(instance_b, second, spec, guard=guard_b, now=T0 + 1)
        assert isinstance(r2, NeedsInput)
        assert runs["n"] == 2

        # The same token again, on either instance: refused, handler not run.
        for engine, guard in ((instance_a, guard_a), (instance_b, guard_b)):
            with pytest.raises(StateRejectedError) as info:
                rt.call(engine, second, spec, guard=guard, now=T0 + 2)
            assert info.value.reason == "replayed"
            assert info.value.to_error_object()["code"] == -32602
        assert runs["n"] == 2

        # The fresh token from round 2 still works, once.
        third = retry(first, r2, {"ticket": accept(id="T-9")})
        r3 = rt.call(instance_a, third, spec, guard=guard_a, now=T0 + 3)
        assert isinstance(r3, Completed) and r3.value == {"id": "T-9"}
        with pytest.raises(StateRejectedError):
            rt.call(instance_b, third, spec, guard=guard_b, now=T0 + 4)
        assert runs["n"] == 3
    assert len(redis_client.keys("mrtr:replay:*")) == 2


def test_handlers_that_are_not_single_use_never_claim(
    rt: Runtime, redis_client: redis.Redis, redis_port: int
) -> None:
    spec = rt.spec(_single_use_flow())
    engine = make_engine()
    first = tool_call("ship")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    second = retry(first, r1, {"confirm": accept(ok=True)})
    for _ in range(2):
        with rt.redis_guard(redis_port) as guard:
            outcome = rt.call(engine, second, spec, guard=guard)
        assert isinstance(outcome, NeedsInput)
    assert redis_client.keys("mrtr:replay:*") == []


def _counted_single_use(rt: Runtime) -> tuple[Any, dict[str, int]]:
    runs = {"n": 0}
    flow = _single_use_flow()

    def counted(ctx: Context) -> Any:
        runs["n"] += 1
        return flow(ctx)

    return rt.spec(counted, single_use=True), runs


def _single_use_retry(rt: Runtime) -> tuple[Any, dict[str, int], Any, Any]:
    """A counted single-use tool, its engine, and the retry that would run it (once)."""
    spec, runs = _counted_single_use(rt)
    engine = make_engine()
    first = tool_call("ship")
    r1 = rt.call(engine, first, spec)
    assert isinstance(r1, NeedsInput)
    return spec, runs, engine, retry(first, r1, {"confirm": accept(ok=True)})


def test_a_sync_guard_given_an_asyncio_client_fails_closed(
    rt: Runtime, redis_client: redis.Redis, redis_port: int
) -> None:
    """``redis.asyncio`` answers ``SET`` with a coroutine, which is truthy: read as a won
    claim, every replay would run the handler again. The claim is refused with a TypeError
    instead, and the handler does not run."""
    spec, runs, engine, second = _single_use_retry(rt)
    wrong_client = redis.asyncio.Redis(host="127.0.0.1", port=redis_port)
    guard: Any = (
        TrioRedisReplayGuard(wrong_client) if rt.name == "trio" else RedisReplayGuard(wrong_client)
    )
    for _ in range(2):
        with pytest.raises(TypeError, match="coroutine"):
            rt.call(engine, second, spec, guard=guard, now=T0 + 1)
    assert runs["n"] == 1
    assert redis_client.keys("mrtr:replay:*") == []


def test_a_guard_refuses_a_set_reply_that_is_no_verdict() -> None:
    class OddClient:
        def set(self, *args: Any, **kwargs: Any) -> Any:
            return "OK"  # truthy, but not what redis-py answers for a stored key

    with pytest.raises(TypeError, match="str"):
        RedisReplayGuard(OddClient()).claim("t1", T0 + 10, T0)

    class AsyncOddClient:
        async def set(self, *args: Any, **kwargs: Any) -> Any:
            return 1

    with pytest.raises(TypeError, match="int"):
        trio.run(AsyncRedisReplayGuard(AsyncOddClient()).claim, "t1", T0 + 10, T0)


def test_an_unreachable_redis_fails_closed_in_every_runtime(rt: Runtime) -> None:
    """A claim Redis cannot record never runs the handler: the driver gets Redis's error
    (the servers answer -32603 naming its type)."""
    spec, runs, engine, second = _single_use_retry(rt)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    guard: Any
    if rt.name == "asyncio":
        guard = AsyncRedisReplayGuard(
            redis.asyncio.Redis(
                host="127.0.0.1",
                port=port,
                retry=redis.asyncio.retry.Retry(redis.backoff.NoBackoff(), 0),
            )
        )
    else:
        client = redis.Redis(
            host="127.0.0.1", port=port, retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0)
        )
        guard = TrioRedisReplayGuard(client) if rt.name == "trio" else RedisReplayGuard(client)
    with pytest.raises(redis.exceptions.ConnectionError):
        rt.call(engine, second, spec, guard=guard, now=T0 + 1)
    assert runs["n"] == 1


def test_a_redis_that_times_out_fails_the_claim_closed_in_every_runtime(rt: Runtime) -> None:
    """A Redis that stops answering (its client's ``socket_timeout`` ran out) records no
    claim: the handler does not run, and the driver gets the timeout (the servers answer
    -32603 naming it), every time."""
    spec, runs, engine, second = _single_use_retry(rt)

    class StalledClient:
        def set(self, *args: Any, **kwargs: Any) -> Any:
            raise redis.exceptions.TimeoutError("Timeout reading from socket")

    class AsyncStalledClient:
        async def set(self, *args: Any, **kwargs: Any) -> Any:
            raise redis.exceptions.TimeoutError("Timeout reading from socket")

    guard: Any = {
        "sync": lambda: RedisReplayGuard(StalledClient()),
        "trio": lambda: TrioRedisReplayGuard(StalledClient()),
        "asyncio": lambda: AsyncRedisReplayGuard(AsyncStalledClient()),
    }[rt.name]()
    for _ in range(2):
        with pytest.raises(redis.exceptions.TimeoutError):
            rt.call(engine, second, spec, guard=guard, now=T0 + 1)
    assert runs["n"] == 1


async def _won(token_id: str, expires_at: float, now: float) -> bool:
    return True


def test_a_claim_that_is_no_verdict_fails_closed_in_every_runtime(rt: Runtime) -> None:
    """A claim answers True or False. An async guard handed to a sync driver answers with
    an un-awaited coroutine and a guard may answer "OK": both are truthy, and read as a won
    claim every replay would run the handler again. The driver raises a TypeError instead
    (the servers answer -32603), and the handler does not run."""
    spec, runs, engine, second = _single_use_retry(rt)
    guards: list[Any] = [SimpleNamespace(claim=lambda *claim: "OK")]  # a raw Redis reply
    if rt.name == "sync":
        guards.append(SimpleNamespace(claim=_won))  # an async guard
    for guard in guards:
        for _ in range(2):
            with pytest.raises(TypeError, match=r"coroutine|str"):
                rt.call(engine, second, spec, guard=guard, now=T0 + 1)
    assert runs["n"] == 1
