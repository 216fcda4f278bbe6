"""``mrtr call`` / ``prompt`` / ``read`` logic over an in-memory server: rounds, progress lines,
results, and the messages for flows that stop."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from cli_app import make_app
from mrtr_cli.calls import EXIT_FAILED, EXIT_OK, EXIT_TOOL_ERROR, CallSpec, build_client, run_call
from mrtr_cli.inputs import Inputs, SamplingConfig, roots_from_paths
from mrtr_cli.progress import RoundReporter
from mrtr_sync import MemoryTransport
from rich.console import Console

from mrtr_core.app import drive_sync
from mrtr_core.client.limits import ClientLimits
from mrtr_core.http import ParamHeaderRegistry

NOW = 1_800_000_000.0


def console() -> Console:
    return Console(file=io.StringIO(), width=200, color_system=None, highlight=False)


def shown(c: Console) -> str:
    assert isinstance(c.file, io.StringIO)
    return c.file.getvalue()


def run(spec: CallSpec, inputs: Inputs, *, raw: bool = False) -> tuple[int, str, str]:
    app = make_app()

    def serve(message: dict[str, Any]) -> dict[str, Any]:
        reply = drive_sync(app, message, now=NOW)
        assert reply.message is not None
        return reply.message

    out, ui = console(), console()
    inputs.console = ui
    reporter = RoundReporter(ui)
    with build_client(MemoryTransport(serve), inputs, on_event=reporter,
                      limits=ClientLimits(max_rounds=5)) as client:
        status = run_call(client, spec, out=out, ui=ui, reporter=reporter, raw=raw)
    return status, shown(out), shown(ui)


def tool(name: str, arguments: dict[str, Any] | None = None) -> CallSpec:
    return CallSpec(method="tools/call", target=name, arguments=arguments)


def test_form_answered_from_answers_file_prints_rounds_and_result() -> None:
    inputs = Inputs(console=console(), answers={"who": {"name": "Ada", "role": "dev"}})
    status, out, ui = run(tool("greet"), inputs)
    assert status == EXIT_OK
    assert out.strip() == "Hello Ada (dev)"
    assert "round 1 → request id 1" in ui
    assert "round 1 ← input_required: who (form); requestState" in ui
    assert "round 2 → request id 2 (inputResponses + requestState echoed)" in ui
    assert "round 2 ← complete" in ui


def test_person_answers_the_form_at_the_terminal(terminal: Any) -> None:
    term = terminal(["Grace", "nope", "grace@example.com", "200", "36", "2", "a"])
    inputs = Inputs(console=term.console, prompter=term.prompter)
    status, out, _ = run(tool("greet"), inputs)
    assert status == EXIT_OK
    assert out.strip() == "Hello Grace (ops)"
    assert "'nope' is not a 'email'" in term.text
    assert "200 is greater than the maximum of 150" in term.text


def test_declined_form_reaches_the_server_as_decline(terminal: Any) -> None:
    term = terminal([":d"])
    status, out, _ = run(tool("greet"), Inputs(console=term.console, prompter=term.prompter))
    assert status == EXIT_TOOL_ERROR
    assert "The tool reported an error" in out
    assert "no answer (decline)" in out


def test_two_rounds_each_get_a_progress_line() -> None:
    inputs = Inputs(console=console(), answers={"step1": {"a": "x"}, "step2": {"b": 2}})
    status, out, ui = run(tool("two_step"), inputs)
    assert status == EXIT_OK
    assert out.strip() == "a=x b=2"
    assert "round 1 ← input_required: step1 (form)" in ui
    assert "round 2 ← input_required: step2 (form)" in ui
    assert "round 3 ← complete" in ui


def test_url_consent_from_the_person(terminal: Any) -> None:
    term = terminal(["a"])
    status, out, _ = run(tool("connect"), Inputs(console=term.console, prompter=term.prompter))
    assert status == EXIT_OK
    assert out.strip() == "consented"
    assert "https://auth.example.com/x?s=1" in term.text


def test_sampling_is_answered_when_configured() -> None:
    inputs = Inputs(console=console(), sampling=SamplingConfig(reply="short and sweet"), auto=True)
    status, out, _ = run(tool("summarise", {"topic": "MRTR"}), inputs)
    assert status == EXIT_OK
    assert out.strip() == "model says: short and sweet"


def test_sampling_not_configured_fails_with_a_clear_message() -> None:
    status, out, ui = run(tool("summarise", {"topic": "MRTR"}), Inputs(console=console()))
    assert status == EXIT_FAILED
    assert out == ""
    # Sampling is not declared, so the server refuses up front (-32021, S7).
    assert "-32021" in ui
    assert "requiredCapabilities" in ui
    # The message names the options that declare the capability, not only its JSON name.
    assert "This call needs sampling (--sampling-reply TEXT or --sampling-command CMD)" in ui


def test_roots_not_configured_names_the_root_option() -> None:
    status, _, ui = run(tool("where"), Inputs(console=console()))
    assert status == EXIT_FAILED
    assert "-32021" in ui
    assert "This call needs roots (--root PATH): add the option and run it again." in ui


def test_roots_from_root_option(tmp_path: Path) -> None:
    inputs = Inputs(console=console(), roots=roots_from_paths([str(tmp_path)]))
    status, out, _ = run(tool("where"), inputs)
    assert status == EXIT_OK
    assert out.strip() == tmp_path.resolve().as_uri()


def test_no_answer_in_a_script_stops_without_retry() -> None:
    status, _, ui = run(tool("greet"), Inputs(console=console()))
    assert status == EXIT_FAILED
    assert "Stopped: a form needs answers and nobody is at a terminal" in ui
    assert "Nothing was sent for this round" in ui
    assert "round 2" not in ui


def test_bad_answers_file_entry_names_the_problems() -> None:
    inputs = Inputs(console=console(), answers={"who": {"name": "Ada", "role": "boss"}})
    status, _, ui = run(tool("greet"), inputs)
    assert status == EXIT_FAILED
    assert "do not fit its form" in ui
    assert "'boss' is not one of ['dev', 'ops']" in ui


def test_an_answers_file_without_the_asked_key_says_so() -> None:
    # A misspelt key is the likely cause: the message names the key and the file's entries
    # instead of telling a script to use --answers, which it did.
    inputs = Inputs(console=console(), answers={"wh": {"name": "Ada", "role": "dev"}})
    status, _, ui = run(tool("greet"), inputs)
    assert status == EXIT_FAILED
    assert "the answers file has no entry for 'who' (its entries: 'wh')" in ui
    assert "use --answers" not in ui


def test_prompt_and_resource_are_printed_readably() -> None:
    inputs = Inputs(console=console(), answers={"mood": {"mood": "happy"}, "pin": {"pin": 42}})
    status, out, _ = run(CallSpec(method="prompts/get", target="story",
                                  arguments={"hero": "Ada"}), inputs)
    assert status == EXIT_OK
    assert "user:" in out and "A happy story about Ada" in out
    status, out, _ = run(CallSpec(method="resources/read", target="memo://note"), inputs)
    assert status == EXIT_OK
    assert "memo://note" in out and "note unlocked with 42" in out


def test_raw_prints_the_result_json() -> None:
    inputs = Inputs(console=console(), answers={"who": {"name": "Ada", "role": "dev"}})
    status, out, _ = run(tool("greet"), inputs, raw=True)
    assert status == EXIT_OK
    assert '"resultType": "complete"' in out
    assert '"text": "Hello Ada (dev)"' in out


def test_server_error_is_explained() -> None:
    status, _, ui = run(tool("no_such_tool"), Inputs(console=console()))
    assert status == EXIT_FAILED
    assert "The server answered error -32602" in ui


def test_undeclared_sampling_from_a_server_stops_with_a_clear_message() -> None:
    def hostile(message: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": message["id"], "result": {
            "resultType": "input_required",
            "inputRequests": {"llm": {"method": "sampling/createMessage", "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                "maxTokens": 5}}}}}

    out, ui = console(), console()
    inputs = Inputs(console=ui)
    reporter = RoundReporter(ui)
    with build_client(MemoryTransport(hostile), inputs, on_event=reporter,
                      limits=ClientLimits()) as client:
        status = run_call(client, tool("anything"), out=out, ui=ui, reporter=reporter)
    assert status == EXIT_FAILED
    text = shown(ui)
    assert "asked for input llm (sampling/createMessage), which this client did not declare" in text
    assert "round 2" not in text


def test_a_request_state_with_a_lone_surrogate_is_counted_not_a_crash() -> None:
    # JSON's "\ud800" escape decodes to a lone surrogate, which strict UTF-8 cannot
    # encode; the progress line counts it as the client's state limit does.
    def server(message: dict[str, Any]) -> dict[str, Any]:
        if "requestState" in message["params"]:
            return {"jsonrpc": "2.0", "id": message["id"], "result": {
                "content": [{"type": "text", "text": "done"}]}}
        return {"jsonrpc": "2.0", "id": message["id"], "result": {
            "resultType": "input_required", "requestState": "s\ud800",
            "inputRequests": {"who": {"method": "elicitation/create", "params": {
                "message": "name?", "requestedSchema": {
                    "type": "object", "properties": {"name": {"type": "string"}}}}}}}}

    out, ui = console(), console()
    reporter = RoundReporter(ui)
    with build_client(MemoryTransport(server), Inputs(console=ui, answers={"who": {"name": "A"}}),
                      on_event=reporter, limits=ClientLimits()) as client:
        status = run_call(client, tool("anything"), out=out, ui=ui, reporter=reporter)
    assert status == EXIT_OK
    assert shown(out).strip() == "done"
    assert "round 1 ← input_required: who (form); requestState 4 bytes" in shown(ui)
    assert reporter.state_sizes == [4]


@pytest.mark.parametrize("raw", [False, True])
def test_lone_surrogates_and_format_characters_in_a_result_are_shown_escaped(raw: bool) -> None:
    # A lone surrogate (JSON's "\ud800" escape) cannot be written to a UTF-8 terminal and a
    # right-to-left override (U+202E) reorders what follows it: both are shown as \uXXXX, in
    # text blocks and in the JSON of structured content and raw results alike.
    def server(message: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": message["id"], "result": {
            "content": [{"type": "text", "text": "a\ud800b\u202ec"}],
            "structuredContent": {"k\udfff": "d\u202ee\u2028"}}}

    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    out, ui = Console(file=stream, width=200, color_system=None), console()
    reporter = RoundReporter(ui)
    with build_client(MemoryTransport(server), Inputs(console=ui), on_event=reporter,
                      limits=ClientLimits()) as client:
        status = run_call(client, tool("anything"), out=out, ui=ui, reporter=reporter, raw=raw)
    assert status == EXIT_OK
    assert isinstance(stream.buffer, io.BytesIO)
    text = stream.buffer.getvalue().decode("ascii")
    if not raw:
        assert "a\\ud800b\\u202ec\n" in text
    assert '"k\\udfff": "d\\u202ee\\u2028"' in text


def test_declined_sampling_stops_without_an_error_channel(terminal: Any) -> None:
    term = terminal(["n"])
    inputs = Inputs(console=term.console, prompter=term.prompter,
                    sampling=SamplingConfig(reply="never sent"))
    status, out, ui = run(tool("summarise", {"topic": "MRTR"}), inputs)
    assert status == EXIT_FAILED
    assert out == ""
    assert "Stopped: you declined the sampling request (input llm" in ui
    assert "MRTR has no way to tell the server" in ui
    assert "round 2" not in ui


@pytest.mark.parametrize(("pages", "followed"), [
    # "" is a cursor like any other: sent back as it came (it was taken for no cursor, and
    # the first page fetched again, 20 times).
    ({None: "", "": None}, [None, ""]),
    ({None: "", "": ""}, [None, ""]),  # a cursor already followed leads nowhere new
    ({None: "2", "2": "3", "3": "2"}, [None, "2", "3"]),
    ({None: "2", "2": None}, [None, "2"]),
])
def test_the_tools_are_listed_by_each_next_cursor_as_given(
    pages: dict[str | None, str | None], followed: list[str | None],
) -> None:
    # Before a call over HTTP the tools are listed (for their Mcp-Param-* arguments): a cursor
    # is an opaque string (server/utilities/pagination.mdx), and only a missing nextCursor
    # ends the listing.
    cursors: list[str | None] = []

    def server(message: dict[str, Any]) -> dict[str, Any]:
        if message["method"] != "tools/list":
            return {"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}}
        cursor = message["params"].get("cursor")
        cursors.append(cursor)
        result: dict[str, Any] = {"tools": []}
        if pages[cursor] is not None:
            result["nextCursor"] = pages[cursor]
        return {"jsonrpc": "2.0", "id": message["id"], "result": result}

    class Http(MemoryTransport):
        param_headers = ParamHeaderRegistry()

    out, ui = console(), console()
    reporter = RoundReporter(ui)
    with build_client(Http(server), Inputs(console=ui), on_event=reporter,
                      limits=ClientLimits()) as client:
        status = run_call(client, tool("anything"), out=out, ui=ui, reporter=reporter)
    assert status == EXIT_OK
    assert cursors == followed
