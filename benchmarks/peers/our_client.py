"""Benchmark peer: an mrtr client (sync, trio or asyncio) over HTTP, driven over stdin.

Run: ``python our_client.py --runtime trio URL``. It opens its transport once, then reads one
JSON command per line on stdin and answers one JSON line on stdout (``loop.py``). The
elicitation handler accepts every form with ``confirm: true``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from mrtr_core.client import ClientLimits
from mrtr_core.wire import ElicitResult

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop import Call, serve_commands_async, serve_commands_sync

ACCEPT = ElicitResult(action="accept", content={"confirm": True})
MAX_CONNECTIONS = 128  # enough for the 100-flow concurrency benchmark
# Room for the 10-round point of the growth curve (the SDK client allows 10 retries too).
LIMITS = ClientLimits(max_rounds=16)


def accept(request: object, key: str) -> ElicitResult:
    """The elicitation handler: accept, confirm."""
    return ACCEPT


def _check(call: Call, result: dict[str, Any]) -> None:
    if result.get("isError"):
        raise RuntimeError(f"tool {call.tool} failed: {result!r}")


def run_sync(url: str) -> None:
    from mrtr_sync import Client
    from mrtr_sync.http_client import HttpTransport

    with Client(
        HttpTransport(url, max_connections=MAX_CONNECTIONS), elicitation=accept, limits=LIMITS
    ) as client:

        def call(call: Call) -> None:
            _check(call, client.call_tool(call.tool, call.arguments))

        serve_commands_sync(call)


async def run_trio(url: str) -> None:
    import trio
    from mrtr_trio import Client
    from mrtr_trio.http_client import HttpTransport

    async def gather(fns: Sequence[Callable[[], Awaitable[None]]]) -> None:
        async with trio.open_nursery() as nursery:
            for fn in fns:
                nursery.start_soon(fn)

    transport = HttpTransport(url, max_connections=MAX_CONNECTIONS)
    async with Client(transport, elicitation=accept, limits=LIMITS) as client:

        async def call(call: Call) -> None:
            _check(call, await client.call_tool(call.tool, call.arguments))

        await serve_commands_async(call, trio.to_thread.run_sync, gather)
    await transport.aclose()


async def run_asyncio(url: str) -> None:
    import asyncio

    from mrtr_asyncio import Client
    from mrtr_asyncio.http_client import HttpTransport

    async def gather(fns: Sequence[Callable[[], Awaitable[None]]]) -> None:
        async with asyncio.TaskGroup() as group:
            for fn in fns:
                group.create_task(fn())

    transport = HttpTransport(url, max_connections=MAX_CONNECTIONS)
    async with Client(transport, elicitation=accept, limits=LIMITS) as client:

        async def call(call: Call) -> None:
            _check(call, await client.call_tool(call.tool, call.arguments))

        await serve_commands_async(call, asyncio.to_thread, gather)
    await transport.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", choices=("sync", "trio", "asyncio"), required=True)
    parser.add_argument("url")
    args = parser.parse_args()
    if args.runtime == "sync":
        run_sync(args.url)
    elif args.runtime == "trio":
        import trio

        trio.run(run_trio, args.url)
    else:
        import asyncio

        asyncio.run(run_asyncio(args.url))


if __name__ == "__main__":
    main()
