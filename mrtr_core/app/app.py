"""The minimal MCP 2026-07-28 server surface, sans-IO.

:class:`App` answers ``server/discover``, the list methods, ``completion/complete`` and the
three MRTR methods (``tools/call``, ``prompts/get``, ``resources/read``) for the tools,
prompts and resources registered on it with decorators. It reads decoded JSON-RPC messages
and returns replies; it never touches a socket, a clock or a thread. Handlers are resumable
(they run under the server engine's :class:`~mrtr_core.server.Context`), so a driver runs
them between :meth:`App.receive` and :meth:`App.complete`.

Validation order (digest §3.5, after the transport's own parse and header checks):

1. the JSON-RPC envelope (-32600);
2. the per-request ``_meta``: ``protocolVersion`` and ``clientCapabilities`` (-32602, 400);
3. the protocol version (-32022 with ``data: {supported, requested}``, 400);
4. the method exists and its capability is advertised (-32601, 404);
5. the method's params: unknown tool/prompt/resource, bad arguments (-32602);
6. ``requestState`` and ``inputResponses`` (the engine; -32602; an answer under a key the
   state does not record is checked when the handler asks that key);
7. the handler (a missing client capability: -32021, 400).

Logging: a handler that raised, a failure of the server's own and a refused
``requestState`` are logged on the ``mrtr.server`` loggers; the client's own mistakes are
not. :mod:`mrtr_core.app.logs` lists the loggers, their levels and what each record holds.
"""

from __future__ import annotations

import functools
import inspect
import marshal
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from mrtr_core._checks import flag, instance_of, optional_text
from mrtr_core._memo import remember
from mrtr_core.app import logs
from mrtr_core.app.completion import completion_params, completion_result
from mrtr_core.app.progress import ProgressBook
from mrtr_core.app.registry import (
    CacheScope,
    Completer,
    PromptArgument,
    PromptDef,
    ResourceDef,
    ResourceTemplateDef,
    ToolDef,
    check_resource_handler,
    declared_annotations,
    declared_icons,
    declared_meta,
    declared_size,
    first_paragraph,
    is_template,
    resource_uri_problem,
)
from mrtr_core.app.reply import Reply, RequestId, RunHandler
from mrtr_core.app.results import (
    caching_problem,
    prompt_result,
    resource_result,
    tool_error_result,
)
from mrtr_core.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    CodecError,
    JsonRpcError,
    LocalProtocolError,
    MrtrError,
    RemoteProtocolError,
)
from mrtr_core.jsonrpc import MessageError, Notification, Request, parse_request
from mrtr_core.server import Completed, HandlerSpec, NeedsInput, ServerEngine, ServerLimits
from mrtr_core.state import StateCodec, StateRejectedError
from mrtr_core.wire.converter import META_SERVER_INFO, structure_params, structure_request_meta
from mrtr_core.wire.models import (
    CALL_TOOL,
    GET_PROMPT,
    READ_RESOURCE,
    SUPPORTED_VERSIONS,
    CallToolParams,
    GetPromptParams,
    JsonObject,
    MrtrParams,
    ReadResourceParams,
    RequestMeta,
)
from mrtr_core.wire.records import record_maker

__all__ = ["REMOVED_METHODS", "SUPPORTED_VERSIONS", "App"]

F = TypeVar("F", bound=Callable[..., Any])

# Methods 2026-07-28 removed (SEP-2575; digest §3.2): answered -32601 / 404 like an unknown
# method, but before _meta is checked (a legacy client sends none), naming them as removed.
REMOVED_METHODS: Final = frozenset({
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
})

_MISSING: Final = object()
# Built on every round from the route's own handler and flag: no __init__.
_handler_spec: Final[Callable[[Callable[..., Any], bool, str], HandlerSpec]] = record_maker(
    HandlerSpec
)
_METAS_MAX: Final = 256  # distinct request _meta remembered per app
_META_KEY_MAX: Final = 4096  # larger _meta values are read every time, never remembered

_Route = Callable[[Request, RequestMeta, float, "str | None"], "Reply | RunHandler"]


def _may_suspend(handler: Callable[..., Any]) -> bool:
    """Whether calling ``handler`` may give an awaitable (anything but a plain function)."""
    if inspect.isfunction(handler) or inspect.ismethod(handler):
        return inspect.iscoroutinefunction(handler) or inspect.isasyncgenfunction(handler)
    return True


def _unreadable_state(params: JsonObject | None) -> bool:
    """Whether ``params`` carries a ``requestState`` that is not a string (``null`` is
    absent)."""
    if params is None:
        return False
    state = params.get("requestState")
    return state is not None and not isinstance(state, str)


