"""The client the MCP conformance suite runs for ``sep-2322-client-request-state``.

    python examples/conformance_client.py [--runtime sync|trio|asyncio] URL

The suite starts a mock server and runs this with its URL. The client calls
``server/discover``, ``tools/list`` and the four tools of the scenario with mrtr's own client
and Streamable HTTP transport of the chosen runtime:

- ``test_mrtr_echo_state``: ``input_required`` with a ``requestState`` that must come back
  byte for byte on a retry with a new JSON-RPC id; while that round's elicitation is being
  answered, the client calls ``test_mrtr_unrelated``, which must carry no ``inputResponses``
  or ``requestState`` of the other flow;
- ``test_mrtr_no_state``: ``input_required`` without state: the retry must carry none;
- ``test_mrtr_no_result_type``: a result without ``resultType``, which is complete.

Exit status 0 when every call completed, 1 otherwise (the error is printed on stderr).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

ECHO_STATE = "test_mrtr_echo_state"
NO_STATE = "test_mrtr_no_state"
UNRELATED = "test_mrtr_unrelated"
NO_RESULT_TYPE = "test_mrtr_no_result_type"
CONFIRMED = {"action": "accept", "content": {"confirmed": True}}


def _text(result: dict[str, Any]) -> str:
    return " ".join(b.get("text", "") for b in result.get("content", []) if isinstance(b, dict))


def run_sync(url: str) -> list[str]:
    """Run the scenario with the sync client; returns one line per call."""
    from mrtr_sync import Client
    from mrtr_sync.http_client import HttpTransport

    lines: list[str] = []
    state = {"unrelated_called": False}

    def elicit(request: Any, key: str) -> dict[str, Any]:
        if not state["unrelated_called"]:
            # Between round 1 of an MRTR flow and its retry: an unrelated call (C5).
            state["unrelated_called"] = True
            lines.append(f"{UNRELATED}: {_text(client.call_tool(UNRELATED, {}))}")
        return CONFIRMED

    with Client(HttpTransport(url), elicitation=elicit) as client:
        discovered = client.request("server/discover")
        lines.append(f"server/discover: {discovered.get('supportedVersions')}")
        tools = client.request("tools/list")
        lines.append(f"tools/list: {[t['name'] for t in tools.get('tools', [])]}")
        for name in (ECHO_STATE, NO_STATE, NO_RESULT_TYPE):
            lines.append(f"{name}: {_text(client.call_tool(name, {}))}")
        if not state["unrelated_called"]:
            lines.append(f"{UNRELATED}: {_text(client.call_tool(UNRELATED, {}))}")
    return lines


async def _run_async(client: Any, lines: list[str], state: dict[str, bool]) -> None:
    discovered = await client.request("server/discover")
    lines.append(f"server/discover: {discovered.get('supportedVersions')}")
    tools = await client.request("tools/list")
    lines.append(f"tools/list: {[t['name'] for t in tools.get('tools', [])]}")
    for name in (ECHO_STATE, NO_STATE, NO_RESULT_TYPE):
        lines.append(f"{name}: {_text(await client.call_tool(name, {}))}")
    if not state["unrelated_called"]:
        lines.append(f"{UNRELATED}: {_text(await client.call_tool(UNRELATED, {}))}")


def run_trio(url: str) -> list[str]:
    """Run the scenario with the trio client."""
    import trio
    from mrtr_trio import Client
    from mrtr_trio.http_client import HttpTransport

    lines: list[str] = []
    state = {"unrelated_called": False}

    async def main() -> None:
        async with HttpTransport(url) as transport:
            client = Client(transport)

            async def elicit(request: Any, key: str) -> dict[str, Any]:
                if not state["unrelated_called"]:
                    state["unrelated_called"] = True
                    lines.append(f"{UNRELATED}: {_text(await client.call_tool(UNRELATED, {}))}")
                return CONFIRMED

            client.on_elicitation(elicit)
            await _run_async(client, lines, state)

    trio.run(main)
    return lines


def run_asyncio(url: str) -> list[str]:
    """Run the scenario with the asyncio client."""
    import asyncio

    from mrtr_asyncio import Client
    from mrtr_asyncio.http_client import HttpTransport

    lines: list[str] = []
    state = {"unrelated_called": False}

    async def main() -> None:
        async with HttpTransport(url) as transport:
            client = Client(transport)

            async def elicit(request: Any, key: str) -> dict[str, Any]:
                if not state["unrelated_called"]:
                    state["unrelated_called"] = True
                    lines.append(f"{UNRELATED}: {_text(await client.call_tool(UNRELATED, {}))}")
                return CONFIRMED

            client.on_elicitation(elicit)
            await _run_async(client, lines, state)

    asyncio.run(main())
    return lines


RUNNERS = {"sync": run_sync, "trio": run_trio, "asyncio": run_asyncio}


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the scenario, print what each call returned."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtime", choices=sorted(RUNNERS), default="sync")
    parser.add_argument("url", help="the MCP endpoint of the suite's mock server")
    args = parser.parse_args(argv)
    try:
        lines = RUNNERS[args.runtime](args.url)
    except Exception as exc:
        print(f"conformance client ({args.runtime}) failed: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
