"""What the interop tests with the official SDKs share: the cases, the answers mrtr's client
gives, and mrtr's client in each runtime running every case against a peer server.

Each peer (``peers/sdk_server.py`` on the Python SDK, ``ts/server.mjs`` on the TypeScript SDK)
serves the same cases, and each peer client (``peers/sdk_client.py``, ``ts/client.mjs``) runs
the same cases against ``peers/mrtr_app.py``, answering with its own name (``who``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import trio
from peer_processes import stop, wait_line

from mrtr_core.client.commands import InputNeeded
from mrtr_core.wire import (
    CreateMessageRequest,
    CreateMessageResult,
    ElicitFormRequest,
    ElicitResult,
    ListRootsResult,
    Root,
)

ROOT = Path(__file__).resolve().parents[2]
PEERS = Path(__file__).resolve().parent / "peers"
MRTR_APP = str(PEERS / "mrtr_app.py")
LAUNCHER = ROOT / "tests" / "conformance" / "serve_app.py"
RUNTIMES = ("sync", "trio", "asyncio")
TRANSPORTS = ("http", "stdio")

OUR_ROOT = "file:///interop/mrtr"


def expected(who: str, root: str) -> dict[str, str]:
    """The text of every case's result when ``who`` answered and offered ``root``."""
    return {
        "echo": "hello",
        "confirm_delete": "deleted a.txt",
        "gather": f"name=name-from-{who}; haiku=sampled-by-{who}; roots={root}",
        "three_rounds": f"name=name-from-{who}; poem=sampled-by-{who}; roots={root}",
        "briefing": f"Brief audience-from-{who} about mrtr",
        "notes": f"notes of work under {root}",
    }


# --- processes ------------------------------------------------------------------------------


@contextlib.contextmanager
def serving(argv: Sequence[str]) -> Iterator[str]:
    """Run an HTTP server process that announces ``READY <url>``; yield the URL."""
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, cwd=ROOT)
    try:
        yield wait_line(proc, "READY ")
    finally:
        stop(proc)


def our_http_server(runtime: str) -> contextlib.AbstractContextManager[str]:
    """mrtr's server for ``peers/mrtr_app.py`` over HTTP in ``runtime``; yields its URL."""
    return serving([sys.executable, str(LAUNCHER), runtime, "http", MRTR_APP])


def our_stdio_server(runtime: str) -> list[str]:
    """The command that serves ``peers/mrtr_app.py`` over stdio in ``runtime``."""
    return [sys.executable, str(LAUNCHER), runtime, "stdio", MRTR_APP]


