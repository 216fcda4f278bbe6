"""The ``mrtr`` command.

::

    mrtr call URL TOOL [--arg KEY=VALUE ...] [--json OBJECT]   call a tool, answering rounds here
    mrtr prompt URL NAME [--arg KEY=VALUE ...]                  get a prompt
    mrtr read URL URI                                           read a resource
    mrtr serve FILE.py:APP [--host H] [--port P] ...            serve an app over HTTP or stdio
    mrtr demo [--interactive]                                   one flow across two instances
    mrtr state inspect TOKEN --keys FILE --audience A           open a requestState, show it
    mrtr sim --seed S --flows N [--faults ...]                  a simulator campaign
    mrtr keys new [FILE]                                        a fresh key ring
    mrtr nginx-conf --upstream H:P ... --listen P               an nginx config

``call``/``prompt``/``read`` take ``--stdio CMD`` instead of a URL to start a stdio server.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from mrtr_cli.answers import AnswersFileError, load_answers
from mrtr_cli.calls import (
    EXIT_FAILED,
    EXIT_USAGE,
    CallSpec,
    build_client,
    connect,
    explain,
    run_call,
)
from mrtr_cli.forms import Prompter
from mrtr_cli.inputs import Inputs, SamplingConfig, roots_from_paths
from mrtr_cli.jsoninput import JsonInputError, read_json
from mrtr_cli.keys import KeyFileError
from mrtr_cli.progress import RoundReporter
from mrtr_cli.terminal import pending_reads
from mrtr_core._checks import MAX_SECONDS, is_time_limit
from mrtr_core.client.limits import ClientLimits
from mrtr_core.errors import LocalProtocolError, MrtrError
from mrtr_core.wire.models import CALL_TOOL, GET_PROMPT, READ_RESOURCE, Root

__all__ = ["build_parser", "main"]


EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad command-line input (exit status 2)."""


def _parse_arg(text: str) -> tuple[str, Any]:
    """``k=v`` is the string ``v``; ``k:=v`` is the JSON value ``v``."""
    index = text.find("=")
    if index <= 0 or (index == 1 and text[0] == ":"):
        raise UsageError(f"--arg {text}: expected KEY=VALUE or KEY:=JSON")
    if text[index - 1] == ":":
        key, value = text[: index - 1], text[index + 1 :]
        try:
            return key, read_json(value)
        except JsonInputError as exc:
            raise UsageError(f"--arg {text}: the value after := must be JSON ({exc})") from exc
    return text[:index], text[index + 1 :]


def _arguments(args: argparse.Namespace) -> dict[str, Any] | None:
    arguments: dict[str, Any] = {}
    if args.json is not None:
        try:
            loaded = read_json(args.json)
        except JsonInputError as exc:
            raise UsageError(f"--json: not JSON ({exc})") from exc
        if not isinstance(loaded, dict):
            raise UsageError("--json: the arguments must be a JSON object")
        arguments.update(loaded)
    for item in args.arg or []:
        key, value = _parse_arg(item)
        arguments[key] = value
    if args.command == "prompt":
        bad = [k for k, v in arguments.items() if not isinstance(v, str)]
        if bad:
            raise UsageError(f"prompt arguments are strings; not: {', '.join(bad)}")
    return arguments if (arguments or args.json is not None) else None


