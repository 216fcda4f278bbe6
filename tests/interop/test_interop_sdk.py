"""Interop with the official Python SDK (``mcp`` 2.3.0), both directions, HTTP and stdio.

1. mrtr's client (sync, trio, asyncio) against a server written with the SDK
   (``peers/sdk_server.py``): elicitation, sampling and roots inputs, three of them in one
   round, three rounds in a row, a prompt and a resource template that ask too.
2. The SDK's client (``peers/sdk_client.py``, its automatic MRTR loop) against mrtr's server
   (``peers/mrtr_app.py``, served by each runtime's adapter), same cases.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

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
SDK_SERVER = PEERS / "sdk_server.py"
SDK_CLIENT = PEERS / "sdk_client.py"
MRTR_APP = str(PEERS / "mrtr_app.py")
LAUNCHER = ROOT / "tests" / "conformance" / "serve_app.py"
RUNTIMES = ("sync", "trio", "asyncio")
TRANSPORTS = ("http", "stdio")

OUR_ROOT = "file:///interop/mrtr"
SDK_ROOT = "file:///interop/root"


def _expected(who: str, root: str) -> dict[str, str]:
    return {
        "echo": "hello",
        "confirm_delete": "deleted a.txt",
        "gather": f"name=name-from-{who}; haiku=sampled-by-{who}; roots={root}",
        "three_rounds": f"name=name-from-{who}; poem=sampled-by-{who}; roots={root}",
        "briefing": f"Brief audience-from-{who} about mrtr",
        "notes": f"notes of work under {root}",
    }


# --- processes ------------------------------------------------------------------------------


def _wait_line(proc: subprocess.Popen[str], prefix: str) -> str:
    """The rest of the first stdout line starting with ``prefix``. Reads until that line (or
    end of output: the process died); a process that hangs silently is stopped by the test
    timeout."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    proc.wait()
    raise AssertionError(f"process {proc.args!r} exited with {proc.returncode} before "
                         f"announcing {prefix!r}")


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture(scope="module")
def sdk_http_url() -> Iterator[str]:
    """The SDK server over Streamable HTTP (one process for the module)."""
    proc = subprocess.Popen([sys.executable, str(SDK_SERVER), "http"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    try:
        yield _wait_line(proc, "READY ")
    finally:
        _stop(proc)


SDK_STDIO = [sys.executable, str(SDK_SERVER), "stdio"]


# --- mrtr's client against the SDK server ----------------------------------------------------


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


def _text(result: dict[str, Any]) -> str:
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


def run_sync(kind: str, url: str) -> tuple[dict[str, str], dict[str, list[list[str]]]]:
    from mrtr_sync import Client
    from mrtr_sync.http_client import HttpTransport
    from mrtr_sync.stdio_client import StdioTransport

    texts: dict[str, str] = {}
    rounds: dict[str, list[list[str]]] = {}
    transport: Any = (HttpTransport(url) if kind == "http"
                      else StdioTransport.spawn(SDK_STDIO, stderr=subprocess.DEVNULL))
    with Client(transport) as client:
        for name, (method, args) in CASES.items():
            rec = Recorder()
            client.on_elicitation(rec.elicit)
            client.on_sampling(rec.sample)
            client.on_roots(rec.roots)
            client.on_event = rec.on_event
            texts[name] = _text(getattr(client, method)(*args))
            rounds[name] = rec.rounds
    return texts, rounds


async def _run_async(client: Any) -> tuple[dict[str, str], dict[str, list[list[str]]]]:
    texts: dict[str, str] = {}
    rounds: dict[str, list[list[str]]] = {}
    for name, (method, args) in CASES.items():
        rec = Recorder()
        client.on_elicitation(rec.elicit)
        client.on_sampling(rec.sample)
        client.on_roots(rec.roots)
        client.on_event = rec.on_event
        texts[name] = _text(await getattr(client, method)(*args))
        rounds[name] = rec.rounds
    return texts, rounds


def run_trio(kind: str, url: str) -> tuple[dict[str, str], dict[str, list[list[str]]]]:
    from mrtr_trio import Client
    from mrtr_trio.http_client import HttpTransport
    from mrtr_trio.stdio_client import open_stdio_transport

    async def main() -> tuple[dict[str, str], dict[str, list[list[str]]]]:
        if kind == "http":
            async with HttpTransport(url) as transport:
                return await _run_async(Client(transport))
        async with open_stdio_transport(SDK_STDIO, stderr=subprocess.DEVNULL) as transport:
            return await _run_async(Client(transport))

    return trio.run(main)


def run_asyncio(kind: str, url: str) -> tuple[dict[str, str], dict[str, list[list[str]]]]:
    from mrtr_asyncio import Client
    from mrtr_asyncio.http_client import HttpTransport
    from mrtr_asyncio.stdio_client import open_stdio_transport

    async def main() -> tuple[dict[str, str], dict[str, list[list[str]]]]:
        if kind == "http":
            async with HttpTransport(url) as transport:
                return await _run_async(Client(transport))
        async with open_stdio_transport(SDK_STDIO, stderr=subprocess.DEVNULL) as transport:
            return await _run_async(Client(transport))

    return asyncio.run(main())


RUNNERS: dict[str, Callable[[str, str], tuple[dict[str, str], dict[str, list[list[str]]]]]] = {
    "sync": run_sync, "trio": run_trio, "asyncio": run_asyncio,
}


@pytest.mark.parametrize("kind", TRANSPORTS)
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_our_client_against_sdk_server(runtime: str, kind: str, sdk_http_url: str) -> None:
    texts, rounds = RUNNERS[runtime](kind, sdk_http_url)
    assert texts == _expected("mrtr", OUR_ROOT)
    # What was asked, round by round (keys sorted within a round).
    assert rounds["echo"] == []
    assert rounds["confirm_delete"] == [["confirm"]]
    assert rounds["gather"] == [["haiku", "name", "roots"]]  # all three in ONE round
    assert rounds["three_rounds"] == [["step1"], ["step2"], ["step3"]]
    assert rounds["briefing"] == [["audience"]]
    assert rounds["notes"] == [["roots"]]


# --- the SDK's client against mrtr's server ------------------------------------------------------


def _sdk_client(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(SDK_CLIENT), *args], capture_output=True,
                          text=True, timeout=120, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no output from the SDK client:\n{done.stdout}\n{done.stderr[-4000:]}"
    out: dict[str, Any] = json.loads(lines[-1])
    return out


def _check_sdk_results(results: dict[str, Any]) -> None:
    assert results.pop("tools") == ["confirm_delete", "echo", "gather", "three_rounds"]
    assert results == _expected("sdk", SDK_ROOT)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_sdk_client_against_our_http_server(runtime: str) -> None:
    proc = subprocess.Popen([sys.executable, str(LAUNCHER), runtime, "http", MRTR_APP],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    try:
        url = _wait_line(proc, "READY ")
        _check_sdk_results(_sdk_client("http", url))
    finally:
        _stop(proc)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_sdk_client_against_our_stdio_server(runtime: str) -> None:
    _check_sdk_results(_sdk_client("stdio", sys.executable, str(LAUNCHER), runtime, "stdio",
                                   MRTR_APP))
