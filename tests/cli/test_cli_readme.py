"""The README's promises, checked: its two commands, its code blocks, its state diagram.

The demo command is run as written after its install steps (which the existing virtualenv
already did: tests never recreate it); ``mrtr call`` is run against ``examples/deploy.py``
served by ``mrtr serve``; the README's Python blocks are executed; the driver block must be
the code of ``examples/driver_sync.py``, which is run too. Every ``mrtr`` line of the README and
the deployment guide names only options its command takes, and the operators' key ring and
nginx lines are run as written.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import StderrLines
from mrtr_cli.keys import new_ring_data, write_ring
from mrtr_cli.processes import ServerProcess, serve_argv

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent  # the virtualenv the tests run in
# A safety net for commands that take a second or two: only a hang waits this long.
TIMEOUT = 120


def block_after(marker: str) -> str:
    """The first fenced code block after ``<!-- marker -->``."""
    match = re.search(rf"<!-- {re.escape(marker)} -->\s*```\w*\n(.*?)```", README, re.S)
    assert match, f"README has no block after <!-- {marker} -->"
    return match.group(1)


def mrtr(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``mrtr ARGS``; it reads ``stdin`` (never this process's stdin, which may be a terminal)."""
    return subprocess.run([str(BIN / "mrtr"), *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=TIMEOUT, check=False)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``examples/deploy.py`` served by ``mrtr serve`` (its own process); yields the URL."""
    tmp = tmp_path_factory.mktemp("served")
    ring = tmp / "ring.json"
    write_ring(ring, new_ring_data())
    instance = ServerProcess("deploy", serve_argv("examples/deploy.py:app", keys=ring),
                             log=tmp / "serve.log", cwd=ROOT)
    try:
        yield instance.wait_ready(TIMEOUT)
    finally:
        instance.stop()


# --- the two commands ----------------------------------------------------------------------


def test_readme_has_exactly_two_commands() -> None:
    assert re.findall(r"<!-- readme-command: (\w+) -->", README) == ["demo", "tests"]
    assert block_after("readme-command: tests").strip() == "bash scripts/test.sh"
    assert (ROOT / "scripts" / "test.sh").is_file()


def test_demo_command_installs_what_the_demo_needs() -> None:
    steps = [s.strip() for s in block_after("readme-command: demo").strip().split("&&")]
    assert steps[0] == "python3 -m venv .venv"
    install = shlex.split(steps[1])
    assert install[:3] == [".venv/bin/pip", "install", "-e"]
    extras = re.fullmatch(r"\.(?:\[([\w,]+)\])?", install[3])
    assert extras, install[3]
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for extra in (extras.group(1) or "").split(","):
        if extra:
            assert extra in declared["optional-dependencies"]
    assert steps[2] == ".venv/bin/mrtr demo"


def test_demo_runs_one_flow_across_two_instances() -> None:
    step = block_after("readme-command: demo").strip().split("&&")[-1].strip()
    argv = shlex.split(step)
    assert argv[0] == ".venv/bin/mrtr"
    done = mrtr(*argv[1:])
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"instance A  http://127\.0\.0\.1:\d+/mcp", out)
    assert re.search(r"instance B  http://127\.0\.0\.1:\d+/mcp", out)
    assert "balancer: request id 1 (tools/call) → instance A, HTTP 200" in out
    assert re.search(r"round 1 ← input_required from instance A: confirm_deploy \(form\), "
                     r"change_ticket \(form\); requestState \d+ bytes", out)
    assert "balancer: request id 2 (tools/call) → instance B, HTTP 200" in out
    assert "round 2 → request id 2 (inputResponses + requestState echoed)" in out
    assert "round 2 ← complete from instance B" in out
    assert "Deployed 1.4.2 to production under change ticket demo-ticket." in out
    assert "Round 1 was served by instance A and round 2 by instance B" in out


def test_call_answers_from_a_file_against_mrtr_serve(served: str, tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"confirm_deploy": {"confirm": True},
                                   "change_ticket": {"ticket": "CHG-7"}}))
    done = mrtr("call", served, "deploy_production", "--arg", "version=2.0.0",
                "--answers", str(answers))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Deployed 2.0.0 to production under change ticket CHG-7.\n"
    assert "round 1 ← input_required: confirm_deploy (form), change_ticket (form)" in done.stderr
    assert "round 2 ← complete" in done.stderr


def test_call_declined_in_answers_file_reports_the_tool_error(served: str,
                                                              tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"confirm_deploy": {"action": "decline"},
                                   "change_ticket": {"action": "cancel"}}))
    done = mrtr("call", served, "deploy_production", "--json", '{"version": "2.0.0"}',
                "--answers", str(answers))
    assert done.returncode == 3
    assert "Deployment of 2.0.0 was not confirmed." in done.stdout


def test_call_prompts_on_stdin_when_interactive(served: str) -> None:
    typed = "\n".join(["maybe", "y", "a", "", "CHG-9", "a"]) + "\n"
    done = mrtr("call", served, "deploy_production", "--arg", "version=3.1",
                "--interactive", "--raw", stdin=typed)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["content"][0]["text"] == (
        "Deployed 3.1 to production under change ticket CHG-9.")
    assert "answer y or n" in done.stderr
    assert "this field is required" in done.stderr


def test_interrupting_an_open_prompt_ends_the_command_at_once(served: str) -> None:
    # Ctrl-C while the person has a form open: the command says so and ends, although the
    # read of the terminal (stdin stays open here) can never be stopped.
    proc = subprocess.Popen([str(BIN / "mrtr"), "call", served, "deploy_production", "--arg",
                             "version=4", "--interactive"], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    shown = StderrLines(proc)
    try:
        shown.wait_for("field(s)", TIMEOUT)  # the first form is on screen: stdin is being read
        proc.send_signal(signal.SIGINT)
        assert proc.wait(TIMEOUT) == 130
        shown.wait_for_end(TIMEOUT)
        text = shown.text
        assert "interrupted" in text
        assert "Fatal Python error" not in text and "Traceback" not in text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdin is not None
        proc.stdin.close()


def test_call_without_answers_in_a_script_stops_cleanly(served: str) -> None:
    done = mrtr("call", served, "deploy_production", "--arg", "version=1")
    assert done.returncode == 1
    assert "nobody is at a terminal" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["call", "prompt", "read"])
def test_readme_synopsis_matches_the_commands_usage(
    command: str, capsys: pytest.CaptureFixture[str],
) -> None:
    # The README's line for a command is what its --help shows: the same positionals and
    # the same option placeholders.
    from mrtr_cli.main import main

    line = re.search(rf"^mrtr {command} (URL \S+)(.*?)(?:#|$)", README, re.M)
    assert line, f"README has no synopsis of mrtr {command}"
    url, target = line.group(1).split()
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    usage = " ".join(capsys.readouterr().out.split("\n\n")[0].split())
    assert usage.endswith(f" [{url}] {target}"), usage
    for option in re.findall(r"\[(--[a-z-]+) ([^]]+)\]", line.group(2)):
        metavar = option[1].replace(":=JSON", "=VALUE")  # KEY:=JSON is --arg's other form
        assert f"[{option[0]} {metavar}]" in usage, (option, usage)


def command_lines(text: str) -> list[str]:
    """Every ``mrtr`` command line of the ``sh`` blocks of ``text``: continuations (after a
    backslash, or indented) joined, trailing comments and a leading ``.venv/bin/`` removed,
    ``$PWD`` read as ``/srv``."""
    found: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        ours = False
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+# .*$", "", line).replace("$PWD", "/srv")
            if line.startswith(" "):
                if ours:
                    found[-1] += line
                continue
            line = line.removeprefix(".venv/bin/")
            ours = line.startswith("mrtr ")
            if ours:
                found.append(line)
    return [" ".join(line.split()) for line in found]


DOCUMENTED_LINES = command_lines(README) + command_lines(
    (ROOT / "deploy" / "README.md").read_text(encoding="utf-8"))


def command_parser(words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser of the (sub)command ``words`` start with, and the words after it."""
    from mrtr_cli.main import build_parser

    parser = build_parser()
    while True:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions or not words or words[0] not in actions[0].choices:
            return parser, words
        parser, words = actions[0].choices[words[0]], words[1:]


@pytest.mark.parametrize("line", DOCUMENTED_LINES)
def test_every_documented_command_line_names_real_options(line: str) -> None:
    # Each option a README shows is one the command takes; a line without placeholders
    # (URL, [--opt X], ...) parses as it is.
    parser, rest = command_parser(shlex.split(line)[1:])
    assert parser.prog != "mrtr", line
    known = {flag for action in parser._actions for flag in action.option_strings}
    for option in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", " ".join(rest)):
        assert option in known, (option, line)
    if not re.search(r"\.\.\.|\[|\b[A-Z]{3,}\b|\bFILE\.py", line):
        parser.parse_args(rest)


def test_operators_key_ring_and_nginx_lines_run(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # "For operators": the key ring and the nginx config, run as written.
    from mrtr_cli.main import main

    block = re.search(r"## For operators.*?```sh\n(.*?)```", README, re.S)
    assert block
    lines = [line for line in command_lines(block.group(0))
             if line.startswith(("mrtr keys", "mrtr nginx-conf"))]
    assert len(lines) == 2
    monkeypatch.chdir(tmp_path)
    for line in lines:
        assert main(shlex.split(line.replace("/srv", str(tmp_path)))[1:]) == 0, line
    assert (tmp_path / "ring.json").stat().st_mode & 0o777 == 0o600
    conf = (tmp_path / "nginx.conf").read_text(encoding="utf-8")
    for port in (8001, 8002, 8003):
        assert f"server 127.0.0.1:{port} max_fails=1" in conf
    assert "listen 127.0.0.1:8080;" in conf
    assert f"pid {tmp_path}/nginx-run/nginx.pid;" in conf


def test_readme_names_every_exit_status_of_the_command() -> None:
    from mrtr_cli.calls import EXIT_FAILED, EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE
    from mrtr_cli.main import EXIT_INTERRUPTED

    sentence = re.search(r"^Exit status: (.*?)\.$", README, re.M | re.S)
    assert sentence, "README has no 'Exit status:' sentence"
    named = {int(n) for n in re.findall(r"(?<![\w-])(\d+) ", sentence.group(1))}
    assert named == {EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_TOOL_ERROR, EXIT_INTERRUPTED}


# --- code blocks -------------------------------------------------------------------------------


def test_driver_block_is_the_example_driver_and_the_example_runs() -> None:
    source = (ROOT / "examples" / "driver_sync.py").read_text(encoding="utf-8")
    assert block_after("readme-driver") in source
    done = subprocess.run([sys.executable, "examples/driver_sync.py"], cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    assert "Deployed 1.4.2 to production under change ticket CHG-1234." in done.stdout
    assert "'inputResponses'" in done.stdout and "'requestState'" in done.stdout


def test_simulator_block_runs() -> None:
    namespace: dict[str, object] = {}
    exec(compile(block_after("readme-python: sim"), "README.md:sim", "exec"), namespace)
    report: Any = namespace["report"]
    assert report.ok is True


@pytest.mark.parametrize("block", ["sync", "trio"])
def test_client_block_runs_against_a_served_app(served: str, block: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code = block_after(f"readme-python: {block}")
    assert "http://127.0.0.1:8000/mcp" in code
    exec(compile(code.replace("http://127.0.0.1:8000/mcp", served), f"README.md:{block}",
                 "exec"), {})
    out = capsys.readouterr().out
    assert "Deployed 1.4.2 to production under change ticket CHG-1234." in out


def test_manual_mode_block_runs_against_a_served_app(
    served: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # No handler at all: the form capability comes from capabilities, the answers from
    # resume on the saved data.
    code = block_after("readme-python: manual")
    assert "http://127.0.0.1:8000/mcp" in code
    exec(compile(code.replace("http://127.0.0.1:8000/mcp", served), "README.md:manual",
                 "exec"), {})
    out = capsys.readouterr().out
    assert "asked: change_ticket, confirm_deploy" in out
    assert "Deployed 1.4.2 to production under change ticket CHG-1234." in out


def test_asyncio_client_is_the_trio_block_with_asyncio_names(
    served: str, capsys: pytest.CaptureFixture[str],
) -> None:
    # "asyncio looks the same with mrtr_asyncio and asyncio.run": the trio block, renamed.
    code = block_after("readme-python: trio")
    for old, new in (("import trio\n", "import asyncio\n"), ("mrtr_trio", "mrtr_asyncio"),
                     ("trio.run(main)", "asyncio.run(main())"),
                     ("http://127.0.0.1:8000/mcp", served)):
        assert old in code, old
        code = code.replace(old, new)
    assert "trio" not in code
    exec(compile(code, "README.md:asyncio", "exec"), {})
    out = capsys.readouterr().out
    assert "Deployed 1.4.2 to production under change ticket CHG-1234." in out


def test_deploy_excerpt_is_taken_from_the_example() -> None:
    # Every line of the excerpt (less its trailing comments and the "..." that stands for the
    # rest) is a line of examples/deploy.py, in the same order.
    source = (ROOT / "examples" / "deploy.py").read_text(encoding="utf-8").splitlines()
    excerpt = [re.sub(r"\s+# [^'\"]*$", "", line)
               for line in block_after("readme-excerpt: examples/deploy.py").splitlines()
               if line.strip() not in ("", "...")]
    assert excerpt
    at = 0
    for line in excerpt:
        assert line in source[at:], f"not in examples/deploy.py (after line {at}): {line!r}"
        at = source.index(line, at) + 1


def test_state_diagram_is_generated_from_the_transition_table() -> None:
    done = subprocess.run([sys.executable, "scripts/state_diagram.py", "--check", "README.md"],
                          cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    from mrtr_core.client.states import TRANSITIONS

    for (source, trigger), target in TRANSITIONS.items():
        label = trigger.label.replace(":", " -")
        line = re.search(rf"^    {source.name} --> {target.name}: (.*)$", README, re.M)
        assert line and label in line.group(1), (source, trigger, target)
