"""stdio client transport for blocking code: spawn the server, route responses by id.

Example::

    with StdioTransport.spawn([sys.executable, "server.py"]) as transport:
        response = transport.request(message, timeout=30.0)
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import select
import selectors
import shlex
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from mrtr_core import jsonrpc
from mrtr_core.errors import LocalProtocolError, MrtrError
from mrtr_core.jsonrpc import NEED_DATA
from mrtr_core.stdio import (
    InputEnded,
    ResponseReceived,
    ServerExitedError,
    StdinStalledError,
    StdioTransportBase,
    cancelled_notification,
)
from mrtr_sync.threads import signal_safe_thread

__all__ = ["StdioTransport"]

JsonObject = dict[str, Any]
_READ_SIZE = 65536


def _left(deadline: float) -> float:
    """Seconds until ``deadline`` (:func:`time.monotonic`), at least 0."""
    return max(0.0, deadline - time.monotonic())


def _wait_writable(fd: int, deadline: float | None) -> bool:
    """Wait until the pipe ``fd`` takes bytes again (or its reader is gone, which the
    next write reports), up to ``deadline``; whether it does."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    timeout_ms = None if deadline is None else math.ceil(_left(deadline) * 1000)
    return bool(poller.poll(timeout_ms))


class _Pending:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.response: JsonObject | None = None
        self.error: BaseException | None = None


