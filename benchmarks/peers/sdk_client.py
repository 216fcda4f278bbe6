"""Benchmark peer: a client built on the official Python SDK (``mcp``), driven over stdin.

Run: ``python sdk_client.py URL``. It connects once, then reads one JSON command per line
on stdin and answers one JSON line on stdout (see ``benchmarks/peers/loop.py`` for the
command vocabulary). The elicitation callback accepts every form with ``confirm: true``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import anyio.to_thread
from mcp import Client
from mcp_types import ElicitResult

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop import Call, anyio_gather, serve_commands_async


async def _elicit(context: object, params: object) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True})


async def main(url: str) -> None:
    async with Client(url, elicitation_callback=_elicit) as client:

        async def call(call: Call) -> None:
            result = await client.call_tool(call.tool, call.arguments)
            if result.is_error:
                raise RuntimeError(f"tool {call.tool} failed: {result.content!r}")

        await serve_commands_async(call, anyio.to_thread.run_sync, anyio_gather)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
