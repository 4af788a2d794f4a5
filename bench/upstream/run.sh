#!/usr/bin/env bash
# The upstream bridge's cost, measured: turn latency and connect time through edges in front of an upstream
# vs that upstream reached directly (bench/upstream/turns.mjs), then CPU per call at load
# (bench/upstream/load.sh). Everything on this machine, on loopback.
#
#   bash bench/upstream/run.sh [--rounds 8] [--calls 200] [--skip-turns] [--skip-load]
#
# Starts an upstream voice-edge (its WebSocket door, key required) and three edges with --upstream to it,
# sending caller audio in 20, 40 and 100 ms appends. The binary is $VOICE_EDGE_BIN or
# target/x86_64-unknown-linux-gnu/release/voice-edge, copied first so a rebuild cannot swap it mid-run;
# nothing here builds it.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN_SRC="${VOICE_EDGE_BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/voice-edge}"
case "$BIN_SRC" in /*) ;; *) BIN_SRC="$ROOT/$BIN_SRC" ;; esac
ROUNDS=8 CALLS=200 LOAD=1 TURNS=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --skip-turns) TURNS=0; shift ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --calls) CALLS="$2"; shift 2 ;;
    --skip-load) LOAD=0; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
log() { echo "[bench-upstream] $*" >&2; }
[[ -x "$BIN_SRC" ]] || { log "no voice-edge binary at $BIN_SRC"; exit 1; }
[[ -d "$ROOT/tests/e2e/node_modules/ws" ]] || (cd "$ROOT/tests/e2e" && npm ci --no-audit --no-fund --silent)

source "$ROOT/bench/lib.sh"
bench_workdir upstream
cp "$BIN_SRC" "$WORK/voice-edge"
wait_http() {
  for _ in $(seq 300); do
    kill -0 "$2" 2>/dev/null || { log "pid $2 exited before $1 answered"; return 1; }
    curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
KEY="sk-bench-$RANDOM$RANDOM"
# start NAME [args…]: an all-in-one on free ports; its base URL in $URL, its pid in $PID. The load
# generator is one client, and so is an edge to its upstream: the per-client cap (100) is lifted.
start() {
  local name="$1"; shift
  local http; http=$(free_port tcp)
  VOICE_EDGE_API_KEYS="$KEY" VOICE_EDGE_UPSTREAM_KEY="$KEY" RUST_LOG=warn \
    "$WORK/voice-edge" --http "127.0.0.1:$http" --relay "127.0.0.1:$(free_port udp)" \
    --max-calls-per-client 2000 "$@" >"$WORK/$name.log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  URL="http://127.0.0.1:$http"
  wait_http "$URL/" "$PID"
}
start upstream --require-keys
UPSTREAM="$URL"
UPSTREAM_PID="$PID"
EDGES=()
for ms in 20 40 100; do
  start "edge$ms" --upstream "ws://${UPSTREAM#http://}/v1/realtime" --upstream-append-ms "$ms"
  EDGES+=(--edge "edge, ${ms} ms appends=$URL")
  [[ $ms == 20 ]] && { EDGE20="$URL"; EDGE20_PID="$PID"; }
done
log "upstream $UPSTREAM; edges ${EDGES[*]}"
[[ $TURNS == 1 ]] && node "$HERE/turns.mjs" --upstream "$UPSTREAM" --key "$KEY" "${EDGES[@]}" --stub "$EDGE20" --rounds "$ROUNDS"
if [[ $LOAD == 1 ]]; then
  bash "$HERE/load.sh" "$WORK/voice-edge" "$EDGE20" "$EDGE20_PID" "$UPSTREAM_PID" "$CALLS"
fi
