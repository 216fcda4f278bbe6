"""What the three client drivers share (``ClientBase``): per-call meta and handled kinds."""

from __future__ import annotations

import random
from typing import Any

from mrtr_core.client.driver import ClientBase
from mrtr_core.wire import Implementation, unstructure

CAPS = "io.modelcontextprotocol/clientCapabilities"


def _driver(**handlers: Any) -> ClientBase[Any]:
    args: dict[str, Any] = {"elicitation": None, "sampling": None, "roots": None}
    args.update(handlers)
    return ClientBase(client_info=Implementation(name="t", version="1"),
                      elicitation_form=True, elicitation_url=False, capabilities=None,
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
