"""One harness per runtime, so the contract scenarios run unchanged against every driver.

A scenario talks to a :class:`Runtime`: it builds a client over a scripted server, with
handlers described as data (:class:`Answer`, :class:`Raise`), makes calls, and inspects the
:class:`Outcome`, the handler log and the round notices, all stamped with virtual time. Each
runtime turns that into its own idioms: the sync client with a
:class:`~mrtr_sync.testing.VirtualClock`, trio under ``MockClock(autojump_threshold=0)``,
asyncio on a :class:`~mrtr_asyncio.testing.VirtualEventLoop`. Virtual time runs on across
calls, so a saved flow's deadlines stay meaningful when it is resumed.
"""

from __future__ import annotations

import abc
import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import mrtr_asyncio
import mrtr_sync
import mrtr_trio
import trio
import trio.testing
from mrtr_asyncio.testing import VirtualEventLoop
from mrtr_sync.testing import VirtualClock

from mrtr_core.client.commands import ClientCommand
from mrtr_core.testing.memory import through_wire

RUNTIMES = ("sync", "trio", "asyncio")


@attrs.frozen
class Answer:
    """A handler that takes ``after`` virtual seconds, then returns ``value``."""

    value: Any
    after: float = 0.0


@attrs.frozen
class Raise:
    """A handler that takes ``after`` virtual seconds, then raises ``error``."""

    error: Exception
    after: float = 0.0


Behaviour = Answer | Raise


@attrs.frozen
class Outcome:
    """How one call ended: its result or its error, and the virtual time it returned at."""

    result: Any = None
    error: BaseException | None = None
    at: float = 0.0

    def unwrap(self) -> Any:
        """The result; re-raises the error."""
        if self.error is not None:
            raise self.error
        return self.result


@attrs.define
class Handle:
    """A client under test with what it recorded.

    Attributes:
        client: The runtime's own ``Client``.
        log: ``(time, key, what)`` for every handler step: ``start``, ``end``, ``raised``,
            ``cancelled``.
        events: ``(time, notice)`` for every round notice, in order.
        requests: ``key -> the typed input request`` each handler received.
    """

    client: Any
    log: list[tuple[float, str, str]] = attrs.Factory(list)
    events: list[tuple[float, ClientCommand]] = attrs.Factory(list)
    requests: dict[str, Any] = attrs.Factory(dict)

    def times(self, key: str, what: str) -> list[float]:
        """When ``key``'s handler did ``what``."""
        return [t for t, k, w in self.log if k == key and w == what]


