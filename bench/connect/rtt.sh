#!/usr/bin/env bash
# Connection setup on a delayed network, in round trips: headless Chromium (and Firefox) → voice-edge
# (relay) through delay.py at several RTTs, and Chromium against aiortc as another row.
#
#   bash bench/connect/rtt.sh [--rtts 25,50,100] [--calls 5] [--no-aiortc] [other args → rtt.mjs,
#                             e.g. --http-delay --jitter-ms 5 --warmup 1 --json /tmp/rtt.json]
#   VOICE_EDGE_BIN_BEFORE=/tmp/old-voice-edge bash bench/connect/rtt.sh   # + that build as a third target
#   bash bench/connect/rtt.sh --browsers chromium,firefox  # Firefox too (media on the primary address)
#
# Installs what it needs (apt chromium if missing, the tests/e2e node_modules if missing, aiortc + aiohttp
# into bench/connect/.venv unless --no-aiortc), copies the voice-edge binary ($VOICE_EDGE_BIN, or
# ${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release/voice-edge; nothing here builds it) to a temp dir so a rebuild
# cannot swap it out, and runs rtt.mjs, which starts voice-edge, aiortc and delay.py on free loopback ports,
# prints one markdown table and stops them. Bounded: rtt.mjs caps each call (--call-timeout-ms, 15 s),
# delay.py exits by itself, and this caps the whole run at 30 min.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="$HERE/.venv"
BIN_SRC="${VOICE_EDGE_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/x86_64-unknown-linux-gnu/release/voice-edge}"
case "$BIN_SRC" in /*) ;; *) BIN_SRC="$ROOT/$BIN_SRC" ;; esac

log() { echo "[bench-rtt] $*" >&2; }

RTTS=25,50,100
CALLS=5
AIORTC=1
PASS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rtts) RTTS="${2// /,}"; shift 2 ;;
    --calls) CALLS="$2"; shift 2 ;;
    --no-aiortc) AIORTC=0; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) PASS+=("$1"); shift ;;
  esac
done

# --- prerequisites -------------------------------------------------------------------------------------------
if [[ ! -x "${CHROMIUM_BIN:-/usr/bin/chromium}" ]]; then
  log "installing chromium (apt)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if [[ ! -d "$ROOT/tests/e2e/node_modules/playwright-core" ]]; then
  log "installing tests/e2e node_modules (npm ci)"
  (cd "$ROOT/tests/e2e" && npm ci --no-audit --no-fund --silent)
fi
if [[ $AIORTC == 1 ]] && { [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import aiortc, aiohttp' 2>/dev/null; }; then
  log "installing aiortc + aiohttp into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check aiortc aiohttp
fi
if [[ ! -x "$BIN_SRC" ]]; then
  log "no voice-edge binary at $BIN_SRC (build it with 'cargo build --release' or set VOICE_EDGE_BIN)"
  exit 1
fi

source "$ROOT/bench/lib.sh"
bench_workdir rtt
cp "$BIN_SRC" "$WORK/voice-edge"
log "$("$WORK/voice-edge" --version); RTTs $RTTS ms, $CALLS call(s) each"

ARGS=(--bin "$WORK/voice-edge" --rtt "$RTTS" --calls "$CALLS")
# Another build side by side in the same run (e.g. the previous commit's), as 'voice-edge (before)'.
if [[ -n "${VOICE_EDGE_BIN_BEFORE:-}" ]]; then
  cp "$VOICE_EDGE_BIN_BEFORE" "$WORK/voice-edge-before"
  ARGS+=(--bin-before "$WORK/voice-edge-before")
fi
[[ $AIORTC == 1 ]] && ARGS+=(--aiortc-python "$VENV/bin/python")
# rtt.mjs stops what it starts (and its children watch it); this bounds the whole run.
timeout --signal=TERM --kill-after=15 1800 node "$HERE/rtt.mjs" "${ARGS[@]}" ${PASS[@]+"${PASS[@]}"} &
PIDS+=($!)
wait "${PIDS[-1]}"
