"""A sync server process for the signal tests: ``python sync_sigterm_server.py``.

Serves a one-tool app with :func:`mrtr_sync.serve_http` in the background while the main
thread only waits (as a server script does), prints ``ready <url>``, and exits with status 0 on
SIGTERM.
"""

from __future__ import annotations

import random
import signal
import sys

from mrtr_sync import serve_http

from mrtr_core.app import App
from mrtr_core.server import Context
from mrtr_core.state import KeyRing, StateCodec


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(0)


def main() -> None:
    codec = StateCodec(
        KeyRing({"k": bytes(32)}, active="k"), audience="t", nonce=random.Random(1).randbytes
    )
    app = App("sigterm", "1.0", codec=codec)

    @app.tool(description="Echo the text back.")
    def echo(ctx: Context, text: str) -> str:
        return text

    server = serve_http(app, "127.0.0.1", 0)
    signal.signal(signal.SIGTERM, _stop)
    try:
        print(f"ready {server.url}", flush=True)
        while True:
            signal.pause()  # the main thread only waits, as an application's might
    finally:
        server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