def _refuse_bare_decorator(kind: str, name: object) -> None:
    """Refuse ``@app.tool`` written without parentheses: the function would arrive as the
    name, and the decorator would replace it with its inner function, registering nothing."""
    if callable(name):
        raise TypeError(f"App.{kind} takes arguments: write @app.{kind}(), not @app.{kind}")


class App:
    """An MCP 2026-07-28 server: a registry of tools, prompts and resources plus the
    protocol rules around them.

    Args:
        name: The server's name (``serverInfo.name``; also a sensible codec audience).
        version: The server's version (``serverInfo.version``).
        codec: Seals and opens ``requestState`` (share its key ring across instances).
        instructions: Optional ``instructions`` for ``server/discover``.
        server_info: Put ``io.modelcontextprotocol/serverInfo`` in every result's ``_meta``
            (a SHOULD, digest §1.1).
        limits: The engine's limits (rounds, input requests per round, state size, ...).
        ttl_ms: ``ttlMs`` on ``server/discover`` and list results (caching.mdx).
        cache_scope: ``cacheScope`` on ``server/discover`` and list results.

    Logging (:mod:`mrtr_core.app.logs`): a handler that raised and the server's own
    failures at ERROR with the traceback on ``mrtr.server``; a refused ``requestState`` at
    INFO with its reason code on ``mrtr.server.state``; the client's own mistakes and
    successful rounds not at all. The app never configures logging.
    """

    def __init__(
        self,
        name: str,
        version: str,
        *,
        codec: StateCodec,
        instructions: str | None = None,
        server_info: bool = True,
        limits: ServerLimits | None = None,
        ttl_ms: int = 0,
        cache_scope: CacheScope = "private",
    ) -> None:
        instance_of("name", name, str, "a string")
        instance_of("version", version, str, "a string")
        optional_text("instructions", instructions)
        flag("server_info", server_info)
        problem = caching_problem(ttl_ms, cache_scope)
        if problem is not None:
            raise ValueError(problem)
        self.name = name
        self.version = version
        self.instructions = instructions
        self.server_info = server_info
        self.ttl_ms = ttl_ms
        self.cache_scope: CacheScope = cache_scope
        self.engine = ServerEngine(codec, limits=limits if limits is not None else ServerLimits())
        self._tools: dict[str, ToolDef] = {}
        self._prompts: dict[str, PromptDef] = {}
        self._resources: dict[str, ResourceDef] = {}
        self._templates: dict[str, ResourceTemplateDef] = {}
        self._completer: Completer | None = None
        self._progress = ProgressBook()
        self._may_suspend: dict[Callable[..., Any], bool] = {}
        # Request _meta read and accepted, by its marshal bytes (bounded, oldest first).
        self._metas: OrderedDict[bytes, RequestMeta] = OrderedDict()

    # --- registration ------------------------------------------------------------------

    def tool(
        self,
        name: str | None = None,
        description: str | None = None,
        input_schema: JsonObject | None = None,
        single_use: bool = False,
        *,
        title: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        output_schema: JsonObject | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Register a tool. The handler is ``(ctx, **arguments)``, sync or async.

        Args:
            name: Defaults to the function's name (1-128 of ``[A-Za-z0-9_.-]``).
            description: Defaults to the docstring's first paragraph.
            input_schema: A JSON Schema (2020-12, JSON values only) with ``type: object`` at
                the root; by default derived from the handler's keyword parameters and
                annotations.
                Arguments are validated against it (-32602 on mismatch).
            single_use: Every ``requestState`` of this tool may be redeemed once (the driver
                claims it on a replay guard first).
            title: The tool's display name (``title`` in ``tools/list``).
            annotations: ``ToolAnnotations`` hints: ``title`` (a string), ``readOnlyHint``,
                ``destructiveHint``, ``idempotentHint``, ``openWorldHint`` (booleans); any
                other member, or one of another type, is refused.
            output_schema: The ``outputSchema``: a JSON Schema (2020-12, JSON values only)
                of the tool's ``structuredContent``. Every complete result that is not an
                error must then carry ``structuredContent`` it accepts, else the call is
                answered -32603 (server/tools.mdx § Output Schema).
            icons: ``Icon`` mappings: ``src`` (a URI with a scheme, such as an https or a
                ``data:`` URI), and when given ``mimeType`` (a string), ``sizes`` (a list
                of ``"WxH"`` sizes or ``"any"``), ``theme`` (``"light"`` or ``"dark"``);
                any other member, or one of another type or format, is refused.
            meta: The tool's ``_meta``: a mapping with string keys that JSON can write.

        Each is checked when the decorator runs (``TypeError``/``ValueError`` naming it),
        copied whole (what was given may change afterwards, at any depth: the app lists and
        checks the copy), and listed in ``tools/list`` under the schema's name only when
        given. A
        schema's ``$ref``s must resolve inside it (no URI is retrieved) and none may loop
        back without going into the value
        (:func:`~mrtr_core.server.schemas.reference_problem`): every call is checked against
        it.

        The handler's value becomes the ``CallToolResult`` (see
        :func:`~mrtr_core.app.results.tool_result`); an exception becomes a result with
        ``isError: true``, except :class:`~mrtr_core.errors.JsonRpcError` and engine errors,
        which are answered as JSON-RPC errors.
        """

        _refuse_bare_decorator("tool", name)

        def register(handler: F) -> F:
            tool = ToolDef.build(handler, name=name, description=description,
                                 input_schema=input_schema, single_use=single_use,
                                 title=title, annotations=annotations,
                                 output_schema=output_schema, icons=icons, meta=meta)
            if tool.name in self._tools:
                raise ValueError(f"tool {tool.name!r} is already registered")
            self._tools[tool.name] = tool
            return handler

        return register

    def prompt(
        self,
        name: str | None = None,
        description: str | None = None,
        arguments: Sequence[PromptArgument | Mapping[str, Any] | str] | None = None,
        single_use: bool = False,
        *,
        title: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Register a prompt. The handler is ``(ctx, **arguments)`` with string arguments.

        ``name`` defaults to the function's name; an empty one is refused (``ValueError``).
        ``title`` is its display name in ``prompts/list``; ``icons`` and ``meta`` (its
        ``_meta``) are checked, copied and listed as a tool's are (:meth:`tool`).
        ``arguments`` are ``{"name", "title", "description", "required"}`` mappings (another
        member is refused) or names (which are required); by default derived from the
        handler's parameters. The handler takes them by keyword: one it cannot take, or a
        parameter without a default that is not a required argument, is refused here with a
        ``TypeError``. The handler returns a string, a list of messages, or a whole
        ``GetPromptResult`` mapping.
        """

        _refuse_bare_decorator("prompt", name)

        def register(handler: F) -> F:
            prompt = PromptDef.build(handler, name=name, description=description,
                                     arguments=arguments, single_use=single_use, title=title,
                                     icons=icons, meta=meta)
            if prompt.name in self._prompts:
                raise ValueError(f"prompt {prompt.name!r} is already registered")
            self._prompts[prompt.name] = prompt
            return handler

        return register

    def resource(
        self,
        uri: str,
        name: str | None = None,
        mime_type: str | None = None,
        description: str | None = None,
        ttl_ms: int = 0,
        cache_scope: CacheScope = "private",
        single_use: bool = False,
        *,
        title: str | None = None,
        icons: Sequence[Mapping[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        size: int | None = None,
    ) -> Callable[[F], F]:
        """Register a resource, or a resource template when ``uri`` contains ``{var}``.

        Templates are RFC 6570 level 1: ``{name}`` matches one path segment (no ``/``,
        ``?`` or ``#``), taken as it appears in the URI (not percent-decoded); other
        braces are refused. The handler, checked here, is ``(ctx, uri)`` (templates:
        ``(ctx, uri, **variables)``; a generator function is refused) and returns
        text, bytes (sent as a base64 blob), a list of contents items, or a whole
        ``ReadResourceResult`` mapping. ``ttl_ms``/``cache_scope`` are its caching hints;
        ``title`` is its display name in ``resources/list`` (``resources/templates/list``);
        ``icons`` and ``meta`` (its ``_meta``) are checked, copied and listed as a tool's
        are (:meth:`tool`), as are ``annotations`` (``Annotations``: ``audience``, a list of
        ``"user"`` and ``"assistant"``; ``priority``, a number from 0 to 1;
        ``lastModified``, an RFC 3339 date-time with an offset such as
        ``"2025-01-12T15:00:58Z"``) and, for a resource that is not a template, ``size``
        (the raw content's size in bytes, an integer).

        Raises:
            ValueError: ``uri`` is not a level-1 template or a URI with a scheme (nor
                expands to one), ``name`` is empty,
                the caching hints are invalid, a template is given a ``size`` (or a
                resource one too long to write), or a member of ``icons``, ``meta`` or
                ``annotations`` is unknown or out of its range or format.
            TypeError: ``name``, ``title``, ``mime_type`` or ``description`` is not a
                string or ``None``, ``single_use`` is not a bool, or ``icons``, ``meta``,
                ``annotations``, ``size`` or one of their members is of another type.
        """
        problem = resource_uri_problem(uri) or caching_problem(ttl_ms, cache_scope)
        if problem is not None:
            raise ValueError(problem)
        # name and mimeType are strings on the wire (resources/list, every read).
        optional_text(f"resource {uri!r}: name", name)
        if name == "":  # as for tools and prompts: only None takes the function's name
            raise ValueError(f"resource {uri!r}: name must not be empty")
        optional_text(f"resource {uri!r}: title", title)
        optional_text(f"resource {uri!r}: mime_type", mime_type)
        optional_text(f"resource {uri!r}: description", description)
        flag(f"resource {uri!r}: single_use", single_use)
        owner = f"resource {uri!r}"
        resource_icons = declared_icons(owner, icons)
        resource_meta = declared_meta(owner, meta)
        resource_annotations = declared_annotations(owner, annotations)
        resource_size = declared_size(owner, size)
        if resource_size is not None and is_template(uri):
            # schema.ts: size is a member of Resource only, not of ResourceTemplate.
            raise ValueError(f"{owner}: a resource template has no size")

        def register(handler: F) -> F:
            check_resource_handler(handler, uri)
            label = name if name is not None else handler.__name__
            doc = description if description is not None else first_paragraph(handler.__doc__)
            if is_template(uri):
                if uri in self._templates:
                    raise ValueError(f"resource template {uri!r} is already registered")
                self._templates[uri] = ResourceTemplateDef(
                    uri_template=uri, name=label, description=doc, mime_type=mime_type,
                    handler=handler, ttl_ms=ttl_ms, cache_scope=cache_scope,
                    single_use=single_use, title=title, icons=resource_icons,
                    meta=resource_meta, annotations=resource_annotations,
                    pattern=ResourceTemplateDef.compile(uri),
                )
            else:
                if uri in self._resources:
                    raise ValueError(f"resource {uri!r} is already registered")
                self._resources[uri] = ResourceDef(
                    uri=uri, name=label, description=doc, mime_type=mime_type,
                    handler=handler, ttl_ms=ttl_ms, cache_scope=cache_scope,
                    single_use=single_use, title=title, icons=resource_icons,
                    meta=resource_meta, annotations=resource_annotations, size=resource_size,
                )
            return handler

        return register

    def completion(self) -> Callable[[F], F]:
        """Register the ``completion/complete`` handler ``(ref, argument, context)``.

        ``ref`` is ``{"type": "ref/prompt", "name"}`` or ``{"type": "ref/resource", "uri"}``,
        ``argument`` is ``{"name", "value"}``, ``context`` the optional ``{"arguments"}``.
        It returns a list of strings (or a ``{"values", "total", "hasMore"}`` mapping); it is
        called synchronously. Registering it advertises the ``completions`` capability.
        """

        def register(handler: F) -> F:
            if self._completer is not None:
                raise ValueError("a completion handler is already registered")
            self._completer = Completer(handler=handler)
            return handler

        return register

    def report_progress(
        self,
        ctx: Any,
        progress: float,
        total: float | None = None,
        message: str | None = None,
    ) -> None:
        """Emit ``notifications/progress`` for the request ``ctx`` belongs to.

        Sent only when the request carried a ``progressToken`` (progress.mdx); delivered
        before the reply (``Reply.notifications``). ``progress`` must increase with every
        notification of a request.

        Raises:
            LocalProtocolError: ``ctx`` is not the context of a handler of this app that is
                still running.
            ValueError: ``progress`` did not increase, or is not a finite number; ``total``
                is not a finite number or ``None``; ``message`` is not a string or ``None``.
        """
        self._progress.report(ctx, progress, total, message)

    # --- introspection -------------------------------------------------------------------

    def find_tool(self, name: str) -> ToolDef | None:
        """The registered tool of that name (the HTTP layer reads ``x-mcp-header`` from its
        ``input_schema``)."""
        return self._tools.get(name)

    def tool_header_params(self, name: str) -> dict[str, str]:
        """``{argument: header name}`` for the tool's ``x-mcp-header`` arguments (mirrored
        into ``Mcp-Param-<name>`` headers on HTTP, digest §3.3 item 6); ``{}`` for an unknown
        tool or one without such arguments."""
        tool = self._tools.get(name)
        properties = tool.input_schema.get("properties") if tool is not None else None
        if not isinstance(properties, dict):
            return {}
        return {
            arg: spec["x-mcp-header"]
            for arg, spec in properties.items()
            if isinstance(spec, dict) and isinstance(spec.get("x-mcp-header"), str)
        }

    @property
    def tools(self) -> tuple[ToolDef, ...]:
        """Registered tools, in registration order (the ``tools/list`` order)."""
        return tuple(self._tools.values())

    @property
    def prompts(self) -> tuple[PromptDef, ...]:
        """Registered prompts, in registration order."""
        return tuple(self._prompts.values())

    @property
    def single_use_targets(self) -> tuple[str, ...]:
        """Every single-use handler, as ``tool NAME``, ``prompt NAME`` or ``resource URI``
        (a template's URI template): each needs a replay guard (S12)."""
        return (
            *(f"tool {d.name}" for d in self._tools.values() if d.single_use),
            *(f"prompt {d.name}" for d in self._prompts.values() if d.single_use),
            *(f"resource {d.uri}" for d in self._resources.values() if d.single_use),
            *(f"resource {d.uri_template}" for d in self._templates.values() if d.single_use),
        )

    def capabilities(self) -> JsonObject:
        """The ``ServerCapabilities`` advertised by ``server/discover``: only what is
        registered (a method behind an unadvertised capability answers -32601)."""
        caps: JsonObject = {}
        if self._completer is not None:
            caps["completions"] = {}
        if self._prompts:
            caps["prompts"] = {}
        if self._resources or self._templates:
            caps["resources"] = {}
        if self._tools:
            caps["tools"] = {}
        return caps

    # --- the sans-IO entry points --------------------------------------------------------

    def receive(
        self,
        message: object,
        *,
        now: float,
        principal: str | None = None,
        parsed: Request | Notification | None = None,
    ) -> Reply | RunHandler:
        """Take one decoded JSON-RPC message.

        Args:
            message: The decoded JSON value (the transport already refused non-JSON, -32700).
            now: The current time (seconds, the clock the codec's tokens use).
            principal: The authenticated user (bound into ``requestState``), if any.
            parsed: ``jsonrpc.parse_request(message)`` when the transport already classified
                this very message (its ``raw`` must be ``message``); it is not parsed again.

        Returns:
            A :class:`Reply` to send, or a :class:`RunHandler` the driver must run and then
            pass to :meth:`complete`.
        """
        if parsed is not None and parsed.raw is message:
            msg: Request | Notification = parsed
        else:
            try:
                msg = parse_request(message)
            except MessageError as exc:
                return Reply.error(exc.request_id, JsonRpcError(exc.jsonrpc_code, str(exc)))
        if isinstance(msg, Notification):
            # Notifications get no response (HTTP: 202, empty body; digest §3.3).
            return Reply.accepted()
        try:
            return self._dispatch(msg, now, principal)
        except JsonRpcError as exc:
            return Reply.error(msg.id, exc)

    def complete(
        self,
        step: RunHandler,
        now: float,
        *,
        returned: Any = _MISSING,
        raised: BaseException | None = None,
    ) -> Reply:
        """Finish a :class:`RunHandler` with what its handler returned or raised.

        Returns the reply: the complete result, a fresh ``input_required`` result, or a
        JSON-RPC error.

        Raises:
            LocalProtocolError: Neither or both of ``returned``/``raised`` given, or the step
                was already finished.
        """
        if (returned is _MISSING) == (raised is None):
            raise LocalProtocolError("pass exactly one of returned= and raised=")
        if step.done:
            raise LocalProtocolError("this step was already completed")
        step.done = True
        self._progress.close(step.run.context)
        notes = step.notifications
        try:
            if raised is not None:
                outcome = step.run.finish(now, raised=raised)
            else:
                outcome = step.run.finish(now, returned=returned)
        except JsonRpcError as exc:
            if exc.code == INTERNAL_ERROR:  # a limit or the handler's mistake: the server's
                logs.server_failed(step.method, step.target, step.request_id, exc)
            return Reply.error(step.request_id, exc, notes)
        except RemoteProtocolError as exc:
            # Something the client sent was wrong (its own JSON-RPC code, e.g. -32602).
            return Reply.error(step.request_id, JsonRpcError(exc.jsonrpc_code, str(exc)), notes)
        except MrtrError as exc:
            # The engine or the server itself (a limit, a driver mistake): not the client's.
            logs.server_failed(step.method, step.target, step.request_id, exc)
            return Reply.error(step.request_id, JsonRpcError(INTERNAL_ERROR, str(exc)), notes)
        except Exception as exc:
            logs.handler_failed(step.method, step.target, step.request_id, exc)
            if step.method == CALL_TOOL:
                return Reply.result(step.request_id, self._stamp(
                    {**tool_error_result(exc), "resultType": "complete"}), notes)
            # Prompts and resources have no error result: an internal error, without the
            # exception's text (it may hold anything).
            return Reply.error(step.request_id, JsonRpcError(
                INTERNAL_ERROR, f"{step.method} handler failed ({type(exc).__name__})"), notes)
        if isinstance(outcome, NeedsInput):
            return Reply.result(step.request_id, self._stamp(dict(outcome.result)), notes)
        if not isinstance(outcome, Completed):
            raise LocalProtocolError(f"unexpected engine outcome {outcome!r}")
        try:
            result = step._finish(outcome.value)
        except JsonRpcError as exc:  # an invalid result: the handler's mistake (-32603)
            logs.server_failed(step.method, step.target, step.request_id, exc)
            return Reply.error(step.request_id, exc, notes)
        # A handler cannot smuggle input_required (or anything else) past the engine.
        result["resultType"] = "complete"
        return Reply.result(step.request_id, self._stamp(result), notes)

    def replayed(self, step: RunHandler) -> Reply:
        """The reply when the replay guard refused ``step.run.claim`` (token already used)."""
        step.done = True
        self._progress.close(step.run.context)
        logs.state_refused(step.method, step.target, step.request_id, "replayed")
        return Reply.error(step.request_id, step.run.replayed())

    # --- dispatch ------------------------------------------------------------------------

    def _dispatch(self, msg: Request, now: float, principal: str | None) -> Reply | RunHandler:
        if msg.method in REMOVED_METHODS:
            # A legacy client's messages never carry modern _meta: -32601 whatever they
            # carry (digest §3.2; the conformance suite expects 404/-32601 for them, §6).
            if msg.method == "initialize":  # name the versions this server speaks (Handshake)
                raise JsonRpcError(METHOD_NOT_FOUND,
                                   "initialize is not supported: this server speaks 2026-07-28",
                                   {"supported": list(SUPPORTED_VERSIONS)})
            raise JsonRpcError(METHOD_NOT_FOUND,
                               f"method {msg.method!r} was removed in 2026-07-28")
        meta = self._check_meta(msg.params)
        handler = self._route(msg.method)
        if handler is None:
            raise JsonRpcError(METHOD_NOT_FOUND, f"method not found: {msg.method}")
        return handler(msg, meta, now, principal)

    def _route(self, method: str) -> _Route | None:
        if method == "server/discover":
            return self._discover
        if method in ("tools/list", CALL_TOOL) and self._tools:
            return self._list_tools if method == "tools/list" else self._call_tool
        if method in ("prompts/list", GET_PROMPT) and self._prompts:
            return self._list_prompts if method == "prompts/list" else self._get_prompt
        if method in ("resources/list", "resources/templates/list", READ_RESOURCE) and (
            self._resources or self._templates
        ):
            routes: dict[str, _Route] = {
                "resources/list": self._list_resources,
                "resources/templates/list": self._list_templates,
                READ_RESOURCE: self._read_resource,
            }
            return routes[method]
        if method == "completion/complete" and self._completer is not None:
            return self._complete_argument
        return None

    def _check_meta(self, params: JsonObject | None) -> RequestMeta:
        # Per-request _meta is required on every request, retries included (digest §1.7).
        raw = None if params is None else params.get("_meta")
        # A client sends the same _meta on every request: a _meta read and accepted before
        # is not read again. It is found by its marshal bytes (format 2, no back-references:
        # equal bytes are equal values of the same built-in types, so 1, 1.0 and True are
        # told apart); a value marshal cannot write is simply read every time.
        key: bytes | None = None
        if type(raw) is dict:
            try:
                key = marshal.dumps(raw, 2)
            except ValueError:
                key = None
            else:
                found = self._metas.get(key)
                if found is not None:
                    return found
        try:
            meta = structure_request_meta(raw)
        except CodecError as exc:
            raise JsonRpcError(INVALID_PARAMS, f"invalid request _meta: {exc}") from None
        if meta.protocol_version not in SUPPORTED_VERSIONS:
            raise JsonRpcError(
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": list(SUPPORTED_VERSIONS), "requested": meta.protocol_version},
            )
        if key is not None and len(key) <= _META_KEY_MAX:
            remember(self._metas, key, meta, _METAS_MAX)
        return meta

    # --- results -------------------------------------------------------------------------

    def _stamp(self, result: JsonObject) -> JsonObject:
        """Add ``io.modelcontextprotocol/serverInfo`` to the result's ``_meta``."""
        if self.server_info:
            meta = result.get("_meta")
            meta = dict(meta) if isinstance(meta, dict) else {}
            meta.setdefault(META_SERVER_INFO, {"name": self.name, "version": self.version})
            result["_meta"] = meta
        return result

    def _complete_result(self, request_id: RequestId, result: JsonObject) -> Reply:
        result["resultType"] = "complete"
        return Reply.result(request_id, self._stamp(result))

    def _cacheable(self, request_id: RequestId, result: JsonObject) -> Reply:
        # ttlMs and cacheScope are required on discover and list results (caching.mdx).
        result["ttlMs"] = self.ttl_ms
        result["cacheScope"] = self.cache_scope
        return self._complete_result(request_id, result)

    # --- non-MRTR methods ----------------------------------------------------------------

    def _discover(self, msg: Request, meta: RequestMeta, now: float,
                  principal: str | None) -> Reply:
        result: JsonObject = {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": self.capabilities(),
        }
        if self.instructions is not None:
            result["instructions"] = self.instructions
        return self._cacheable(msg.id, result)

    @staticmethod
    def _no_cursor(params: JsonObject | None) -> None:
        # No list is paginated, so no cursor was ever issued: any cursor is invalid.
        if params is not None and params.get("cursor") is not None:
            raise JsonRpcError(INVALID_PARAMS, "invalid cursor")

    def _list_tools(self, msg: Request, meta: RequestMeta, now: float,
                    principal: str | None) -> Reply:
        self._no_cursor(msg.params)
        # Deterministic order (tools.mdx, SHOULD): registration order.
        return self._cacheable(msg.id, {"tools": [t.to_wire() for t in self._tools.values()]})

    def _list_prompts(self, msg: Request, meta: RequestMeta, now: float,
                      principal: str | None) -> Reply:
        self._no_cursor(msg.params)
        return self._cacheable(msg.id,
                               {"prompts": [p.to_wire() for p in self._prompts.values()]})

    def _list_resources(self, msg: Request, meta: RequestMeta, now: float,
                        principal: str | None) -> Reply:
        self._no_cursor(msg.params)
        return self._cacheable(
            msg.id, {"resources": [r.to_wire() for r in self._resources.values()]})

    def _list_templates(self, msg: Request, meta: RequestMeta, now: float,
                        principal: str | None) -> Reply:
        self._no_cursor(msg.params)
        return self._cacheable(
            msg.id, {"resourceTemplates": [t.to_wire() for t in self._templates.values()]})

    def _complete_argument(self, msg: Request, meta: RequestMeta, now: float,
                           principal: str | None) -> Reply:
        assert self._completer is not None
        ref, argument, context = completion_params(msg.params)
        try:
            value = self._completer.handler(ref, argument, context)
        except JsonRpcError:
            raise
        except Exception as exc:
            target = ref.get("name") if ref["type"] == "ref/prompt" else ref.get("uri")
            logs.handler_failed(msg.method, str(target), msg.id, exc)
            raise JsonRpcError(INTERNAL_ERROR,
                               f"completion handler failed ({type(exc).__name__})") from None
        return self._complete_result(msg.id, {"completion": completion_result(value)})

    # --- MRTR methods --------------------------------------------------------------------

    def _params(self, msg: Request, meta: RequestMeta) -> MrtrParams:
        # ``meta`` was read from these params by _check_meta: it is not read twice.
        raw = msg.params
        if raw is not None and _unreadable_state(raw):
            # Refused later with the other bad states (_begin), after the tool or prompt
            # and its arguments (validation order above): read the rest without it.
            raw = {key: value for key, value in raw.items() if key != "requestState"}
        try:
            return structure_params(msg.method, raw, meta=meta)
        except CodecError as exc:
            raise JsonRpcError(INVALID_PARAMS, f"invalid params: {exc}") from None

    def _begin(
        self,
        msg: Request,
        params: MrtrParams,
        *,
        handler: Callable[..., Any],
        single_use: bool,
        now: float,
        principal: str | None,
        call: Callable[[Any], Any],
        finish: Callable[[Any], JsonObject],
    ) -> RunHandler:
        # The engine checks requestState and inputResponses before any handler runs (an
        # answer under a key the state does not record is checked when the handler asks
        # it). The app calls the handler itself (``call``): with the arguments it
        # validated, and ``uri`` for resources.
        spec = _handler_spec(handler, single_use, params.target)
        try:
            if _unreadable_state(msg.params):
                # The server only issues strings: anything else fails verification (S9,
                # S10) and gets the reply every refused requestState gets (digest §2.5).
                raise StateRejectedError("malformed", "requestState is not a string")
            run = self.engine.begin(params, spec, now=now, principal=principal)
        except StateRejectedError as exc:
            logs.state_refused(msg.method, params.target, msg.id, exc.reason)
            raise
        notes = self._progress.open(run.context, params.meta.progress_token)
        return RunHandler(
            run=run,
            # partial objects, not lambdas: no Python frame of their own between the
            # driver and the handler (nor in the traceback of every pending question).
            invoke=functools.partial(call, run.context),
            request_id=msg.id,
            method=msg.method,
            target=params.target,
            finish=finish,
            notifications=notes,
            may_suspend=self._suspends(handler),
        )

    def _suspends(self, handler: Callable[..., Any]) -> bool:
        try:
            return self._may_suspend[handler]
        except KeyError:
            found = self._may_suspend[handler] = _may_suspend(handler)
            return found
        except TypeError:  # an unhashable callable object
            return _may_suspend(handler)

    def _call_tool(self, msg: Request, meta: RequestMeta, now: float,
                   principal: str | None) -> RunHandler:
        params = self._params(msg, meta)
        assert isinstance(params, CallToolParams)
        tool = self._tools.get(params.name)
        if tool is None:
            raise JsonRpcError(INVALID_PARAMS, f"Unknown tool: {params.name}",
                               {"name": params.name})
        arguments = dict(params.arguments or {})
        try:
            problem = tool.check_arguments(arguments)
        except JsonRpcError as exc:  # the tool's own schema failed (-32603): the server's
            logs.server_failed(msg.method, tool.name, msg.id, exc)
            raise
        if problem is not None:
            raise JsonRpcError(INVALID_PARAMS,
                               f"invalid arguments for tool {tool.name!r}: {problem}")
        return self._begin(
            msg, params, handler=tool.handler, single_use=tool.single_use, now=now,
            principal=principal, call=functools.partial(tool.handler, **arguments),
            finish=tool.finish,
        )

    def _get_prompt(self, msg: Request, meta: RequestMeta, now: float,
                    principal: str | None) -> RunHandler:
        params = self._params(msg, meta)
        assert isinstance(params, GetPromptParams)
        prompt = self._prompts.get(params.name)
        if prompt is None:
            raise JsonRpcError(INVALID_PARAMS, f"Unknown prompt: {params.name}",
                               {"name": params.name})
        selected = prompt.select_arguments(params.arguments or {})
        if isinstance(selected, str):
            raise JsonRpcError(INVALID_PARAMS,
                               f"invalid arguments for prompt {prompt.name!r}: {selected}")
        arguments = selected
        return self._begin(
            msg, params, handler=prompt.handler, single_use=prompt.single_use, now=now,
            principal=principal, call=functools.partial(prompt.handler, **arguments),
            finish=prompt_result,
        )

    def _read_resource(self, msg: Request, meta: RequestMeta, now: float,
                       principal: str | None) -> RunHandler:
        params = self._params(msg, meta)
        assert isinstance(params, ReadResourceParams)
        uri = params.uri
        entry: ResourceDef | ResourceTemplateDef | None = self._resources.get(uri)
        variables: dict[str, str] = {}
        if entry is None:
            for template in self._templates.values():
                matched = template.match(uri)
                if matched is not None:
                    entry, variables = template, matched
                    break
        if entry is not None:
            return self._begin_read(msg, params, entry, variables, now, principal)
        # Resource not found is -32602 with the uri in data (SEP-2164; digest §1.8).
        raise JsonRpcError(INVALID_PARAMS, "Resource not found", {"uri": uri})

    def _begin_read(
        self,
        msg: Request,
        params: ReadResourceParams,
        entry: ResourceDef | ResourceTemplateDef,
        variables: dict[str, str],
        now: float,
        principal: str | None,
    ) -> RunHandler:
        uri = params.uri

        def finish(value: Any) -> JsonObject:
            return resource_result(value, uri=uri, mime_type=entry.mime_type,
                                   ttl_ms=entry.ttl_ms, cache_scope=entry.cache_scope)

        return self._begin(
            msg, params, handler=entry.handler, single_use=entry.single_use, now=now,
            principal=principal, call=lambda ctx: entry.handler(ctx, uri, **variables),
            finish=finish,
        )
