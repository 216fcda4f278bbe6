"""The public names of every package: each ``__all__`` holds names the module has, and every
public error class and documented constant can be imported from a module that lists it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

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
