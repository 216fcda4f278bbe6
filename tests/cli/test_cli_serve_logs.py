"""``mrtr serve`` logs on stderr: a handler's traceback reaches the operator, while the client
still gets its reply and a stdio server's stdout carries nothing but protocol lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import cli

APP = '''
import os

from mrtr_core.app import App
from mrtr_core.state import KeyRing, StateCodec

app = App("failing", "1.0", codec=StateCodec(KeyRing({"k": b"k" * 32}, active="k"),
                                             audience="failing", nonce=os.urandom))


@app.tool(description="Fails.")
def explode(ctx, secret: str) -> str:
    print("a stray print")
    raise ValueError("the tool broke on purpose")


@app.tool(description="Works.")
def fine(ctx) -> str:
    return "fine"
'''
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}


def _call(request_id: int, name: str, state: str | None = None, **arguments: str) -> str:
    params = {"name": name, "arguments": arguments, "_meta": META}
    if state is not None:
        params["requestState"] = state
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": params}) + "\n"


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_serve_stdio_prints_a_handlers_traceback_on_stderr_only(
    runtime: str, tmp_path: Path
) -> None:
    app = tmp_path / "failing_app.py"
    app.write_text(APP, encoding="utf-8")
    done = cli("serve", f"{app}:app", "--stdio", "--runtime", runtime,
               stdin=_call(1, "explode", secret="hunter2") + _call(2, "fine"))
    assert done.returncode == 0, done.stderr
    replies = {reply["id"]: reply for reply in map(json.loads, done.stdout.splitlines())}
    assert set(replies) == {1, 2}  # every stdout line is a protocol message
    failed = replies[1]["result"]
    assert failed["isError"] is True
    assert failed["content"] == [{"type": "text", "text": "the tool broke on purpose"}]
    assert replies[2]["result"]["content"] == [{"type": "text", "text": "fine"}]
    err = done.stderr
    assert "ERROR mrtr.server" in err and "tools/call 'explode'" in err
    assert "Traceback (most recent call last)" in err
    assert "ValueError: the tool broke on purpose" in err
    assert "a stray print" in err
    assert "hunter2" not in err


@pytest.mark.parametrize(("level", "shows_info"), [(None, True), ("warning", False)])
def test_serve_log_level_sets_what_reaches_stderr(
    level: str | None, shows_info: bool, tmp_path: Path
) -> None:
    # A refused requestState is INFO: shown by default, not at --log-level warning; a
    # handler's traceback (ERROR) is shown either way.
    app = tmp_path / "failing_app.py"
    app.write_text(APP, encoding="utf-8")
    chosen = [] if level is None else ["--log-level", level]
    done = cli("serve", f"{app}:app", "--stdio", *chosen,
               stdin=_call(1, "explode", secret="x") + _call(2, "fine", state="forged-state"))
    assert done.returncode == 0, done.stderr
    replies = {reply["id"]: reply for reply in map(json.loads, done.stdout.splitlines())}
    assert replies[2]["error"]["code"] == -32602
    assert "ValueError: the tool broke on purpose" in done.stderr
    refused = "INFO mrtr.server.state"
    assert (refused in done.stderr) is shows_info, done.stderr
    assert "forged-state" not in done.stderr
