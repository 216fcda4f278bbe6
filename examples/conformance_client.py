"""The client the MCP conformance suite runs: ``sep-2322-client-request-state`` and the other
2026-07-28 client scenarios.

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

For the suite's other 2026-07-28 client scenarios (the harness names the scenario in
``MCP_CONFORMANCE_SCENARIO`` and its inputs in ``MCP_CONFORMANCE_CONTEXT``) the client runs
the script of :data:`SCRIPTS`, with the same client and transport:

- ``tools_call``: list the tools, call ``add_numbers``;
- ``request-metadata``: ``server/discover`` then ``tools/list``; the mock refuses the first
  request with ``-32022`` while listing our version, so the client sends it again;
- ``http-standard-headers``: list and call every tool, list and read every resource, list
  and get every prompt (``Mcp-Method`` and ``Mcp-Name`` on each);
- ``http-custom-headers``: list the tools, then make the calls the context names
  (``Mcp-Param-*`` headers mirrored from ``x-mcp-header`` arguments);
- ``http-invalid-tool-headers``: list the tools and call every tool the client kept (tools
  with invalid ``x-mcp-header`` annotations are dropped from the list);
- ``json-schema-ref-no-deref``: list the tools (a network ``$ref`` in a schema is never
  fetched).

Exit status 0 when every call completed, 1 otherwise (the error is printed on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Generator
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

# --- the other client scenarios ------------------------------------------------------------

Step = tuple[str, dict[str, Any] | None]
Script = Generator[Step, dict[str, Any], None]
"""Yields each request to make (method, params) and is sent each one's result."""


def _placeholder(schema: Any) -> dict[str, Any]:
    """Arguments for a tool the scenario does not describe: a value per required property."""
    values = {"string": "x", "integer": 1, "number": 1, "boolean": True}
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = schema.get("required", []) if isinstance(schema, dict) else []
    return {name: values.get(properties.get(name, {}).get("type"), "x") for name in required}


def _tools_call(context: dict[str, Any]) -> Script:
    tools = yield ("tools/list", None)
    for tool in tools.get("tools", []):
        if tool["name"] == "add_numbers":
            yield ("tools/call", {"name": "add_numbers", "arguments": {"a": 5, "b": 3}})


def _request_metadata(context: dict[str, Any]) -> Script:
    yield ("server/discover", None)
    yield ("tools/list", None)


def _standard_headers(context: dict[str, Any]) -> Script:
    tools = yield ("tools/list", None)
    for tool in tools.get("tools", []):
        yield ("tools/call", {"name": tool["name"], "arguments": {}})
    resources = yield ("resources/list", None)
    for resource in resources.get("resources", []):
        yield ("resources/read", {"uri": resource["uri"]})
    prompts = yield ("prompts/list", None)
    for prompt in prompts.get("prompts", []):
        yield ("prompts/get", {"name": prompt["name"], "arguments": {}})


def _custom_headers(context: dict[str, Any]) -> Script:
    yield ("tools/list", None)  # the client learns the x-mcp-header arguments here
    for call in context.get("toolCalls", []):
        yield ("tools/call", {"name": call["name"], "arguments": call.get("arguments", {})})


def _invalid_tool_headers(context: dict[str, Any]) -> Script:
    tools = yield ("tools/list", None)  # tools with invalid annotations are already dropped
    for tool in tools.get("tools", []):
        arguments = _placeholder(tool.get("inputSchema"))
        yield ("tools/call", {"name": tool["name"], "arguments": arguments})


def _ref_no_deref(context: dict[str, Any]) -> Script:
    yield ("tools/list", None)


SCRIPTS: dict[str, Callable[[dict[str, Any]], Script]] = {
    "tools_call": _tools_call,
    "request-metadata": _request_metadata,
    "http-standard-headers": _standard_headers,
    "http-custom-headers": _custom_headers,
    "http-invalid-tool-headers": _invalid_tool_headers,
    "json-schema-ref-no-deref": _ref_no_deref,
}


def _decline(request: Any, key: str) -> dict[str, Any]:
    return {"action": "decline"}


def _sample(request: Any, key: str) -> dict[str, Any]:
    return {"role": "assistant", "model": "mrtr-conformance",
            "content": {"type": "text", "text": "sampled"}}


def _roots(request: Any, key: str) -> dict[str, Any]:
    return {"roots": [{"uri": "file:///conformance", "name": "conformance"}]}


# Every input kind has a handler, so every capability is declared on every request.
HANDLERS: dict[str, Any] = {"elicitation": _decline, "sampling": _sample, "roots": _roots}


def _line(method: str, params: dict[str, Any] | None, result: dict[str, Any]) -> str:
    target = (params or {}).get("name") or (params or {}).get("uri") or ""
    return f"{method} {target}".strip() + f": {json.dumps(result, sort_keys=True)[:200]}"


def script_sync(url: str, script: Script) -> list[str]:
    """Run a scenario script with the sync client."""
    from mrtr_sync import Client
    from mrtr_sync.http_client import HttpTransport

    lines: list[str] = []
    with Client(HttpTransport(url), **HANDLERS) as client:
        result: dict[str, Any] | None = None
        while True:
            try:
                method, params = script.send(result)  # send(None) starts it
            except StopIteration:
                return lines
            result = client.request(method, params)
            lines.append(_line(method, params, result))


async def _script_async(client: Any, script: Script) -> list[str]:
    lines: list[str] = []
    result: dict[str, Any] | None = None
    while True:
        try:
            method, params = script.send(result)  # send(None) starts it
        except StopIteration:
            return lines
        result = await client.request(method, params)
        lines.append(_line(method, params, result))


def script_trio(url: str, script: Script) -> list[str]:
    """Run a scenario script with the trio client."""
    import trio
    from mrtr_trio import Client
    from mrtr_trio.http_client import HttpTransport

    async def main() -> list[str]:
        async with HttpTransport(url) as transport:
            return await _script_async(Client(transport, **HANDLERS), script)

    return trio.run(main)


def script_asyncio(url: str, script: Script) -> list[str]:
    """Run a scenario script with the asyncio client."""
    import asyncio

    from mrtr_asyncio import Client
    from mrtr_asyncio.http_client import HttpTransport

    async def main() -> list[str]:
        async with HttpTransport(url) as transport:
            return await _script_async(Client(transport, **HANDLERS), script)

    return asyncio.run(main())


SCRIPT_RUNNERS = {"sync": script_sync, "trio": script_trio, "asyncio": script_asyncio}


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the scenario, print what each call returned."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtime", choices=sorted(RUNNERS), default="sync")
    parser.add_argument("url", help="the MCP endpoint of the suite's mock server")
    args = parser.parse_args(argv)
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "sep-2322-client-request-state")
    try:
        if scenario in SCRIPTS:
            context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
            lines = SCRIPT_RUNNERS[args.runtime](args.url, SCRIPTS[scenario](context))
        else:
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
