"""Running an app on the chosen runtime's server adapter until the process is told to stop.

HTTP: the adapter binds (port 0 picks a free port), ``on_ready(url)`` is called once it
listens, and SIGTERM or SIGINT shut it down cleanly; an address that cannot be bound is a
:class:`ListenError` naming it. stdio: serves until end of input.
"""

from __future__ import annotations

import functools
import signal
from collections.abc import Callable
from typing import Any

from mrtr_core.app import App
from mrtr_core.errors import MrtrError

__all__ = ["ListenError", "Stop", "serve_http", "serve_stdio"]


class ListenError(MrtrError):
    """The server could not listen on the address it was given (taken, not allowed...)."""


class Stop(Exception):
    """Raised in the main thread by SIGTERM/SIGINT to leave the serving loop."""


def _raise_stop(signum: int, _frame: object) -> None:
    raise Stop(signum)


def serve_http(app: App, *, host: str, port: int, runtime: str, guard: Any,
               on_ready: Callable[[str], None]) -> int:
    """Serve ``app`` over Streamable HTTP until SIGTERM/SIGINT; returns the exit status.

    Raises:
        ListenError: the address could not be bound (nothing was served).
    """
    listening = False

    def ready(url: str) -> None:
        nonlocal listening
        listening = True
        on_ready(url)

    try:
        if runtime == "trio":
            return _serve_trio(app, host, port, guard, ready)
        if runtime == "asyncio":
            return _serve_asyncio(app, host, port, guard, ready)
        return _serve_sync(app, host, port, guard, ready)
    except BaseException as exc:
        error = None if listening else _os_error(exc)
        if error is None:
            raise
        raise ListenError(f"cannot listen on {host}:{port}: {error.strerror or error}") from exc


def _os_error(exc: BaseException) -> OSError | None:
    """The ``OSError`` that ``exc`` is or (in an exception group) contains."""
    if isinstance(exc, OSError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _os_error(inner)
            if found is not None:
                return found
    return None


def _serve_sync(app: App, host: str, port: int, guard: Any,
                on_ready: Callable[[str], None]) -> int:
    from mrtr_sync.http_server import HttpServer

    server = HttpServer(app, host, port, guard=guard)
    previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        on_ready(server.url)
        server.serve_forever()
    except Stop:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.shutdown()
    return 0


def _url(host: str, port: int) -> str:
    from mrtr_core.http import HttpServerConfig

    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{HttpServerConfig().path}"


def _serve_trio(app: App, host: str, port: int, guard: Any,
                on_ready: Callable[[str], None]) -> int:
    import trio
    from mrtr_trio.http_server import serve_http as trio_serve_http

    async def main() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                bound = await nursery.start(functools.partial(
                    trio_serve_http, app, host, port, guard=guard))
                on_ready(_url(host, bound))
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    break

    trio.run(main)
    return 0


def _serve_asyncio(app: App, host: str, port: int, guard: Any,
                   on_ready: Callable[[str], None]) -> int:
    import asyncio

    from mrtr_asyncio.http_server import serve_http as asyncio_serve_http

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with asyncio_serve_http(app, host, port, guard=guard) as server:
            on_ready(server.url)
            serving = asyncio.create_task(server.serve_forever())
            await stop.wait()
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)

    asyncio.run(main())
    return 0


def serve_stdio(app: App, *, runtime: str, guard: Any) -> int:
    """Serve one client over stdin/stdout until end of input."""
    if runtime == "trio":
        import trio
        from mrtr_trio.stdio_server import serve_stdio as trio_serve_stdio

        try:
            trio.run(functools.partial(trio_serve_stdio, app, guard=guard))
        except BaseExceptionGroup as group:
            # Ctrl-C reaches the caller inside the server's nursery group: an interrupt
            # like any other runtime's, not a traceback.
            _, rest = group.split(KeyboardInterrupt)
            if rest is None:
                raise KeyboardInterrupt from None
            raise
        return 0
    if runtime == "asyncio":
        import asyncio

        from mrtr_asyncio.stdio_server import serve_stdio as asyncio_serve_stdio

        asyncio.run(asyncio_serve_stdio(app, guard=guard))
        return 0
    from mrtr_sync.stdio_server import serve_stdio as sync_serve_stdio

    sync_serve_stdio(app, guard=guard)
    return 0
