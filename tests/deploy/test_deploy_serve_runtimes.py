"""``mrtr serve`` on every runtime: shared ring across instances, the Redis replay guard
refusing a replayed single-use state on another instance, and a clean stop on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cluster_helpers import ROOT
from mrtr_cli.keys import new_ring_data, write_ring
from mrtr_cli.processes import ServerProcess, serve_argv
from mrtr_sync.http_client import HttpTransport

APP = f"{ROOT / 'tests' / 'deploy' / 'cluster_app.py'}:app"
TIMEOUT = 120.0  # a safety net: each step takes a second or two; only a hang waits this long
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}


def call(url: str, request_id: int, op: str, **extra: Any) -> dict[str, Any]:
    params = {"name": "redeem", "arguments": {"op": op}, "_meta": META, **extra}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    with HttpTransport(url) as transport:
        return transport.request(message, timeout=TIMEOUT)


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_replayed_state_is_refused_by_another_instance(runtime: str, tmp_path: Path,
                                                       redis_url: str) -> None:
    ring = tmp_path / "ring.json"
    write_ring(ring, new_ring_data())
    env = {**os.environ, "MRTR_TEST_REDIS": redis_url}
    instances = [
        ServerProcess(f"{runtime}-{i}", serve_argv(APP, runtime=runtime, keys=ring,
                                                   redis=redis_url),
                      log=tmp_path / f"{i}.log", env=env)
        for i in range(2)
    ]
    try:
        first, second = (instance.wait_ready(TIMEOUT) for instance in instances)
        asked = call(first, 1, "op-r")["result"]
        assert asked["resultType"] == "input_required"
        retry = {"inputResponses": {"confirm": {"action": "accept",
                                                "content": {"confirm": True}}},
                 "requestState": asked["requestState"]}
        done = call(second, 2, "op-r", **retry)  # round 2 on the other instance
        assert done["result"]["content"][0]["text"] == "redeemed op-r (1)"
        replayed = call(first, 3, "op-r", **retry)  # the same state again, first instance
        assert replayed["error"]["code"] == -32602
        assert replayed["error"]["message"] == "Invalid or expired requestState"
        for instance in instances:
            os.kill(instance.pid, signal.SIGTERM)
            assert instance.proc.wait(TIMEOUT) == 0, instance.name
    finally:
        for instance in instances:
            instance.stop()


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_stdio_serving_on_every_runtime(runtime: str, tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text('{"confirm_deploy": {"confirm": true}, "change_ticket": {"ticket": "T"}}')
    server = (f"{sys.executable} -m mrtr_cli serve examples/deploy.py:app --stdio "
              f"--runtime {runtime}")
    done = subprocess.run(
        [sys.executable, "-m", "mrtr_cli", "call", "--stdio", server, "deploy_production",
         "--arg", "version=7", "--answers", str(answers)],
        cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT,
        check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Deployed 7 to production under change ticket T.\n"
