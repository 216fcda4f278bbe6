"""The sync MRTR client: blocking calls, handlers in threads, one timer.

The client drives a :class:`~mrtr_core.client.flow.ClientFlow` and does only what the flow
orders: send a request, run handlers, cancel handlers, wait until ``flow.deadline``. Every
protocol decision (the next request, limits, timeouts, pacing, errors) is the flow's.

Handlers run in a thread pool, all handlers of a round at once. A thread cannot be killed:
on cancellation the client cancels handlers that have not started yet, sets the ``cancel``
event of those that accept one (a keyword parameter named ``cancel``), and stops waiting for
the rest; whatever they return later is ignored. Pool threads are joined when the
interpreter exits, so a handler that never returns (blocked on a terminal, say) should
watch its ``cancel`` event. Pool threads block SIGINT and SIGTERM (see
:mod:`mrtr_sync.threads`): Ctrl-C reaches the main thread, which is waiting in the call, and
ends the call (its handlers are cancelled) with ``KeyboardInterrupt``.
"""

from __future__ import annotations

import inspect
import random as _random
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future
from typing import Any, Unpack

from mrtr_core._checks import client_options, positive_int
from mrtr_core.client.commands import (
    AwaitAnswers,
    CancelHandlers,
    ClientCommand,
    Complete,
    Fail,
    InvokeHandler,
    SendRequest,
)
from mrtr_core.client.driver import (
    NOTICES,
    CallOptions,
    ClientBase,
    InputRequired,
    client_closed,
    prompt_params,
    resource_params,
    tool_params,
    transport_failed,
)
from mrtr_core.client.events import (
    ClientEvent,
    HandlerFailed,
    HandlerReturned,
    ResponseReceived,
    TimerFired,
)
from mrtr_core.client.flow import ClientFlow
from mrtr_core.client.limits import ClientLimits
from mrtr_core.errors import MrtrError, TransportClosedError
from mrtr_core.wire.models import PROTOCOL_VERSION, ClientCapabilities, Implementation, JsonObject
from mrtr_sync.clock import Clock, SystemClock
from mrtr_sync.transport import Transport

__all__ = ["Client", "Handler"]

Handler = Callable[..., object]
"""``handler(request, key)`` (or with ``cancel=threading.Event``) -> the typed answer or a dict."""

DEFAULT_CLIENT_INFO = Implementation(name="mrtr-sync", version="0.1.0")


