"""mrtr for asyncio: an MRTR client whose handlers run in a ``TaskGroup``.

Example::

    from mrtr_asyncio import Client
    async with Client(transport, elicitation=ask_user) as client:
        result = await client.call_tool("deploy_production", {"version": "1.4.2"})
"""

from mrtr_asyncio.client import BROKEN, Client, Handler
from mrtr_asyncio.transport import MemoryTransport, Transport
from mrtr_core.client.driver import InputRequired

__all__ = [
    "BROKEN",
    "Client",
    "Handler",
    "InputRequired",
    "MemoryTransport",
    "Transport",
]
