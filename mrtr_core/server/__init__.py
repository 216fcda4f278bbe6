"""Resumable MRTR handlers over stateless rounds.

Handlers are straight-line code: ``ctx.ask`` / ``ctx.ask_all`` for input, ``ctx.memo``
for work carried between rounds, ``ctx.once`` for steps that must not repeat. Each round
the engine re-runs the handler with every answer gathered so far (carried, sealed, in
``requestState``); the first unanswered question ends the run with ``input_required``.
"""

from mrtr_core.server.builders import (
    FieldSpec,
    accepted,
    cancelled,
    content,
    declined,
    form,
    root_uris,
    roots,
    sample,
    text,
    url,
)
from mrtr_core.server.capabilities import (
    MissingCapabilityError,
    merge_capabilities,
    missing_capabilities,
)
from mrtr_core.server.context import (
    Context,
    InputPending,
    InputRejected,
    InputRequired,
    question_digest,
)
from mrtr_core.server.digests import SHARED_DIGESTS, QuestionDigests
from mrtr_core.server.engine import Completed, HandlerSpec, NeedsInput, Run, ServerEngine
from mrtr_core.server.limits import ServerLimits
from mrtr_core.server.schemas import CompiledSchema, SchemaCache, forget_accepted

__all__ = [
    "SHARED_DIGESTS",
    "CompiledSchema",
    "Completed",
    "Context",
    "FieldSpec",
    "HandlerSpec",
    "InputPending",
    "InputRejected",
    "InputRequired",
    "MissingCapabilityError",
    "NeedsInput",
    "QuestionDigests",
    "Run",
    "SchemaCache",
    "ServerEngine",
    "ServerLimits",
    "accepted",
    "cancelled",
    "content",
    "declined",
    "forget_accepted",
    "form",
    "merge_capabilities",
    "missing_capabilities",
    "question_digest",
    "root_uris",
    "roots",
    "sample",
    "text",
    "url",
]
