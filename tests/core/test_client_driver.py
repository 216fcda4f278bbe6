"""What the three client drivers share (``ClientBase``): per-call meta and handled kinds."""

from __future__ import annotations

import random
from typing import Any

import pytest

from mrtr_core.client import AwaitAnswers, Fail, InvokeHandler, ResponseReceived
from mrtr_core.client.driver import ClientBase, prompt_params, resource_params, tool_params
from mrtr_core.errors import LocalProtocolError, UnsupportedInputError
from mrtr_core.wire import (
    ClientCapabilities,
    ElicitationCapability,
    Implementation,
    SamplingCapability,
    unstructure,
)

CAPS = "io.modelcontextprotocol/clientCapabilities"


def _driver(capabilities: ClientCapabilities | None = None, **handlers: Any) -> ClientBase[Any]:
    args: dict[str, Any] = {"elicitation": None, "sampling": None, "roots": None}
    args.update(handlers)
    return ClientBase(client_info=Implementation(name="t", version="1"),
                      elicitation_form=True, elicitation_url=False, capabilities=capabilities,
                      limits=None, random=random.Random(0).random, on_event=None, auto=True,
                      **args)


def _declared(driver: ClientBase[Any], **options: Any) -> Any:
    flow = driver.new_flow("tools/call", {"name": "x"}, **options)
    message = flow.start(0.0)[-1].message  # type: ignore[union-attr]
    return message["params"]["_meta"]


def test_calls_with_the_same_configuration_share_one_meta() -> None:
    driver = _driver(elicitation=print)
    first = driver.new_flow("tools/call", {"name": "x"})
    second = driver.new_flow("tools/call", {"name": "y"})
    assert first.to_data(0.0)["meta"] == second.to_data(0.0)["meta"]
    assert driver._call_setup(None)[0] is driver._call_setup(None)[0]


def test_a_handler_registered_later_is_declared_on_the_next_call() -> None:
    driver = _driver(elicitation=print)
    assert _declared(driver)[CAPS] == {"elicitation": {"form": {}}}
    driver.on_roots(print)
    driver.on_elicitation(print, form=True, url=True)
    assert _declared(driver)[CAPS] == {"elicitation": {"form": {}, "url": {}}, "roots": {}}
    flow = driver.new_flow("tools/call", {"name": "x"})
    assert flow.to_data(0.0)["handled_kinds"] == ["elicitation/create", "roots/list"]
    driver.handlers.roots = None
    assert _declared(driver)[CAPS] == {"elicitation": {"form": {}, "url": {}}}


def test_each_call_sends_its_own_progress_token() -> None:
    driver = _driver()
    assert _declared(driver, progress_token=1)["progressToken"] == 1
    assert _declared(driver, progress_token="1")["progressToken"] == "1"
    assert "progressToken" not in _declared(driver)
    driver.client_info = Implementation(name="t", version="2")
    meta = _declared(driver)
    assert meta == unstructure(driver._call_setup(None)[0])
    assert meta["io.modelcontextprotocol/clientInfo"]["version"] == "2"


@pytest.mark.parametrize("token", [True, ["t"], {"t": 1}, float("nan"), b"t"])
def test_a_progress_token_that_is_not_a_string_or_number_is_refused_before_sending(
    token: Any,
) -> None:
    # digest §1.7: progressToken is a string or a number; JSON cannot carry nan, and a
    # boolean, array or object is not a token the server can echo in notifications/progress.
    with pytest.raises(LocalProtocolError, match="progress_token must be a string or a number"):
        _driver().new_flow("tools/call", {"name": "x"}, progress_token=token)


TOOL_SAMPLING = {
    "method": "sampling/createMessage",
    "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
               "maxTokens": 10, "tools": [{"name": "lookup", "inputSchema": {"type": "object"}}]},
}


def test_declared_sampling_tools_and_context_are_kept_for_a_sampling_handler() -> None:
    # digest §1.7, S6b/C12: tool-enabled sampling needs sampling.tools on the request; a
    # client whose sampling handler supports tools must be able to declare it.
    declared = ClientCapabilities(
        sampling=SamplingCapability(tools={}, context={}), experimental={"x": {}}
    )
    driver = _driver(declared, sampling=print)
    assert _declared(driver)[CAPS] == {"sampling": {"context": {}, "tools": {}},
                                       "experimental": {"x": {}}}
    flow = driver.new_flow("tools/call", {"name": "x"})
    first = flow.start(0.0)[-1].request_id  # type: ignore[union-attr]
    result = {"resultType": "input_required", "inputRequests": {"s": TOOL_SAMPLING}}
    commands = flow.handle(
        ResponseReceived(message={"jsonrpc": "2.0", "id": first, "result": result}), 0.5
    )
    assert [c.key for c in commands if isinstance(c, InvokeHandler)] == ["s"]


