"""attrs models of the MCP 2026-07-28 messages that MRTR touches.

Python names are snake_case; the wire's camelCase and the ``io.modelcontextprotocol/``
``_meta`` keys appear only in :mod:`mrtr_core.wire.converter`. Models carry an ``extra``
mapping where the wire type is open, so unknown fields survive a round trip.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal, TypeAlias

import attrs

__all__ = [
    "CALL_TOOL",
    "ELICITATION_CREATE",
    "GET_PROMPT",
    "INCLUDE_CONTEXT_VALUES",
    "INPUT_REQUEST_KINDS",
    "MRTR_METHODS",
    "PROTOCOL_VERSION",
    "READ_RESOURCE",
    "RESULT_TYPE_COMPLETE",
    "RESULT_TYPE_INPUT_REQUIRED",
    "ROOTS_LIST",
    "SAMPLING_CREATE_MESSAGE",
    "SUPPORTED_VERSIONS",
    "CallToolParams",
    "ClientCapabilities",
    "CreateMessageRequest",
    "CreateMessageResult",
    "ElicitFormRequest",
    "ElicitResult",
    "ElicitUrlRequest",
    "ElicitationCapability",
    "GetPromptParams",
    "Implementation",
    "InputRequest",
    "InputRequiredResult",
    "InputResponse",
    "JsonObject",
    "ListRootsRequest",
    "ListRootsResult",
    "MrtrParams",
    "ReadResourceParams",
    "RequestMeta",
    "Root",
    "SamplingCapability",
    "WireValueError",
]

JsonObject: TypeAlias = dict[str, Any]

PROTOCOL_VERSION: Final = "2026-07-28"
SUPPORTED_VERSIONS: Final = (PROTOCOL_VERSION,)
"""The protocol revisions a server built on mrtr speaks (named in -32022's ``supported``)."""

# Methods that may answer input_required (digest §1.4, mrtr.mdx § Supported Requests).
CALL_TOOL: Final = "tools/call"
GET_PROMPT: Final = "prompts/get"
READ_RESOURCE: Final = "resources/read"
MRTR_METHODS: Final = frozenset({CALL_TOOL, GET_PROMPT, READ_RESOURCE})

# Input request kinds (digest §1.5).
ELICITATION_CREATE: Final = "elicitation/create"
SAMPLING_CREATE_MESSAGE: Final = "sampling/createMessage"
ROOTS_LIST: Final = "roots/list"
INPUT_REQUEST_KINDS: Final = frozenset({ELICITATION_CREATE, SAMPLING_CREATE_MESSAGE, ROOTS_LIST})

# CreateMessageRequestParams.includeContext (digest §1.5 b).
INCLUDE_CONTEXT_VALUES: Final = ("none", "thisServer", "allServers")

RESULT_TYPE_COMPLETE: Final = "complete"
RESULT_TYPE_INPUT_REQUIRED: Final = "input_required"


def _empty() -> JsonObject:
    return {}


@attrs.frozen(kw_only=True)
class Implementation:
    """Who a peer is (``clientInfo`` / ``serverInfo``)."""

    name: str
    version: str
    title: str | None = None
    extra: JsonObject = attrs.field(factory=_empty)


@attrs.frozen(kw_only=True)
class ElicitationCapability:
    """``clientCapabilities.elicitation``. An empty object means form mode only."""

    form: JsonObject | None = None
    url: JsonObject | None = None

    @property
    def supports_form(self) -> bool:
        """Form mode is declared (explicitly, or by an empty ``elicitation: {}``)."""
        # client/elicitation.mdx: `elicitation: {}` means form only.
        return self.form is not None or self.url is None

    @property
    def supports_url(self) -> bool:
        """URL mode is declared."""
        return self.url is not None


@attrs.frozen(kw_only=True)
class SamplingCapability:
    """``clientCapabilities.sampling``."""

    context: JsonObject | None = None
    tools: JsonObject | None = None


@attrs.frozen(kw_only=True)
class ClientCapabilities:
    """What the client declares on every request (digest §1.7)."""

    elicitation: ElicitationCapability | None = None
    sampling: SamplingCapability | None = None
    roots: JsonObject | None = None
    experimental: JsonObject | None = None
    extensions: JsonObject | None = None
    extra: JsonObject = attrs.field(factory=_empty)

    def declares(self, kind: str) -> bool:
        """Whether an input request of this kind (method) may be sent to this client."""
        if kind == ELICITATION_CREATE:
            return self.elicitation is not None
        if kind == SAMPLING_CREATE_MESSAGE:
            return self.sampling is not None
        if kind == ROOTS_LIST:
            return self.roots is not None
        return False


@attrs.frozen(kw_only=True)
class RequestMeta:
    """Per-request ``params._meta`` (digest §1.7). Required on every request and retry."""

    protocol_version: str = PROTOCOL_VERSION
    client_capabilities: ClientCapabilities = attrs.field(factory=ClientCapabilities)
    client_info: Implementation | None = None
    progress_token: str | int | None = None
    extra: JsonObject = attrs.field(factory=_empty)


# --- input requests (bare {method, params}; digest §1.5) -------------------------------
# ``method`` (and ``mode``) are constants of each class, not per-instance fields: nothing to
# store when a request is built, one per entry of every input_required result.


@attrs.frozen(kw_only=True)
class ElicitFormRequest:
    """``elicitation/create`` in form mode (``mode`` absent means form: C9)."""

    message: str
    requested_schema: JsonObject
    extra: JsonObject = attrs.field(factory=_empty)

    method: ClassVar[Literal["elicitation/create"]] = ELICITATION_CREATE
    mode: ClassVar[Literal["form"]] = "form"


@attrs.frozen(kw_only=True)
class ElicitUrlRequest:
    """``elicitation/create`` in URL mode."""

    message: str
    url: str
    extra: JsonObject = attrs.field(factory=_empty)

    method: ClassVar[Literal["elicitation/create"]] = ELICITATION_CREATE
    mode: ClassVar[Literal["url"]] = "url"


@attrs.frozen(kw_only=True)
class CreateMessageRequest:
    """``sampling/createMessage``. Fields beyond the required ones stay in ``extra``."""

    messages: list[JsonObject]
    max_tokens: int
    system_prompt: str | None = None
    extra: JsonObject = attrs.field(factory=_empty)

    method: ClassVar[Literal["sampling/createMessage"]] = SAMPLING_CREATE_MESSAGE


@attrs.frozen(kw_only=True)
class ListRootsRequest:
    """``roots/list``."""

    meta: JsonObject | None = None

    method: ClassVar[Literal["roots/list"]] = ROOTS_LIST


InputRequest: TypeAlias = (
    ElicitFormRequest | ElicitUrlRequest | CreateMessageRequest | ListRootsRequest
)


# --- input responses (no resultType, no discriminator; digest §1.6) -----------------------


@attrs.frozen(kw_only=True)
class ElicitResult:
    """The answer to an ``elicitation/create``."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, str | int | float | bool | list[str]] | None = None

    @property
    def accepted(self) -> bool:
        """The user accepted (in URL mode: consented to open the URL)."""
        return self.action == "accept"


@attrs.frozen(kw_only=True)
class CreateMessageResult:
    """The answer to a ``sampling/createMessage``."""

    role: Literal["user", "assistant"]
    content: JsonObject | list[JsonObject]
    model: str
    stop_reason: str | None = None
    meta: JsonObject | None = None


class WireValueError(ValueError):
    """A wire model was given a value its protocol rules forbid (the message says which)."""


def _file_uri(_: Any, attribute: attrs.Attribute[str], value: str) -> None:
    # digest §1.6: a Root's uri must be a file:// URI (the scheme is case-insensitive,
    # RFC 3986 §3.1).
    if not isinstance(value, str) or value[:7].lower() != "file://":
        raise WireValueError(f"{attribute.name} must be a file:// URI, not {value!r}")


@attrs.frozen(kw_only=True)
class Root:
    """One root offered by the client (``file://`` URI)."""

    uri: str = attrs.field(validator=_file_uri)
    name: str | None = None
    meta: JsonObject | None = None


@attrs.frozen(kw_only=True)
class ListRootsResult:
    """The answer to a ``roots/list``."""

    roots: list[Root]


InputResponse: TypeAlias = ElicitResult | CreateMessageResult | ListRootsResult


# --- results ---------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class InputRequiredResult:
    """``resultType: "input_required"`` (digest §1.2).

    At least one of ``input_requests`` and ``request_state`` must be present (S5).
    ``request_state`` is kept as the exact string received; ``""`` is not absent.
    """

    input_requests: dict[str, InputRequest] | None = None
    request_state: str | None = None
    meta: JsonObject | None = None


# --- params of the three MRTR methods (digest §1.3) -------------------------------------------


@attrs.frozen(kw_only=True)
class CallToolParams:
    """``tools/call`` params. ``input_responses`` values stay raw JSON until the server
    engine validates them against the key it issued."""

    name: str
    meta: RequestMeta
    arguments: JsonObject | None = None
    input_responses: dict[str, Any] | None = None
    request_state: str | None = None
    extra: JsonObject = attrs.field(factory=_empty)

    method: Literal["tools/call"] = attrs.field(default=CALL_TOOL, init=False)

    @property
    def target(self) -> str:
        """The name or URI this request is about (also the ``Mcp-Name`` header)."""
        return self.name


@attrs.frozen(kw_only=True)
class GetPromptParams:
    """``prompts/get`` params."""

    name: str
    meta: RequestMeta
    arguments: dict[str, str] | None = None
    input_responses: dict[str, Any] | None = None
    request_state: str | None = None
    extra: JsonObject = attrs.field(factory=_empty)

    method: Literal["prompts/get"] = attrs.field(default=GET_PROMPT, init=False)

    @property
    def target(self) -> str:
        """The name or URI this request is about (also the ``Mcp-Name`` header)."""
        return self.name


@attrs.frozen(kw_only=True)
class ReadResourceParams:
    """``resources/read`` params."""

    uri: str
    meta: RequestMeta
    input_responses: dict[str, Any] | None = None
    request_state: str | None = None
    extra: JsonObject = attrs.field(factory=_empty)

    method: Literal["resources/read"] = attrs.field(default=READ_RESOURCE, init=False)

    @property
    def target(self) -> str:
        """The name or URI this request is about (also the ``Mcp-Name`` header)."""
        return self.uri


MrtrParams: TypeAlias = CallToolParams | GetPromptParams | ReadResourceParams
