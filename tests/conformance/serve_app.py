"""Serve an app file with one runtime's server adapter (the test suites' launcher).

    python tests/conformance/serve_app.py RUNTIME http  FILE.py[:APP]
    python tests/conformance/serve_app.py RUNTIME stdio FILE.py[:APP]

HTTP: listens on 127.0.0.1, a free port, and prints ``READY <url>`` once it accepts
connections, so a test waits for that line instead of polling the port; runs until
terminated. stdio: serves one client until end of input. A MemoryReplayGuard serves
single-use handlers. Each runtime is driven through its adapter's own ``serve_http`` /
``serve_stdio``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from mrtr_core.state import MemoryReplayGuard

READY = "READY "


def load_app(spec: str) -> Any:
    """Import ``FILE.py`` and return its ``APP`` (default ``app``)."""
    path_text, _, attribute = spec.partition(":")
    path = Path(path_text).resolve()
    module_spec = importlib.util.spec_from_file_location(f"served_{path.stem}", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    module_spec.loader.exec_module(module)
    return getattr(module, attribute or "app")


def ready(url: str) -> None:
    print(f"{READY}{url}", flush=True)


def serve_sync(app: Any, mode: str) -> None:
    if mode == "stdio":
        from mrtr_sync.stdio_server import serve_stdio

        serve_stdio(app, guard=MemoryReplayGuard())
        return
    from mrtr_sync.http_server import HttpServer

    server = HttpServer(app, "127.0.0.1", 0, guard=MemoryReplayGuard())
    ready(server.url)
    server.serve_forever()


def serve_trio(app: Any, mode: str) -> None:
    import trio

    if mode == "stdio":
        from mrtr_trio.stdio_server import serve_stdio

        trio.run(lambda: serve_stdio(app, guard=MemoryReplayGuard()))
        return
    from mrtr_trio.http_server import serve_http

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(
                lambda task_status: serve_http(app, "127.0.0.1", 0, guard=MemoryReplayGuard(),
                                               task_status=task_status))
            ready(f"http://127.0.0.1:{port}/mcp")

    trio.run(main)


def serve_asyncio(app: Any, mode: str) -> None:
    import asyncio

    if mode == "stdio":
        from mrtr_asyncio.stdio_server import serve_stdio

        asyncio.run(serve_stdio(app, guard=MemoryReplayGuard()))
        return
    from mrtr_asyncio.http_server import serve_http

    async def main() -> None:
        async with serve_http(app, "127.0.0.1", 0, guard=MemoryReplayGuard()) as server:
            ready(server.url)
            await asyncio.Event().wait()

    asyncio.run(main())


SERVERS = {"sync": serve_sync, "trio": serve_trio, "asyncio": serve_asyncio}


def main() -> None:
    runtime, mode, spec = sys.argv[1:4]
    SERVERS[runtime](load_app(spec), mode)


if __name__ == "__main__":
    main()
