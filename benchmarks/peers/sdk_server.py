"""Benchmark peer: an MCP 2026-07-28 server built on the official Python SDK (``mcp``).

Tools (the same names and wire shapes as ``our_server.py``):

- ``echo(text)``: one plain round.
- ``delete_file(path)``: two rounds; round 1 asks for an elicitation form
  ``{"confirm": boolean}`` and carries ``requestState``; round 2 completes.
- ``multi_round(rounds, inputs, state_bytes)``: ``rounds`` input_required rounds, each
  asking ``inputs`` elicitation forms and carrying ``state_bytes`` of application state,
  then a final complete round (used by the growth curves).

The SDK seals ``requestState`` itself (its default, an ephemeral AES-GCM key).
Run: ``python sdk_server.py --port 8765`` (listens on 127.0.0.1 only).
"""

from __future__ import annotations

import argparse
import json
import logging

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)

CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "description": "Really do it?"}},
    "required": ["confirm"],
}


def _form(message: str) -> ElicitRequest:
    return ElicitRequest(
        params=ElicitRequestFormParams(message=message, requested_schema=CONFIRM_SCHEMA)
    )


def build_server() -> MCPServer:
    """The benchmark server: ``echo``, ``delete_file`` and ``multi_round``."""
    server = MCPServer("mrtr-bench", version="1.0", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def delete_file(path: str, ctx: Context) -> str | InputRequiredResult:
        """Ask for confirmation, then report the deletion."""
        answers = ctx.input_responses or {}
        answer = answers.get("confirm")
        state = ctx.request_state
        if (
            state != f"pending-delete:{path}"
            or not isinstance(answer, ElicitResult)
            or answer.action != "accept"
            or not (answer.content or {}).get("confirm")
        ):
            return InputRequiredResult(
                input_requests={"confirm": _form(f"Delete {path}?")},
                request_state=f"pending-delete:{path}",
            )
        return f"deleted {path}"

    @server.tool()
    def multi_round(
        rounds: int, inputs: int, state_bytes: int, ctx: Context
    ) -> str | InputRequiredResult:
        """``rounds`` rounds of ``inputs`` forms each, carrying ``state_bytes`` of state."""
        done = 0
        if ctx.request_state is not None:
            done = int(json.loads(ctx.request_state)["done"])
            answers = ctx.input_responses or {}
            if len(answers) == inputs:
                done += 1
        if done >= rounds:
            return f"finished {rounds} rounds"
        state = json.dumps({"done": done, "pad": "x" * state_bytes})
        requests = {
            f"q{done}_{i}": _form(f"Question {i} of round {done + 1}") for i in range(inputs)
        }
        return InputRequiredResult(input_requests=requests, request_state=state)

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    # JSON responses and no sessions: the fastest configuration measured for this SDK.
    app = build_server().streamable_http_app(json_response=True, stateless_http=True)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
