"""``mrtr serve FILE.py:APP``: serve an app over Streamable HTTP or stdio.

Keys: ``--keys FILE`` is exported as ``MRTR_KEYS`` before the app's file is imported, so an
app that builds its codec from ``MRTR_KEYS`` (``examples/deploy.py`` does) seals with the ring
every instance shares (see :mod:`mrtr_cli.keys`). ``--redis URL`` shares a replay guard for
single-use tools (its Redis clients wait at most :data:`REDIS_TIMEOUT_S` seconds to connect
and for each reply). ``--workers N`` starts N processes on N consecutive ports (PORT,
PORT+1, ...): each is a whole instance, individually addressable behind a load balancer
(``deploy/``).

Each HTTP instance prints one line on stdout once it listens::

    mrtr serve: listening on http://127.0.0.1:8001/mcp (pid 4242, runtime sync, app deploy)

Supervisors (the demo, the deployment test) wait for that line instead of polling the port.

Logging goes to stderr (never stdout, which is the protocol's under ``--stdio``): mrtr's own
loggers at ``--log-level`` (default INFO: a handler's traceback, the server's own failures,
refused ``requestState``; see :mod:`mrtr_core.app.logs`), other libraries' at WARNING. An app
that configured logging itself when its file was imported keeps its configuration.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from mrtr_sync.threads import leave_signals_to_main_thread
from rich.console import Console

from mrtr_cli.keys import ENV_KEYS, load_ring, ring_env_value, ring_from_environment
from mrtr_core.app import App
from mrtr_core.errors import MrtrError

__all__ = [
    "READY_PREFIX",
    "REDIS_TIMEOUT_S",
    "AppLoadError",
    "GuardUnavailableError",
    "add_parser",
    "configure_logging",
    "load_app",
    "ready_line",
]

READY_PREFIX: Final = "mrtr serve: listening on "
RUNTIMES: Final = ("sync", "trio", "asyncio")
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s [pid %(process)d]: %(message)s"


class AppLoadError(MrtrError):
    """``FILE.py:APP`` could not be loaded (the message says why)."""


def load_app(spec: str) -> App:
    """Import ``FILE.py`` and return its ``APP`` attribute (default ``app``).

    ``APP`` may be an :class:`~mrtr_core.app.App` or a callable with no arguments returning one.

    Raises:
        AppLoadError: no such file or attribute, or not an app.
    """
    path_text, _, attribute = spec.partition(":")
    attribute = attribute or "app"
    path = Path(path_text)
    if not path.is_file():
        raise AppLoadError(f"{path_text}: no such file")
    name = f"mrtr_served_{path.stem}"
    module_spec = importlib.util.spec_from_file_location(name, path.resolve())
    if module_spec is None or module_spec.loader is None:
        raise AppLoadError(f"{path_text}: cannot be imported")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    # The app's folder is importable, as it would be for `python FILE.py`.
    sys.path.insert(0, str(path.resolve().parent))
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        raise AppLoadError(f"{path_text}: import failed: {type(exc).__name__}: {exc}") from exc
    return _app_attribute(module, attribute, path_text)


def _app_attribute(module: ModuleType, attribute: str, where: str) -> App:
    value = getattr(module, attribute, None)
    if value is None:
        raise AppLoadError(f"{where}: has no attribute {attribute!r}")
    if not isinstance(value, App) and callable(value):
        value = value()
    if not isinstance(value, App):
        raise AppLoadError(f"{where}:{attribute} is not an mrtr_core.app.App")
    return value


def ready_line(url: str, runtime: str, app: App) -> str:
    """The line an instance prints once it listens."""
    return f"{READY_PREFIX}{url} (pid {os.getpid()}, runtime {runtime}, app {app.name})"


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0-65535)")
    return port


def add_parser(sub: Any) -> None:
    """Register ``mrtr serve``."""
    p: argparse.ArgumentParser = sub.add_parser("serve", help="serve an app over HTTP or stdio")
    p.add_argument("app", metavar="FILE.py:APP", help="the app to serve (APP defaults to app)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000,
                   help="port (default 8000; 0 picks a free one); workers use PORT..PORT+N-1")
    p.add_argument("--runtime", choices=RUNTIMES, default="sync",
                   help="server adapter: sync (threads), trio or asyncio (default sync)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="run N instances on N consecutive ports (default 1)")
    p.add_argument("--stdio", action="store_true", help="serve one client over stdin/stdout")
    p.add_argument("--keys", metavar="FILE", help="the shared key ring (JSON; see mrtr keys new)")
    p.add_argument("--redis", metavar="URL",
                   help="Redis URL for the shared replay guard single-use handlers need "
                        "(redis://, unix://); "
                        f"its clients wait {REDIS_TIMEOUT_S:g} s to connect and for each reply")
    p.add_argument("--log-level", choices=LOG_LEVELS, default="INFO", type=str.upper,
                   help="level of mrtr's own log on stderr (default INFO: handler tracebacks, "
                        "internal errors, refused requestState)")
    p.set_defaults(func=cmd_serve)


def configure_logging(level: str) -> None:
    """Log to stderr: mrtr's loggers at ``level``, other libraries' at WARNING.

    Nothing changes when logging was configured already (the app did it on import).
    """
    root = logging.getLogger()
    if root.handlers:
        return
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format=LOG_FORMAT)
    logging.getLogger("mrtr").setLevel(level)


def cmd_serve(args: argparse.Namespace, out: Console, ui: Console) -> int:
    """Run ``mrtr serve``."""
    if args.workers < 1:
        ui.print("--workers must be at least 1")
        return 2
    if args.keys:
        os.environ[ENV_KEYS] = ring_env_value(load_ring(args.keys))
    elif not os.environ.get(ENV_KEYS):
        ui.print("mrtr serve: no --keys and no MRTR_KEYS: the app seals requestState with "
                 "its own fallback key (the examples' is public: development only); "
                 "instances share requestState only if they share a ring (mrtr keys new)",
                 style="yellow")
    if args.workers > 1:
        if args.stdio:
            ui.print("--workers does not apply to --stdio")
            return 2
        if args.port == 0:
            ui.print("--workers needs an explicit --port (instances use PORT..PORT+N-1)")
            return 2
        if args.port + args.workers - 1 > 65535:
            ui.print(f"--port {args.port} --workers {args.workers} goes past port 65535")
            return 2
        return _supervise(args, ui)
    app = load_app(args.app)
    _check_ring(app, ui, "--keys" if args.keys else f"${ENV_KEYS}")
    configure_logging(args.log_level)
    try:
        guard = _guard(args.redis, args.runtime) if args.redis else None
    except GuardUnavailableError as exc:
        ui.print(f"mrtr serve: {exc}")
        return 1
    if guard is None:
        _check_single_use(app, ui)
    from mrtr_cli import servers

    if args.stdio:
        return servers.serve_stdio(app, runtime=args.runtime, guard=guard)
    try:
        return servers.serve_http(app, host=args.host, port=args.port, runtime=args.runtime,
                                  guard=guard,
                                  on_ready=lambda url: _announce(url, args.runtime, app))
    except servers.ListenError as exc:
        ui.print(f"mrtr serve: {exc}")
        return 1


def _check_ring(app: App, ui: Console, source: str) -> None:
    """Warn when a ring is given (``--keys`` or ``MRTR_KEYS``) but the app seals with another:
    the ring reaches an app only through ``MRTR_KEYS``, read when its codec is built, so an
    app that builds it otherwise would refuse every other instance's ``requestState``."""
    ring = ring_from_environment()
    if ring is None:
        return
    own = app.engine.codec.ring
    if own.active == ring.active and sorted(own.items()) == sorted(ring.items()):
        return
    ui.print(f"mrtr serve: the app does not seal requestState with the ring of {source}: "
             f"build its codec from ${ENV_KEYS} (mrtr_cli.keys.ring_from_environment, or "
             "codec_from_env in examples/deploy.py), or instances will refuse each "
             "other's requestState", style="yellow")


