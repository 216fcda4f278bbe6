"""The public names of every package: each ``__all__`` holds names the module has, and every
public error class and documented constant can be imported from a module that lists it."""

from __future__ import annotations

import copy as copy_module
import importlib
import inspect
import pickle
import pkgutil
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

PACKAGES = ("mrtr_core", "mrtr_sync", "mrtr_trio", "mrtr_asyncio", "mrtr_cli")
SKIPPED = ("__main__", "pytest_plugin")
"""Modules not imported here: one runs the command, the other needs pytest's hooks only."""


def _modules() -> dict[str, ModuleType]:
    found: dict[str, ModuleType] = {}
    for root in PACKAGES:
        package = importlib.import_module(root)
        found[root] = package
        for info in pkgutil.walk_packages(package.__path__, f"{root}."):
            if not info.name.endswith(SKIPPED):
                found[info.name] = importlib.import_module(info.name)
    return found


MODULES = _modules()


def test_every_name_in_an_all_exists_once() -> None:
    wrong = []
    for name, module in MODULES.items():
        listed = getattr(module, "__all__", None)
        if listed is None:
            continue
        wrong += [f"{name}.{item}: missing" for item in listed if not hasattr(module, item)]
        wrong += [f"{name}: {item} listed twice" for item in set(listed)
                  if listed.count(item) > 1]
    assert wrong == []


def test_every_public_error_class_is_listed_where_it_is_defined() -> None:
    unlisted = []
    for name, module in MODULES.items():
        for item, value in vars(module).items():
            if (not item.startswith("_") and inspect.isclass(value)
                    and issubclass(value, BaseException) and value.__module__ == name
                    and item not in getattr(module, "__all__", ())):
                unlisted.append(f"{name}.{item}")
    # The command's own usage error never leaves ``main``.
    assert unlisted == ["mrtr_cli.main.UsageError"]


@pytest.mark.parametrize(("module", "names"), [
    ("mrtr_core.stdio", ("ServerExitedError", "StdinStalledError")),
    ("mrtr_core.errors", ("TransportError", "TransportClosedError", "CodecError")),
    ("mrtr_core.jsonrpc", ("ParseError", "InvalidRequestError")),
    ("mrtr_core.http", ("HeaderMismatchError",)),
    ("mrtr_cli.serve", ("REDIS_TIMEOUT_S", "GuardUnavailableError")),
])
def test_names_the_documentation_points_to_are_exported(
    module: str, names: tuple[str, ...]
) -> None:
    assert set(names) <= set(MODULES[module].__all__)


LAST = {"resultType": "input_required", "inputRequests": {}, "requestState": "s"}


def _limit(cls: Any) -> BaseException:
    return cls("over the limit", limit="max_rounds", value=3, last_result=LAST)


def _input_required(cls: Any) -> BaseException:
    from mrtr_core.wire.models import InputRequiredResult, ListRootsRequest

    result = InputRequiredResult(input_requests={"roots": ListRootsRequest()}, request_state="s")
    return cls(2, result, {"format": "saved"}, saved_at=1.5, clock=object())


