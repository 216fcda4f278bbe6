"""mrtr for plain blocking Python: an MRTR client whose handlers run in threads.

Example::

    from mrtr_sync import Client
    client = Client(transport, elicitation=ask_user)
    result = client.call_tool("deploy_production", {"version": "1.4.2"})
"""

from mrtr_core.client.driver import InputRequired
from mrtr_sync.client import Client, Handler
from mrtr_sync.clock import Clock, SystemClock
from mrtr_sync.transport import MemoryTransport, Transport

__all__ = [
    "Client",
    "Clock",
    "Handler",
    "InputRequired",
    "MemoryTransport",
    "SystemClock",
    "Transport",
]
