"""Runs the client-driver contract (``contract.py``) against the sync, trio and asyncio
clients: the ``rt`` fixture in ``conftest.py`` is parametrized over the three runtimes."""

from contract import *  # noqa: F403
