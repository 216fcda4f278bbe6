"""mrtr_core: the pure, I/O-free protocol core of MCP Multi Round-Trip Requests.

Nothing in this package opens a socket, reads a clock, sleeps, spawns, or draws randomness.
Time is an argument, ids come from the side that owns the connection, and jitter comes from
a seeded source the caller passes in.
"""

from mrtr_core import errors, wire

__all__ = ["errors", "wire"]
