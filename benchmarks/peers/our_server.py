"""Benchmark peer: the benchmark app (``our_app.py``) served over HTTP by an mrtr adapter.

Run: ``python our_server.py --runtime trio --port 8765`` (listens on 127.0.0.1 only).
Stop it with SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from our_app import build_app

HOST = "127.0.0.1"


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(0)


def run_sync(port: int) -> None:
    from mrtr_sync.http_server import serve_http

    server = serve_http(build_app(), HOST, port)
    signal.signal(signal.SIGTERM, _stop)
    try:
        while True:
            time.sleep(3600)
    finally:
        server.shutdown()


def run_trio(port: int) -> None:
    import trio
    from mrtr_trio.http_server import serve_http

    trio.run(serve_http, build_app(), HOST, port)


def run_asyncio(port: int) -> None:
    import asyncio

    from mrtr_asyncio.http_server import serve_http

    async def serve() -> None:
        async with serve_http(build_app(), HOST, port) as server:
            await server.serve_forever()

    asyncio.run(serve())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", choices=("sync", "trio", "asyncio"), required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    {"sync": run_sync, "trio": run_trio, "asyncio": run_asyncio}[args.runtime](args.port)


if __name__ == "__main__":
    main()
