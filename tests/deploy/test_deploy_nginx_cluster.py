"""The documented deployment, for real: three ``mrtr serve`` instances behind nginx (round
robin, keepalive, ``proxy_next_upstream error timeout non_idempotent``), one shared key ring,
the Redis replay guard; 200 concurrent two-round flows; one instance SIGKILLed in the middle.

Every flow must complete or fail with a typed error, and no operation's side effect may run
twice (counted in Redis by the single-use tool itself).
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis
from cluster_helpers import ROOT, Watched, ensure_installed
from mrtr_cli.keys import new_ring_data, write_ring
from mrtr_cli.nginx import NginxConfig, nginx_command, write_nginx_conf
from mrtr_cli.processes import ServerProcess, serve_argv
from mrtr_sync import Client
from mrtr_sync.http_client import HttpTransport

from mrtr_core.client.commands import InputNeeded
from mrtr_core.client.limits import ClientLimits
from mrtr_core.errors import MrtrError
from mrtr_core.wire.models import ElicitResult

FLOWS = 200
KILL_AFTER_ROUND_1 = 50  # flows that finished round 1 before the kill
HELD_FROM = 100  # flows from this index on answer round 1 only after the kill
# Safety nets, far above what each step takes: readiness is a line the process prints, and
# every wait below ends on a signal; only a hang waits this long.
START_TIMEOUT = 120.0
WAIT = 120.0
MAX_CONNECTIONS = 64  # client connections to nginx


class Cluster:
    def __init__(self, redis_url: str, nginx_url: str, instances: list[ServerProcess],
                 upstreams: list[str], access_log: Path) -> None:
        self.redis_url = redis_url
        self.url = nginx_url
        self.instances = instances
        self.upstreams = upstreams
        self.access_log = access_log


@pytest.fixture
def cluster(
    tmp_path: Path, redis_url: str, free_ports: Callable[..., int]
) -> Iterator[Cluster]:
    nginx = ensure_installed("nginx", ["scripts/setup_nginx.sh"])
    started: list[Any] = []
    try:
        ring = tmp_path / "ring.json"
        write_ring(ring, new_ring_data("k1"))
        env = {**os.environ, "MRTR_TEST_REDIS": redis_url}
        app = f"{ROOT / 'tests' / 'deploy' / 'cluster_app.py'}:app"
        instances = [
            ServerProcess(f"instance-{i}", serve_argv(app, keys=ring, redis=redis_url,
                                                      python=sys.executable),
                          log=tmp_path / f"instance-{i}.log", env=env)
            for i in range(3)
        ]
        started.extend(instances)
        upstreams = [url.split("/")[2] for url in
                     (instance.wait_ready(START_TIMEOUT) for instance in instances)]

        port = free_ports()  # nginx cannot report the port it got
        config = NginxConfig(upstreams=tuple(upstreams), listen=f"127.0.0.1:{port}",
                             prefix=str(tmp_path / "nginx"), error_log="stderr notice",
                             user="root" if os.geteuid() == 0 else None)
        conf = write_nginx_conf(config, tmp_path / "nginx.conf")
        nginx_proc = Watched(nginx_command(nginx, config, conf), stream="stderr")
        started.append(nginx_proc)
        nginx_proc.wait_for("start worker process", START_TIMEOUT)
        yield Cluster(redis_url, f"http://127.0.0.1:{port}/mcp", instances, upstreams,
                      Path(config.prefix) / "access.log")
    finally:
        for process in reversed(started):
            process.stop()


@pytest.mark.timeout(300)
def test_two_round_flows_survive_a_killed_instance_without_double_effects(
    cluster: Cluster,
) -> None:
    victim = cluster.instances[1]
    round1_done = 0
    counted = threading.Condition()
    killed = threading.Event()

    def killer() -> None:
        with counted:
            reached = counted.wait_for(lambda: round1_done >= KILL_AFTER_ROUND_1, WAIT)
        if reached:
            victim.kill()  # SIGKILL by pid: a crash, not a shutdown
        killed.set()

    def flow(index: int, transport: HttpTransport) -> tuple[str, Any]:
        def on_event(notice: object) -> None:
            if isinstance(notice, InputNeeded) and notice.round == 1:
                round1_finished()

        def answer(request: Any, key: str) -> ElicitResult:
            if index >= HELD_FROM:
                assert killed.wait(WAIT), "the kill never happened"
            return ElicitResult(action="accept", content={"confirm": True})

        client = Client(transport, elicitation=answer, on_event=on_event,
                        limits=ClientLimits(leg_timeout=60.0, flow_timeout=WAIT + 60.0))
        try:
            result = client.call_tool("redeem", {"op": f"op-{index}"})
        except MrtrError as exc:
            return "failed", exc
        return "completed", result

    def round1_finished() -> None:
        nonlocal round1_done
        with counted:
            round1_done += 1
            counted.notify_all()

    kill_thread = threading.Thread(target=killer)
    kill_thread.start()
    transport = HttpTransport(cluster.url, max_connections=MAX_CONNECTIONS)
    try:
        with ThreadPoolExecutor(max_workers=FLOWS) as pool:
            outcomes = list(pool.map(lambda i: flow(i, transport), range(FLOWS)))
    finally:
        kill_thread.join()
        transport.close()

    assert victim.proc.returncode == -9, "the instance was killed mid-run"
    effects = redis.Redis.from_url(cluster.redis_url)
    counts = {
        key.decode().removeprefix("effect:"): int(effects.get(key) or 0)
        for key in effects.scan_iter("effect:*")
    }
    completed = [i for i, (kind, _) in enumerate(outcomes) if kind == "completed"]
    failed = [(i, err) for i, (kind, err) in enumerate(outcomes) if kind == "failed"]

    # No operation's side effect ran twice, whichever instance took which retry.
    assert all(count == 1 for count in counts.values()), counts
    # Every flow ended: completed, or failed with a typed error (never hung, never raw).
    assert len(completed) + len(failed) == FLOWS
    assert all(isinstance(err, MrtrError) for _, err in failed)
    for i in completed:
        text = outcomes[i][1]["content"][0]["text"]
        assert text == f"redeemed op-{i} (1)"
        assert counts[f"op-{i}"] == 1
    # The flows held until after the kill sent round 2 with one instance gone: nginx moved
    # those requests on, so they completed.
    assert all(outcomes[i][0] == "completed" for i in range(HELD_FROM, FLOWS)), [
        (i, outcomes[i][1]) for i in range(HELD_FROM, FLOWS) if outcomes[i][0] != "completed"]
    # Only rounds in flight on the victim when it died can fail (their state was claimed);
    # there are never more in flight than the client's connections.
    assert len(failed) <= MAX_CONNECTIONS, failed
    # nginx really sent requests to the victim, and after the kill moved requests it had
    # sent there on to another instance (the upstream list of one log line names both).
    log = cluster.access_log.read_text()
    victim_addr = cluster.upstreams[1]
    assert f"upstream={victim_addr} " in log
    assert re.search(rf"upstream={re.escape(victim_addr)}, \S+", log), "no request moved on"
