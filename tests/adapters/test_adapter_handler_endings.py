"""How a call ends when its handlers end oddly, in the async runtimes (virtual clocks): a
handler's own cancellation is a typed failure naming its key, a plain-function handler is held
to its time limit like a coroutine one, and nothing leaves a call as an exception group."""

from __future__ import annotations

import asyncio
from typing import Any

import mrtr_asyncio
import mrtr_trio
import pytest
import trio
import trio.testing
from mrtr_asyncio.testing import VirtualEventLoop

from mrtr_core.client import ClientLimits
from mrtr_core.errors import HandlerFailedError, HandlerTimeoutError
from mrtr_core.testing import ScriptedServer, elicit_form, input_required, tool_result
from mrtr_core.wire import ElicitResult

FORM = elicit_form("ok?", {"ok": {"type": "boolean"}})
YES = ElicitResult(action="accept", content={"ok": True})


def two_rounds(*keys: str) -> ScriptedServer:
    return ScriptedServer([input_required({key: FORM for key in keys}, "s1"),
                           tool_result("done")])


class Stop(BaseException):
    """Not an Exception: what a handler must never turn into an exception group."""


def test_asyncio_handler_whose_own_future_is_cancelled_fails_naming_its_key() -> None:
    # A dialog future cancelled by the UI: the handler's cancellation, not the call's.
    async def handler(request: Any, key: str) -> ElicitResult:
        dialog: asyncio.Future[ElicitResult] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(1.0, dialog.cancel)
        return await dialog

    loop = VirtualEventLoop()

    async def main() -> None:
        server = two_rounds("a")
        client = mrtr_asyncio.Client(mrtr_asyncio.MemoryTransport(server), elicitation=handler,
                                     limits=ClientLimits(handler_timeout=None, flow_timeout=None))
        with pytest.raises(HandlerFailedError) as failed:
            await client.call_tool("t")
        assert failed.value.key == "a"
        assert isinstance(failed.value.cause, asyncio.CancelledError)
        assert loop.time() == 1.0
        assert len(server.requests) == 1  # no retry

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_asyncio_plain_handler_that_overruns_its_time_limit_times_out() -> None:
    # As in the trio and sync drivers: an answer that comes after the handler's deadline
    # does not count, however the handler was written.
    loop = VirtualEventLoop()

    def slow(request: Any, key: str) -> ElicitResult:
        loop.advance(10.0)  # a blocking handler: ten seconds pass while it runs
        return YES

    async def main() -> None:
        server = two_rounds("a")
        client = mrtr_asyncio.Client(mrtr_asyncio.MemoryTransport(server), elicitation=slow,
                                     limits=ClientLimits(handler_timeout=5.0, pacing_jitter=0))
        with pytest.raises(HandlerTimeoutError):
            await client.call_tool("t")
        assert len(server.requests) == 1

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_trio_caller_cancelling_during_coroutine_handlers_gets_a_bare_cancelled() -> None:
    async def waits(request: Any, key: str) -> ElicitResult:
        await trio.sleep(100)
        return YES

    async def main() -> tuple[bool, bool]:
        client = mrtr_trio.Client(mrtr_trio.MemoryTransport(two_rounds("a", "b")),
                                  elicitation=waits)
        caught = False
        with trio.move_on_after(1) as scope:
            try:
                await client.call_tool("t")
            except trio.Cancelled:  # a caller's own handling of its cancellation works
                caught = True
                raise
        return caught, scope.cancelled_caught

    assert trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)) == (True, True)


@pytest.mark.parametrize("runtime", ["trio", "asyncio"])
def test_a_handler_raising_a_base_exception_reaches_the_caller_bare(runtime: str) -> None:
    async def stops(request: Any, key: str) -> ElicitResult:
        await (trio.sleep(0) if runtime == "trio" else asyncio.sleep(0))
        raise Stop

    async def main(module: Any) -> None:
        client = module.Client(module.MemoryTransport(two_rounds("a", "b")), elicitation=stops)
        await client.call_tool("t")

    with pytest.raises(Stop):
        if runtime == "trio":
            trio.run(main, mrtr_trio, clock=trio.testing.MockClock(autojump_threshold=0))
        else:
            loop = VirtualEventLoop()
            try:
                loop.run_until_complete(main(mrtr_asyncio))
            finally:
                loop.close()


@pytest.mark.parametrize("runtime", ["trio", "asyncio"])
@pytest.mark.parametrize("b_fails", [True, False])
def test_a_failure_that_raced_the_first_is_kept_on_others(runtime: str, b_fails: bool) -> None:
    # Both handlers end in the same step: the first failure names the call's error, a
    # second one is kept on ``others`` (and a success that raced it changes nothing).
    async def ends(request: Any, key: str) -> ElicitResult:
        if key == "a" or b_fails:
            raise ValueError(f"boom-{key}")
        return YES

    async def main(module: Any) -> HandlerFailedError:
        client = module.Client(module.MemoryTransport(two_rounds("a", "b")), elicitation=ends)
        with pytest.raises(HandlerFailedError) as failed:
            await client.call_tool("t")
        return failed.value

    if runtime == "trio":
        error = trio.run(main, mrtr_trio, clock=trio.testing.MockClock(autojump_threshold=0))
    else:
        loop = VirtualEventLoop()
        try:
            error = loop.run_until_complete(main(mrtr_asyncio))
        finally:
            loop.close()
    failures = {error.key: str(error.cause), **{k: str(e) for k, e in error.others}}
    assert failures == ({"a": "boom-a", "b": "boom-b"} if b_fails else {"a": "boom-a"})


def test_sync_cancel_returns_the_outcomes_of_handlers_that_had_already_finished() -> None:
    # The sync driver cannot wait for handler threads it cancels; those that had finished
    # when the first failure was read are handed to the flow (kept on ``others``), and a
    # finished success likewise; one still running is left to end on its own.
    from concurrent.futures import Future

    import mrtr_sync
    from mrtr_sync.client import _Handlers

    from mrtr_core.client import HandlerFailed, HandlerReturned

    run = _Handlers(mrtr_sync.Client(mrtr_sync.MemoryTransport(two_rounds("a"))), workers=1)
    failed: Future[Any] = Future()
    failed.set_exception(ValueError("boom-b"))
    answered: Future[Any] = Future()
    answered.set_result(YES)
    running: Future[Any] = Future()
    running.set_running_or_notify_cancel()
    run.running.update({"b": failed, "c": answered, "d": running})
    late = run.cancel(("b", "c", "d"))
    assert [type(event) for event in late] == [HandlerFailed, HandlerReturned]
    assert [event.key for event in late] == ["b", "c"]
    assert not run.running
