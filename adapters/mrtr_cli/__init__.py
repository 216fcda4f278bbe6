"""The ``mrtr`` command: call MRTR servers from the terminal, serve apps, run the demo.

Entry point: :func:`mrtr_cli.main.main` (``mrtr`` and ``python -m mrtr_cli``).
"""

from mrtr_cli.main import main

__all__ = ["main"]
