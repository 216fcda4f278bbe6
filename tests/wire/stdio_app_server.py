"""A stdio MCP server for the wire tests: ``python stdio_app_server.py sync|trio|asyncio``.

Serves :func:`wire_app.make_app` with that runtime's ``serve_stdio``; the tool ``crash``
ends the process at once with status 3 (a crashed server), and ``chatty`` prints to stdout
(a handler that forgot stdout is the protocol's) before it answers ``quiet``. With
``ORPHAN_FIFO`` set in its environment it serves nothing: it starts a child that keeps its
stdout open until a writer opens and closes that FIFO (or it is killed: its pid is written to
``ORPHAN_PID_FILE`` when that is set), reads ``ORPHAN_READS`` requests (none when unset),
answers the ``ping`` ones, and exits with status 3 (a server that left a process behind and
crashed with the other requests unanswered).
"""

from __future__ import annotations

import json
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


def leave_a_process_behind(fifo: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", f"open({fifo!r}).read()"])  # stdout inherited
    pid_file = os.environ.get("ORPHAN_PID_FILE")
    if pid_file:
        with open(pid_file + ".part", "w") as out:
            out.write(str(child.pid))
        os.replace(pid_file + ".part", pid_file)  # the test never reads half a pid
    replies = []
    for _ in range(int(os.environ.get("ORPHAN_READS", "0"))):
        message = json.loads(sys.stdin.buffer.readline())
        if message.get("method") == "ping":
            replies.append({"jsonrpc": "2.0", "id": message["id"], "result": {}})
    # Written just before the exit: the client must still deliver them.
    sys.stdout.buffer.write(b"".join(json.dumps(reply).encode() + b"\n" for reply in replies))
    sys.stdout.flush()
    os._exit(3)


def main(runtime: str) -> None:
    fifo = os.environ.get("ORPHAN_FIFO")
    if fifo:
        leave_a_process_behind(fifo)
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
