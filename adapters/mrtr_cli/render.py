"""Showing final results to a person: text blocks as text, everything else summarised.

Results come from the server, so every string goes through :func:`mrtr_cli.safe.plain`.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.text import Text

from mrtr_cli.safe import plain, plain_json

__all__ = ["print_result"]

_LIMIT = 100_000


def _block(console: Console, block: Any, indent: str = "") -> None:
    if not isinstance(block, dict):
        console.print(plain(f"{indent}{json.dumps(block)}", limit=_LIMIT))
        return
    kind = block.get("type")
    if kind == "text":
        console.print(plain(f"{indent}{block.get('text', '')}", limit=_LIMIT))
    elif kind in ("image", "audio"):
        data = block.get("data")
        size = len(data) * 3 // 4 if isinstance(data, str) else 0
        console.print(plain(f"{indent}[{kind} {block.get('mimeType', '?')}, ~{size} bytes]", "dim"))
    elif kind == "resource_link":
        console.print(plain(f"{indent}[link {block.get('name', '')} {block.get('uri', '')}]",
                            "cyan"))
    elif kind == "resource":
        _contents(console, [block.get("resource")], indent)
    else:
        console.print(plain(f"{indent}[{kind} block] {json.dumps(block)}", "dim", limit=2000))


def _contents(console: Console, contents: Any, indent: str = "") -> None:
    for item in contents if isinstance(contents, list) else []:
        if not isinstance(item, dict):
            continue
        header = f"{indent}{item.get('uri', '?')}"
        if item.get("mimeType"):
            header += f" ({item['mimeType']})"
        console.print(plain(header, "bold"))
        if isinstance(item.get("text"), str):
            console.print(plain(item["text"], limit=_LIMIT))
        elif isinstance(item.get("blob"), str):
            console.print(plain(f"{indent}[binary, ~{len(item['blob']) * 3 // 4} bytes]", "dim"))


def print_result(console: Console, method: str, result: dict[str, Any], *, raw: bool) -> None:
    """Print a final result: raw JSON with ``raw``, else readably for its method."""
    if raw:
        console.print(plain_json(result))
        return
    if method == "tools/call":
        if result.get("isError"):
            console.print(Text("The tool reported an error:", style="bold red"))
        for block in result.get("content") or []:
            _block(console, block)
        if "structuredContent" in result:
            console.print(Text("structured content:", style="dim"))
            console.print(plain_json(result["structuredContent"]))
    elif method == "prompts/get":
        if result.get("description"):
            console.print(plain(result["description"], "italic"))
        for message in result.get("messages") or []:
            if isinstance(message, dict):
                console.print(plain(f"{message.get('role', '?')}:", "bold"))
                _block(console, message.get("content"), "  ")
    elif method == "resources/read":
        _contents(console, result.get("contents"))
    else:
        console.print(plain_json(result))
