#!/usr/bin/env bash
# Install everything the tests need (Python packages, Redis, nginx, Node 22, the official
# conformance harness and the official TypeScript SDK), then run lint, types and the whole
# test suite; then the core, server, adapter, wire and quick simulation tests and the wheel's
# build and type check again under each other Python version that pyproject.toml's
# classifiers name (scripts/other_pythons.sh; a version not installed here is reported and
# not tested).
# Caches downloads and those versions' virtualenvs under ${MRTR_CACHE:-$HOME/.cache/mrtr}.
# Exits non-zero on any failure, and also when a pytest run collected no test at all.
set -euo pipefail
cd "$(dirname "$0")/.."
export MRTR_CACHE="${MRTR_CACHE:-$HOME/.cache/mrtr}"
mkdir -p "$MRTR_CACHE"

step() { printf '\n== %s\n' "$*"; }

step "python environment"
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip 2>/dev/null || true
.venv/bin/python -m pip install --quiet --cache-dir "$MRTR_CACHE/pip" -e '.[test]'

step "services and harness"
bash scripts/redis.sh install
bash scripts/setup_nginx.sh
bash scripts/conformance.sh --install >/dev/null
bash scripts/ts_sdk.sh --install >/dev/null

step "ruff"
.venv/bin/ruff check .

step "mypy (strict on mrtr_core and the adapters)"
.venv/bin/mypy

step "pytest"
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e

# The versions the classifiers claim ("Programming Language :: Python :: 3.X") besides
# .venv's own. Under each, the tests that need no service, Node or nginx and take about a
# minute on two cores: not the slow campaign, nor the sim tests that run whole campaigns with
# planted bugs or start pytest itself (those run above).
other_versions="$(.venv/bin/python - <<'PYTHON'
import sys
import tomllib

with open("pyproject.toml", "rb") as file:
    classifiers = tomllib.load(file)["project"]["classifiers"]
prefix = "Programming Language :: Python :: "
claimed = [c.removeprefix(prefix) for c in classifiers if c.startswith(prefix + "3.")]
print(" ".join(v for v in claimed if v != "%d.%d" % sys.version_info[:2]))
PYTHON
)"
others=0
if [ -n "$other_versions" ]; then
    step "pytest under the other Python versions: $other_versions"
    set +e
    # shellcheck disable=SC2086  # one argument per version
    bash scripts/other_pythons.sh $other_versions -- -q -m "not slow" \
        tests/core tests/server tests/adapters tests/wire tests/sim \
        tests/packaging/test_typed_packages.py \
        --ignore=tests/sim/test_planted_bugs.py --ignore=tests/sim/test_pytest_plugin.py
    others=$?
    set -e
fi

if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
    exit 1
fi
if [ "$status" -ne 0 ]; then
    exit "$status"
fi
if [ "$others" -ne 0 ]; then
    echo "the tests failed under another Python version (above): failing" >&2
    exit 1
fi