class UserTransport:
    """A sync transport of the user's own: it hands each request to ``server`` through the
    wire and, unlike mrtr's transports, goes on doing so after :meth:`close` (which it only
    notes)."""

    def __init__(self, server: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.server = server
        self.closed = False

    def request(self, message: dict[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
        return through_wire(self.server(through_wire(message)))

    def close(self) -> None:
        self.closed = True


class AsyncUserTransport:
    """:class:`UserTransport` for the trio and asyncio clients."""

    def __init__(self, server: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.server = server
        self.closed = False

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        return through_wire(self.server(through_wire(message)))

    async def aclose(self) -> None:
        self.closed = True


class Runtime(abc.ABC):
    """What a scenario needs from a runtime (see the module docstring)."""

    name: str

    @abc.abstractmethod
    def now(self) -> float:
        """The current virtual time."""
        ...

    @abc.abstractmethod
    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass between calls (a user thinking)."""
        ...

    def client(
        self,
        server: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        latency: float | Callable[[dict[str, Any]], float] = 0.0,
        elicitation: Mapping[str, Behaviour] | None = None,
        sampling: Mapping[str, Behaviour] | None = None,
        roots: Mapping[str, Behaviour] | None = None,
        user_transport: bool = False,
        **options: Any,
    ) -> Handle:
        """A client over an in-memory transport to ``server`` (with ``user_transport``, a
        :class:`UserTransport` or :class:`AsyncUserTransport` instead, without latency),
        handlers keyed by input key."""
        handle = Handle(client=None)
        kwargs = dict(options)
        kwargs.setdefault("on_event", lambda cmd: handle.events.append((self.now(), cmd)))
        for kind, table in (("elicitation", elicitation), ("sampling", sampling),
                            ("roots", roots)):
            if table is not None:
                kwargs[kind] = self._handler(dict(table), handle)
        if user_transport:
            kwargs["transport"] = (UserTransport if self.name == "sync" else AsyncUserTransport)(
                server
            )
        handle.client = self._make_client(server, latency, kwargs)
        return handle

    def call(self, handle: Handle, method: str, *args: Any, **kwargs: Any) -> Outcome:
        """Run ``handle.client.<method>(*args, **kwargs)`` to its end."""
        return self.gather((handle, method, args, kwargs))[0]

    @abc.abstractmethod
    def gather(self, *calls: tuple[Handle, str, tuple[Any, ...], dict[str, Any]]) -> list[Outcome]:
        """Run several calls concurrently; their outcomes in order."""
        ...

    def close(self, handle: Handle) -> Outcome:
        """Close the client (``close`` or ``aclose``, as the runtime spells it)."""
        return self.call(handle, "close" if self.name == "sync" else "aclose")

    @abc.abstractmethod
    def _make_client(self, server: Any, latency: Any, kwargs: dict[str, Any]) -> Any:
        ...

    @abc.abstractmethod
    def _handler(self, table: dict[str, Behaviour], handle: Handle) -> Any:
        ...


class SyncRuntime(Runtime):
    """The sync client on a :class:`VirtualClock`; concurrent calls run in its threads."""

    name = "sync"

    def __init__(self) -> None:
        self.clock = VirtualClock()

    def now(self) -> float:
        return self.clock.now()

    def advance(self, seconds: float) -> None:
        self.clock.sleep(seconds)

    def _make_client(self, server: Any, latency: Any, kwargs: dict[str, Any]) -> Any:
        transport = kwargs.pop("transport", None) or mrtr_sync.MemoryTransport(
            server, latency=latency, clock=self.clock
        )
        return mrtr_sync.Client(transport, clock=self.clock, **kwargs)

    def _handler(self, table: dict[str, Behaviour], handle: Handle) -> Any:
        clock = self.clock

        def handler(request: Any, key: str, cancel: threading.Event) -> Any:
            handle.requests[key] = request
            behaviour = table[key]
            handle.log.append((clock.now(), key, "start"))
            if not clock.sleep(behaviour.after, interrupt=cancel):
                handle.log.append((clock.now(), key, "cancelled"))
                return None
            return _finish(behaviour, key, handle, clock.now())

        return handler

    def gather(self, *calls: tuple[Handle, str, tuple[Any, ...], dict[str, Any]]) -> list[Outcome]:
        def run(call: tuple[Handle, str, tuple[Any, ...], dict[str, Any]]) -> Outcome:
            handle, method, args, kwargs = call
            try:
                result = getattr(handle.client, method)(*args, **kwargs)
            except Exception as exc:
                return Outcome(error=exc, at=self.clock.now())
            return Outcome(result=result, at=self.clock.now())

        if len(calls) == 1:
            outcomes = [run(calls[0])]
        else:
            pool = self.clock.executor(len(calls))
            futures = [pool.submit(run, call) for call in calls]
            while not all(f.done() for f in futures):
                self.clock.wait([f for f in futures if not f.done()], None)
            pool.shutdown()
            outcomes = [f.result() for f in futures]
        self.clock.settle()  # abandoned handler threads finish recording
        return outcomes


class TrioRuntime(Runtime):
    """The trio client; every call is a ``trio.run`` on one shared ``MockClock``."""

    name = "trio"

    def __init__(self) -> None:
        self.clock = trio.testing.MockClock(autojump_threshold=0)

    def now(self) -> float:
        return self.clock.current_time()

    def advance(self, seconds: float) -> None:
        self.clock.jump(seconds)

    def _make_client(self, server: Any, latency: Any, kwargs: dict[str, Any]) -> Any:
        transport = kwargs.pop("transport", None) or mrtr_trio.MemoryTransport(
            server, latency=latency
        )
        return mrtr_trio.Client(transport, **kwargs)

    def _handler(self, table: dict[str, Behaviour], handle: Handle) -> Any:
        async def handler(request: Any, key: str) -> Any:
            handle.requests[key] = request
            behaviour = table[key]
            handle.log.append((trio.current_time(), key, "start"))
            try:
                await trio.sleep(behaviour.after)
            except trio.Cancelled:
                handle.log.append((trio.current_time(), key, "cancelled"))
                raise
            return _finish(behaviour, key, handle, trio.current_time())

        return handler

    def gather(self, *calls: tuple[Handle, str, tuple[Any, ...], dict[str, Any]]) -> list[Outcome]:
        outcomes: list[Outcome | None] = [None] * len(calls)

        async def run_one(index: int) -> None:
            handle, method, args, kwargs = calls[index]
            try:
                result = await getattr(handle.client, method)(*args, **kwargs)
            except Exception as exc:
                outcomes[index] = Outcome(error=exc, at=trio.current_time())
            else:
                outcomes[index] = Outcome(result=result, at=trio.current_time())

        async def main() -> None:
            async with trio.open_nursery() as nursery:
                for index in range(len(calls)):
                    nursery.start_soon(run_one, index)

        trio.run(main, clock=self.clock)
        return [o for o in outcomes if o is not None]


class AsyncioRuntime(Runtime):
    """The asyncio client; every call runs on one shared :class:`VirtualEventLoop`."""

    name = "asyncio"

    def __init__(self) -> None:
        self.loop = VirtualEventLoop()

    def shutdown(self) -> None:
        """Close the shared loop."""
        self.loop.close()

    def now(self) -> float:
        return self.loop.time()

    def advance(self, seconds: float) -> None:
        self.loop.advance(seconds)

    def _make_client(self, server: Any, latency: Any, kwargs: dict[str, Any]) -> Any:
        transport = kwargs.pop("transport", None) or mrtr_asyncio.MemoryTransport(
            server, latency=latency
        )
        return mrtr_asyncio.Client(transport, **kwargs)

    def _handler(self, table: dict[str, Behaviour], handle: Handle) -> Any:
        loop = self.loop

        async def handler(request: Any, key: str) -> Any:
            handle.requests[key] = request
            behaviour = table[key]
            handle.log.append((loop.time(), key, "start"))
            try:
                await asyncio.sleep(behaviour.after)
            except asyncio.CancelledError:
                handle.log.append((loop.time(), key, "cancelled"))
                raise
            return _finish(behaviour, key, handle, loop.time())

        return handler

    def gather(self, *calls: tuple[Handle, str, tuple[Any, ...], dict[str, Any]]) -> list[Outcome]:
        async def run_one(call: tuple[Handle, str, tuple[Any, ...], dict[str, Any]]) -> Outcome:
            handle, method, args, kwargs = call
            try:
                result = await getattr(handle.client, method)(*args, **kwargs)
            except Exception as exc:
                return Outcome(error=exc, at=self.loop.time())
            return Outcome(result=result, at=self.loop.time())

        async def main() -> list[Outcome]:
            return list(await asyncio.gather(*(run_one(call) for call in calls)))

        return self.loop.run_until_complete(main())


def _finish(behaviour: Behaviour, key: str, handle: Handle, now: float) -> Any:
    if isinstance(behaviour, Raise):
        handle.log.append((now, key, "raised"))
        raise behaviour.error
    handle.log.append((now, key, "end"))
    return behaviour.value


def make_runtime(name: str) -> Runtime:
    """A fresh runtime harness by name (one of :data:`RUNTIMES`)."""
    return {"sync": SyncRuntime, "trio": TrioRuntime, "asyncio": AsyncioRuntime}[name]()
