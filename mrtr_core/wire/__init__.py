"""Wire models of the MCP 2026-07-28 messages MRTR touches, the one converter, the checks
of the string formats the schema gives some members, and the parser of elicitation form
schemas."""

from mrtr_core.wire.converter import (
    converter,
    structure_client_capabilities,
    structure_input_request,
    structure_input_required,
    structure_input_response,
    structure_params,
    structure_request_meta,
    unstructure,
    unstructure_input_request,
    unstructure_input_required,
    unstructure_params,
)
from mrtr_core.wire.formats import *  # noqa: F403
from mrtr_core.wire.formats import __all__ as _formats_all
from mrtr_core.wire.forms import (
    Choice,
    FormAnswerError,
    FormField,
    FormSchemaError,
    FormSpec,
)
from mrtr_core.wire.models import *  # noqa: F403
from mrtr_core.wire.models import __all__ as _models_all

__all__ = [
    *_models_all,
    *_formats_all,
    "Choice",
    "FormAnswerError",
    "FormField",
    "FormSchemaError",
    "FormSpec",
    "converter",
    "structure_client_capabilities",
    "structure_input_request",
    "structure_input_required",
    "structure_input_response",
    "structure_params",
    "structure_request_meta",
    "unstructure",
    "unstructure_input_request",
    "unstructure_input_required",
    "unstructure_params",
]