def _check_single_use(app: App, ui: Console) -> None:
    """Warn, before serving without ``--redis``, about every single-use handler: each of
    its rounds that redeems a ``requestState`` needs a replay guard (digest S12) and fails
    without one, which the client would otherwise learn only after answering round 1."""
    names = app.single_use_targets
    if names:
        ui.print(f"mrtr serve: no --redis: the single-use {', '.join(names)} cannot redeem a "
                 "requestState without a replay guard, so every round after its first fails; "
                 "give --redis URL", style="yellow")


def _announce(url: str, runtime: str, app: App) -> None:
    print(ready_line(url, runtime, app), flush=True)


REDIS_TIMEOUT_S: Final = 2.0
"""Seconds a replay guard's Redis client waits to connect, and for each reply. A Redis that
stops answering then fails the claim with ``redis.exceptions.TimeoutError`` (after redis-py's
own retries) instead of holding the request for ever: the single-use ``requestState`` is not
accepted, the handler does not run, and the client gets ``-32603`` naming the error (digest
§2.10: at most once). A ``socket_timeout`` or ``socket_connect_timeout`` in the URL's query
overrides it."""


class GuardUnavailableError(Exception):
    """The replay guard's Redis cannot be used (the message says why)."""


def _guard(url: str, runtime: str) -> Any:
    """The replay guard on the Redis at ``url``, checked once before serving: a server
    that starts without its guard would fail every single-use round instead."""
    try:
        import redis
    except ModuleNotFoundError:
        raise GuardUnavailableError(
            "--redis needs the redis extra (pip install 'mrtr[redis]')") from None
    client = redis.Redis.from_url(url, **_redis_timeouts())
    try:
        client.ping()
    except redis.exceptions.RedisError as exc:
        raise GuardUnavailableError(f"cannot use Redis at {url}: {exc}") from exc
    if runtime == "trio":
        from mrtr_trio.replay_redis import TrioRedisReplayGuard

        return TrioRedisReplayGuard(client)
    if runtime == "asyncio":
        import redis.asyncio
        from mrtr_asyncio.replay_redis import AsyncRedisReplayGuard

        return AsyncRedisReplayGuard(redis.asyncio.Redis.from_url(url, **_redis_timeouts()))
    from mrtr_sync.replay_redis import RedisReplayGuard

    return RedisReplayGuard(client)


