"""The other subcommands: keys, state inspect, sim, serve (workers, stdio), the demo balancer."""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shlex
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import ROOT, START_TIMEOUT, StderrLines, cli
from mrtr_cli.balancer import Backend, Balancer
from mrtr_cli.keys import (
    KeyFileError,
    load_ring,
    new_ring_data,
    ring_env_value,
    ring_from_data,
    ring_from_environment,
    write_ring,
)
from mrtr_cli.main import build_parser, main
from mrtr_cli.processes import InstanceError, ServerProcess, serve_argv
from mrtr_cli.serve import AppLoadError, load_app

from mrtr_core.state import Binding, StateCodec, digest_arguments

KEY = base64.b64encode(b"k" * 32).decode()
OTHER = base64.b64encode(b"o" * 32).decode()
NOW = 1_800_000_000.0


# --- keys ----------------------------------------------------------------------------------------


def test_key_ring_file_forms() -> None:
    short = ring_from_data({"old": OTHER, "new": KEY})
    assert short.active == "new" and short.ids == {"old", "new"}
    long = ring_from_data({"active": "old", "keys": {"old": OTHER, "new": KEY}})
    assert long.active == "old"
    exported = json.loads(ring_env_value(long))
    assert list(exported) == ["new", "old"]  # the sealing key last, as MRTR_KEYS wants


@pytest.mark.parametrize(("data", "fragment"), [
    ({}, "expected a JSON object"),
    ({"k": "not base64!"}, "not base64"),
    # Text that is not base64 is not decoded by dropping what is not in the alphabet: a
    # passphrase would become a "key" of 32 bytes with a passphrase's strength.
    ({"k": "correct horse battery staple, the production passphrase"}, "not base64"),
    ({"k": KEY + " (rotated in May)"}, "not base64"),
    ({"k": KEY.replace("a", "a\n")}, "not base64"),
    ({"k": base64.b64encode(b"short").decode()}, "at least 32"),
    ({"active": 3, "keys": {"k": KEY}}, "'active' must name"),
])
def test_bad_key_rings_are_refused(data: Any, fragment: str) -> None:
    with pytest.raises(KeyFileError, match=fragment):
        ring_from_data(data)


def test_keys_new_writes_an_owner_only_ring(tmp_path: Path) -> None:
    path = tmp_path / "ring.json"
    assert main(["keys", "new", str(path), "--kid", "prod1"]) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    ring = load_ring(path)
    assert ring.active == "prod1" and len(ring.key("prod1")) == 32


def test_keys_new_never_writes_over_a_file_unless_forced(tmp_path: Path) -> None:
    # An existing ring is someone's live secret, and its mode may let others read it: it
    # is refused, and --force puts a fresh owner-only file in its place.
    path = tmp_path / "ring.json"
    path.write_text(json.dumps({"k1": OTHER}))
    path.chmod(0o644)
    assert main(["keys", "new", str(path)]) == 2
    assert load_ring(path).key("k1") == base64.b64decode(OTHER)  # untouched
    assert main(["keys", "new", str(path), "--force"]) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_ring(path).key("k1") != base64.b64decode(OTHER)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ring.json"]  # no temporary left


def test_keys_new_never_writes_through_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "ring.json"
    link.symlink_to(victim)
    assert main(["keys", "new", str(link)]) == 2
    assert main(["keys", "new", str(link), "--force"]) == 0
    assert victim.read_text() == "keep me"
    assert not link.is_symlink() and stat.S_IMODE(link.stat().st_mode) == 0o600


@pytest.mark.parametrize("text", [
    f'{{"k1": "{OTHER}", "k1": "{KEY}"}}',
    f'{{"active": "k1", "keys": {{"k1": "{OTHER}", "k1": "{KEY}"}}}}',
])
def test_a_ring_naming_a_key_twice_is_refused(tmp_path: Path, text: str) -> None:
    # Two rings pasted together for a rotation, both k1: JSON would keep only the last key.
    path = tmp_path / "ring.json"
    path.write_text(text)
    with pytest.raises(KeyFileError, match="'k1' appears twice"):
        load_ring(path)
    with pytest.raises(KeyFileError, match="'k1' appears twice"):
        ring_from_environment({"MRTR_KEYS": text})


