"""Fulfilling input requests from the command line.

One :class:`Inputs` answers every kind the command was configured for:

- ``elicitation/create``: the answers file first, then (``--yes`` or the demo) automatic
  answers, else the person at the terminal (:class:`~mrtr_cli.forms.Prompter`);
- ``roots/list``: the ``--root`` folders as ``file://`` URIs (declared only when given);
- ``sampling/createMessage``: a fixed reply or a command's output, only when configured
  (``--sampling-reply`` / ``--sampling-command``), with the person's approval when a terminal
  is there (C12: a human in the loop), cut to ``maxTokens`` (C12: MUST respect it).

Given the client's :class:`~mrtr_cli.terminal.Turns`, the inputs of a round take turns in the
server's order: one person, one terminal, one prompt at a time, and notes in a stable order.

A kind that is not configured is not declared in ``clientCapabilities`` (C8), so a server
that follows S6 never asks for it. When an input cannot be given (sampling refused, no answer
for a form in a script), the handler raises :class:`InputUnavailableError`: MRTR has no error
channel for input requests (digest C13, §5.4), so the flow stops here and nothing is sent.
"""

from __future__ import annotations

import functools
import json
import shlex
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
from rich.console import Console
from rich.text import Text

from mrtr_cli.answers import auto_content, scripted_result
from mrtr_cli.forms import Prompter, describe_url
from mrtr_cli.safe import clean, plain
from mrtr_cli.terminal import Turns
from mrtr_core.errors import MrtrError
from mrtr_core.wire.forms import FormAnswerError, FormSpec
from mrtr_core.wire.models import (
    ELICITATION_CREATE,
    ROOTS_LIST,
    SAMPLING_CREATE_MESSAGE,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageResult,
    ElicitationCapability,
    ElicitFormRequest,
    ElicitResult,
    ElicitUrlRequest,
    InputRequest,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
    Root,
    SamplingCapability,
)

__all__ = ["InputUnavailableError", "Inputs", "SamplingConfig", "roots_from_paths"]

SAMPLING_MODEL: Final = "mrtr-cli"
MAX_SAMPLING_OUTPUT: Final = 1024 * 1024


class InputUnavailableError(MrtrError):
    """This client cannot (or will not) provide one input; the flow stops without a retry.

    Attributes:
        key: The ``inputRequests`` key.
        kind: The input request method.
        reason: Why, in words for a person.
    """

    def __init__(self, key: str, kind: str, reason: str) -> None:
        super().__init__(f"input {key!r} ({kind}): {reason}")
        self.key = key
        self.kind = kind
        self.reason = reason


@attrs.frozen(kw_only=True)
class SamplingConfig:
    """How to answer ``sampling/createMessage``: a fixed ``reply`` or a ``command``.

    The command gets the request's params as JSON on stdin and its stdout is the reply text.
    """

    reply: str | None = None
    command: str | None = None
    timeout: float = 120.0


def _unblock_signals() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def roots_from_paths(paths: Sequence[str]) -> tuple[Root, ...]:
    """``--root`` folders as ``Root`` entries with absolute ``file://`` URIs (roots.mdx)."""
    roots = []
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        roots.append(Root(uri=path.as_uri(), name=path.name or str(path)))
    return tuple(roots)


