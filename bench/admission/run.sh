#!/usr/bin/env bash
# Admission control under offered load beyond capacity: real WebRTC calls from `voice-edge loadgen`
# against a fresh all-in-one server per row, with admission on (the default) and off (every worker
# takes every call: --admit-when-saturated and caps out of reach), alternating, on this machine
# (server and load generator share its cores).
#
#   bash bench/admission/run.sh                          # 1,500 calls offered, 60 s hold, 2 runs
#   bash bench/admission/run.sh --sessions 1200 --duration 30 --runs 1
#
# Each row ramps at --ramp calls/s, holds --duration, hangs up and stops by itself; only
# loopback is used. As root it runs in a network namespace of its own (see bench/load/run.sh for
# why), unless --host-netns. Raw loadgen tables stay in $OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."

source bench/lib.sh
run_in_own_netns admission "$0" "$@"

SESSIONS=1500
DURATION=60
RAMP=50
RUNS=2
WHERE="the host's network namespace"
OUT_DIR="${OUT_DIR:-/tmp/voice-edge-admission}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sessions) SESSIONS="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --ramp) RAMP="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --host-netns) shift ;;
    --inside-netns) WHERE="a network namespace of its own"; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done

BIN="${VOICE_EDGE_BIN:-}"
if [[ -z "$BIN" ]]; then
  cargo build --release --quiet
  BIN=target/x86_64-unknown-linux-gnu/release/voice-edge
fi
mkdir -p "$OUT_DIR"


# Every offer comes from this one address, so the per-client cap is off in both rows.
COMMON=(--max-calls-per-client 0)
OFF=(--admit-when-saturated --max-calls-per-worker 1000000 --max-connecting-per-worker 1000000)

run_row() {
  local mode="$1" run="$2" http udp pid out extra=()
  [[ "$mode" == off ]] && extra=("${OFF[@]}")
  http=$(free_port); udp=$(free_port)
  "$BIN" --http "127.0.0.1:$http" --relay "127.0.0.1:$udp" "${COMMON[@]}" "${extra[@]}" \
    >"$OUT_DIR/server-$mode-$run.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$http/admin/stats" >/dev/null && break; sleep 0.1; done
  out="$OUT_DIR/loadgen-$mode-$run.md"
  "$BIN" loadgen --url "http://127.0.0.1:$http" --sessions "$SESSIONS" --duration "$DURATION" --ramp "$RAMP" \
    --server-pid "$pid" --setup-timeout 10 >"$out" 2>"$OUT_DIR/loadgen-$mode-$run.err" || true
  local saturated
  saturated=$(curl -sf "http://127.0.0.1:$http/admin/stats" \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(t.get("saturated_windows",0) for t in d.get("transceivers",[])))' 2>/dev/null || echo "?")
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  awk -v mode="$mode" -v n="$SESSIONS" -v sat="$saturated" -F'|' '
    function t(s) { gsub(/^ +| +$/, "", s); return s }
    /offer posted → refusal/        { refusal = t($3) }
    /offer posted → DTLS connected/ { dtls = t($3) " / " t($5) }
    /^\| echo RTT/                  { rtt = t($3) " / " t($5) }
    /sessions connected/            { split(t($3), a, " "); connected = a[1]; failed = a[3] }
    /offers refused for load/       { split(t($3), a, " "); refused = a[1] }
    /^\| loss/                      { split(t($3), a, " "); loss = a[1] " %" }
    /ICE disconnects/               { split(t($3), a, " "); disc = a[3] }
    /^\| server CPU/                { split(t($3), a, " "); cpu = a[1] " %" }
    END {
      if (refused == "") refused = 0; if (disc == "") disc = 0; if (refusal == "") refusal = "–"
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n, mode, connected, refused, refusal, failed, loss, disc, rtt, dtls, sat, cpu
    }
  ' "$out"
}

echo "## voice-edge admission: $SESSIONS calls offered at ${RAMP}/s, ${DURATION} s hold ($(nproc) cores shared by server and loadgen, in $WHERE; $(date -u +%F))"
echo
echo "| offered | admission | admitted (connected) | refused 429/503 | → refusal p50 ms | admitted but failed | loss (admitted calls) | ICE disconnects | echo RTT p50 / p99 ms | offer → DTLS p50 / p99 ms | saturated worker-seconds | server CPU |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|"
for run in $(seq "$RUNS"); do
  run_row on "$run"
  run_row off "$run"
done
echo
echo "Raw loadgen tables: $OUT_DIR/loadgen-*.md"