# --- state inspect -------------------------------------------------------------------------------


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[Path, str]:
    ring_file = tmp_path / "ring.json"
    write_ring(ring_file, {"k1": KEY})
    codec = StateCodec(load_ring(ring_file), audience="deploy", nonce=lambda n: b"\x01" * n)
    binding = Binding(method="tools/call", target="deploy_production",
                      arguments_digest=digest_arguments({"version": "1.4.2"}))
    return ring_file, codec.seal({"plan": ["drain", "roll"]}, binding, NOW)


def inspect(ring: Path, token: str, *extra: str) -> list[str]:
    return ["state", "inspect", token, "--keys", str(ring), "--audience", "deploy",
            "--now", str(NOW + 5), *extra]


BOUND = ["--method", "tools/call", "--target", "deploy_production",
         "--arguments", '{"version": "1.4.2"}']


def test_state_inspect_verifies_and_shows_the_payload(sealed: tuple[Path, str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    ring, token = sealed
    assert main(inspect(ring, token, *BOUND)) == 0
    out = capsys.readouterr().out
    assert "valid" in out and "binding matches" in out
    assert "tools/call deploy_production" in out
    assert "k1" in out and "2027-01-15T08:00:00+00:00" in out  # issued at NOW
    assert '"plan"' in out and '"drain"' in out


@pytest.mark.parametrize(("change", "reason"), [
    (["--audience", "other"], "binding_mismatch"),
    (["--arguments", '{"version": "9"}'], "binding_mismatch"),
    (["--now", str(NOW + 10_000)], "expired"),
])
def test_state_inspect_rejects(sealed: tuple[Path, str], capsys: pytest.CaptureFixture[str],
                               change: list[str], reason: str) -> None:
    ring, token = sealed
    assert main(inspect(ring, token, *BOUND, *change)) == 1
    assert f"rejected: {reason}" in capsys.readouterr().err


def test_state_inspect_rejects_a_tampered_token(sealed: tuple[Path, str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    ring, token = sealed
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    assert main(inspect(ring, flipped, *BOUND)) == 1
    assert "rejected:" in capsys.readouterr().err


def test_state_inspect_without_binding_shows_the_sealed_binding_digest(
        sealed: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    ring, token = sealed
    assert main(inspect(ring, token)) == 0
    out = capsys.readouterr().out
    assert "binding not checked" in out
    assert "binding digest" in out


def test_state_inspect_without_binding_still_rejects_a_tampered_token(
        sealed: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    ring, token = sealed
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    assert main(inspect(ring, flipped)) == 1
    assert "rejected:" in capsys.readouterr().err


# --- sim -----------------------------------------------------------------------------------------


def test_sim_runs_a_seeded_campaign_reproducibly(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sim", "--seed", "11", "--flows", "60", "--faults", "all"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert "mrtr simulation: seed=11 flows=60" in first
    assert "invariants: all held" in first
    assert main(argv) == 0
    assert capsys.readouterr().out == first


def test_sim_refuses_unknown_faults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--faults", "meteor=1"]) == 2
    assert "unknown fault 'meteor'" in capsys.readouterr().err


# --- serve ---------------------------------------------------------------------------------------


def test_load_app_reports_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(AppLoadError, match="no such file"):
        load_app(str(tmp_path / "nope.py"))
    bad = tmp_path / "bad.py"
    bad.write_text("app = 3\n")
    with pytest.raises(AppLoadError, match=r"is not an mrtr_core\.app\.App"):
        load_app(f"{bad}:app")
    with pytest.raises(AppLoadError, match="has no attribute 'other'"):
        load_app(f"{bad}:other")


def answers_file(tmp_path: Path) -> Path:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"confirm_deploy": {"confirm": True},
                                "change_ticket": {"ticket": "CHG-1"}}))
    return path


def test_serve_workers_run_on_consecutive_ports_and_stop_together(
    tmp_path: Path, free_ports: Callable[..., int]
) -> None:
    ring = tmp_path / "ring.json"
    write_ring(ring, new_ring_data())
    base = free_ports(2)
    argv = [*serve_argv("examples/deploy.py:app", port=base, keys=ring), "--workers", "2"]
    parent = ServerProcess("workers", argv, log=tmp_path / "serve.log", cwd=ROOT)
    try:
        # Each worker's ready line, passed on by the parent, is the readiness signal; a
        # worker that exits first ends the parent at once (see the next test).
        urls = sorted(parent.wait_listening(2, START_TIMEOUT))
        assert urls == [f"http://127.0.0.1:{base}/mcp", f"http://127.0.0.1:{base + 1}/mcp"]
        for url in urls:
            done = cli("call", url, "deploy_production", "--arg", "version=1",
                       "--answers", str(answers_file(tmp_path)))
            assert done.returncode == 0, done.stderr
        os.kill(parent.pid, signal.SIGTERM)
        assert parent.proc.wait(START_TIMEOUT) == 0
    finally:
        parent.stop()
    for url in urls:
        port = int(url.split(":")[2].split("/")[0])
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, "worker still listening"


def test_serve_workers_stop_at_once_when_one_cannot_listen(
    tmp_path: Path, free_ports: Callable[..., int]
) -> None:
    ring = tmp_path / "ring.json"
    write_ring(ring, new_ring_data())
    base = free_ports(2)
    with socket.create_server(("127.0.0.1", base + 1)):  # the second worker's port is taken
        argv = [*serve_argv("examples/deploy.py:app", port=base, keys=ring), "--workers", "2"]
        parent = ServerProcess("workers", argv, log=tmp_path / "serve.log", cwd=ROOT)
        try:
            with pytest.raises(InstanceError, match=r"exited \(1\) before listening"):
                parent.wait_listening(2, START_TIMEOUT)
            assert parent.proc.wait(START_TIMEOUT) == 1
        finally:
            parent.stop()
    log = (tmp_path / "serve.log").read_text()
    assert f"cannot listen on 127.0.0.1:{base + 1}: Address already in use" in log
    assert f"the worker for port {base + 1}" in log and "stopping the others" in log
    assert "Traceback" not in log
    with socket.socket() as probe:  # the first worker, which did listen, was stopped
        assert probe.connect_ex(("127.0.0.1", base)) != 0, "worker still listening"


def test_serve_reports_an_address_it_cannot_listen_on(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        for runtime in ("sync", "trio", "asyncio"):
            done = cli("serve", "examples/deploy.py:app", "--port", str(port),
                       "--runtime", runtime)
            assert done.returncode == 1, (runtime, done.stderr)
            assert f"mrtr serve: cannot listen on 127.0.0.1:{port}: " in done.stderr, runtime
            assert "Traceback" not in done.stderr, runtime


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["call", "deploy_production"])
    assert info.value.code == 2
    assert "give the server URL" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["call", "http://x/mcp", "t", "--arg", "novalue"])
    assert "expected KEY=VALUE or KEY:=JSON" in capsys.readouterr().err


TOO_MANY_DIGITS = "9" * 5000  # more than sys.get_int_max_str_digits() (4300)
TOO_DEEP = "[" * 20_000 + "]" * 20_000  # deeper than the interpreter recurses


@pytest.mark.parametrize(("value", "problem"), [
    ("{", "Expecting property name"),
    (TOO_MANY_DIGITS, "a number has more than 4300 digits"),
    (TOO_DEEP, "nested too deeply"),
])
@pytest.mark.parametrize("option", ["--arg", "--json"])
def test_unreadable_json_arguments_are_usage_errors(
    option: str, value: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A number too long for Python's int, or nesting deeper than it recurses, printed a
    # traceback instead of saying what was wrong.
    given = f"n:={value}" if option == "--arg" else value
    with pytest.raises(SystemExit) as info:
        main(["call", "http://127.0.0.1:1/mcp", "t", option, given])
    assert info.value.code == 2
    assert problem in capsys.readouterr().err


def test_a_ring_too_deep_or_too_long_to_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ring.json"
    for text, problem in [(TOO_DEEP, "nested too deeply"),
                          ('{"k1": ' + TOO_MANY_DIGITS + "}", "more than 4300 digits")]:
        path.write_text(text)
        with pytest.raises(KeyFileError, match=f"not JSON \\(.*{problem}"):
            load_ring(path)
        with pytest.raises(KeyFileError, match=problem):
            ring_from_environment({"MRTR_KEYS": text})


def _commands(parser: argparse.ArgumentParser,
              words: tuple[str, ...] = ()) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command of ``mrtr`` (a parser without subcommands: ``call``, ``keys new``...)."""
    groups = [action for action in parser._actions
              if isinstance(action, argparse._SubParsersAction)]
    if not groups:
        yield " ".join(words), parser
    for group in groups:
        for name, child in group.choices.items():
            yield from _commands(child, (*words, name))


def test_every_option_is_explained_in_help_with_its_default() -> None:
    # --help is the reference a user reads: no option without a text, and an option that
    # takes a value it falls back on names that value.
    commands = dict(_commands(build_parser()))
    assert {"call", "serve", "keys new", "state inspect", "sim", "nginx-conf"} <= set(commands)
    unexplained = []
    for name, parser in commands.items():
        for action in parser._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS:
                continue
            option = f"mrtr {name} {action.option_strings[0]}"
            takes_value = action.nargs != 0
            if not action.help:
                unexplained.append(f"{option}: no help")
            elif takes_value and action.default is not None and "default" not in action.help:
                unexplained.append(f"{option}: default {action.default!r} not named")
    assert unexplained == []


# --- the demo's balancer -------------------------------------------------------------------------


@pytest.fixture
def backends() -> Iterator[list[Backend]]:
    servers = []
    for name in ("A", "B"):
        class Handler(BaseHTTPRequestHandler):
            who = name

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                body = self.who.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    yield [Backend(n, "127.0.0.1", int(s.server_address[1])) for n, s in zip("AB", servers)]
    for server in servers:
        server.shutdown()
        server.server_close()


def test_balancer_alternates_and_logs_each_request(backends: list[Backend]) -> None:
    import http.client

    with Balancer(backends) as balancer:
        conn = http.client.HTTPConnection("127.0.0.1", balancer.port)
        answers = []
        for request_id in range(1, 5):
            body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call"})
            conn.request("POST", "/mcp", body=body, headers={"Content-Type": "application/json"})
            answers.append(conn.getresponse().read().decode())
        conn.close()
    assert answers == ["A", "B", "A", "B"]
    assert [(h.request_id, h.backend, h.method, h.status) for h in balancer.hops] == [
        (1, "A", "tools/call", 200), (2, "B", "tools/call", 200),
        (3, "A", "tools/call", 200), (4, "B", "tools/call", 200)]


def test_balancer_logs_no_id_from_a_body_the_server_would_refuse(
    backends: list[Backend],
) -> None:
    import http.client

    # Duplicate member names: json.loads keeps the last, the server's decoder refuses the
    # body (a parse error), so no id or method is read from it; it is forwarded untouched.
    bodies = [b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "id": 2}',
              b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "method": "ping"}']
    with Balancer(backends) as balancer:
        conn = http.client.HTTPConnection("127.0.0.1", balancer.port)
        answers = []
        for body in bodies:
            conn.request("POST", "/mcp", body=body, headers={"Content-Type": "application/json"})
            answers.append(conn.getresponse().read().decode())
        conn.close()
    assert answers == ["A", "B"]
    assert [(h.request_id, h.backend, h.method, h.status) for h in balancer.hops] == [
        (None, "A", None, 200), (None, "B", None, 200)]


def test_balancer_answers_502_for_a_dead_backend() -> None:
    import http.client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = int(probe.getsockname()[1])
    with Balancer([Backend("gone", "127.0.0.1", dead)]) as balancer:
        conn = http.client.HTTPConnection("127.0.0.1", balancer.port)
        conn.request("POST", "/mcp", body=b"{}")
        assert conn.getresponse().status == 502
        conn.close()
    assert balancer.hops[0].status == 502


@pytest.mark.parametrize(("length", "status"), [
    ("x", 400), ("-1", 400), ("1_0", 400), ("\u00b2", 400), ("9" * 5000, 413)])
def test_balancer_refuses_a_content_length_that_is_not_digits_or_too_large(
        backends: list[Backend], length: str, status: int) -> None:
    import http.client

    with Balancer(backends) as balancer:
        conn = http.client.HTTPConnection("127.0.0.1", balancer.port)
        conn.putrequest("POST", "/mcp")
        conn.putheader("Content-Length", length.encode("latin-1"))
        conn.endheaders()
        assert conn.getresponse().status == status
        conn.close()
    assert balancer.hops == []


def test_demo_interactive_takes_the_persons_answers(tmp_path: Path) -> None:
    # One round asks two forms at once; the person answers them one after the other, in the
    # server's order (confirm_deploy, then change_ticket), whatever the handler threads do.
    done = cli("demo", "--interactive", "--version", "9.9", "--timeout", str(START_TIMEOUT),
               stdin="y\na\nCHG-55\na\n", env={"TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []  # a demo that succeeded keeps no logs
    assert "logs are kept" not in done.stdout
    assert "Deployed 9.9 to production under change ticket CHG-55." in done.stdout
    assert "Deploy 9.9 to production" in done.stderr  # the form was shown to the person
    assert done.stderr.index("input confirm_deploy") < done.stderr.index("input change_ticket")
    assert "round 2 ← complete from instance B" in done.stdout


def test_a_failed_demo_keeps_the_log_its_message_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    # The error quotes the end of an instance's log and names the file: the file must still
    # be there to read in full once the demo has ended; the key ring must not be.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    missing = tmp_path / "missing.py"
    assert main(["demo", "--app", f"{missing}:app", "--timeout", str(START_TIMEOUT)]) == 1
    out, err = capsys.readouterr()
    named = re.search(r"its log \((.+?)\):", err)
    assert named, err
    log = Path(named.group(1))
    assert f"{missing}: no such file" in log.read_text(encoding="utf-8")
    assert f"The instances' logs are kept in {log.parent}" in out
    assert sorted(p.name for p in log.parent.iterdir()) == ["instance-A.log", "instance-B.log"]


def test_a_stopped_instance_leaves_neither_its_pipe_nor_its_log_open(tmp_path: Path) -> None:
    # An instance that exits before listening, as the failed demo's do: once stopped, the
    # pipe from its stdout and its log file are closed, not left to the garbage collector.
    argv = [sys.executable, "-c", "import sys; sys.exit('no app here')"]
    instance = ServerProcess("exits", argv, log=tmp_path / "exits.log")
    try:
        with pytest.raises(InstanceError, match="no app here"):
            instance.wait_ready(START_TIMEOUT)
    finally:
        instance.stop()
    assert instance.proc.stdout is not None and instance.proc.stdout.closed
    assert instance._log_file.closed


def test_a_failed_demo_stops_its_instances_and_closes_their_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mrtr_cli.demo

    started: list[ServerProcess] = []

    def recorded(*args: Any, **kwargs: Any) -> ServerProcess:
        started.append(ServerProcess(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(mrtr_cli.demo, "ServerProcess", recorded)
    missing = tmp_path / "missing.py"
    assert main(["demo", "--app", f"{missing}:app", "--timeout", str(START_TIMEOUT)]) == 1
    assert [instance.name for instance in started] == ["A", "B"]
    for instance in started:
        assert instance.proc.returncode is not None
        assert instance.proc.stdout is not None and instance.proc.stdout.closed
        assert instance._log_file.closed


def test_prompt_and_read_commands_against_a_served_factory(tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"mood": {"mood": "sad"}, "pin": {"pin": 7}}))
    app = f"{ROOT / 'tests' / 'cli' / 'cli_app.py'}:make_app"  # a factory, called once
    instance = ServerProcess("cli-app", serve_argv(app), log=tmp_path / "serve.log", cwd=ROOT)
    try:
        url = instance.wait_ready(START_TIMEOUT)
        done = cli("prompt", url, "story", "--arg", "hero=Ada", "--answers", str(answers))
        assert done.returncode == 0, done.stderr
        assert "A sad story about Ada" in done.stdout
        done = cli("read", url, "memo://note", "--answers", str(answers))
        assert done.returncode == 0, done.stderr
        assert "memo://note" in done.stdout and "note unlocked with 7" in done.stdout
    finally:
        instance.stop()


def test_prompt_arguments_must_be_strings(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["prompt", "http://127.0.0.1:1/mcp", "story", "--arg", "n:=3"])
    assert "prompt arguments are strings" in capsys.readouterr().err


def test_call_mirrors_x_mcp_header_arguments_over_http(tmp_path: Path) -> None:
    # The transport learns which arguments become Mcp-Param-* headers from tools/list: the
    # command lists the tools first (quietly), or the server refuses the call (-32020).
    app = f"{ROOT / 'examples' / 'conformance_server.py'}:app"
    instance = ServerProcess("conformance", serve_argv(app), log=tmp_path / "serve.log",
                             cwd=ROOT)
    try:
        url = instance.wait_ready(START_TIMEOUT)
        done = cli("call", url, "test_header_param", "--arg", "region=eu")
        assert done.returncode == 0, done.stderr
        assert "region=eu" in done.stdout
        assert "tools/list" not in done.stderr  # the listing is no round of the call
    finally:
        instance.stop()


@pytest.mark.parametrize(("argv", "fragment"), [
    (["call", "http://127.0.0.1:1/mcp", "t", "--max-rounds", "0"], "--max-rounds"),
    (["call", "http://127.0.0.1:1/mcp", "t", "--timeout", "nan"], "--timeout"),
    (["call", "http://127.0.0.1:1/mcp", "t", "--timeout", "-1"], "--timeout"),
    (["call", "http://127.0.0.1:1/mcp", "t", "--timeout", "1e10"], "up to 1e+09"),
    (["demo", "--timeout", "nan"], "--timeout"),
    (["demo", "--timeout", "0"], "--timeout"),
    (["demo", "--timeout", "inf"], "up to 1e+09"),
    (["demo", "--timeout", "1e10"], "up to 1e+09"),
    (["call", "--stdio", "'unterminated", "t"], "--stdio"),
    (["call", "http://127.0.0.1:1/mcp", "t", "--sampling-command", "'x"], "--sampling-command"),
    (["call", "notaurl", "t"], "URL"),
    (["serve", "app.py", "--port", "70000"], "not a port"),
    (["call", "http://127.0.0.1:1/mcp"], "give the server URL and then the tool"),
    (["call", "--stdio", "cmd", "http://127.0.0.1:1/mcp", "t"], "with --stdio give only"),
    (["call", "http://127.0.0.1:1/mcp", "t", "extra"], "unrecognized arguments: extra"),
    (["prompt", "http://127.0.0.1:1/mcp", "p", "--json", "[]"], "a JSON object"),
    (["read", "http://127.0.0.1:1/mcp", "memo://x", "--max-rounds", "0"], "--max-rounds"),
    (["serve", "app.py", "--port", "70000"], "not a port"),
    (["keys", "new", "--kid", "a.b"], "key id"),
    (["keys", "new", "a.json", "b.json"], "unrecognized arguments: b.json"),
])
def test_bad_command_lines_are_usage_errors(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert fragment in err
    # The usage of the command that was mistyped, not of mrtr as a whole.
    command = " ".join(argv[:2] if argv[0] == "keys" else argv[:1])
    assert err.startswith(f"usage: mrtr {command} "), err
    assert f"\nmrtr {command}: error: " in err


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_root_must_be_an_existing_folder(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A root is a folder the client offers the server to read: a typo is refused before
    # anything is sent (the URL below would fail to connect with exit 1).
    bad = tmp_path / "nowhere"
    if kind == "file":
        bad.write_text("not a folder")
    with pytest.raises(SystemExit) as exited:
        main(["call", "http://127.0.0.1:1/mcp", "where", "--root", str(tmp_path),
              "--root", str(bad)])
    assert exited.value.code == 2
    problem = "no such folder" if kind == "missing" else "not a folder"
    assert f"mrtr call: error: --root {bad}: {problem}" in capsys.readouterr().err


@pytest.mark.parametrize(("extra", "fragment"), [
    (["--method", "tools/call", "--target", "x", "--arguments", "nope"], "--arguments: not JSON"),
    (["--method", "tools/call", "--target", "x", "--arguments", TOO_MANY_DIGITS],
     "--arguments: not JSON (a number has more than 4300 digits)"),
    (["--principal", "alice"], "give --method and --target too"),
])
def test_state_inspect_refuses_binding_options_it_cannot_use(
    sealed: tuple[Path, str], extra: list[str], fragment: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ring, token = sealed
    assert main(inspect(ring, token, *extra)) == 2
    assert fragment in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "status"), [
    (["--upstream", "127.0.0.1", "--prefix", "/p"], 2),  # no port
    (["--upstream", "127.0.0.1:8001", "--prefix", "/p q"], 2),  # nginx cannot read the space
])
def test_nginx_conf_reports_bad_settings_without_a_traceback(
    argv: list[str], status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["nginx-conf", *argv]) == status
    assert capsys.readouterr().err.startswith("mrtr nginx-conf: ")


def test_nginx_conf_on_stdout_prepares_the_prefix_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "run"
    assert main(["nginx-conf", "--upstream", "127.0.0.1:8001", "--prefix", str(prefix)]) == 0
    assert f"{prefix}" in capsys.readouterr().out
    assert (prefix / "tmp" / "client_body").is_dir()  # nginx will not start without it


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_serve_stdio_stops_on_ctrl_c_as_an_interrupt(runtime: str) -> None:
    argv = [sys.executable, "-m", "mrtr_cli", "serve", "examples/deploy.py:app", "--stdio",
            "--runtime", runtime]
    proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "deploy_production", "arguments": {"version": "1"}, "_meta": meta}}
        proc.stdin.write(json.dumps(call).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1  # a handler ran: serving
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=START_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert b"interrupted" in err and b"Traceback" not in err


def test_ctrl_c_during_a_call_to_a_stdio_server_says_interrupted_once() -> None:
    # A terminal's Ctrl-C signals its whole foreground process group: the command and, unless
    # it runs in a group of its own, the stdio server it started, whose stderr is the
    # command's. The command alone reports the interrupt, and its server still ends.
    server = f"{shlex.quote(sys.executable)} -m mrtr_cli serve examples/deploy.py:app --stdio"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mrtr_cli", "call", "--stdio", server, "deploy_production",
         "--arg", "version=4", "--interactive"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, start_new_session=True)  # its own group, which plays the terminal's
    shown = StderrLines(proc)
    try:
        # The server sent round 1 and the person has its form on screen.
        shown.wait_for("field(s)", START_TIMEOUT)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(START_TIMEOUT) == 130
        assert shown.wait_for_end(START_TIMEOUT)  # the server, sharing stderr, ended too
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdin is not None
        proc.stdin.close()
    text = shown.text
    assert text.count("interrupted") == 1, text
    assert "Traceback" not in text


def test_serve_with_a_redis_it_cannot_reach_stops_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Without the check it served, and failed every single-use round with -32603.
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    argv = ["serve", f"{ROOT / 'examples' / 'deploy.py'}:app", "--port", "0", "--redis",
            f"redis://127.0.0.1:{port}/0"]
    assert main(argv) == 1
    assert f"cannot use Redis at redis://127.0.0.1:{port}/0" in capsys.readouterr().err


@pytest.mark.parametrize("runtime", ["sync", "trio", "asyncio"])
def test_serve_builds_its_redis_clients_with_bounded_waits(
    runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without socket_timeout a Redis that stops answering held a single-use round for ever.
    import redis
    from mrtr_cli.serve import REDIS_TIMEOUT_S, _guard

    monkeypatch.setattr(redis.Redis, "ping", lambda self: True)  # no Redis is needed
    guard = _guard("redis://127.0.0.1:1/0", runtime)
    client = guard._sync._client if runtime == "trio" else guard._client
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (
        REDIS_TIMEOUT_S, REDIS_TIMEOUT_S)


def test_serve_help_names_the_redis_wait() -> None:
    from mrtr_cli.serve import REDIS_TIMEOUT_S

    serve = dict(_commands(build_parser()))["serve"]
    (redis_option,) = [a for a in serve._actions if "--redis" in a.option_strings]
    assert redis_option.help is not None
    assert redis_option.help.endswith(
        f"; its clients wait {REDIS_TIMEOUT_S:g} s to connect and for each reply")


OWN_CODEC_APP = """
from mrtr_core.app import App
from mrtr_core.state import KeyRing, StateCodec

app = App("own", "1", codec=StateCodec(KeyRing({"own": b"o" * 32}, active="own"),
                                       audience="own", nonce=lambda n: bytes(n)))
"""


def test_serve_warns_when_the_app_does_not_seal_with_the_ring_of_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the check --keys was ignored in silence by an app that builds its codec
    # otherwise: each instance sealed with its own key and refused the others' states.
    monkeypatch.delenv("MRTR_KEYS", raising=False)
    ring = tmp_path / "ring.json"
    write_ring(ring, new_ring_data())
    (tmp_path / "own.py").write_text(OWN_CODEC_APP)
    with socket.create_server(("127.0.0.1", 0)) as taken:  # serving stops after the checks
        port = str(taken.getsockname()[1])
        assert main(["serve", f"{tmp_path / 'own.py'}:app", "--port", port,
                     "--keys", str(ring)]) == 1
        warned = " ".join(capsys.readouterr().err.split())
        assert "the app does not seal requestState with the ring of --keys" in warned
        assert "MRTR_KEYS" in warned
        assert main(["serve", f"{ROOT / 'examples' / 'deploy.py'}:app", "--port", port,
                     "--keys", str(ring)]) == 1
        assert "does not seal" not in capsys.readouterr().err


SINGLE_USE_APP = OWN_CODEC_APP + """

@app.tool(single_use=True)
def redeem(ctx) -> str:
    return "redeemed"


@app.resource("memo://{name}", single_use=True)
def memo(ctx, uri, name):
    return name
"""


def test_serve_without_redis_warns_about_single_use_handlers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Without the warning it served in silence, and the client of a single-use tool learned
    # only after answering round 1 that round 2 cannot run without a replay guard.
    (tmp_path / "single.py").write_text(SINGLE_USE_APP)
    with socket.create_server(("127.0.0.1", 0)) as taken:  # serving stops after the checks
        port = str(taken.getsockname()[1])
        assert main(["serve", f"{tmp_path / 'single.py'}:app", "--port", port]) == 1
        warned = " ".join(capsys.readouterr().err.split())
        assert "no --redis: the single-use tool redeem, resource memo://{name} cannot" in warned
        assert main(["serve", f"{ROOT / 'examples' / 'deploy.py'}:app", "--port", port]) == 1
        assert "single-use" not in capsys.readouterr().err
