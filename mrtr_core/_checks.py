"""Checks of configuration values a developer passes in, shared by the core and the adapters.

Each raises :class:`ValueError` naming the argument, so a bad value fails where it is given
instead of as a hang, a crash deep inside, or a limit silently never enforced.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any, Final

import attrs

__all__ = [
    "MAX_SECONDS",
    "MAX_SIM_CLIENTS",
    "MAX_SIM_FLOWS",
    "MAX_SIM_INSTANCES",
    "MAX_SIM_JOBS",
    "MAX_SIM_SEEDS",
    "client_options",
    "finite_seconds",
    "flag",
    "http_server_options",
    "instance_of",
    "is_time_limit",
    "json_value",
    "non_negative_seconds",
    "optional_text",
    "port_number",
    "positive_int",
    "positive_int_field",
    "positive_seconds",
    "shown",
]


def shown(value: Any) -> str:
    """``repr(value)`` cut short (:func:`reprlib.repr`), for a message about a value given:
    it may be long, or nested too deeply for ``repr`` itself."""
    return reprlib.repr(value)


def positive_int(name: str, value: Any, most: int | None = None) -> None:
    """Refuse ``value`` unless it is an integer of at least 1 (a ``bool`` is not one), and
    of at most ``most`` when given."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (
        most is not None and value > most
    ):
        bound = ">= 1" if most is None else f"from 1 to {most}"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")


def positive_seconds(name: str, value: Any) -> None:
    """Refuse ``value`` unless it is a number of seconds above 0 (not ``nan``, not a ``bool``)."""
    # ``not value > 0`` also refuses nan, which compares false with everything.
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")


def non_negative_seconds(name: str, value: Any) -> None:
    """Refuse ``value`` unless it is a number of seconds of at least 0 (not ``nan``, not a
    ``bool``)."""
    # ``not value >= 0`` also refuses nan.
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")


MAX_SECONDS: Final = 1e9
"""About 31 years: the longest time limit (a wait, a state's lifetime) taken anywhere. A
blocking wait much longer (about 9.2e9 s on Linux) does not fit the system's time type."""


# The simulator's counts, shared by its API, its pytest plugin and ``mrtr sim`` (here, so
# that the command line reads them without importing the simulator). A mistyped count
# would build instances or clients until memory runs out, or run for days.
MAX_SIM_FLOWS: Final = 10_000_000
"""The most flows one simulated run takes (hours, not days: a sweep runs more seeds)."""
MAX_SIM_INSTANCES: Final = 1000
"""The most server instances one simulated run builds (each holds an app of its own)."""
MAX_SIM_CLIENTS: Final = 100_000
"""The most client connections one simulated run keeps."""
MAX_SIM_SEEDS: Final = 100_000
"""The most seeds one sweep of simulated campaigns runs (its reports are all kept)."""
MAX_SIM_JOBS: Final = 1024
"""The most worker processes one sweep of simulated campaigns starts."""


def is_time_limit(value: Any) -> bool:
    """Whether ``value`` is a number of seconds above 0 and at most :data:`MAX_SECONDS` (not
    ``nan``, not an infinity, not a ``bool``)."""
    # The chained comparison is false for nan as for anything out of range.
    return not isinstance(value, bool) and isinstance(value, int | float) and (
        0 < value <= MAX_SECONDS
    )


def finite_seconds(name: str, value: Any) -> None:
    """Refuse ``value`` unless it is a finite number of seconds of at least 0 (not ``nan``,
    not an infinity, not a ``bool``): a wait bounded by it always ends."""
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not (value >= 0 and math.isfinite(value))):
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")


def instance_of(name: str, value: Any, kind: type | tuple[type, ...], what: str) -> None:
    """Refuse ``value`` with a :class:`TypeError` unless it is a ``kind``; ``what`` names
    the type expected in the message (``"a ClientLimits or None"``)."""
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be {what}, not {type(value).__name__}")


def optional_text(name: str, value: Any) -> None:
    """Refuse ``value`` with a :class:`TypeError` unless it is a string or ``None``."""
    instance_of(name, value, (str, type(None)), "a string or None")


