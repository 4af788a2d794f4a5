#!/usr/bin/env bash
# Connect-time comparison: headless Chromium → aiortc vs voice-edge through its relay vs voice-edge --direct.
#
#   bash bench/connect/run.sh [--runs 10] [--warmup 1] [--json out.json]   (other args go to connect.mjs)
#   BENCH_CONNECT_LITE=1 bash bench/connect/run.sh ...   adds a 4th target, aiortc-lite: aiortc answering with
#                                                         a=ice-lite like voice-edge (a control)
#
# Installs what it needs (apt chromium if missing, aiortc + aiohttp into bench/connect/.venv, the e2e
# node_modules if missing), starts three servers on free loopback ports, runs connect.mjs, stops everything
# it started. The voice-edge binary is $VOICE_EDGE_BIN or target/x86_64-unknown-linux-gnu/release/voice-edge, copied to a temp dir
# first so a rebuild during the run cannot swap it out. Nothing here builds it.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="$HERE/.venv"
BIN_SRC="${VOICE_EDGE_BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/voice-edge}"
case "$BIN_SRC" in /*) ;; *) BIN_SRC="$ROOT/$BIN_SRC" ;; esac

log() { echo "[bench-connect] $*" >&2; }

# --- prerequisites -------------------------------------------------------------------------------------------
if [[ ! -x "${CHROMIUM_BIN:-/usr/bin/chromium}" ]]; then
  log "installing chromium (apt)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import aiortc, aiohttp' 2>/dev/null; then
  log "installing aiortc + aiohttp into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check aiortc aiohttp
fi
if [[ ! -d "$ROOT/tests/e2e/node_modules/playwright-core" ]]; then
  log "installing tests/e2e node_modules (npm ci)"
  (cd "$ROOT/tests/e2e" && npm ci --no-audit --no-fund --silent)
fi
if [[ ! -x "$BIN_SRC" ]]; then
  log "no voice-edge binary at $BIN_SRC (build it with 'cargo build --release' or set VOICE_EDGE_BIN)"
  exit 1
fi

source "$ROOT/bench/lib.sh"
bench_workdir connect
cp "$BIN_SRC" "$WORK/voice-edge"

wait_http() { # url name pid: up to 30 s
  for _ in $(seq 300); do
    kill -0 "$3" 2>/dev/null || { log "$2 exited before it was ready"; return 1; }
    curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  log "$2 not ready at $1 after 30 s"
  return 1
}

# --- servers -------------------------------------------------------------------------------------------------
A_PORT=$(free_port tcp)
"$VENV/bin/python" "$HERE/aiortc_answerer.py" --port "$A_PORT" --max-call-secs 30 >"$WORK/aiortc.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$A_PORT/" aiortc "${PIDS[-1]}"

TARGETS=(--target "aiortc=http://127.0.0.1:$A_PORT")
if [[ "${BENCH_CONNECT_LITE:-0}" == 1 ]]; then
  L_PORT=$(free_port tcp)
  "$VENV/bin/python" "$HERE/aiortc_answerer.py" --port "$L_PORT" --max-call-secs 30 --ice-lite >"$WORK/aiortc-lite.log" 2>&1 &
  PIDS+=($!)
  wait_http "http://127.0.0.1:$L_PORT/" aiortc-lite "${PIDS[-1]}"
  TARGETS+=(--target "aiortc-lite=http://127.0.0.1:$L_PORT")
fi

R_HTTP=$(free_port tcp); R_UDP=$(free_port udp)
RUST_LOG=${RUST_LOG:-warn} "$WORK/voice-edge" --http "127.0.0.1:$R_HTTP" --relay "127.0.0.1:$R_UDP" >"$WORK/relay.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$R_HTTP/" voice-edge-relay "${PIDS[-1]}"

D_HTTP=$(free_port tcp); D_UDP=$(free_port udp)
RUST_LOG=${RUST_LOG:-warn} "$WORK/voice-edge" --http "127.0.0.1:$D_HTTP" --relay "127.0.0.1:$D_UDP" --direct >"$WORK/direct.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$D_HTTP/" voice-edge-direct "${PIDS[-1]}"

log "aiortc http://127.0.0.1:$A_PORT  relay http://127.0.0.1:$R_HTTP (udp $R_UDP)  direct http://127.0.0.1:$D_HTTP"
log "$("$VENV/bin/python" -c 'import aiortc; print("aiortc", aiortc.__version__)'), $("$WORK/voice-edge" --version)"

# Bounded: connect.mjs caps every call (--call-timeout-ms); this caps the whole run at 30 min.
timeout --signal=TERM 1800 node "$HERE/connect.mjs" "${TARGETS[@]}" \
  --target "relay=http://127.0.0.1:$R_HTTP" \
  --target "direct=http://127.0.0.1:$D_HTTP" \
  "$@"

log "aiortc answers: $(grep -o 'a=setup:[a-z]*' "$WORK/aiortc.log" | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
