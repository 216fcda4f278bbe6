"""Pure helpers for testing MRTR clients: a scripted server and wire-shape builders.

Nothing here performs I/O or reads a clock; latency is data the transport acts on.
"""

from mrtr_core.testing.scripted import (
    ScriptedServer,
    Step,
    elicit_form,
    elicit_url,
    error_response,
    input_required,
    list_roots,
    sample,
    success_response,
    tool_result,
)

__all__ = [
    "ScriptedServer",
    "Step",
    "elicit_form",
    "elicit_url",
    "error_response",
    "input_required",
    "list_roots",
    "sample",
    "success_response",
    "tool_result",
]
