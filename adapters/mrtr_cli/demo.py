"""``mrtr demo``: one MRTR flow whose rounds land on two different server instances.

Starts two ``mrtr serve`` instances of ``examples/deploy.py`` (child processes on free ports of
127.0.0.1, sharing a fresh key ring and nothing else), a round-robin balancer in front of them
(:mod:`mrtr_cli.balancer`, logging which instance takes each request), and a client that calls
``deploy_production``. Round 1 lands on one instance, round 2 on the other, and still
completes: the answers travel in ``inputResponses`` and the first instance's progress in the
sealed ``requestState``. The transcript shows each round (instance, request id, keys, state
size) and the result. ``--interactive`` lets the person answer the forms.

The instances log to a fresh temporary folder: it is removed when the demo succeeds, and kept
when it fails or is interrupted (the transcript says where), so that the log an error message
names is still there to read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from rich.console import Console
from rich.text import Text

from mrtr_cli.balancer import Backend, Balancer, Hop
from mrtr_cli.calls import EXIT_FAILED, EXIT_OK, build_client, connect, explain
from mrtr_cli.forms import Prompter
from mrtr_cli.inputs import Inputs
from mrtr_cli.keys import new_ring_data, write_ring
from mrtr_cli.processes import ServerProcess, serve_argv
from mrtr_cli.progress import RoundReporter
from mrtr_cli.render import print_result
from mrtr_core._checks import MAX_SECONDS, is_time_limit
from mrtr_core.client.limits import ClientLimits
from mrtr_core.errors import MrtrError

__all__ = ["add_parser", "default_app", "run_demo"]

NAMES: Final = ("A", "B")
TOOL: Final = "deploy_production"


def default_app() -> str:
    """``examples/deploy.py:app`` of the checkout this package runs from."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "examples" / "deploy.py"
        if candidate.is_file():
            return f"{candidate}:app"
    return "examples/deploy.py:app"


def _seconds(text: str) -> float:
    """``--timeout``: a positive, finite number of seconds that a wait can take."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not is_time_limit(seconds):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a positive number of seconds up to {MAX_SECONDS:g}")
    return seconds


def add_parser(sub: Any) -> None:
    """Register ``mrtr demo``."""
    p: argparse.ArgumentParser = sub.add_parser(
        "demo", help="one MRTR flow across two server instances behind a balancer",
        description="One MRTR flow across two server instances behind a balancer. The "
                    "instances log to a temporary folder, removed when the demo succeeds and "
                    "kept (its path is printed) when it fails or is interrupted.")
    p.add_argument("--interactive", action="store_true", help="answer the forms yourself")
    p.add_argument("--version", default="1.4.2", help="the version to deploy (default 1.4.2)")
    p.add_argument("--runtime", choices=("sync", "trio", "asyncio"), default="sync",
                   help="server adapter the instances use (default sync)")
    p.add_argument("--app", default=None, metavar="FILE.py:APP",
                   help="the app to serve (default examples/deploy.py)")
    p.add_argument("--timeout", type=_seconds, default=120.0, metavar="SECONDS",
                   help="seconds to wait for the instances to start, at most 1e9 (default 120; an "
                        "instance that exits first is reported at once)")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace, out: Console, ui: Console) -> int:
    """Run ``mrtr demo``."""
    return run_demo(out, interactive=args.interactive, version=args.version,
                    runtime=args.runtime, app=args.app or default_app(), timeout=args.timeout)


def run_demo(out: Console, *, interactive: bool = False, version: str = "1.4.2",
             runtime: str = "sync", app: str | None = None, timeout: float = 120.0) -> int:
    """The demo; returns the exit status (0 when the flow completed across both instances)."""
    app = app or default_app()
    out.print(Text("MRTR demo: one tools/call, two rounds, two server instances",
                   style="bold"))
    folder = Path(tempfile.mkdtemp(prefix="mrtr-demo-"))
    ring = folder / "ring.json"
    status = EXIT_FAILED
    try:
        # Each instance is stopped, and its log file closed, on every way out, even when
        # stopping another one is interrupted; only then are the logs removed or kept.
        with contextlib.ExitStack() as running:
            write_ring(ring, new_ring_data("demo"))
            instances = [
                running.enter_context(ServerProcess(
                    name, serve_argv(app, runtime=runtime, keys=ring),
                    log=folder / f"instance-{name}.log"))
                for name in NAMES
            ]
            urls = [instance.wait_ready(timeout) for instance in instances]
            for instance, url in zip(instances, urls, strict=True):
                out.print(f"  instance {instance.name}  {url}  (pid {instance.pid})")
            backends = []
            for instance, url in zip(instances, urls, strict=True):
                parts = urlsplit(url)
                backends.append(Backend(instance.name, parts.hostname or "127.0.0.1",
                                        parts.port or 80))
            path = urlsplit(urls[0]).path or "/"
            with Balancer(backends, on_hop=lambda hop: _print_hop(out, hop)) as balancer:
                out.print(f"  balancer    {balancer.url}{path}  (round robin: "
                          f"{', '.join(NAMES)}, {NAMES[0]}, ...)")
                out.print("  key ring    one fresh key, shared by both instances only\n")
                status = _call(out, balancer, f"{balancer.url}{path}", version, interactive)
                return status
    finally:
        _clean_up(out, folder, ring, keep_logs=status != EXIT_OK)


def _clean_up(out: Console, folder: Path, ring: Path, *, keep_logs: bool) -> None:
    """Remove the demo's folder, or only its key ring when the instances' logs are kept."""
    if not keep_logs:
        shutil.rmtree(folder, ignore_errors=True)
        return
    ring.unlink(missing_ok=True)
    out.print(f"The instances' logs are kept in {folder}")


def _print_hop(out: Console, hop: Hop) -> None:
    what = hop.method or hop.http_method
    out.print(Text(f"  balancer: request id {hop.request_id} ({what}) → instance {hop.backend}, "
                   f"HTTP {hop.status}", style="cyan"))


def _call(out: Console, balancer: Balancer, url: str, version: str, interactive: bool) -> int:
    def where(request_id: Any) -> str | None:
        for hop in reversed(balancer.hops):
            if hop.request_id == request_id:
                return f"instance {hop.backend}"
        return None

    reporter = RoundReporter(out, where=where)
    inputs = Inputs(
        console=out,
        prompter=Prompter(Console(stderr=True), server="deploy (via the balancer)")
        if interactive else None,
        auto=not interactive,
        fill=True,
    )
    arguments = {"version": version}
    out.print(f"calling {TOOL} {json.dumps(arguments)}")
    limits = ClientLimits(flow_timeout=None if interactive else 60.0,
                          handler_timeout=None if interactive else 60.0)
    with build_client(connect(url, None), inputs, on_event=reporter, limits=limits) as client:
        try:
            result = client.call_tool(TOOL, arguments)
        except MrtrError as exc:
            out.print(explain(exc))
            return EXIT_FAILED
    reporter.completed()
    out.print("\nresult:")
    print_result(out, "tools/call", result, raw=False)
    served = {hop.request_id: hop.backend for hop in balancer.hops if hop.method == "tools/call"}
    calls = list(served.values())
    if len(calls) >= 2 and calls[0] != calls[-1]:
        out.print(Text(
            f"\nRound 1 was served by instance {calls[0]} and round {len(calls)} by instance "
            f"{calls[-1]}, which never saw round 1: the answers came back in inputResponses, "
            f"and everything instance {calls[0]} had worked out came back sealed in "
            "requestState.", style="green"))
    return EXIT_OK if not result.get("isError") else EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run_demo(Console()))
