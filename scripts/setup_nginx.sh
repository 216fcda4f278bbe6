#!/usr/bin/env bash
# Install Debian's nginx when it is missing (for the deploy/ cluster and its test).
# Idempotent: does nothing when an nginx binary is already there. Never starts, enables or
# reloads the system service: the test and deploy/ run nginx as a foreground process of their own
# (`nginx -p PREFIX -c CONF` with `daemon off;`).
set -euo pipefail

find_nginx() {
    command -v nginx 2>/dev/null && return 0
    [ -x /usr/sbin/nginx ] && { echo /usr/sbin/nginx; return 0; }
    return 1
}

if path="$(find_nginx)"; then
    echo "nginx present: $path"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "nginx is missing and apt-get is not available: install nginx by hand" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

# policy-rc.d exit 101 keeps the package's postinst from starting the system service.
export DEBIAN_FRONTEND=noninteractive
policy=/usr/sbin/policy-rc.d
created_policy=""
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod +x "$policy"
    created_policy=1
fi
cleanup() { if [ -n "$created_policy" ]; then $SUDO rm -f "$policy"; fi; }
trap cleanup EXIT

$SUDO apt-get update -qq
if ! $SUDO apt-get install -y -qq --no-install-recommends nginx-light >/dev/null 2>&1; then
    $SUDO apt-get install -y -qq --no-install-recommends nginx >/dev/null
fi

if path="$(find_nginx)"; then
    echo "nginx installed: $path"
else
    echo "nginx install finished but no nginx binary was found" >&2
    exit 1
fi
