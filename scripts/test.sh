#!/usr/bin/env bash
# Install everything the tests need (Python packages, Redis, nginx, Node 22, the official
# conformance harness and the official TypeScript SDK), then run lint, types and the whole
# test suite.
# Caches downloads under ${MRTR_CACHE:-$HOME/.cache/mrtr}. Exits non-zero on any failure,
# and also when pytest collected no test at all.
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
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
    exit 1
fi
exit "$status"
