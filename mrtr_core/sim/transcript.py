"""A run's transcript: one line per thing that happened, in virtual-time order.

Recording is off on the fast path; a failing run is re-run with recording on (the run is
deterministic, so it goes the same way) and the lines of the shrunk run are printed. Lines
hold no object ids, addresses or wall-clock times, so the same seed prints the same
transcript byte for byte.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Transcript", "describe_message", "short_token"]


def short_token(token: object) -> str:
    """A short, stable name for a ``requestState``: its head, tail and length."""
    if not isinstance(token, str):
        return f"<{type(token).__name__}>"
    if len(token) <= 24:
        return repr(token)
    return f"{token[:10]}..{token[-6:]}({len(token)})"


def _keys(value: object) -> str:
    if isinstance(value, dict):
        return "[" + ",".join(str(k) for k in value) + "]"
    return f"<{type(value).__name__}>"


def describe_message(message: object) -> str:
    """One line about a JSON-RPC request or response, without the bulky parts."""
    if not isinstance(message, dict):
        return f"<not an object: {type(message).__name__}>"
    ident = message.get("id")
    if "method" in message:
        params = message.get("params")
        parts = [f"request #{ident} {message.get('method')}"]
        if isinstance(params, dict):
            target = params.get("name", params.get("uri"))
            if target is not None:
                parts.append(str(target))
            if "inputResponses" in params:
                parts.append(f"answers={_keys(params['inputResponses'])}")
            if "requestState" in params:
                parts.append(f"state={short_token(params['requestState'])}")
        return " ".join(parts)
    if "error" in message:
        error = message["error"]
        if isinstance(error, dict):
            return f"error #{ident} {error.get('code')} {error.get('message')!r}"
        return f"error #{ident} <malformed>"
    result = message.get("result")
    if not isinstance(result, dict):
        return f"response #{ident} <no result>"
    kind = result.get("resultType", "complete")
    parts = [f"result #{ident} {kind}"]
    if "inputRequests" in result:
        parts.append(f"asks={_keys(result['inputRequests'])}")
    if "requestState" in result:
        parts.append(f"state={short_token(result['requestState'])}")
    if result.get("isError"):
        parts.append("isError")
    return " ".join(parts)


class Transcript:
    """Lines of ``time  op  actor  what``, kept in the order they happened."""

    __slots__ = ("lines",)

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, time: float, op: str, actor: str, text: Any) -> None:
        """Record one line."""
        self.lines.append(f"{time:12.6f}  {op:<9} {actor:<11} {text}")

    def for_ops(self, ops: set[str]) -> list[str]:
        """The lines about these operations, and run-wide lines (op ``-``)."""
        out = []
        for line in self.lines:
            parts = line.split(None, 2)
            if len(parts) < 2 or parts[1] in ops or parts[1] == "-":
                out.append(line)
        return out

    def text(self) -> str:
        """The whole transcript."""
        return "\n".join(self.lines)
