"""``mrtr state inspect TOKEN``: open a ``requestState`` with the key ring and show it.

The token is verified with the ring (integrity, key id, expiry, audience). Its binding (the
method, target, arguments and principal it was sealed for) is a digest: give ``--method`` and
``--target`` (and ``--arguments``, ``--principal``) to check it; otherwise the binding digest is
shown without being checked. Everything in the token stays local: nothing is sent anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.text import Text

from mrtr_cli.jsoninput import JsonInputError, read_json
from mrtr_cli.keys import load_ring
from mrtr_cli.safe import plain
from mrtr_core.state import Binding, StateCodec, StateRejectedError, digest_arguments

__all__ = ["add_parser", "inspect_token"]


def add_parser(sub: Any) -> None:
    """Register ``mrtr state inspect``."""
    state = sub.add_parser("state", help="requestState tools")
    actions = state.add_subparsers(dest="state_command", required=True, metavar="ACTION")
    p: argparse.ArgumentParser = actions.add_parser(
        "inspect", help="verify a requestState with the key ring and show what it holds")
    p.add_argument("token", help="the requestState ('-' reads it from stdin)")
    p.add_argument("--keys", required=True, metavar="FILE", help="the key ring it was sealed with")
    p.add_argument("--audience", required=True, help="the server's audience (its name)")
    p.add_argument("--mode", choices=("aead", "hmac"), default="aead",
                   help="how the server protects its states: aead (AES-256-GCM, encrypted) or "
                        "hmac (HMAC-SHA256, signed only) (default aead)")
    p.add_argument("--method", help="expected method, e.g. tools/call (checks the binding)")
    p.add_argument("--target", help="expected tool or prompt name, or resource URI")
    p.add_argument("--arguments", default=None, metavar="JSON", help="expected arguments")
    p.add_argument("--principal", default=None, help="expected principal")
    p.add_argument("--now", type=float, default=None,
                   help="check expiry at this Unix time instead of now")
    p.set_defaults(func=cmd_inspect)


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds")


def inspect_token(codec: StateCodec, token: str, *, now: float,
                  binding: Binding | None) -> dict[str, Any]:
    """Verify ``token`` and describe it.

    With ``binding`` the token is opened exactly as the server would open it. Without, the
    codec's inspection (integrity, key, expiry, audience; binding digest reported, not
    checked) is used.

    Raises:
        StateRejectedError: the token does not verify (``reason`` says why).
    """
    if binding is not None:
        opened = codec.open(token, binding, now)
        bound: dict[str, Any] = {"checked": True, "method": binding.method,
                                 "target": binding.target, "principal": binding.principal,
                                 "digest": binding.digest}
    else:
        opened = codec.inspect(token, now)
        bound = {"checked": False, "digest": opened.binding_digest}
    return {
        "key_id": opened.key_id,
        "token_id": opened.token_id,
        "issued_at": opened.issued_at,
        "expires_at": opened.expires_at,
        "expires_in": opened.expires_at - now,
        "binding": bound,
        "payload": opened.payload,
        "bytes": len(token.encode("utf-8")),
    }


def cmd_inspect(args: argparse.Namespace, out: Console, ui: Console) -> int:
    """Run ``mrtr state inspect``."""
    token = sys.stdin.read().strip() if args.token == "-" else args.token
    codec = StateCodec(load_ring(args.keys), audience=args.audience, nonce=os.urandom,
                       mode=args.mode)
    binding = None
    if (args.arguments is not None or args.principal is not None) and not (
            args.method and args.target):
        ui.print("--arguments and --principal check the binding: give --method and --target too")
        return 2
    if args.method or args.target:
        if not (args.method and args.target):
            ui.print("give both --method and --target to check the binding")
            return 2
        try:
            arguments = read_json(args.arguments) if args.arguments is not None else None
        except JsonInputError as exc:
            ui.print(f"--arguments: not JSON ({exc})")
            return 2
        binding = Binding(method=args.method, target=args.target,
                          arguments_digest=digest_arguments(arguments), principal=args.principal)
    now = args.now if args.now is not None else time.time()
    try:
        info = inspect_token(codec, token, now=now, binding=binding)
    except StateRejectedError as exc:
        ui.print(Text(f"✗ rejected: {exc.reason}" + (f" ({exc.detail})" if exc.detail else ""),
                      style="bold red"))
        return 1
    bound = info["binding"]
    verdict = "valid: integrity, key, expiry and audience check out" + (
        ", binding matches" if bound["checked"] else
        "; binding not checked (no --method/--target)")
    rows: list[tuple[str, Text]] = [
        ("verdict", Text(verdict, style="green")),
        ("key id", plain(info["key_id"])),
        ("token id", plain(info["token_id"])),
        ("issued", Text(_when(info["issued_at"]))),
        ("expires", Text(f"{_when(info['expires_at'])} (in {info['expires_in']:.0f} s)")),
        ("audience", plain(args.audience)),
    ]
    if bound["checked"]:
        rows.append(("bound to", plain(f"{bound['method']} {bound['target']} "
                                       f"(principal {bound['principal']!r})")))
    rows.append(("binding digest", plain(bound["digest"])))
    rows.append(("size", Text(f"{info['bytes']} bytes")))
    for label, value in rows:
        out.print(Text.assemble((f"{label:<15}", "bold"), value))
    out.print(Text("payload:", style="bold"))
    out.print(plain(json.dumps(info["payload"], indent=2, ensure_ascii=False)))
    return 0
