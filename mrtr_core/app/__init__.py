"""A minimal MCP 2026-07-28 server surface, sans-IO: discover, lists, and the three MRTR
methods over resumable handlers.

>>> app = App("deploy", "1.0", codec=codec)                      # doctest: +SKIP
>>> @app.tool()
... def deploy_production(ctx, version: str) -> str:
...     ...
>>> reply = drive_sync(app, message, now=now, guard=guard)        # doctest: +SKIP
"""

from mrtr_core.app.app import REMOVED_METHODS, SUPPORTED_VERSIONS, App
from mrtr_core.app.drive import drive_sync, run_inline, run_step_sync
from mrtr_core.app.logs import SERVER_LOGGER, STATE_LOGGER
from mrtr_core.app.registry import (
    CacheScope,
    PromptArgument,
    PromptDef,
    ResourceDef,
    ResourceTemplateDef,
    ToolDef,
)
from mrtr_core.app.reply import EngineRun, Reply, RunHandler, http_status_for
from mrtr_core.app.results import (
    prompt_result,
    resource_result,
    text_block,
    tool_error_result,
    tool_result,
)

__all__ = [
    "REMOVED_METHODS",
    "SERVER_LOGGER",
    "STATE_LOGGER",
    "SUPPORTED_VERSIONS",
    "App",
    "CacheScope",
    "EngineRun",
    "PromptArgument",
    "PromptDef",
    "Reply",
    "ResourceDef",
    "ResourceTemplateDef",
    "RunHandler",
    "ToolDef",
    "drive_sync",
    "http_status_for",
    "prompt_result",
    "resource_result",
    "run_inline",
    "run_step_sync",
    "text_block",
    "tool_error_result",
    "tool_result",
]