def flag(name: str, value: Any) -> None:
    """Refuse ``value`` with a :class:`TypeError` unless it is ``True`` or ``False`` (a
    truthy string or ``1`` would switch a behaviour on by accident)."""
    instance_of(name, value, bool, "True or False")


def client_options(transport: Any, methods: tuple[str, ...], random: Any) -> None:
    """The checks every adapter's ``Client`` makes of the arguments it handles itself:
    ``transport`` has ``methods`` (the runtime's ``Transport`` protocol), ``random`` is a
    ``random.Random`` or ``None``."""
    missing = [m for m in methods if not callable(getattr(transport, m, None))]
    if missing:
        raise TypeError(
            f"transport must be a Transport (with {' and '.join(methods)}),"
            f" not {type(transport).__name__}"
        )
    # Duck-typed, as the core imports no random module: anything with .random() will do.
    if random is not None and not callable(getattr(random, "random", None)):
        raise TypeError(f"random must be a random.Random or None, not {type(random).__name__}")


_JSON_DEPTH: Final = 64  # jsonrpc.DEFAULT_MAX_DEPTH: no peer decodes a deeper message
_LONG_INT_BITS: Final = 4000  # longer integers may exceed the digits str() will write


def json_value(name: str, value: Any, max_depth: int = _JSON_DEPTH) -> None:
    """Refuse ``value`` unless it is a JSON value: dicts with string keys, lists,
    strings, integers, finite floats, booleans and ``None``, nested at most ``max_depth``
    levels (by default 64, as deep as a peer decodes a message; a value sent inside a
    message has fewer). The error names where the bad part is, as a path from ``name``
    (``params.arguments.tags[2]``).

    Raises:
        TypeError: A part of another type (a set, bytes, an object, a tuple: what takes
            the value as it is, not as JSON text, sees no array), or a key that is not a
            string (the encoder would write ``1`` as ``"1"``, or fail).
        ValueError: ``NaN`` or an infinity (RFC 8259 §6), an integer too long to write, or
            nesting deeper than ``max_depth`` levels (a value that holds itself is one).
    """
    stack: list[tuple[str, Any, int]] = [(name, value, 0)]
    while stack:
        path, item, depth = stack.pop()
        if item is None or isinstance(item, str | bool):
            continue
        if isinstance(item, int):
            if item.bit_length() > _LONG_INT_BITS:
                try:
                    int.__repr__(item)
                except ValueError:
                    raise ValueError(f"{path} is an integer too long to write") from None
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError(f"{path} is {item!r}, not a JSON number")
            continue
        if isinstance(item, tuple):
            raise TypeError(f"{path} is a tuple, not a JSON value (write a list)")
        if not isinstance(item, dict | list):
            raise TypeError(f"{path} is a {type(item).__name__}, not a JSON value")
        if depth >= max_depth:
            raise ValueError(f"{path} is nested deeper than {max_depth} levels")
        if isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    raise TypeError(
                        f"{path} has the key {key!r} ({type(key).__name__}), not a string")
                where = f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"
                stack.append((where, inner, depth + 1))
        else:
            stack.extend((f"{path}[{index}]", inner, depth + 1)
                         for index, inner in enumerate(item))


def positive_int_field(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """:func:`positive_int` as an ``attrs`` validator, naming the field."""
    positive_int(attribute.name, value)


def port_number(name: str, value: Any) -> None:
    """Refuse ``value`` unless it is a TCP port, ``0`` to ``65535`` (``0`` picks a free one)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ValueError(f"{name} must be an integer from 0 to 65535, got {value!r}")


def http_server_options(
    *, port: Any, read_timeout: Any, idle_timeout: Any, max_connections: Any
) -> None:
    """The checks every adapter's ``serve_http`` makes of its arguments before it binds."""
    port_number("port", port)
    positive_seconds("read_timeout", read_timeout)
    positive_seconds("idle_timeout", idle_timeout)
    positive_int("max_connections", max_connections)