def test_a_declared_kind_without_a_handler_is_not_declared() -> None:
    declared = ClientCapabilities(sampling=SamplingCapability(tools={}), roots={})
    assert _declared(_driver(declared, elicitation=print))[CAPS] == {
        "elicitation": {"form": {}}
    }


FORM_QUESTION = {
    "method": "elicitation/create",
    "params": {"mode": "form", "message": "ok?",
               "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}},
}


def _first_round(driver: ClientBase[Any], **options: Any) -> list[Any]:
    """The commands after a server asks one form question and a roots question."""
    flow = driver.new_flow("tools/call", {"name": "x"}, **options)
    first = flow.start(0.0)[-1].request_id  # type: ignore[union-attr]
    result = {"resultType": "input_required", "requestState": "s",
              "inputRequests": {"f": FORM_QUESTION, "r": {"method": "roots/list"}}}
    return flow.handle(
        ResponseReceived(message={"jsonrpc": "2.0", "id": first, "result": result}), 0.5
    )


def test_a_manual_call_declares_the_kinds_its_capabilities_declare_without_handlers() -> None:
    # Manual mode: the caller answers every round (resume), so a client that has no
    # handler at all declares, and takes, what its capabilities say it can answer. They
    # were dropped, and the server could never ask such a client anything.
    declared = ClientCapabilities(elicitation=ElicitationCapability(form={}), roots={})
    driver = _driver(declared)
    assert _declared(driver, auto=False)[CAPS] == {"elicitation": {"form": {}}, "roots": {}}
    [waiting] = [c for c in _first_round(driver, auto=False) if isinstance(c, AwaitAnswers)]
    assert sorted(waiting.result.input_requests) == ["f", "r"]
    # An automatic call of the same client has no one to answer: nothing is declared.
    assert _declared(driver)[CAPS] == {}
    [failed] = [c for c in _first_round(driver) if isinstance(c, Fail)]
    assert isinstance(failed.error, UnsupportedInputError)


@pytest.mark.parametrize(("build", "error", "message"), [
    (lambda: tool_params(5, None), TypeError, "name must be a string, not int"),  # type: ignore[arg-type]
    (lambda: tool_params("", None), ValueError, "name must not be empty"),
    (lambda: tool_params("t", [1]), TypeError, "arguments must be a mapping or None, not list"),  # type: ignore[arg-type]
    (lambda: tool_params("t", {1: "x"}), TypeError, "arguments: a name must be a string"),  # type: ignore[dict-item]
    (lambda: prompt_params("p", {"n": 3}), TypeError,  # type: ignore[dict-item]
     "arguments\\['n'\\]: a prompt argument is a string, not int"),
    (lambda: prompt_params(None, None), TypeError, "name must be a string"),  # type: ignore[arg-type]
    (lambda: resource_params(b"file:///a"), TypeError, "uri must be a string, not bytes"),  # type: ignore[arg-type]
    (lambda: resource_params(""), ValueError, "uri must not be empty"),
    # ReadResourceRequestParams.uri has format "uri" (schema.json): servers refuse others.
    (lambda: resource_params("a.txt"), ValueError, "uri must be a URI with a scheme"),
    (lambda: resource_params("file:///a b"), ValueError, "uri must be a URI with a scheme"),
])
def test_call_targets_and_arguments_of_the_wrong_shape_are_refused_before_sending(
    build: Any, error: type[Exception], message: str
) -> None:
    # call_tool(5) sent a name no server can find; call_tool("t", [1]) failed inside dict();
    # a prompt argument that is not a string (digest §1.3) was sent for the server to refuse.
    with pytest.raises(error, match=message):
        build()


def test_call_arguments_are_copied_as_given() -> None:
    arguments = {"a": [1], "b": None}
    method, params = tool_params("t", arguments)
    assert (method, params) == ("tools/call", {"name": "t", "arguments": {"a": [1], "b": None}})
    assert params["arguments"] is not arguments
    assert prompt_params("p", {"who": "Ada"}) == (
        "prompts/get", {"name": "p", "arguments": {"who": "Ada"}})
    assert resource_params("file:///a") == ("resources/read", {"uri": "file:///a"})
