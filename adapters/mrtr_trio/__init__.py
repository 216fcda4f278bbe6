"""mrtr for trio: an MRTR client whose handlers run in a nursery.

Example::

    from mrtr_trio import Client
    async with Client(transport, elicitation=ask_user) as client:
        result = await client.call_tool("deploy_production", {"version": "1.4.2"})

The Redis replay guard lives in ``mrtr_trio.replay_redis`` (it needs the ``redis``
extra, so it is not imported here).
"""

from mrtr_core.client.driver import InputRequired
from mrtr_trio.client import BROKEN, Client, Handler
from mrtr_trio.http_client import HttpTransport
from mrtr_trio.http_server import serve_http
from mrtr_trio.server_engine import run_handler
from mrtr_trio.stdio_client import StdioTransport, open_stdio_transport
from mrtr_trio.stdio_server import serve_stdio
from mrtr_trio.transport import MemoryTransport, Transport

__all__ = [
    "BROKEN",
    "Client",
    "Handler",
    "HttpTransport",
    "InputRequired",
    "MemoryTransport",
    "StdioTransport",
    "Transport",
    "open_stdio_transport",
    "run_handler",
    "serve_http",
    "serve_stdio",
]
