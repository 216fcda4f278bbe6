#!/usr/bin/env bash
# Run pytest under other CPython versions than the one of .venv.
#
#   scripts/other_pythons.sh VERSION... -- PYTEST_ARGS...
#
# For each VERSION (e.g. 3.12) it looks for `pythonVERSION` on PATH or, where pyenv shims stand
# there for a version pyenv has installed but not selected, for pyenv's newest VERSION.x. It
# keeps a virtualenv holding the project's dependencies and its `test` extra under
# ${MRTR_CACHE:-$HOME/.cache/mrtr}/venvs, built again whenever pyproject.toml or the interpreter
# changes, and runs `python -m pytest PYTEST_ARGS` there on this checkout's sources (on
# PYTHONPATH: the virtualenv holds no checkout, so checkouts can share it).
#
# A version that is not installed is reported ("python3.13 not found: not tested") and does
# not fail the run. Exits non-zero when, for a version that is present, its virtualenv cannot
# be built, its tests fail, or pytest collects no test.
set -euo pipefail
cd "$(dirname "$0")/.."
export MRTR_CACHE="${MRTR_CACHE:-$HOME/.cache/mrtr}"
VENVS="$MRTR_CACHE/venvs"

usage() {
    echo "usage: $0 VERSION... -- PYTEST_ARGS..." >&2
    exit 2
}

versions=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
        [0-9]*.[0-9]*) versions+=("$1") ;;
        *) usage ;;
    esac
    shift
done
[ "$#" -gt 1 ] && [ "${#versions[@]}" -gt 0 ] || usage
shift

# "3.12" for an interpreter that runs; nothing for one that does not (a pyenv shim of a
# version pyenv has not selected exits with "command not found").
minor_version_of() {
    "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}

# The path of a working interpreter of VERSION, or status 1.
find_python() {
    local version="$1" candidate installed
    if candidate="$(command -v "python$version")" \
        && [ "$(minor_version_of "$candidate")" = "$version" ]; then
        echo "$candidate"
        return 0
    fi
    if command -v pyenv >/dev/null 2>&1; then
        installed="$(pyenv versions --bare 2>/dev/null \
            | grep -E "^${version//./\\.}\.[0-9]+$" | sort -V | tail -n 1)" || true
        if [ -n "$installed" ]; then
            candidate="$(pyenv prefix "$installed")/bin/python$version"
            if [ -x "$candidate" ] && [ "$(minor_version_of "$candidate")" = "$version" ]; then
                echo "$candidate"
                return 0
            fi
        fi
    fi
    return 1
}

# The virtualenv for PYTHON and this pyproject.toml: named by a hash of both.
venv_dir() {
    local version="$1" python="$2" key
    key="$("$python" - <<'EOF'
import hashlib
import os
import sys

digest = hashlib.sha256(open("pyproject.toml", "rb").read())
digest.update(sys.version.encode())
digest.update(os.path.realpath(sys.executable).encode())
print(digest.hexdigest()[:16])
EOF
)"
    echo "$VENVS/py$version-$key"
}

# Build the virtualenv DIR with PYTHON: the project's dependencies and its test extra.
# Each command is checked by hand: `set -e` does not apply in a function called as a condition.
build_venv() {
    local dir="$1" python="$2"
    rm -rf "$dir"
    echo "building $dir"
    "$python" -m venv "$dir" || return 1
    "$dir/bin/python" -m pip install --quiet --upgrade pip 2>/dev/null || true
    "$dir/bin/python" - > "$dir/requirements.txt" <<'EOF' || return 1
import tomllib

with open("pyproject.toml", "rb") as file:
    project = tomllib.load(file)["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["test"]))
EOF
    "$dir/bin/python" -m pip install --quiet --cache-dir "$MRTR_CACHE/pip" \
        -r "$dir/requirements.txt" || return 1
    touch "$dir/.complete"
}

# Make sure DIR is complete (one run at a time builds it), and drop this version's
# virtualenvs for another pyproject.toml or interpreter that no run used for a week.
ensure_venv() {
    local version="$1" python="$2" dir="$3"
    mkdir -p "$VENVS" || return 1
    (
        if command -v flock >/dev/null 2>&1; then
            flock 9 || exit 1
        fi
        if [ ! -f "$dir/.complete" ]; then
            build_venv "$dir" "$python" || exit 1
        fi
        touch "$dir"
        find "$VENVS" -mindepth 1 -maxdepth 1 -type d -name "py$version-*" \
            ! -name "$(basename "$dir")" -mtime +7 -exec rm -rf {} + || true
    ) 9>"$VENVS/py$version.lock"
}

failed=()
for version in "${versions[@]}"; do
    printf '\n== pytest under python%s\n' "$version"
    if ! python="$(find_python "$version")"; then
        echo "python$version not found: not tested"
        continue
    fi
    dir="$(venv_dir "$version" "$python")"
    if ! ensure_venv "$version" "$python" "$dir"; then
        echo "python$version: building its virtualenv $dir failed" >&2
        failed+=("$version")
        continue
    fi
    echo "$("$dir/bin/python" --version) from $python"
    set +e
    PYTHONPATH="$PWD:$PWD/adapters${PYTHONPATH:+:$PYTHONPATH}" \
        "$dir/bin/python" -m pytest -p no:cacheprovider "$@"
    status=$?
    set -e
    if [ "$status" -eq 5 ]; then
        echo "python$version: pytest collected no tests" >&2
        failed+=("$version")
    elif [ "$status" -ne 0 ]; then
        echo "python$version: tests failed (pytest exit status $status)" >&2
        failed+=("$version")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "failed under: ${failed[*]/#/python}" >&2
    exit 1
fi
