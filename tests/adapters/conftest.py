"""The ``rt`` fixture: every contract scenario runs once per runtime (sync, trio, asyncio)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from adapter_harness import RUNTIMES, AsyncioRuntime, Runtime, make_runtime


@pytest.fixture(params=RUNTIMES)
def rt(request: pytest.FixtureRequest) -> Iterator[Runtime]:
    """A fresh runtime harness with its virtual clock at 0."""
    runtime = make_runtime(request.param)
    yield runtime
    if isinstance(runtime, AsyncioRuntime):
        runtime.shutdown()