# An instance of every public error whose constructor takes more than a message, each
# argument given (keyword-only ones too) and each differing from its default.
SAMPLES: dict[str, Callable[[Any], BaseException]] = {
    "mrtr_core.errors.ProtocolError": lambda cls: cls("bad", jsonrpc_code=-32603),
    "mrtr_core.errors.LocalProtocolError": lambda cls: cls("bad", jsonrpc_code=-32601),
    "mrtr_core.errors.RemoteProtocolError": lambda cls: cls(
        "bad", jsonrpc_code=-32603, result=LAST),
    "mrtr_core.errors.CodecError": lambda cls: cls("not a string", path="a.b", result=LAST),
    "mrtr_core.errors.StructuredContentError": lambda cls: cls("forecast", "no", result=LAST),
    "mrtr_core.errors.JsonRpcError": lambda cls: cls(-32000, "failed", {"why": 1}),
    "mrtr_core.errors.UnsupportedInputError": lambda cls: cls(
        "k", "roots/list", "no handler", LAST),
    "mrtr_core.errors.HandlerFailedError": lambda cls: cls(
        "k", ValueError("boom"), others=(("j", KeyError("x")),), last_result=LAST),
    "mrtr_core.errors.FlowCancelledError": lambda cls: cls("stopped", last_result=LAST),
    "mrtr_core.errors.LimitExceededError": _limit,
    "mrtr_core.errors.RoundLimitError": _limit,
    "mrtr_core.errors.FlowDeadlineError": _limit,
    "mrtr_core.errors.LegTimeoutError": _limit,
    "mrtr_core.errors.StateSizeLimitError": _limit,
    "mrtr_core.errors.InputRequestsLimitError": _limit,
    "mrtr_core.errors.HandlerTimeoutError": lambda cls: cls(
        "slow", key="k", limit="handler_timeout", value=1.0, last_result=LAST),
    "mrtr_core.errors.TransportError": lambda cls: cls(
        ConnectionResetError("reset"), last_result=LAST),
    "mrtr_core.jsonrpc.MessageError": lambda cls: cls("bad", jsonrpc_code=-32700, request_id=7),
    "mrtr_core.jsonrpc.ParseError": lambda cls: cls("bad", request_id="a"),
    "mrtr_core.jsonrpc.InvalidRequestError": lambda cls: cls("bad", request_id=3),
    "mrtr_core.server.context.InputPending": lambda cls: cls(("a", "b")),
    "mrtr_core.server.context.InputRejected": lambda cls: cls(
        MODULES["mrtr_core.errors"].JsonRpcError(-32602, "bad answer")),
    "mrtr_core.server.capabilities.MissingCapabilityError": lambda cls: cls({"sampling": {}}),
    "mrtr_core.stdio.ServerExitedError": lambda cls: cls("gone", returncode=3),
    "mrtr_core.http._client.HttpStatusError": lambda cls: cls(503, b"busy", "text/plain"),
    "mrtr_core.http._client.ServerDisconnectedError": lambda cls: cls(
        "cut", response_started=True),
    "mrtr_core.http._server.HttpRequestError": lambda cls: cls(
        "refused", status=415, jsonrpc_code=-32700, request_id=4),
    "mrtr_core.http._headers.HeaderMismatchError": lambda cls: cls(
        "differs", header="Mcp-Name", request_id=5),
    "mrtr_core.sim.report.SimulationError": lambda cls: cls(
        9, "operations", ValueError("boom"), where="flow 3", flow=3, op="op-3"),
    "mrtr_core.wire.forms.FormSchemaError": lambda cls: cls("no type", field="age"),
    "mrtr_core.wire.forms.FormAnswerError": lambda cls: cls(["age: too low", "name: empty"]),
    "mrtr_core.state.errors.StateRejectedError": lambda cls: cls("expired", "too old"),
    "mrtr_core.client.persist.SavedFlowVersionError": lambda cls: cls("mrtr.client-flow/1"),
    "mrtr_core.client.driver.InputRequired": _input_required,
    "mrtr_cli.inputs.InputUnavailableError": lambda cls: cls("k", "roots/list", "no roots"),
    "mrtr_cli.simsweep.SweepError": lambda cls: cls(4, "Traceback ..."),
    "mrtr_cli.terminal.InputAbandoned": lambda cls: cls("k"),
}
LEFT_BEHIND = {"mrtr_core.client.driver.InputRequired": {"clock": None}}
"""Attributes a copy does not get, and what it has instead (a clock is this process's)."""


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


PUBLIC_ERRORS = sorted(
    {value for module in MODULES.values() for item in getattr(module, "__all__", ())
     if inspect.isclass(value := getattr(module, item))
     and issubclass(value, BaseException)},
    key=_name,
)


def _shown(value: Any) -> Any:
    """``value`` with each error in it replaced by what it shows: its class, text, ``args``,
    attributes and ``__cause__``."""
    if isinstance(value, BaseException):
        return (type(value), str(value), _shown(value.args), _shown(vars(value)),
                _shown(value.__cause__))
    if isinstance(value, dict):
        return {key: _shown(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return type(value)(_shown(item) for item in value)
    return value


@pytest.mark.parametrize("cls", PUBLIC_ERRORS, ids=_name)
def test_every_public_error_pickles_with_its_class_text_and_fields(cls: type) -> None:
    # Errors cross process boundaries: a sweep's workers, a caller's process pool.
    error = SAMPLES.get(_name(cls), lambda cls: cls("the message"))(cls)
    for copy in (pickle.loads(pickle.dumps(error)), copy_module.copy(error)):
        assert type(copy) is cls
        assert str(copy) == str(error)
        expected = _shown(error)
        expected[3].update(LEFT_BEHIND.get(_name(cls), {}))
        assert _shown(copy) == expected
