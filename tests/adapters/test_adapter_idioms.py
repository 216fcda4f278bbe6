"""What each driver does in its own runtime's idiom, beyond the shared contract: caller
cancellation, plain handlers in async clients, abandoned threads, the virtual clocks, and
the shared pieces (capabilities from handlers, per-call limits, the scripted server)."""

from __future__ import annotations

import asyncio
import threading

import mrtr_asyncio
import mrtr_sync
import mrtr_trio
import pytest
import trio
import trio.testing
from mrtr_asyncio.testing import VirtualDeadlockError as LoopDeadlockError
from mrtr_asyncio.testing import VirtualEventLoop
from mrtr_asyncio.testing import run as run_virtual
from mrtr_sync.testing import VirtualClock, VirtualDeadlockError

from mrtr_core.client import ClientLimits
from mrtr_core.client.driver import HandlerTable, InputRequired, call_limits
from mrtr_core.errors import INTERNAL_ERROR, FlowDeadlineError, HandlerFailedError
from mrtr_core.testing import ScriptedServer, Step, elicit_form, input_required, tool_result
from mrtr_core.wire import ClientCapabilities, ElicitationCapability, ElicitResult

ASK = input_required({"ok": elicit_form("ok?", {"ok": {"type": "boolean"}})}, state="s1")
DONE = tool_result("done")
YES = ElicitResult(action="accept", content={"ok": True})


# --- plain handlers in async clients ----------------------------------------------------------


def test_trio_client_accepts_a_plain_handler() -> None:
    async def main() -> dict:
        client = mrtr_trio.Client(mrtr_trio.MemoryTransport(ScriptedServer([ASK, DONE])),
                                  elicitation=lambda request, key: YES)
        return await client.call_tool("t")

    assert trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)) == DONE


def test_asyncio_client_accepts_a_plain_handler() -> None:
    async def main() -> dict:
        transport = mrtr_asyncio.MemoryTransport(ScriptedServer([ASK, DONE]))
        async with mrtr_asyncio.Client(transport, elicitation=lambda r, k: YES) as client:
            return await client.call_tool("t")

    assert run_virtual(main()) == DONE


# --- the caller cancels -----------------------------------------------------------------------


def test_trio_cancel_scope_cancels_and_awaits_the_handlers() -> None:
    log: list[tuple[float, str]] = []

    async def slow(request: object, key: str) -> ElicitResult:
        try:
            await trio.sleep(10)
        except trio.Cancelled:
            log.append((trio.current_time(), "cancelled"))
            raise
        return YES

    async def main() -> None:
        client = mrtr_trio.Client(mrtr_trio.MemoryTransport(ScriptedServer([ASK, DONE])),
                                  elicitation=slow)
        with trio.move_on_after(2):
            await client.call_tool("t")
        log.append((trio.current_time(), "returned"))

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert log == [(2.0, "cancelled"), (2.0, "returned")]


