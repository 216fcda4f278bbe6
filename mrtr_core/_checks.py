"""Checks of configuration values a developer passes in, shared by the core and the adapters.

Each raises :class:`ValueError` naming the argument, so a bad value fails where it is given
instead of as a hang, a crash deep inside, or a limit silently never enforced.
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = [
    "http_server_options",
    "port_number",
    "positive_int",
    "positive_int_field",
    "positive_seconds",
]


def positive_int(name: str, value: Any) -> None:
    """Refuse ``value`` unless it is an integer of at least 1 (a ``bool`` is not one)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def positive_seconds(name: str, value: Any) -> None:
    """Refuse ``value`` unless it is a number of seconds above 0 (not ``nan``, not a ``bool``)."""
    # ``not value > 0`` also refuses nan, which compares false with everything.
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")


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
