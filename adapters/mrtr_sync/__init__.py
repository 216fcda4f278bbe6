"""mrtr for plain blocking Python: an MRTR client whose handlers run in threads.

Example::

    from mrtr_sync import Client
    with Client(transport, elicitation=ask_user) as client:
        result = client.call_tool("deploy_production", {"version": "1.4.2"})

Every thread mrtr_sync starts (servers, transports, the handler pool) blocks SIGINT and
SIGTERM, so those signals always reach the main thread (:mod:`mrtr_sync.threads`).

The Redis replay guard lives in ``mrtr_sync.replay_redis`` (it needs the ``redis``
extra, so it is not imported here).
"""

from mrtr_core.client.driver import InputRequired
from mrtr_sync.client import Client, Handler
from mrtr_sync.clock import Clock, SystemClock
from mrtr_sync.http_client import HttpTransport
from mrtr_sync.http_server import HttpServer, serve_http
from mrtr_sync.server_engine import run_handler
from mrtr_sync.stdio_client import StdioTransport
from mrtr_sync.stdio_server import serve_stdio
from mrtr_sync.threads import leave_signals_to_main_thread
from mrtr_sync.transport import MemoryTransport, Transport

__all__ = [
    "Client",
    "Clock",
    "Handler",
    "HttpServer",
    "HttpTransport",
    "InputRequired",
    "MemoryTransport",
    "StdioTransport",
    "SystemClock",
    "Transport",
    "leave_signals_to_main_thread",
    "run_handler",
    "serve_http",
    "serve_stdio",
]