def run_peer_client(argv: Sequence[str]) -> dict[str, Any]:
    """Run a peer client to its end; the JSON object it printed last."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=120,
                          check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no output from the peer client:\n{done.stdout}\n{done.stderr[-4000:]}"
    out: dict[str, Any] = json.loads(lines[-1])
    return out


# --- mrtr's client against a peer server -----------------------------------------------------


class Recorder:
    """Answers every input kind and records what was asked, round by round."""

    def __init__(self) -> None:
        self.rounds: list[list[str]] = []
        self.asked: list[tuple[str, str]] = []

    def on_event(self, cmd: object) -> None:
        if isinstance(cmd, InputNeeded):
            self.rounds.append(sorted(cmd.result.input_requests or {}))

    def elicit(self, request: ElicitFormRequest, key: str) -> ElicitResult:
        self.asked.append((key, "elicitation/create"))
        field = next(iter(request.requested_schema["properties"]))
        value: Any = True if field == "confirm" else f"{field}-from-mrtr"
        return ElicitResult(action="accept", content={field: value})

    def sample(self, request: CreateMessageRequest, key: str) -> CreateMessageResult:
        self.asked.append((key, "sampling/createMessage"))
        return CreateMessageResult(role="assistant", model="mrtr-model",
                                   content={"type": "text", "text": "sampled-by-mrtr"})

    def roots(self, request: object, key: str) -> ListRootsResult:
        self.asked.append((key, "roots/list"))
        return ListRootsResult(roots=[Root(uri=OUR_ROOT, name="mrtr")])


def text_of(result: dict[str, Any]) -> str:
    if "messages" in result:
        return " ".join(m["content"].get("text", "") for m in result["messages"])
    if "contents" in result:
        return " ".join(c.get("text", "") for c in result["contents"])
    return " ".join(b.get("text", "") for b in result.get("content", []))


CASES: dict[str, tuple[str, tuple[Any, ...]]] = {
    "echo": ("call_tool", ("echo", {"text": "hello"})),
    "confirm_delete": ("call_tool", ("confirm_delete", {"path": "a.txt"})),
    "gather": ("call_tool", ("gather", {})),
    "three_rounds": ("call_tool", ("three_rounds", {})),
    "briefing": ("get_prompt", ("briefing", {"topic": "mrtr"})),
    "notes": ("read_resource", ("notes://work",)),
}


Outcome = tuple[dict[str, str], dict[str, list[list[str]]]]
"""Per case, the text of the result and the input keys asked, round by round."""


def run_sync(kind: str, url: str, command: Sequence[str]) -> Outcome:
    from mrtr_sync import Client
    from mrtr_sync.http_client import HttpTransport
    from mrtr_sync.stdio_client import StdioTransport

    texts: dict[str, str] = {}
    rounds: dict[str, list[list[str]]] = {}
    transport: Any = (HttpTransport(url) if kind == "http"
                      else StdioTransport.spawn(list(command), stderr=subprocess.DEVNULL))
    with Client(transport) as client:
        for name, (method, args) in CASES.items():
            rec = _recording(client)
            texts[name] = text_of(getattr(client, method)(*args))
            rounds[name] = rec.rounds
    return texts, rounds


def _recording(client: Any) -> Recorder:
    """A fresh recorder, set as every handler and the round callback of ``client``."""
    rec = Recorder()
    client.on_elicitation(rec.elicit)
    client.on_sampling(rec.sample)
    client.on_roots(rec.roots)
    client.on_event = rec.on_event
    return rec


async def _run_async(client: Any) -> Outcome:
    texts: dict[str, str] = {}
    rounds: dict[str, list[list[str]]] = {}
    for name, (method, args) in CASES.items():
        rec = _recording(client)
        texts[name] = text_of(await getattr(client, method)(*args))
        rounds[name] = rec.rounds
    return texts, rounds


def _main(runtime: Any, kind: str, url: str, command: Sequence[str]) -> Any:
    """The coroutine function that runs the cases with ``runtime``'s client (the package
    ``mrtr_trio`` or ``mrtr_asyncio``) over HTTP or stdio."""

    async def main() -> Outcome:
        if kind == "http":
            async with runtime.http_client.HttpTransport(url) as transport:
                return await _run_async(runtime.Client(transport))
        async with runtime.stdio_client.open_stdio_transport(
            list(command), stderr=subprocess.DEVNULL
        ) as transport:
            return await _run_async(runtime.Client(transport))

    return main


def run_trio(kind: str, url: str, command: Sequence[str]) -> Outcome:
    import mrtr_trio.http_client
    import mrtr_trio.stdio_client

    return trio.run(_main(mrtr_trio, kind, url, command))


def run_asyncio(kind: str, url: str, command: Sequence[str]) -> Outcome:
    import mrtr_asyncio.http_client
    import mrtr_asyncio.stdio_client

    return asyncio.run(_main(mrtr_asyncio, kind, url, command)())


RUNNERS: dict[str, Callable[[str, str, Sequence[str]], Outcome]] = {
    "sync": run_sync, "trio": run_trio, "asyncio": run_asyncio,
}

NOTIFICATION: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/interop"}
"""A notification without _meta (none is required of one): its POST carries the headers the
client adds by itself."""


def notify_over_http(runtime: str, url: str) -> None:
    """POST :data:`NOTIFICATION` with ``runtime``'s HTTP transport; raises if it is refused
    (``mrtr_core.http.HttpStatusError``)."""
    if runtime == "sync":
        from mrtr_sync.http_client import HttpTransport

        with HttpTransport(url) as transport:
            transport.notify(NOTIFICATION)
        return
    package: Any = importlib.import_module(f"mrtr_{runtime}.http_client")

    async def main() -> None:
        async with package.HttpTransport(url) as transport:
            await transport.notify(NOTIFICATION)

    if runtime == "trio":
        trio.run(main)
    else:
        asyncio.run(main())




def check_our_client(outcome: Outcome) -> None:
    """mrtr's client got every case right, asking what each case asks, round by round."""
    texts, rounds = outcome
    assert texts == expected("mrtr", OUR_ROOT)
    # What was asked, round by round (keys sorted within a round).
    assert rounds["echo"] == []
    assert rounds["confirm_delete"] == [["confirm"]]
    assert rounds["gather"] == [["haiku", "name", "roots"]]  # all three in ONE round
    assert rounds["three_rounds"] == [["step1"], ["step2"], ["step3"]]
    assert rounds["briefing"] == [["audience"]]
    assert rounds["notes"] == [["roots"]]


def check_peer_client(results: dict[str, Any], who: str, root: str) -> None:
    """A peer client got every case right against ``peers/mrtr_app.py``."""
    assert results.pop("tools") == ["confirm_delete", "echo", "gather", "three_rounds"]
    assert results == expected(who, root)