@attrs.define(kw_only=True)
class Inputs:
    """Answers input requests for one command run.

    Attributes:
        console: Where notes about automatic answers are printed.
        prompter: Asks the person; ``None`` when nobody is at a terminal.
        answers: The answers file's entries, by input key.
        auto: Answer forms automatically (``--yes``): defaults and booleans true.
        fill: With ``auto``, also fill required fields without defaults (the demo).
        roots: What ``roots/list`` returns; empty means roots are not declared.
        sampling: How sampling is answered; ``None`` means it is not declared.
        url_mode: Declare URL-mode elicitation.
    """

    console: Console
    prompter: Prompter | None = None
    answers: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    auto: bool = False
    fill: bool = False
    roots: tuple[Root, ...] = ()
    sampling: SamplingConfig | None = None
    url_mode: bool = True

    @property
    def handled_kinds(self) -> frozenset[str]:
        """The input kinds this client answers (and so declares)."""
        kinds = {ELICITATION_CREATE}
        if self.roots:
            kinds.add(ROOTS_LIST)
        if self.sampling is not None:
            kinds.add(SAMPLING_CREATE_MESSAGE)
        return frozenset(kinds)

    def capabilities(self) -> ClientCapabilities:
        """The ``clientCapabilities`` to send on every request (C8)."""
        return ClientCapabilities(
            elicitation=ElicitationCapability(form={}, url={} if self.url_mode else None),
            sampling=SamplingCapability() if self.sampling is not None else None,
            roots={} if self.roots else None,
        )

    def answer(
        self,
        key: str,
        request: InputRequest,
        *,
        turns: Turns | None = None,
        cancel: threading.Event | None = None,
    ) -> InputResponse:
        """The response to one input request.

        With ``turns`` (one per client: :func:`~mrtr_cli.calls.build_client`), it waits until
        the earlier inputs of its round are done; ``cancel`` is the client's cancellation
        event for this input: once set, the input stops waiting for its turn or for a line.

        Raises:
            InputUnavailableError: this input cannot be given; the flow must stop (C13).
            FormSchemaError: the server's form is outside what a form may ask.
            FormAnswerError: an answers-file entry does not satisfy the form.
            InputAbandoned: ``cancel`` was set first (the flow no longer needs the answer).
        """
        if turns is None:
            return self._answer(key, request)
        with turns.turn(key, cancel):
            if self.prompter is None:
                return self._answer(key, request)
            with self.prompter.reading_through(functools.partial(turns.read, key, cancel=cancel)):
                return self._answer(key, request)

    def _answer(self, key: str, request: InputRequest) -> InputResponse:
        if isinstance(request, ElicitFormRequest):
            return self._form(key, request)
        if isinstance(request, ElicitUrlRequest):
            return self._url(key, request)
        if isinstance(request, ListRootsRequest):
            if not self.roots:
                raise InputUnavailableError(key, ROOTS_LIST, "no --root was given")
            return ListRootsResult(roots=list(self.roots))
        return self._sample(key, request)

    # --- elicitation ------------------------------------------------------------------------

    def _note(self, key: str, how: str, result: ElicitResult) -> None:
        line = Text(f"  {clean(key)}: {how} → {result.action}", style="dim")
        if result.content:
            line.append(" ")
            line.append(plain(json.dumps(result.content, ensure_ascii=False), "dim", limit=400))
        self.console.print(line)

    def _unanswered(self, key: str, why: str) -> InputUnavailableError:
        if self.answers:  # an answers file was given: most likely a key misspelt in it
            known = ", ".join(repr(name) for name in sorted(self.answers))
            why = f"the answers file has no entry for {key!r} (its entries: {known})"
        return InputUnavailableError(key, ELICITATION_CREATE, clean(why, limit=400))

    def _form(self, key: str, request: ElicitFormRequest) -> ElicitResult:
        spec = FormSpec.from_schema(request.requested_schema)
        if key in self.answers:
            result = scripted_result(spec, self.answers[key])
            self._note(key, "answers file", result)
            return result
        if self.auto:
            try:
                content = auto_content(spec, fill=self.fill)
            except FormAnswerError as exc:
                raise InputUnavailableError(
                    key, ELICITATION_CREATE,
                    f"--yes cannot answer this form ({'; '.join(exc.problems)})") from exc
            result = ElicitResult(action="accept", content=content)
            self._note(key, "automatic", result)
            return result
        if self.prompter is not None:
            return self.prompter.form(key, request)
        raise self._unanswered(
            key, "a form needs answers and nobody is at a terminal: use --answers or --yes")

    def _url(self, key: str, request: ElicitUrlRequest) -> ElicitResult:
        if key in self.answers:
            result = scripted_result(None, self.answers[key])
        elif self.auto:
            result = ElicitResult(action="accept")
        elif self.prompter is not None:
            return self.prompter.url(key, request)
        else:
            raise self._unanswered(
                key, "a URL needs the person's consent and nobody is at a terminal")
        # Without a prompt the whole URL is still shown (C10); this client never opens it.
        shown, notes = describe_url(request.url)
        self.console.print(Text.assemble(f"  {clean(key)}: URL ", shown,
                                         " (not opened by mrtr)", *[f" ⚠ {n}" for n in notes]))
        self._note(key, "answers file" if key in self.answers else "--yes", result)
        return result

    # --- sampling ---------------------------------------------------------------------------

    def _sample(self, key: str, request: CreateMessageRequest) -> CreateMessageResult:
        config = self.sampling
        if config is None:
            raise InputUnavailableError(key, SAMPLING_CREATE_MESSAGE, "sampling is not configured")
        if request.extra.get("tools") is not None or request.extra.get("toolChoice") is not None:
            # sampling.tools is never declared here, so a request with tools is an error
            # case that MRTR cannot report (C12, S6b): stop.
            raise InputUnavailableError(key, SAMPLING_CREATE_MESSAGE,
                                        "the request uses tools, which this client did not declare")
        if self.prompter is not None and not self.auto:
            self._show_sampling(key, request)
            if not self.prompter.confirm(Text("Answer this sampling request?"), default=True):
                raise InputUnavailableError(key, SAMPLING_CREATE_MESSAGE,
                                            "you declined the sampling request")
        text = config.reply if config.reply is not None else self._run_command(key, request)
        words = text.split()
        stop = "endTurn"
        if len(words) > request.max_tokens:  # one word counts as one token here
            text = " ".join(words[: request.max_tokens])
            stop = "maxTokens"
        return CreateMessageResult(role="assistant", content={"type": "text", "text": text},
                                   model=SAMPLING_MODEL, stop_reason=stop)

    def _show_sampling(self, key: str, request: CreateMessageRequest) -> None:
        self.console.print(Text(f"Sampling request {clean(key)} (max {request.max_tokens} tokens):",
                                style="bold"))
        if request.system_prompt:
            self.console.print(plain(f"  system: {request.system_prompt}", "dim", limit=2000))
        for message in request.messages:
            content = message.get("content")
            blocks = content if isinstance(content, list) else [content]
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "text":
                    body = block.get("text", "")
                else:
                    body = f"[{block.get('type') if isinstance(block, dict) else '?'} block]"
                self.console.print(plain(f"  {message.get('role', '?')}: {body}", limit=2000))

    def _run_command(self, key: str, request: CreateMessageRequest) -> str:
        config = self.sampling
        assert config is not None and config.command is not None
        params = {"messages": request.messages, "maxTokens": request.max_tokens,
                  **({"systemPrompt": request.system_prompt} if request.system_prompt else {}),
                  **request.extra}
        try:
            done = subprocess.run(
                shlex.split(config.command), input=json.dumps(params), capture_output=True,
                text=True, timeout=config.timeout, check=False,
                # Handler threads block SIGINT/SIGTERM (mrtr_sync.threads); a child inherits
                # that mask, and would then outlive Ctrl-C and `kill`.
                preexec_fn=_unblock_signals,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputUnavailableError(key, SAMPLING_CREATE_MESSAGE,
                                        f"sampling command failed: {exc}") from exc
        if done.returncode != 0:
            raise InputUnavailableError(
                key, SAMPLING_CREATE_MESSAGE,
                f"sampling command exited {done.returncode}: {clean(done.stderr, limit=200)}")
        return done.stdout[:MAX_SAMPLING_OUTPUT].strip()
