#!/usr/bin/env bash
# A throwaway redis-server for tests and local runs (127.0.0.1 only, no persistence).
#
#   scripts/redis.sh install          install redis-server from Debian's package if missing
#   scripts/redis.sh start PORT       install if needed, start on 127.0.0.1:PORT, wait until it
#                                     answers, print its pid (logs go to $TMPDIR/mrtr-redis-PORT.log)
#   scripts/redis.sh stop PID         stop the server with that pid
set -euo pipefail

install_redis() {
    if command -v redis-server >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "redis-server is missing; run: sudo apt-get update && sudo apt-get install -y redis-server" >&2
        exit 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server >&2
    # The package may start a system service on 6379; this script never uses it.
}

start_redis() {
    local port="$1"
    case "$port" in ''|*[!0-9]*) echo "usage: $0 start PORT" >&2; exit 2 ;; esac
    install_redis
    local log="${TMPDIR:-/tmp}/mrtr-redis-${port}.log"
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
        --daemonize no --protected-mode yes --logfile "$log" >/dev/null 2>&1 &
    local pid=$!
    # Wait until it accepts commands (at most about 10 s).
    local i
    for i in $(seq 1 200); do
        if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
            echo "$pid"
            return 0
        fi
        if ! alive "$pid"; then
            echo "redis-server exited early; see $log" >&2
            exit 1
        fi
        sleep 0.05
    done
    kill "$pid" 2>/dev/null || true
    echo "redis-server did not answer on port $port; see $log" >&2
    exit 1
}

alive() {
    # Running and not a zombie waiting to be reaped.
    local state
    if ! command -v ps >/dev/null 2>&1; then
        kill -0 "$1" 2>/dev/null
        return
    fi
    state="$(ps -o stat= -p "$1" 2>/dev/null || true)"
    [ -n "$state" ] && [ "${state#Z}" = "$state" ]
}

stop_redis() {
    local pid="$1"
    case "$pid" in ''|*[!0-9]*) echo "usage: $0 stop PID" >&2; exit 2 ;; esac
    if alive "$pid"; then
        kill "$pid"
        local i
        for i in $(seq 1 100); do
            alive "$pid" || return 0
            sleep 0.05
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
}

case "${1:-}" in
    install) install_redis ;;
    start) start_redis "${2:-}" ;;
    stop) stop_redis "${2:-}" ;;
    *) echo "usage: $0 install | start PORT | stop PID" >&2; exit 2 ;;
esac
