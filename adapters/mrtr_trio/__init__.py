"""mrtr for trio: an MRTR client whose handlers run in a nursery.

Example::

    from mrtr_trio import Client
    async with Client(transport, elicitation=ask_user) as client:
        result = await client.call_tool("deploy_production", {"version": "1.4.2"})
"""

from mrtr_core.client.driver import InputRequired
from mrtr_trio.client import BROKEN, Client, Handler
from mrtr_trio.transport import MemoryTransport, Transport

__all__ = [
    "BROKEN",
    "Client",
    "Handler",
    "InputRequired",
    "MemoryTransport",
    "Transport",
]
