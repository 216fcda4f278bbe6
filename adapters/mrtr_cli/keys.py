"""Key ring files: the secrets every instance of a deployment shares.

Format (JSON), the same as the ``MRTR_KEYS`` environment variable apps read::

    {"k1": "<base64 of 32+ random bytes>", "k2": "..."}

The last key seals new tokens, every key opens them. The long form
``{"active": "k1", "keys": {...}}`` names the sealing key explicitly. Rotate in three steps,
each rolled out to every instance before the next (see ``mrtr_core.state.keys``): add the new
key (not yet last), make it the sealing one, drop the old one once a state lifetime and twice
the codec's clock-skew allowance have passed (a state is accepted until ``skew`` past its
expiry, on instance clocks that may differ by ``skew``).
``mrtr keys new`` writes a fresh ring.

``mrtr serve --keys FILE`` exports the ring as ``MRTR_KEYS`` (sealing key last) before it
imports the app, so an app that builds its codec from ``MRTR_KEYS`` (as
``examples/deploy.py`` does) shares the ring with every other instance started the same way.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from mrtr_cli.jsoninput import JsonInputError, read_json
from mrtr_core.errors import MrtrError
from mrtr_core.state import KeyRing

__all__ = [
    "ENV_KEYS",
    "KeyFileError",
    "load_ring",
    "new_ring_data",
    "ring_env_value",
    "ring_from_data",
    "ring_from_environment",
    "write_ring",
]

ENV_KEYS: Final = "MRTR_KEYS"
MAX_RING_BYTES: Final = 64 * 1024
# The URL-safe alphabet, padding optional. Its decoder (like every non-validating one) drops
# characters outside the alphabet, which would turn any text into a key.
_URLSAFE_KEY: Final = re.compile(r"[A-Za-z0-9_-]*={0,2}")


class KeyFileError(MrtrError):
    """A key ring file or variable is unreadable or malformed (the message says which)."""


def new_ring_data(
    kid: str = "k1", *, random: Callable[[int], bytes] = os.urandom
) -> dict[str, str]:
    """A fresh one-key ring as JSON-able data (32 random bytes)."""
    return {kid: base64.b64encode(random(32)).decode("ascii")}


def ring_env_value(ring: KeyRing) -> str:
    """The ring as ``MRTR_KEYS`` text: ``{kid: base64}`` with the sealing key last."""
    ordered = [(k, v) for k, v in ring.items() if k != ring.active]
    ordered.append((ring.active, ring.key(ring.active)))
    return json.dumps({k: base64.b64encode(v).decode("ascii") for k, v in ordered})


def ring_from_data(data: Any, *, source: str = "key ring") -> KeyRing:
    """Read ring data (see the module docstring).

    Raises:
        KeyFileError: the data is not a ring, a key is not base64, or the ring is invalid.
    """
    if not isinstance(data, Mapping) or not data:
        raise KeyFileError(f"{source}: expected a JSON object {{key id: base64 key}}")
    if isinstance(data.get("keys"), Mapping):
        active = data.get("active")
        encoded_keys: Mapping[str, Any] = data["keys"]
        if not isinstance(active, str):
            raise KeyFileError(f"{source}: 'active' must name a key id")
    else:
        encoded_keys = data
        active = list(data)[-1]
    keys: dict[str, bytes] = {}
    for kid, encoded in encoded_keys.items():
        if not isinstance(encoded, str):
            raise KeyFileError(f"{source}: key {kid!r} must be a base64 string")
        try:
            keys[str(kid)] = base64.b64decode(encoded.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            if not _URLSAFE_KEY.fullmatch(encoded):
                raise KeyFileError(f"{source}: key {kid!r} is not base64") from None
            try:
                keys[str(kid)] = base64.urlsafe_b64decode(
                    encoded.encode("ascii") + b"=" * (-len(encoded) % 4))
            except (binascii.Error, UnicodeEncodeError, ValueError):
                raise KeyFileError(f"{source}: key {kid!r} is not base64") from None
    try:
        return KeyRing(keys, active=active)
    except (TypeError, ValueError) as exc:
        raise KeyFileError(f"{source}: {exc}") from exc


def load_ring(path: str | Path) -> KeyRing:
    """Read a key ring file.

    Raises:
        KeyFileError: unreadable, too large, not JSON, or not a valid ring.
    """
    file = Path(path)
    try:
        if file.stat().st_size > MAX_RING_BYTES:
            raise KeyFileError(f"{file}: larger than {MAX_RING_BYTES} bytes")
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise KeyFileError(f"{file}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise KeyFileError(f"{file}: not JSON ({exc})") from exc
    return ring_from_data(_parse(text, str(file)), source=str(file))


def _parse(text: str, source: str) -> Any:
    """JSON text of a ring. A name given twice is refused: JSON would keep only the last,
    and two rings pasted together for a rotation (both ``k1`` from ``mrtr keys new``)
    would silently lose a key."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        names = [name for name, _ in pairs]
        for name in names:
            if names.count(name) > 1:
                raise KeyFileError(f"{source}: {name!r} appears twice (give each key its own id)")
        return dict(pairs)

    try:
        return read_json(text, object_pairs_hook=unique)
    except JsonInputError as exc:
        raise KeyFileError(f"{source}: not JSON ({exc})") from exc


def ring_from_environment(environ: Mapping[str, str] | None = None) -> KeyRing | None:
    """The ring in ``MRTR_KEYS``, if set."""
    env = os.environ if environ is None else environ
    if env.get(ENV_KEYS):
        source = f"${ENV_KEYS}"
        return ring_from_data(_parse(env[ENV_KEYS], source), source=source)
    return None


def write_ring(path: str | Path, data: Mapping[str, Any], *, replace: bool = False) -> None:
    """Write ring data to a new file at ``path``, readable by its owner only.

    An existing ``path`` (a symlink included) is refused unless ``replace``: then the ring
    goes to a new file beside it, renamed over ``path``, so neither an old file's mode nor
    a symlink's target is ever written to.

    Raises:
        KeyFileError: ``path`` exists (without ``replace``) or cannot be written.
    """
    file = Path(path)
    target = file.with_name(f".{file.name}.{os.getpid()}.tmp") if replace else file
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags, 0o600)
    except FileExistsError:
        raise KeyFileError(f"{target}: already exists (--force replaces a ring)") from None
    except OSError as exc:
        raise KeyFileError(f"{target}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2)
            out.write("\n")
        if replace:
            os.replace(target, file)
    except BaseException:
        if replace:
            target.unlink(missing_ok=True)
        raise


def cmd_new(args: Any, out: Any) -> int:
    """``mrtr keys new [FILE] [--kid ID] [--force]``: write a fresh ring to a new FILE (0600)
    or stdout; ``--force`` replaces an existing FILE."""
    data = new_ring_data(args.kid)
    if args.file:
        write_ring(args.file, data, replace=args.force)
        out.print(f"wrote a one-key ring ({args.kid}) to {args.file}")
    else:
        print(json.dumps(data))
    return 0
