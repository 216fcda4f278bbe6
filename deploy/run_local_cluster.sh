#!/usr/bin/env bash
# Three `mrtr serve` instances of examples/deploy.py behind nginx, with a shared key ring and a
# Redis replay guard, all on 127.0.0.1, in a temporary folder. Runs until Ctrl-C, then stops
# everything it started (by pid).
#
#   bash deploy/run_local_cluster.sh [BASE_PORT]      (default 8001; nginx listens on BASE-1)
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="${1:-8001}"
LISTEN=$((BASE - 1))
MRTR=.venv/bin/mrtr
[ -x "$MRTR" ] || { echo "run: python3 -m venv .venv && .venv/bin/pip install -e '.[cli,redis]'" >&2; exit 1; }
bash scripts/setup_nginx.sh >/dev/null
bash scripts/redis.sh install >/dev/null
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"

RUN="$(mktemp -d "${TMPDIR:-/tmp}/mrtr-cluster.XXXXXX")"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    echo "stopped; logs kept in $RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for() {  # wait_for DESCRIPTION COMMAND...: up to 20 s for COMMAND to succeed
    local what="$1" i
    shift
    for i in $(seq 1 200); do
        "$@" && return 0
        sleep 0.1
    done
    echo "$what did not come up; see $RUN" >&2
    exit 1
}

"$MRTR" keys new "$RUN/ring.json" >/dev/null
redis-server --bind 127.0.0.1 --port 0 --unixsocket "$RUN/redis.sock" --save '' \
    --appendonly no --daemonize no >"$RUN/redis.log" 2>&1 &
PIDS+=($!)
"$MRTR" serve examples/deploy.py:app --host 127.0.0.1 --port "$BASE" --workers 3 \
    --keys "$RUN/ring.json" --redis "unix://$RUN/redis.sock" --runtime sync \
    >"$RUN/instances.log" 2>&1 &
PIDS+=($!)
instances_ready() { [ "$(grep -c 'listening on' "$RUN/instances.log")" -ge 3 ]; }
wait_for "the instances" instances_ready
USER_OPT=()
[ "$(id -u)" -eq 0 ] && USER_OPT=(--user root)
"$MRTR" nginx-conf --listen "127.0.0.1:$LISTEN" --prefix "$RUN/nginx" -o "$RUN/nginx.conf" \
    "${USER_OPT[@]}" \
    --upstream "127.0.0.1:$BASE" --upstream "127.0.0.1:$((BASE + 1))" \
    --upstream "127.0.0.1:$((BASE + 2))"
"$NGINX" -p "$RUN/nginx" -c "$RUN/nginx.conf" -e stderr &
PIDS+=($!)
wait_for "nginx" test -s "$RUN/nginx/nginx.pid"

echo "cluster in $RUN: nginx on http://127.0.0.1:$LISTEN/mcp, instances on $BASE-$((BASE + 2))"
echo "try: $MRTR call http://127.0.0.1:$LISTEN/mcp deploy_production --arg version=1.4.2"
wait