class StdioTransport(StdioTransportBase[subprocess.Popen[bytes], _Pending]):
    """The sync :class:`~mrtr_sync.Transport` over a stdio server subprocess (digest §3.4).

    Requests from several threads interleave on the one pipe; a reader thread routes each
    response to the request with its id (it and the thread that waits for the process leave
    SIGINT and SIGTERM to the main thread, see :mod:`mrtr_sync.threads`). When the process
    dies (or writes something that is not an MCP message to stdout) every request in flight
    fails with a typed error, even while a process it started still holds its stdout open;
    replies it wrote before it died are delivered first.

    Args:
        process: A running process with binary ``stdin`` and ``stdout`` pipes.
        max_line_bytes: Longest line accepted from the server.
        close_timeout: Seconds :meth:`close` waits after closing stdin, and after SIGTERM;
            and at most that a ``notifications/cancelled`` waits for stdin to take it.
    """

    _stdin: IO[bytes]
    _stdout: IO[bytes]

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        *,
        max_line_bytes: int = jsonrpc.DEFAULT_MAX_MESSAGE_BYTES,
        close_timeout: float = 2.0,
    ) -> None:
        super().__init__(process, max_line_bytes=max_line_bytes, close_timeout=close_timeout)
        os.set_blocking(self._stdin.fileno(), False)  # writes wait in _wait_writable, bounded
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._closing = False
        """:meth:`close` began: the write that holds stdin closes it as it ends."""
        self._exit_r, self._exit_w = os.pipe()
        """A byte on this pipe says the process exited (its stdout may stay open)."""
        self._exited = False
        """(Reader thread.) The exit was seen: only what is already in stdout is read."""
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout, selectors.EVENT_READ)
        self._selector.register(self._exit_r, selectors.EVENT_READ)
        self._watcher = signal_safe_thread(self._watch_exit, name="mrtr-stdio-exit")
        self._reader = signal_safe_thread(self._read_loop, name="mrtr-stdio-reader")
        self._watcher.start()
        self._reader.start()

    @classmethod
    def spawn(
        cls,
        command: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr: int | IO[Any] | None = None,
        max_line_bytes: int = jsonrpc.DEFAULT_MAX_MESSAGE_BYTES,
        close_timeout: float = 2.0,
        process_group: int | None = None,
    ) -> StdioTransport:
        """Start ``command`` (a list, or a string split like a shell would) as the server.

        The server's stderr is inherited unless ``stderr`` says otherwise (it is a log, not an
        error signal, digest §3.4). ``process_group`` is :class:`subprocess.Popen`'s (POSIX):
        ``0`` puts the server in a group of its own, out of reach of the terminal's Ctrl-C,
        which then reaches this process alone and :meth:`close` ends the server.
        """
        cls.check_options(max_line_bytes=max_line_bytes, close_timeout=close_timeout)
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            process_group=process_group,
        )
        return cls(process, max_line_bytes=max_line_bytes, close_timeout=close_timeout)

    # -- the Transport protocol -------------------------------------------------------------

    def request(self, message: Mapping[str, Any], *, timeout: float | None = None) -> JsonObject:
        """Send one request and wait for the response with its id.

        ``timeout`` covers writing the request too: a server that does not read its stdin
        holds the caller no longer than one that does not answer.

        Raises:
            TimeoutError: No response within ``timeout``; ``notifications/cancelled`` is sent
                (if the request went out), as it is when the wait is interrupted
                (``KeyboardInterrupt``).
            StdinStalledError: ``timeout`` ran out with the request half written, or an
                earlier line stalled so (the transport is unusable afterwards: digest §3.4,
                one message per line).
            ServerExitedError: The process ended (or closed stdout) before answering.
            mrtr_core.errors.TransportClosedError: The transport was closed before.
            mrtr_core.errors.RemoteProtocolError: The server wrote something that is not an
                MCP message to stdout (the transport is unusable afterwards).
        """
        rid, line = self._conn.send_request(message)
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = _Pending()
        with self._lock:
            if self._failure is not None:
                raise copy.copy(self._failure)
            if rid in self._pending:
                raise LocalProtocolError(f"request id {rid!r} is already in flight")
            self._pending[rid] = pending
        try:
            if not self._write(line, deadline):
                raise TimeoutError(f"request {rid!r} could not be sent within {timeout} s")
            try:
                answered = pending.done.wait(None if deadline is None else _left(deadline))
            except BaseException:
                # The caller gave up while waiting (Ctrl-C): tell the server (digest §2.7).
                if not pending.done.is_set():
                    self._cancel(rid, "cancelled")
                raise
            if not answered:
                self._cancel(rid, "timed out")
                raise TimeoutError(f"no response to request {rid!r} within {timeout} s")
        finally:
            with self._lock:
                self._pending.pop(rid, None)
        if pending.error is not None:
            raise copy.copy(pending.error)
        assert pending.response is not None
        return pending.response

    def notify(self, message: Mapping[str, Any], *, timeout: float | None = None) -> None:
        """Send one notification, waiting up to ``timeout`` seconds (``None``: for as long
        as it takes) for stdin to accept it.

        Raises:
            TimeoutError: ``timeout`` ran out before any of the line was written (the
                transport stays usable).
            StdinStalledError: ``timeout`` ran out with the line half written, or an earlier
                line stalled halfway (the transport is unusable afterwards: digest §3.4, one
                message per line).
            ServerExitedError: stdin is closed, or the process ended.
            mrtr_core.errors.TransportClosedError: The transport was closed before.
            mrtr_core.errors.RemoteProtocolError: The server wrote something that is not an
                MCP message to stdout before (the transport is unusable).
        """
        line = self._conn.send(message)
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._write(line, deadline):
            method = message.get("method")
            raise TimeoutError(f"notification {method!r} could not be sent within {timeout} s")

    def _cancel(self, rid: jsonrpc.RequestId, reason: str) -> None:
        """Send ``notifications/cancelled`` for request ``rid``, waiting at most
        ``close_timeout`` seconds for stdin to take it (best effort: a server that is gone,
        or does not read its stdin, has nothing to cancel)."""
        deadline = time.monotonic() + self.close_timeout
        with contextlib.suppress(OSError, MrtrError):
            self._write(self._conn.send(cancelled_notification(rid, reason)), deadline)

    def close(self) -> None:
        """Close stdin, wait, then SIGTERM, then SIGKILL (digest §3.4 "Shutdown").

        A request blocked writing to a server that does not read its stdin holds stdin:
        waiting ``close_timeout`` for that write stands for the wait after closing stdin,
        and the signals follow (ending the server ends the write too).
        """
        self._closing = True
        stdin_closed = self._close_stdin(self.close_timeout)
        try:
            self.process.wait(self.close_timeout if stdin_closed else 0)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                self.process.wait(self.close_timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not stdin_closed:  # the blocked write fails now (or, if a process the server
            self._close_stdin(0)  # left behind holds stdin, later): it closes stdin as it ends
        self._reader.join(self.close_timeout)
        if not self._reader.is_alive():
            # Closing a buffered pipe waits for a read in progress (its lock): when a
            # process the server left behind still holds the pipe open, the daemon reader
            # keeps it until that process ends, and close() does not wait for it.
            with contextlib.suppress(OSError, ValueError):
                self._stdout.close()
        self._fail_closed()

    def __enter__(self) -> StdioTransport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------

    def _close_stdin(self, timeout: float) -> bool:
        """Close stdin once no write holds it, waiting at most ``timeout`` seconds for one
        to end (closing the pipe's file would wait on its lock for as long as the write
        blocks). Whether it was closed."""
        if not self._write_lock.acquire(timeout=timeout):
            return False
        try:
            with contextlib.suppress(OSError, ValueError):
                self._stdin.close()
        finally:
            self._write_lock.release()
        return True

    def _write(self, line: bytes, deadline: float | None = None) -> bool:
        """Write ``line`` whole before ``deadline`` (:func:`time.monotonic`; ``None``: no
        limit), waiting for the write lock and for room in the pipe up to it. Whether it
        was written: ``False`` when the deadline passed before any of it went out.

        Raises:
            StdinStalledError: The deadline passed with part of the line written: anything
                written after it would be read as the rest of that line (digest §3.4), so
                the transport is failed (as it is when Ctrl-C interrupts a line halfway).
            ServerExitedError: stdin is closed.
        """
        if not self._write_lock.acquire(timeout=-1 if deadline is None else _left(deadline)):
            return False
        try:
            if self._failure is not None:
                raise copy.copy(self._failure)
            try:
                fd = self._stdin.fileno()  # asked under the lock: close() closes it under it
            except ValueError:
                raise self._stdin_closed() from None
            view = memoryview(line)
            sent = 0
            try:
                while sent < len(view):
                    try:
                        sent += os.write(fd, view[sent:])
                    except BlockingIOError:  # the pipe is full: the server is not reading
                        if not _wait_writable(fd, deadline):
                            break
            except OSError:
                raise self._stdin_closed() from None
            except BaseException:  # Ctrl-C
                if sent:
                    self._fail(self._stalled())
                raise
            if sent == len(view):
                return True
            if not sent:  # out of time before the line began: nothing to undo
                return False
            stalled = self._stalled()
            self._fail(stalled)
            raise stalled
        finally:
            if self._closing:  # close() could not take stdin from this write: it ends here
                with contextlib.suppress(OSError, ValueError):
                    self._stdin.close()
            self._write_lock.release()

    def _stalled(self) -> StdinStalledError:
        return StdinStalledError("the server stopped reading its stdin halfway through a line")

    def _stdin_closed(self) -> ServerExitedError:
        return ServerExitedError("the server's stdin is closed", returncode=self.process.poll())

    def _watch_exit(self) -> None:
        self.process.wait()
        with contextlib.suppress(OSError):  # the reader may have ended and closed its end
            os.write(self._exit_w, b"x")
        os.close(self._exit_w)

    def _receive(self) -> bytes | None:
        """The next bytes from stdout (``b""``: it ended), or ``None`` once the process has
        exited and all it wrote has been read: a process it started may hold stdout open,
        and no end of it would ever come (digest §3.4 "Crash")."""
        while not self._exited:
            ready = [key.fileobj for key, _ in self._selector.select()]
            if self._stdout in ready:
                return self._read()
            # The exit is seen; stdout, found empty in this same select, is looked at again
            # below: what the process wrote before exiting is in the pipe by now.
            self._exited = True
            self._selector.unregister(self._exit_r)
        return self._read() if self._selector.select(0) else None

    def _read(self) -> bytes:
        # select() said stdout is readable, so this one read does not block (read1 reads
        # the pipe straight into its result: nothing stays in the file's buffer).
        read = getattr(self._stdout, "read1", self._stdout.read)
        try:
            return read(_READ_SIZE)
        except (OSError, ValueError):
            return b""

    def _read_loop(self) -> None:
        try:
            self._route_replies()
        finally:
            self._selector.close()
            os.close(self._exit_r)

    def _route_replies(self) -> None:
        try:
            while True:
                event = self._conn.next_event()
                if event is NEED_DATA:
                    data = self._receive()
                    if data is None:
                        returncode = self.process.returncode  # set before the exit was told
                        self._fail(ServerExitedError("the server exited", returncode=returncode))
                        return
                    self._conn.receive_data(data)
                elif isinstance(event, ResponseReceived):
                    with self._lock:
                        pending = self._pending.get(event.request_id)  # type: ignore[arg-type]
                    if pending is not None:  # else: answered after a timeout; dropped
                        pending.response = event.message
                        pending.done.set()
                elif isinstance(event, InputEnded):
                    returncode = self._wait_briefly()
                    self._fail(
                        ServerExitedError("the server closed its stdout", returncode=returncode)
                    )
                    return
                # NotificationReceived: progress and logs are not a transport's concern
        except MrtrError as exc:  # the server broke the framing: nothing can be trusted now
            self._fail(exc)
            # Read on, discarding, until stdout ends or the process exited: a server blocked
            # writing to a full pipe would never see its stdin close, and close() would have
            # to kill it.
            while self._receive():
                pass

    def _wait_briefly(self) -> int | None:
        try:
            return self.process.wait(0.5)
        except subprocess.TimeoutExpired:
            return None

    def _fail(self, error: MrtrError) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = error
            pending = list(self._pending.values())
        for item in pending:
            if not item.done.is_set():
                item.error = error
                item.done.set()