def _kid(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", text):
        raise argparse.ArgumentTypeError("a key id is 1-32 characters of A-Za-z0-9_-")
    return text


def _add_client_options(p: argparse.ArgumentParser, *, what: str, what_help: str) -> None:
    # Two positionals, the first optional, read as ``[URL] TOOL``: "URL TOOL" fills both,
    # a lone "TOOL" (with --stdio) leaves the URL out.
    p.add_argument("url", nargs="?", metavar="URL",
                   help="the server's MCP endpoint, such as http://127.0.0.1:8000/mcp "
                        "(omit it with --stdio)")
    p.add_argument("target", metavar=what, help=what_help)
    p.add_argument("--stdio", metavar="CMD", help="start this command and talk to it over stdio")
    p.add_argument("--answers", metavar="FILE",
                   help="JSON answers: {key: {field: value}} or {key: {action, content}}")
    p.add_argument("--yes", "-y", action="store_true",
                   help="answer forms without asking: defaults, booleans true; accept URLs")
    p.add_argument("--interactive", action="store_true",
                   help="ask on stdin even when it is not a terminal")
    p.add_argument("--root", action="append", metavar="PATH",
                   help="offer this existing folder as a root (repeatable); roots are declared "
                        "only then")
    p.add_argument("--sampling-reply", metavar="TEXT", help="answer sampling requests with TEXT")
    p.add_argument("--sampling-command", metavar="CMD",
                   help="answer sampling requests with CMD's output (request JSON on stdin)")
    p.add_argument("--no-url-mode", action="store_true",
                   help="do not declare URL-mode elicitation")
    p.add_argument("--raw", action="store_true", help="print the final result as raw JSON")
    p.add_argument("--max-rounds", type=int, default=10, metavar="N",
                   help="most requests in one operation (default 10)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="time budget for the whole operation, at most 1e9 (default: none "
                        "while a person answers, 600 s otherwise)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mrtr``."""
    parser = argparse.ArgumentParser(
        prog="mrtr",
        description="MCP Multi Round-Trip Requests (protocol 2026-07-28) from the terminal.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    call = sub.add_parser("call", help="call a tool, answering its MRTR rounds here")
    _add_client_options(call, what="TOOL", what_help="the tool to call")
    call.add_argument("--arg", "-a", action="append", metavar="KEY=VALUE",
                      help="a tool argument, the string VALUE; KEY:=JSON gives a JSON value "
                           "(repeatable)")
    call.add_argument("--json", metavar="OBJECT", help="the tool arguments as one JSON object")

    prompt = sub.add_parser("prompt", help="get a prompt, answering its MRTR rounds here")
    _add_client_options(prompt, what="NAME", what_help="the prompt's name")
    prompt.add_argument("--arg", "-a", action="append", metavar="KEY=VALUE",
                        help="a prompt argument, the string VALUE (repeatable)")
    prompt.add_argument("--json", metavar="OBJECT",
                        help="the prompt arguments as one JSON object")

    read = sub.add_parser("read", help="read a resource, answering its MRTR rounds here")
    _add_client_options(read, what="URI", what_help="the resource's URI")

    from mrtr_cli import demo, nginx, serve, simcmd, statecmd
    from mrtr_cli import keys as keyscmd

    serve.add_parser(sub)
    demo.add_parser(sub)
    statecmd.add_parser(sub)
    simcmd.add_parser(sub)
    nginx.add_parser(sub)
    keys_parser = sub.add_parser("keys", help="key rings")
    keys_sub = keys_parser.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    new = keys_sub.add_parser("new", help="write a fresh one-key ring (JSON) to FILE or stdout")
    new.add_argument("file", nargs="?", metavar="FILE", help="where to write it (mode 0600)")
    new.add_argument("--kid", default="k1", type=_kid, help="the key id (default k1)")
    new.add_argument("--force", action="store_true", help="replace an existing FILE")
    new.set_defaults(func=lambda args, out, ui: keyscmd.cmd_new(args, out))
    _name_each_command(parser)
    return parser


def _name_each_command(parser: argparse.ArgumentParser) -> None:
    """Let every command (a parser without subcommands: ``call``, ``keys new``...) put itself
    in the parsed arguments as ``command_parser``, so that a usage error found after parsing
    shows that command's usage, as argparse does for the errors it finds itself."""
    commands = [action for action in parser._actions
                if isinstance(action, argparse._SubParsersAction)]
    if not commands:
        parser.set_defaults(command_parser=parser)
    for action in commands:
        for child in action.choices.values():
            _name_each_command(child)


def _roots(paths: Sequence[str]) -> tuple[Root, ...]:
    """The ``--root`` folders as roots; each must be a folder that exists, since a root is
    something the client offers the server to read (roots.mdx)."""
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.is_dir():
            problem = "not a folder" if path.exists() else "no such folder"
            raise UsageError(f"--root {raw}: {problem}")
    return roots_from_paths(paths)


def _run_client_command(args: argparse.Namespace, out: Console, ui: Console) -> int:
    url, target = args.url, args.target
    if args.stdio is not None and url is not None:
        raise UsageError("with --stdio give only the tool, prompt name or URI")
    if args.stdio is None and url is None:
        raise UsageError("give the server URL and then the tool, prompt name or URI")
    if args.sampling_reply is not None and args.sampling_command is not None:
        raise UsageError("--sampling-reply and --sampling-command exclude each other")
    if args.max_rounds < 1:
        raise UsageError("--max-rounds must be at least 1")
    if args.timeout is not None and not is_time_limit(args.timeout):
        raise UsageError(f"--timeout must be a positive number of seconds up to {MAX_SECONDS:g}")
    for option, command in (("--stdio", args.stdio), ("--sampling-command", args.sampling_command)):
        if command is not None:
            try:
                if not shlex.split(command):
                    raise UsageError(f"{option}: empty command")
            except ValueError as exc:
                raise UsageError(f"{option} {command!r}: {exc}") from None
    roots = _roots(args.root or [])
    method = {"call": CALL_TOOL, "prompt": GET_PROMPT, "read": READ_RESOURCE}[args.command]
    spec = CallSpec(method=method, target=target,
                    arguments=None if args.command == "read" else _arguments(args))
    answers = load_answers(args.answers) if args.answers else {}
    interactive = args.interactive or sys.stdin.isatty()
    sampling = None
    if args.sampling_reply is not None or args.sampling_command is not None:
        sampling = SamplingConfig(reply=args.sampling_reply, command=args.sampling_command)
    inputs = Inputs(
        console=ui,
        prompter=Prompter(ui, server=url or args.stdio) if interactive else None,
        answers=answers,
        auto=args.yes,
        roots=roots,
        sampling=sampling,
        url_mode=not args.no_url_mode,
    )
    person = interactive and not args.yes
    limits = ClientLimits(
        max_rounds=args.max_rounds,
        flow_timeout=args.timeout if args.timeout is not None else (None if person else 600.0),
        handler_timeout=None if person else 300.0,
    )
    reporter = RoundReporter(ui)
    try:
        transport = connect(url, args.stdio)
    except LocalProtocolError as exc:  # a malformed URL
        raise UsageError(str(exc)) from None
    except OSError as exc:  # --stdio CMD could not be started
        ui.print(explain(exc))
        return EXIT_FAILED
    with build_client(transport, inputs, on_event=reporter, limits=limits) as client:
        return run_call(client, spec, out=out, ui=ui, reporter=reporter, raw=args.raw)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mrtr``; returns the exit status (0 ok, 1 failed, 2 usage, 3 tool error,
    130 interrupted).

    As the process's command (``argv`` not given), it ends the process itself, without the
    interpreter's shutdown, after Ctrl-C or when a prompt the flow abandoned (a timeout) is
    still blocked reading the terminal. Input handler threads cannot be stopped, and an
    interrupt may have cut their bookkeeping short anywhere (in ``concurrent.futures``
    too): the shutdown would wait for them, or abort over the read that holds stdin.
    """
    status = _main(argv)
    if argv is None and (status == EXIT_INTERRUPTED or pending_reads()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, unrecognized = parser.parse_known_args(argv)
    command_parser: argparse.ArgumentParser = args.command_parser
    if unrecognized:
        command_parser.error(f"unrecognized arguments: {' '.join(unrecognized)}")
    out = Console(highlight=False, soft_wrap=True)
    ui = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        if args.command in ("call", "prompt", "read"):
            return _run_client_command(args, out, ui)
        return int(args.func(args, out, ui))
    except UsageError as exc:
        command_parser.error(str(exc))
    except (AnswersFileError, KeyFileError) as exc:
        ui.print(explain(exc))
        return EXIT_USAGE
    except MrtrError as exc:
        ui.print(explain(exc))
        return EXIT_FAILED
    except KeyboardInterrupt:
        ui.print("interrupted")
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
