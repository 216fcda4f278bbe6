"""mrtr_core: the pure, I/O-free protocol core of MCP Multi Round-Trip Requests.

Nothing in this package opens a socket, reads a clock, sleeps, spawns, or draws randomness.
Time is an argument, ids come from the side that owns the connection, and jitter comes from
a seeded source the caller passes in.

Subpackages, each with its own ``__all__``:

- :mod:`mrtr_core.wire`: attrs models of the MCP 2026-07-28 messages MRTR touches.
- :mod:`mrtr_core.client`: :class:`~mrtr_core.client.ClientFlow`, one operation round by round.
- :mod:`mrtr_core.server`: resumable handlers over stateless rounds.
- :mod:`mrtr_core.state`: ``requestState`` sealing, key ring, binding, replay guard protocol.
- :mod:`mrtr_core.app`: a minimal MCP 2026-07-28 server surface.
- :mod:`mrtr_core.jsonrpc`, :mod:`mrtr_core.http`, :mod:`mrtr_core.stdio`: framing, bytes in
  and bytes out; :mod:`mrtr_core.jsontext`: compact and canonical JSON text.
- :mod:`mrtr_core.sim`: the deterministic simulator.
- :mod:`mrtr_core.errors`: the error tree.
"""

from mrtr_core import app, client, errors, http, jsonrpc, jsontext, server, state, stdio, wire
from mrtr_core.app import App
from mrtr_core.client import ClientFlow, ClientLimits
from mrtr_core.errors import MrtrError
from mrtr_core.server import Context, ServerEngine
from mrtr_core.state import KeyRing, StateCodec

__all__ = [
    "App",
    "ClientFlow",
    "ClientLimits",
    "Context",
    "KeyRing",
    "MrtrError",
    "ServerEngine",
    "StateCodec",
    "app",
    "client",
    "errors",
    "http",
    "jsonrpc",
    "jsontext",
    "server",
    "state",
    "stdio",
    "wire",
]
