"""Closing a client ends every call in flight, wherever it waits: on its handlers (a
person who may never answer) or on the pacing delay of a state-only round, as well as on its
transport. Each such call fails with a ``TransportError`` whose cause is a
``TransportClosedError``; a running handler is cancelled. Virtual clocks throughout."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import mrtr_asyncio
import mrtr_sync
import mrtr_trio
import pytest
import trio
import trio.testing
from adapter_harness import UserTransport
from mrtr_asyncio.testing import VirtualEventLoop
from mrtr_sync.testing import VirtualClock

from mrtr_core.client import ClientLimits, RoundStarted
from mrtr_core.errors import TransportClosedError, TransportError
from mrtr_core.testing import ScriptedServer, elicit_form, input_required, tool_result
from mrtr_core.wire import ElicitResult

FORM = elicit_form("ok?", {"ok": {"type": "boolean"}})
LIMITS = ClientLimits(handler_timeout=None, flow_timeout=None, pacing_initial=1.0, pacing_jitter=0)


def waits_for_input() -> ScriptedServer:
    """Two calls, each asked for input (a retry would get "done")."""
    ask = input_required({"a": FORM}, "s1")
    return ScriptedServer([ask, ask, tool_result("done")])


def state_only() -> ScriptedServer:
    """Two calls, each on a state-only round paced for a second."""
    again = input_required({}, "s1")
    return ScriptedServer([again, again, tool_result("done")])


def never_answers(seen: list[str], wait: Callable[[], Awaitable[object]]) -> Any:
    """A handler that waits forever on ``wait()``, noting in ``seen`` that it started and
    that it was cancelled."""

    async def never(request: Any, key: str) -> ElicitResult:
        seen.append("started")
        try:
            await wait()
        finally:
            seen.append("cancelled")
        raise AssertionError("unreachable")

    return never


def assert_closed(error: BaseException) -> None:
    assert type(error) is TransportError
    assert type(error.cause) is TransportClosedError
    assert str(error.cause) == "the client was closed"


def assert_both_closed(
    server: Any, errors: list[BaseException], scripted: ScriptedServer, seen: list[str],
    *, at: float,
) -> None:
    """Both calls ended at the close (t = 0.01) with the closed client's error, no retry was
    sent, and each handler (when the round asked for input) was cancelled."""
    assert len(errors) == 2
    for error in errors:
        assert_closed(error)
    assert at == 0.01
    assert len(scripted.requests) == 2
    handled = ["started", "started", "cancelled", "cancelled"]
    assert seen == (handled if server is waits_for_input else [])


@pytest.mark.parametrize("server", [waits_for_input, state_only])
def test_trio_aclose_ends_calls_waiting_on_handlers_or_pacing(server: Any) -> None:
    seen: list[str] = []
    never = never_answers(seen, trio.sleep_forever)

    async def main() -> None:
        scripted = server()
        client = mrtr_trio.Client(mrtr_trio.MemoryTransport(scripted), elicitation=never,
                                  limits=LIMITS)
        errors: list[BaseException] = []

        async def call() -> None:
            try:
                await client.call_tool("t")
            except TransportError as exc:
                errors.append(exc)

        with trio.fail_after(100):  # virtual seconds: a call left hanging fails the test
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                nursery.start_soon(call)
                await trio.sleep(0.01)  # both calls wait past their first leg
                await client.aclose()
        assert_both_closed(server, errors, scripted, seen, at=trio.current_time())

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize("server", [waits_for_input, state_only])
def test_asyncio_aclose_ends_calls_waiting_on_handlers_or_pacing(server: Any) -> None:
    seen: list[str] = []
    never = never_answers(seen, lambda: asyncio.get_running_loop().create_future())

    loop = VirtualEventLoop()

    async def main() -> None:
        scripted = server()
        client = mrtr_asyncio.Client(mrtr_asyncio.MemoryTransport(scripted), elicitation=never,
                                     limits=LIMITS)
        calls = [asyncio.create_task(client.call_tool("t")) for _ in range(2)]
        await asyncio.sleep(0.01)  # both calls wait past their first leg
        await client.aclose()
        async with asyncio.timeout(100):  # virtual seconds: a call left hanging fails
            errors = await asyncio.gather(*calls, return_exceptions=True)
        assert_both_closed(server, errors, scripted, seen, at=loop.time())

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_asyncio_caller_cancellation_stays_the_callers_after_aclose() -> None:
    # The caller's own timeout that fires with the close is still the caller's.
    loop = VirtualEventLoop()

    async def main() -> None:
        client = mrtr_asyncio.Client(mrtr_asyncio.MemoryTransport(state_only()), limits=LIMITS)
        task = asyncio.create_task(client.call_tool("t"))
        await asyncio.sleep(0.01)
        task.cancel()
        await client.aclose()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_sync_close_ends_a_call_waiting_on_pacing() -> None:
    # A call in the pacing delay of a state-only round ends at the close, not when the delay
    # would have ended, and sends no retry.
    clock = VirtualClock()
    scripted = state_only()
    client = mrtr_sync.Client(mrtr_sync.MemoryTransport(scripted), limits=LIMITS, clock=clock)
    closer = clock.executor(1)

    def close_soon() -> None:
        clock.sleep(0.01)
        client.close()

    try:
        closer.submit(close_soon)
        with pytest.raises(TransportError) as info:
            client.call_tool("t")
    finally:
        closer.shutdown()
    assert_closed(info.value)
    assert clock.now() == 0.01
    assert len(scripted.requests) == 1



def fails_or_slow_to_cancel(
    sleep: Callable[[float], Awaitable[object]],
    wait: Callable[[], Awaitable[object]],
    cleanup: Callable[[], Awaitable[object]],
) -> Any:
    """A handler for a round of keys ``fails`` and ``slow``: ``fails`` raises after one
    (virtual) second; ``slow`` waits on ``wait()`` and, once cancelled, takes ``cleanup()``
    (a shielded wait) to end."""

    async def handler(request: Any, key: str) -> ElicitResult:
        if key == "fails":
            await sleep(1)
            raise RuntimeError("the dialog broke")
        try:
            await wait()
        finally:
            await cleanup()
        raise AssertionError("unreachable")

    return handler


FAILS_AND_SLOW = input_required({"fails": FORM, "slow": FORM}, "s1")


async def call_noting_error(client: mrtr_trio.Client, errors: list[BaseException]) -> None:
    """Call the tool ``t``, noting in ``errors`` what the call raises."""
    try:
        await client.call_tool("t")
    except Exception as exc:
        errors.append(exc)


def test_trio_aclose_while_a_failed_call_waits_for_a_cancelled_handler() -> None:
    # The flow has failed (one handler raised) and the call waits for the other handler to
    # end its cancellation: a close then ends the call with the closed client's error, not
    # with a LocalProtocolError from cancelling a flow that was already over.
    async def cleanup() -> None:
        with trio.CancelScope(shield=True):
            await trio.sleep(5)

    handler = fails_or_slow_to_cancel(trio.sleep, trio.sleep_forever, cleanup)

    async def main() -> None:
        scripted = ScriptedServer([FAILS_AND_SLOW])
        client = mrtr_trio.Client(mrtr_trio.MemoryTransport(scripted), elicitation=handler,
                                  limits=LIMITS)
        errors: list[BaseException] = []
        with trio.fail_after(100):  # virtual seconds
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call_noting_error, client, errors)
                await trio.sleep(2)  # "fails" raised at 1 s; "slow" cleans up until 6 s
                await client.aclose()
        assert len(errors) == 1
        assert_closed(errors[0])
        assert len(scripted.requests) == 1

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_asyncio_aclose_while_a_failed_call_waits_for_a_cancelled_handler() -> None:
    async def cleanup() -> None:
        await asyncio.shield(asyncio.sleep(5))

    handler = fails_or_slow_to_cancel(
        asyncio.sleep, lambda: asyncio.get_running_loop().create_future(), cleanup
    )
    loop = VirtualEventLoop()

    async def main() -> None:
        scripted = ScriptedServer([FAILS_AND_SLOW])
        client = mrtr_asyncio.Client(mrtr_asyncio.MemoryTransport(scripted),
                                     elicitation=handler, limits=LIMITS)
        task = asyncio.create_task(client.call_tool("t"))
        await asyncio.sleep(2)  # "fails" raised at 1 s; "slow" cleans up until 6 s
        await client.aclose()
        async with asyncio.timeout(100):  # virtual seconds
            errors = await asyncio.gather(task, return_exceptions=True)
        assert_closed(errors[0])
        assert len(scripted.requests) == 1

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_sync_close_from_on_event_stops_the_next_leg_over_a_transport_that_still_accepts() -> None:
    # on_event closes the client as round 2 is about to be sent: the client itself holds the
    # retry back, whatever its transport still accepts.
    scripted = waits_for_input()
    transport = UserTransport(scripted)
    client: mrtr_sync.Client

    def on_event(cmd: object) -> None:
        if isinstance(cmd, RoundStarted) and cmd.round == 2:
            client.close()

    def answer(request: Any, key: str) -> ElicitResult:
        return ElicitResult(action="accept", content={"ok": True})

    client = mrtr_sync.Client(transport, elicitation=answer, on_event=on_event, limits=LIMITS,
                              clock=VirtualClock())
    with pytest.raises(TransportError) as info:
        client.call_tool("t")
    assert_closed(info.value)
    assert transport.closed and len(scripted.requests) == 1