def _redis_timeouts() -> dict[str, Any]:
    """The bounded waits every replay guard client is built with (:data:`REDIS_TIMEOUT_S`)."""
    return {"socket_connect_timeout": REDIS_TIMEOUT_S, "socket_timeout": REDIS_TIMEOUT_S}


def _supervise(args: argparse.Namespace, ui: Console) -> int:
    """Start one child per worker and wait for all of them; SIGTERM/SIGINT stops them all.

    Each worker's output is passed on line by line, so its ready line is this command's
    readiness signal too. A worker that ends before it listens (its port is taken, say)
    fails the start: the others are stopped and the exit status is 1, at once, so whoever
    waits for the ready lines learns why instead of waiting out a timeout. A worker that
    dies after listening leaves the others running (the balancer skips it); the exit status
    is then 1.
    """
    children: list[subprocess.Popen[str]] = []
    stopping = threading.Event()
    lines: queue.SimpleQueue[tuple[int, str | None]] = queue.SimpleQueue()
    base = [sys.executable, "-m", "mrtr_cli", "serve", args.app, "--host", args.host,
            "--runtime", args.runtime, "--log-level", args.log_level]
    if args.redis:
        base += ["--redis", args.redis]

    def stop_all() -> None:
        stopping.set()
        for child in children:
            if child.poll() is None:
                child.terminate()

    def on_signal(signum: int, _frame: object) -> None:
        stop_all()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for index in range(args.workers):
            if stopping.is_set():
                break
            child = subprocess.Popen([*base, "--port", str(args.port + index)],
                                     stdout=subprocess.PIPE, text=True, errors="replace")
            children.append(child)
            threading.Thread(target=_pass_on, args=(index, child, lines), daemon=True,
                             name=f"mrtr-serve-worker-{index}").start()
        if stopping.is_set():
            stop_all()  # a signal came while the workers were being started
        status = 0
        listening: set[int] = set()
        ended = 0
        while ended < len(children):
            index, line = lines.get()
            child = children[index]
            if line is not None:
                with contextlib.suppress(OSError):  # nobody reads our output any more
                    print(line, flush=True)
                if line.startswith(READY_PREFIX):
                    listening.add(index)
                continue
            ended += 1
            code = child.wait()
            if stopping.is_set() and code in (0, -signal.SIGTERM, -signal.SIGINT):
                continue
            status = 1
            port = args.port + index
            if index not in listening and not stopping.is_set():
                ui.print(f"mrtr serve: the worker for port {port} (pid {child.pid}) exited "
                         f"with {code} before listening; stopping the others")
                stop_all()
            else:
                ui.print(f"mrtr serve: the worker for port {port} (pid {child.pid}) exited "
                         f"with {code}")
        return status
    finally:
        stop_all()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _pass_on(index: int, child: subprocess.Popen[str],
             lines: queue.SimpleQueue[tuple[int, str | None]]) -> None:
    """Queue each line the worker prints, then ``None`` once its output ends."""
    assert child.stdout is not None
    # SIGTERM/SIGINT must reach the main thread, which waits on the queue to stop them all.
    leave_signals_to_main_thread()
    try:
        with child.stdout:
            for line in child.stdout:
                lines.put((index, line.rstrip("\n")))
    finally:
        lines.put((index, None))
