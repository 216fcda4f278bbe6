"""mrtr for asyncio: an MRTR client whose handlers run in a ``TaskGroup``.

Example::

    from mrtr_asyncio import Client
    async with Client(transport, elicitation=ask_user) as client:
        result = await client.call_tool("deploy_production", {"version": "1.4.2"})

The Redis replay guard lives in ``mrtr_asyncio.replay_redis`` (it needs the ``redis``
extra, so it is not imported here).
"""

from mrtr_asyncio.client import BROKEN, Client, Handler
from mrtr_asyncio.http_client import HttpTransport
from mrtr_asyncio.http_server import HttpServer, serve_http
from mrtr_asyncio.server_engine import run_handler
from mrtr_asyncio.stdio_client import StdioTransport, open_stdio_transport
from mrtr_asyncio.stdio_server import serve_stdio
from mrtr_asyncio.transport import MemoryTransport, Transport
from mrtr_core.client.driver import InputRequired

__all__ = [
    "BROKEN",
    "Client",
    "Handler",
    "HttpServer",
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
