"""The example apps, driven in-process (no sockets): deploy_production and the fixture."""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conformance_helpers import Driver, error, make_codec, meta, request, result

from mrtr_core.app import App

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def deploy() -> ModuleType:
    return load_example("deploy")


@pytest.fixture
def deploy_driver(deploy: ModuleType) -> Driver:
    # The example's own app and handler, with a deterministic codec.
    app = App("deploy", "1.0.0", codec=make_codec("deploy"))
    app.tool(description="deploy")(deploy.deploy_production)
    return Driver(app)


def call(driver: Driver, **params: Any) -> Any:
    return driver.call("tools/call", {"name": "deploy_production",
                                      "arguments": {"version": "1.4.2"}, **params})


def answers(confirm: dict[str, Any], ticket: dict[str, Any]) -> dict[str, Any]:
    return {"confirm_deploy": confirm, "change_ticket": ticket}


def test_deploy_asks_both_questions_in_one_round(deploy_driver: Driver) -> None:
    first = result(call(deploy_driver))
    assert first["resultType"] == "input_required"
    requests = first["inputRequests"]
    assert list(requests) == ["confirm_deploy", "change_ticket"]
    confirm_schema = requests["confirm_deploy"]["params"]["requestedSchema"]
    assert confirm_schema["properties"] == {"confirm": {"type": "boolean"}}
    ticket_schema = requests["change_ticket"]["params"]["requestedSchema"]
    assert ticket_schema["properties"] == {"ticket": {"type": "string"}}
    assert "drain canary" in requests["confirm_deploy"]["params"]["message"]


def test_deploy_completes_naming_version_and_ticket(deploy_driver: Driver) -> None:
    first = result(call(deploy_driver))
    done = result(call(deploy_driver, requestState=first["requestState"], inputResponses=answers(
        {"action": "accept", "content": {"confirm": True}},
        {"action": "accept", "content": {"ticket": "CHG-1234"}})))
    assert done["resultType"] == "complete"
    assert not done.get("isError")
    text = done["content"][0]["text"]
    assert "1.4.2" in text and "CHG-1234" in text


def test_deploy_plan_is_memoised_across_rounds(deploy: ModuleType, deploy_driver: Driver,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = deploy.compute_plan

    def counting(version: str) -> Any:
        calls.append(version)
        return original(version)

    monkeypatch.setattr(deploy, "compute_plan", counting)
    first = result(call(deploy_driver))
    result(call(deploy_driver, requestState=first["requestState"], inputResponses=answers(
        {"action": "accept", "content": {"confirm": True}},
        {"action": "accept", "content": {"ticket": "T"}})))
    assert calls == ["1.4.2"]


@pytest.mark.parametrize("confirm", [
    {"action": "decline"}, {"action": "cancel"},
    {"action": "accept", "content": {"confirm": False}},
])
def test_deploy_not_confirmed_is_an_error_result(deploy_driver: Driver,
                                                 confirm: dict[str, Any]) -> None:
    first = result(call(deploy_driver))
    done = result(call(deploy_driver, requestState=first["requestState"], inputResponses=answers(
        confirm, {"action": "accept", "content": {"ticket": "T"}})))
    assert done["isError"] is True
    assert "not confirmed" in done["content"][0]["text"]


def test_deploy_without_elicitation_is_32021(deploy_driver: Driver) -> None:
    reply = deploy_driver.call("tools/call", {"name": "deploy_production",
                                              "arguments": {"version": "1"}},
                               capabilities={"sampling": {}})
    assert error(reply)["code"] == -32021
    assert error(reply)["data"]["requiredCapabilities"] == {"elicitation": {}}


def test_deploy_key_ring_from_mrtr_keys(deploy: ModuleType) -> None:
    keys = {kid: base64.b64encode(kid.encode() * 16).decode() for kid in ("old", "new")}
    codec = deploy.codec_from_env("deploy", {"MRTR_KEYS": json.dumps(keys)})
    assert codec.ring.active == "new"
    assert codec.ring.ids == frozenset({"old", "new"})


def test_deploy_falls_back_to_the_development_key(deploy: ModuleType) -> None:
    codec = deploy.codec_from_env("deploy", {})
    assert codec.ring.ids == frozenset({"dev"})


def test_deploy_module_app_serves_discover(deploy: ModuleType) -> None:
    reply = Driver(deploy.app).call("tools/list")
    assert [t["name"] for t in result(reply)["tools"]] == ["deploy_production"]
    assert result(reply)["tools"][0]["inputSchema"]["required"] == ["version"]


# --- the conformance fixture, in-process -----------------------------------------------------


@pytest.fixture(scope="module")
def fixture_app() -> App:
    app: App = load_example("conformance_server").app
    return app


def test_fixture_first_tool_completes_without_arguments(fixture_app: App) -> None:
    # http-header-validation calls the first listed tool with {} and expects success.
    d = Driver(fixture_app)
    first = result(d.call("tools/list"))["tools"][0]["name"]
    assert result(d.call("tools/call", {"name": first, "arguments": {}}))["resultType"] == (
        "complete")


def test_fixture_first_resource_reads_complete(fixture_app: App) -> None:
    # The caching scenario reads the first listed resource and needs ttlMs/cacheScope.
    d = Driver(fixture_app)
    uri = result(d.call("resources/list"))["resources"][0]["uri"]
    res = result(d.call("resources/read", {"uri": uri}))
    assert "ttlMs" in res and "cacheScope" in res


def test_fixture_elicitation_accepts_an_answer_sent_without_state(fixture_app: App) -> None:
    d = Driver(fixture_app)
    res = result(d.call("tools/call", {
        "name": "test_input_required_result_elicitation", "arguments": {},
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}},
                           "unknown_extra_key": {"action": "accept", "content": {"x": 1}}}}))
    assert res["content"][0]["text"] == "Hello, Alice!"


def test_fixture_elicitation_rejects_a_malformed_answer_without_state(fixture_app: App) -> None:
    d = Driver(fixture_app)
    reply = d.call("tools/call", {"name": "test_input_required_result_elicitation",
                                  "arguments": {}, "inputResponses": {"user_name": 12345}})
    assert error(reply)["code"] == -32602


def test_fixture_wrong_key_is_asked_again(fixture_app: App) -> None:
    d = Driver(fixture_app)
    res = result(d.call("tools/call", {
        "name": "test_input_required_result_elicitation", "arguments": {},
        "inputResponses": {"wrong_key": {"action": "accept", "content": {"data": "x"}}}}))
    assert res["resultType"] == "input_required"
    assert list(res["inputRequests"]) == ["user_name"]


def test_fixture_capabilities_tool_asks_sampling_when_only_sampling_is_declared(
    fixture_app: App,
) -> None:
    d = Driver(fixture_app)
    res = result(d.send(request("tools/call", {
        "name": "test_input_required_result_capabilities", "arguments": {},
        "_meta": meta({"sampling": {}})})))
    methods = {r["method"] for r in res["inputRequests"].values()}
    assert methods == {"sampling/createMessage"}