class Client(ClientBase[Handler]):
    """A blocking MRTR client over one :class:`~mrtr_sync.transport.Transport`.

    Handlers are plain functions ``handler(request, key)`` returning the typed answer
    (``ElicitResult``, ``CreateMessageResult``, ``ListRootsResult``) or its dict form; one
    that also takes ``cancel`` gets a ``threading.Event`` set when the round is abandoned.
    The other arguments are those of :class:`~mrtr_core.client.driver.ClientBase`, plus:

    Args:
        transport: Carries each request leg.
        random: The jitter source (default: a fresh ``random.Random``).
        clock: Time and threads (default :class:`~mrtr_sync.clock.SystemClock`).
        max_workers: Handler threads per call (default: the call's
            ``limits.max_input_requests``, so a round's handlers all run at once).
    """

    def __init__(
        self,
        transport: Transport,
        *,
        client_info: Implementation = DEFAULT_CLIENT_INFO,
        elicitation: Handler | None = None,
        elicitation_form: bool = True,
        elicitation_url: bool = False,
        sampling: Handler | None = None,
        roots: Handler | None = None,
        capabilities: ClientCapabilities | None = None,
        limits: ClientLimits | None = None,
        random: _random.Random | None = None,
        on_event: Callable[[ClientCommand], object] | None = None,
        auto: bool = True,
        clock: Clock | None = None,
        max_workers: int | None = None,
        protocol_version: str = PROTOCOL_VERSION,
        validate_output: bool = True,
    ) -> None:
        client_options(transport, ("request", "close"), random)
        if max_workers is not None:
            positive_int("max_workers", max_workers)
        super().__init__(
            client_info=client_info, elicitation=elicitation, elicitation_form=elicitation_form,
            elicitation_url=elicitation_url, sampling=sampling, roots=roots,
            capabilities=capabilities, limits=limits, random=(random or _random.Random()).random,
            on_event=on_event, auto=auto, protocol_version=protocol_version,
            validate_output=validate_output,
        )
        self.transport = transport
        self.clock = clock or SystemClock()
        self.max_workers = max_workers
        # One handler pool for the client's life (a pool per call cost a third of a sync
        # MRTR call's client CPU). A call whose round needs more threads than the pool has
        # free (a handler that ignored cancellation still holds its thread) gets a pool of
        # its own, so a round's handlers always run at once.
        self._pool: Executor | None = None
        self._pool_size = 0
        self._pool_busy = 0
        self._pool_lock = threading.Lock()
        # The calls whose handlers use a pool now, for close() to signal; set under the lock.
        self._runs: set[_Handlers] = set()
        self._closing = threading.Event()
        """Set by :meth:`close` through the clock: it ends a pacing delay at once."""

    def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, **options: Unpack[CallOptions]
    ) -> JsonObject:
        """``tools/call``; returns the final ``CallToolResult`` dict (options: :meth:`request`)."""
        return self.request(*tool_params(name, arguments), **options)

    def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None, **options: Unpack[CallOptions]
    ) -> JsonObject:
        """``prompts/get``; returns the final ``GetPromptResult`` dict."""
        return self.request(*prompt_params(name, arguments), **options)

    def read_resource(self, uri: str, **options: Unpack[CallOptions]) -> JsonObject:
        """``resources/read``; returns the final ``ReadResourceResult`` dict."""
        return self.request(*resource_params(uri), **options)

    def request(
        self, method: str, params: Mapping[str, Any] | None = None, **options: Unpack[CallOptions]
    ) -> JsonObject:
        """Run one request through as many rounds as the server needs; return its result.

        Any method works; only ``tools/call``, ``prompts/get`` and ``resources/read`` may go
        past one leg. Options: :class:`~mrtr_core.client.driver.CallOptions` (``auto``,
        ``limits``, ``max_rounds``, ``timeout`` for the whole flow, ``progress_token``).

        Raises:
            MrtrError: the typed failure (round limit, a timeout, a handler failure, a
                JSON-RPC error, a broken transport, ...).
            InputRequired: manual mode, when a round needs input.
        """
        flow = self.new_flow(method, params, **options)
        return self._drive(flow, flow.start(self.clock.now()))

    def resume(
        self, pending: InputRequired | Mapping[str, Any], answers: Mapping[str, object]
    ) -> JsonObject:
        """Answer a manual-mode round (an :class:`InputRequired` or its saved ``data``).

        The wait for the answers counts against the flow's budget when ``pending`` was
        raised by a client on this clock (or, for the default system clock, by any client
        in this process); saved data carries the budget it had left.

        A round is answered once: an :class:`InputRequired` resumed already is refused.

        Raises:
            LocalProtocolError: ``pending`` is not a pending round or its saved data, or is
                an :class:`InputRequired` resumed already (the first resume may still be
                running), or ``answers`` misses a key of the round, names a key not in it,
                or holds an answer of the wrong shape; nothing is sent.
        """
        flow, cmds = self.resume_flow(pending, answers, self.clock.now(), _time_line(self.clock))
        return self._drive(flow, cmds)

    def close(self) -> None:
        """Close the transport and the handler pool (running handlers are not waited for).

        Every call in flight ends with :class:`~mrtr_core.errors.TransportError` whose
        ``cause`` is a :class:`~mrtr_core.errors.TransportClosedError` (with mrtr's
        transports): the transport fails its request (the HTTP transport fails every
        request in flight), the pool drops its queued handlers, and its running handlers
        get their ``cancel`` event set; the call raises once they have returned (a handler
        that ignores the event keeps its call waiting until it returns); a call in the pacing
        delay of a state-only round raises at once. A call that has yet to send its next
        leg, and every call and ``resume`` made after the close, raises that error before
        anything is sent, whatever the transport does once closed."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
            self._closed = True
            runs = tuple(self._runs)
        self.clock.cancel(self._closing)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        for run in runs:
            run.signal_all()
        self.transport.close()

    def _pool_for(self, run: _Handlers, workers: int) -> tuple[Executor, bool]:
        """The pool a call's handlers run on, and whether the call owns it (and shuts it
        down): the shared pool with ``workers`` threads reserved for the call when it has
        them free, else a new pool. ``run`` is recorded for :meth:`close` to signal.

        Raises:
            TransportClosedError: the client was closed.
        """
        with self._pool_lock:
            if self._closed:
                raise client_closed()
            self._runs.add(run)
            if self._pool is None:
                self._pool_size = max(workers, self.max_workers or 0)
                self._pool = self.clock.executor(self._pool_size)
            if self._pool_busy + workers <= self._pool_size:
                self._pool_busy += workers
                return self._pool, False
        return self.clock.executor(workers), True

    def _release(self, run: _Handlers | None, threads: int) -> None:
        """Give back threads of the shared pool reserved by a call (and, with ``run``,
        forget that call's handlers)."""
        with self._pool_lock:
            self._pool_busy -= threads
            if run is not None:
                self._runs.discard(run)

    def _forget(self, run: _Handlers) -> None:
        """Forget a call's handlers (they ran on a pool of its own)."""
        with self._pool_lock:
            self._runs.discard(run)


    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- the driver -------------------------------------------------------------------------

    def _drive(self, flow: ClientFlow, cmds: list[ClientCommand]) -> JsonObject:
        run = _Handlers(self, self.max_workers or flow.limits.max_input_requests)
        try:
            while True:
                send: SendRequest | None = None
                for cmd in cmds:
                    if isinstance(cmd, NOTICES):
                        self.notify(cmd)
                    elif isinstance(cmd, SendRequest):
                        send = cmd
                    elif isinstance(cmd, InvokeHandler):
                        try:
                            run.start(cmd)
                        except TransportClosedError as exc:  # close() came first
                            raise transport_failed(flow, exc, self.clock.now()) from exc
                    elif isinstance(cmd, CancelHandlers):
                        for late in run.cancel(cmd.keys):  # a failure that raced the first
                            flow.handle(late, self.clock.now())
                    elif isinstance(cmd, AwaitAnswers):
                        raise self.input_required(
                            cmd, flow, self.clock.now(), _time_line(self.clock)
                        )
                    elif isinstance(cmd, Complete):
                        return cmd.result
                    elif isinstance(cmd, Fail):
                        raise cmd.error
                cmds = flow.handle(self._next_event(flow, send, run), self.clock.now())
        finally:
            run.close()

    def _next_event(
        self, flow: ClientFlow, send: SendRequest | None, run: _Handlers
    ) -> ClientEvent:
        """Block until the next fact: a response, a handler outcome, or the timer."""
        deadline = flow.deadline
        if send is not None:
            if self._closed:  # close() came first (from on_event, another thread)
                raise transport_failed(flow, client_closed(), self.clock.now())
            timeout = None if deadline is None else max(0.0, deadline - self.clock.now())
            try:
                response = self.transport.request(send.message, timeout=timeout)
            except TimeoutError as exc:
                # The wait ran out, unless the transport raised its own typed failure
                # before the deadline (StdinStalledError, a TimeoutError too): a broken
                # transport, as it is for the trio and asyncio clients.
                if deadline is None or (isinstance(exc, MrtrError)
                                        and self.clock.now() < deadline):
                    raise transport_failed(flow, exc, self.clock.now()) from exc
                return TimerFired()
            except (OSError, EOFError) as exc:
                raise transport_failed(flow, exc, self.clock.now()) from exc
            return ResponseReceived(message=response)
        if run.running:
            self.clock.wait(run.running.values(), deadline)
            try:
                event = run.pop_done()
            except TransportClosedError as exc:  # close() dropped a handler before it ran
                raise transport_failed(flow, exc, self.clock.now()) from exc
            if self._closed:  # close() signalled the handlers: what they return is moot
                raise transport_failed(flow, client_closed(), self.clock.now())
            return event or TimerFired()
        if deadline is None:
            raise MrtrError(f"flow in state {flow.state.name} has nothing to wait for")
        # Pacing of a state-only round; close() ends it.
        if not self.clock.sleep(deadline - self.clock.now(), interrupt=self._closing):
            raise transport_failed(flow, client_closed(), self.clock.now())
        return TimerFired()


def _time_line(clock: Clock) -> object:
    """What identifies the time ``clock`` reads, for a manual-mode round's wait: every
    :class:`SystemClock` reads the one ``time.monotonic``, so clients on default clocks
    share it (as asyncio clients share a loop); any other clock is its own."""
    return SystemClock if type(clock) is SystemClock else clock


def _outcome(key: str, future: Future[Any]) -> ClientEvent:
    error = future.exception()
    if error is not None:
        return HandlerFailed(key=key, error=error)
    return HandlerReturned(key=key, answer=future.result())


class _Handlers:
    """The handler threads of one call."""

    def __init__(self, client: Client, workers: int) -> None:
        self._client = client
        self._workers = workers
        self._executor: Executor | None = None
        self._owned = False
        self._submitted: list[Future[Any]] = []
        self.running: dict[str, Future[Any]] = {}
        self._cancel_events: dict[str, threading.Event] = {}

    def start(self, cmd: InvokeHandler) -> None:
        """Run one handler in the pool.

        Raises:
            TransportClosedError: :meth:`Client.close` came first; the handler never runs.
        """
        if self._executor is None:
            self._executor, self._owned = self._client._pool_for(self, self._workers)
        fn = self._client.handlers.for_kind(cmd.request.method)
        cancel: threading.Event | None = None
        if fn is not None and _takes_cancel(fn):
            cancel = self._cancel_events[cmd.key] = threading.Event()
        # The handler's future is ours and recorded before the pool sees the work: an
        # exception (Ctrl-C) raised inside or right after ``submit`` cannot leave a handler
        # running that :meth:`close` does not know of and cancel.
        future: Future[Any] = Future()
        self.running[cmd.key] = future  # first: close() cancels what it finds here
        self._submitted.append(future)
        # Client.close() sets the flag, then signals the events it finds: it either finds
        # this handler's or the check below sees the flag.
        if self._client._closed:
            raise client_closed()
        work = self._executor.submit(_run, future, fn, cmd, cancel)
        # Work the pool drops unrun (``Client.close`` from another thread) ends the handler.
        work.add_done_callback(lambda work: future.cancel() if work.cancelled() else None)

    def pop_done(self) -> ClientEvent | None:
        """The outcome of the first finished handler, in invocation order.

        Raises:
            TransportClosedError: :meth:`Client.close` shut the pool down before that
                handler ran (its work was dropped, so it has no outcome).
        """
        for key, future in self.running.items():
            if future.done():
                del self.running[key]
                if future.cancelled():  # only the pool's shutdown cancels one still listed
                    raise TransportClosedError(
                        f"the client was closed before the handler for input request "
                        f"{key!r} ran"
                    )
                return _outcome(key, future)
        return None

    def cancel(self, keys: tuple[str, ...]) -> list[ClientEvent]:
        """Cancel these handlers; the outcomes of those that had already finished, for the
        flow (a failure that raced the first one is kept on ``HandlerFailedError.others``).
        Threads still running are left to end on their own (they cannot be stopped)."""
        late: list[ClientEvent] = []
        for key in keys:
            future = self.running.pop(key, None)
            if future is None:
                continue
            if future.done():
                if not future.cancelled():
                    late.append(_outcome(key, future))
            elif not future.cancel():
                # A handler without a ``cancel`` parameter cannot see its event; the clock
                # is told all the same (it may wake what the handler waits on).
                event = self._cancel_events.get(key) or threading.Event()
                self._client.clock.cancel(event)
        return late

    def signal_all(self) -> None:
        """Set the cancel event of every handler of the call (from :meth:`Client.close`, in
        another thread: the events are read in one step, and setting one of a handler that
        has returned changes nothing)."""
        for event in tuple(self._cancel_events.values()):
            self._client.clock.cancel(event)

    def close(self) -> None:
        self.cancel(tuple(self.running))
        if self._executor is None:
            return
        if self._owned:
            self._client._forget(self)
            self._executor.shutdown(wait=False, cancel_futures=True)
            return
        # A handler that ignored cancellation keeps its thread (and its share of the
        # reservation) until it returns; the rest goes back to the shared pool now.
        abandoned = [future for future in self._submitted if not future.done()]
        self._client._release(self, self._workers - len(abandoned))
        for future in abandoned:
            future.add_done_callback(lambda _: self._client._release(None, 1))


def _run(
    future: Future[Any], fn: Handler | None, cmd: InvokeHandler, cancel: threading.Event | None
) -> None:
    """Run one handler in a pool thread unless it was cancelled first; settle its future."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        answer = _invoke(fn, cmd, cancel)
    except BaseException as exc:
        future.set_exception(exc)
    else:
        future.set_result(answer)


def _invoke(fn: Handler | None, cmd: InvokeHandler, cancel: threading.Event | None) -> Any:
    """Run one handler in a pool thread (the flow checks its answer)."""
    if fn is None:
        raise LookupError(f"no handler for {cmd.request.method}")
    if cancel is not None:
        return fn(cmd.request, cmd.key, cancel=cancel)
    return fn(cmd.request, cmd.key)


_TAKES_CANCEL: dict[Any, bool] = {}


def _takes_cancel(fn: Handler) -> bool:
    try:
        return _TAKES_CANCEL[fn]
    except (KeyError, TypeError):  # not seen yet, or not hashable
        pass
    try:
        takes = "cancel" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # no signature to inspect (some builtins)
        takes = False
    try:
        if len(_TAKES_CANCEL) > 256:
            _TAKES_CANCEL.clear()
        _TAKES_CANCEL[fn] = takes
    except TypeError:
        pass
    return takes