def test_asyncio_task_cancel_cancels_and_awaits_the_handlers() -> None:
    log: list[tuple[float, str]] = []

    async def slow(request: object, key: str) -> ElicitResult:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            log.append((asyncio.get_running_loop().time(), "cancelled"))
            raise
        return YES

    async def main() -> None:
        client = mrtr_asyncio.Client(mrtr_asyncio.MemoryTransport(ScriptedServer([ASK, DONE])),
                                     elicitation=slow)
        task = asyncio.create_task(client.call_tool("t"))
        await asyncio.sleep(2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        log.append((asyncio.get_running_loop().time(), "returned"))

    run_virtual(main())
    assert log == [(2.0, "cancelled"), (2.0, "returned")]


# --- sync: threads cannot be killed -----------------------------------------------------------


def test_sync_abandons_a_handler_without_a_cancel_event() -> None:
    clock = VirtualClock()
    log: list[tuple[float, str]] = []

    def stubborn(request: object, key: str) -> ElicitResult:  # no ``cancel`` parameter
        clock.sleep(10)
        log.append((clock.now(), key))
        return YES

    def fails(request: object, key: str) -> ElicitResult:
        clock.sleep(1)
        raise ValueError("no")

    ask_two = input_required({"a": elicit_form("a", {}), "b": elicit_form("b", {})}, state="s")
    server = ScriptedServer([ask_two, DONE])
    table = {"a": stubborn, "b": fails}
    client = mrtr_sync.Client(mrtr_sync.MemoryTransport(server, clock=clock), clock=clock,
                              elicitation=lambda request, key: table[key](request, key))
    with pytest.raises(HandlerFailedError) as caught:
        client.call_tool("t")
    assert caught.value.key == "b" and clock.now() == 1.0  # the call did not wait for "a"
    clock.sleep(20)
    assert log == [(10.0, "a")]  # "a" ran on, and its answer was ignored
    assert len(server.requests) == 1


class CountingClock(VirtualClock):
    """A virtual clock that counts the handler pools a client asks it for."""

    def __init__(self) -> None:
        super().__init__()
        self.pools: list[int] = []

    def executor(self, max_workers: int):  # type: ignore[no-untyped-def]
        self.pools.append(max_workers)
        return super().executor(max_workers)


def test_sync_client_keeps_one_handler_pool_across_calls() -> None:
    clock = CountingClock()
    server = ScriptedServer([ASK, DONE, ASK, DONE, ASK, DONE])
    client = mrtr_sync.Client(mrtr_sync.MemoryTransport(server, clock=clock), clock=clock,
                              elicitation=lambda request, key: YES)
    for _ in range(3):
        assert client.call_tool("t") == DONE
    assert clock.pools == [client.limits.max_input_requests]
    client.close()


def test_sync_client_gives_a_round_its_own_pool_when_abandoned_handlers_hold_threads() -> None:
    clock = CountingClock()
    release = threading.Event()

    def stubborn(request: object, key: str) -> ElicitResult:  # ignores cancellation
        clock.sleep(10, interrupt=release)
        return YES

    def fails(request: object, key: str) -> ElicitResult:
        raise ValueError("no")

    ask_two = input_required({"a": elicit_form("a", {}), "b": elicit_form("b", {})}, state="s")
    server = ScriptedServer([ask_two, ASK, DONE])
    table = {"a": stubborn, "b": fails, "ok": lambda request, key: YES}
    client = mrtr_sync.Client(mrtr_sync.MemoryTransport(server, clock=clock), clock=clock,
                              elicitation=lambda request, key: table[key](request, key),
                              max_workers=2)
    with pytest.raises(HandlerFailedError):
        client.call_tool("t")  # "a" keeps one of the pool's two threads
    assert client.call_tool("t") == DONE
    assert clock.pools == [2, 2]  # the second call could not count on two free threads
    clock.cancel(release)  # wake the stubborn handler so its thread ends
    client.close()


def test_sync_client_on_the_system_clock() -> None:
    server = ScriptedServer([ASK, DONE])
    with mrtr_sync.Client(mrtr_sync.MemoryTransport(server), elicitation=lambda r, k: YES) as c:
        assert c.call_tool("t") == DONE
    assert server.params[1]["inputResponses"] == {"ok": {"action": "accept",
                                                         "content": {"ok": True}}}


def test_sync_clients_on_the_system_clock_count_a_wait_across_instances() -> None:
    """Two clients on the system clock share one time line, as two asyncio clients on one
    loop or two trio clients in one ``trio.run`` do: the wait before ``resume`` counts."""
    server = ScriptedServer([ASK, DONE])
    limits = ClientLimits(flow_timeout=5)
    asking = mrtr_sync.Client(mrtr_sync.MemoryTransport(server), auto=False,
                              elicitation=lambda r, k: YES, limits=limits)
    with pytest.raises(InputRequired) as raised:
        asking.call_tool("t")
    pending = raised.value
    # The same round, raised 10 s earlier on that clock: its 5 s budget is spent.
    assert pending.saved_at is not None
    earlier = InputRequired(pending.round, pending.result, pending.data,
                            saved_at=pending.saved_at - 10, clock=pending.clock)
    answering = mrtr_sync.Client(mrtr_sync.MemoryTransport(server))
    with pytest.raises(FlowDeadlineError):
        answering.resume(earlier, {"ok": YES})
    assert len(server.requests) == 1


# --- the virtual clocks -----------------------------------------------------------------------


def test_VirtualClock_jumps_when_every_participant_waits() -> None:
    clock = VirtualClock()
    pool = clock.executor(2)
    done = [pool.submit(clock.sleep, 5), pool.submit(clock.sleep, 3)]
    clock.wait(done, None)
    assert clock.now() == 3.0
    clock.wait(done[:1], None)
    assert clock.now() == 5.0
    pool.shutdown()


def test_VirtualClock_cancel_interrupts_a_sleep_at_once() -> None:
    clock = VirtualClock()
    event = threading.Event()
    pool = clock.executor(1)
    sleeper = pool.submit(clock.sleep, 100, interrupt=event)
    clock.sleep(4)
    clock.cancel(event)
    clock.wait([sleeper], None)
    assert sleeper.result() is False and clock.now() == 4.0
    pool.shutdown()


def test_SystemClock_sleep_ends_when_its_interrupt_is_set() -> None:
    clock = mrtr_sync.SystemClock()
    event = threading.Event()
    assert clock.sleep(0, interrupt=event) is True  # nothing to wait: not interrupted
    setter = threading.Thread(target=event.set)
    setter.start()
    try:
        # An hour, unless the event ends it (at once, or by the next wake-up).
        assert clock.sleep(3600, interrupt=event) is False
    finally:
        setter.join()
    assert clock.sleep(3600, interrupt=event) is False  # already set: no wait at all


def test_VirtualClock_reports_a_deadlock() -> None:
    clock = VirtualClock()
    pool = clock.executor(1)
    never = pool.submit(clock.wait, [], None)  # waits for nothing, with no deadline
    with pytest.raises(VirtualDeadlockError):
        clock.wait([never], None)
    assert isinstance(never.exception(), VirtualDeadlockError)  # every waiter is told
    pool.shutdown()


def test_VirtualEventLoop_jumps_to_the_next_timer() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(3600)
        async with asyncio.timeout_at(loop.time() + 5):
            await asyncio.sleep(1)
        return loop.time()

    assert run_virtual(main(), start=100.0) == 3701.0


def test_VirtualEventLoop_reports_a_deadlock() -> None:
    loop = VirtualEventLoop()
    try:
        with pytest.raises(LoopDeadlockError):
            loop.run_until_complete(loop.create_future())
    finally:
        loop.close()


# --- shared pieces ----------------------------------------------------------------------------


def test_HandlerTable_declares_what_has_a_handler() -> None:
    table: HandlerTable[object] = HandlerTable()
    assert table.capabilities() == ClientCapabilities()
    assert table.handled_kinds == frozenset()
    table.elicitation, table.elicitation_url, table.roots = print, True, print
    base = ClientCapabilities(experimental={"x": {}})
    caps = table.capabilities(base)
    assert caps.elicitation == ElicitationCapability(form={}, url={})
    assert caps.roots == {} and caps.sampling is None and caps.experimental == {"x": {}}
    assert table.handled_kinds == frozenset({"elicitation/create", "roots/list"})


def test_on_elicitation_registers_and_declares_modes() -> None:
    client = mrtr_sync.Client(mrtr_sync.MemoryTransport(ScriptedServer([])))
    assert client.capabilities.elicitation is None
    client.on_elicitation(print, form=False, url=True)
    assert client.capabilities.elicitation == ElicitationCapability(form=None, url={})


def test_call_limits_override_per_call() -> None:
    base = ClientLimits(max_rounds=10, flow_timeout=600)
    assert call_limits(base) is base
    assert call_limits(base, max_rounds=3, timeout=5) == ClientLimits(max_rounds=3, flow_timeout=5)
    assert call_limits(base, limits=ClientLimits(max_rounds=4)).max_rounds == 4


def test_ScriptedServer_records_and_reports_an_exhausted_script() -> None:
    server = ScriptedServer([Step(result=lambda params: tool_result(params["name"]), delay=2)])
    first = server({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}})
    assert first["result"] == tool_result("x") and server.latency({"id": 1}) == 2
    over = server({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x"}})
    assert over["error"]["code"] == INTERNAL_ERROR and server.remaining == 0
    server.requests[0]["params"]["name"] = "changed"
    assert first["result"] == tool_result("x")  # the record is a copy
