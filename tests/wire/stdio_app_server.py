"""A stdio MCP server for the wire tests: ``python stdio_app_server.py sync|trio|asyncio``.

Serves :func:`wire_app.make_app` with that runtime's ``serve_stdio``; the tool ``crash``
ends the process at once with status 3 (a crashed server), and ``chatty`` prints to stdout
(a handler that forgot stdout is the protocol's) before it answers ``quiet``. With
``ORPHAN_FIFO`` set in its environment it serves nothing: it starts a child that keeps its
stdout open until a writer opens and closes that FIFO, and exits with status 3 (a server
that left a process behind).
"""

from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from wire_app import make_app


def with_crash(app):
    @app.tool(description="Exit the process with status 3.")
    def crash(ctx) -> str:
        sys.stdout.flush()
        os._exit(3)

    @app.tool(description="Print to stdout, then answer quiet.")
    def chatty(ctx) -> str:
        print("noise from a handler")
        return "quiet"

    return app


def main(runtime: str) -> None:
    fifo = os.environ.get("ORPHAN_FIFO")
    if fifo:
        subprocess.Popen([sys.executable, "-c", f"open({fifo!r}).read()"])  # stdout inherited
        os._exit(3)
    if runtime == "sync":
        import threading

        from mrtr_sync.stdio_server import serve_stdio

        serve_stdio(with_crash(make_app(threading.Event())))
    elif runtime == "trio":
        import trio
        from mrtr_trio.stdio_server import serve_stdio as trio_serve

        async def run() -> None:
            app = with_crash(make_app(trio.Event()))
            await trio_serve(app)

        trio.run(run)
    elif runtime == "asyncio":
        import asyncio

        from mrtr_asyncio.stdio_server import serve_stdio as asyncio_serve

        async def run_asyncio() -> None:
            await asyncio_serve(with_crash(make_app(asyncio.Event())))

        asyncio.run(run_asyncio())
    else:
        raise SystemExit(f"unknown runtime {runtime!r}")


if __name__ == "__main__":
    main(sys.argv[1])
