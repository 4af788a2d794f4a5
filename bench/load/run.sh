#!/usr/bin/env bash
# Load table for issue-style reporting: real WebRTC calls from `voice-edge loadgen` against a fresh
# all-in-one server per row, on this machine (server and load generator share its cores).
#
#   bash bench/load/run.sh                         # relay 100/500/1000 calls + direct 100, 60 s each
#   bash bench/load/run.sh --sessions "100 500" --duration 30 --direct-sessions ""
#   bash bench/load/run.sh --sessions 1000 --direct-sessions "" --runs 5   # five back-to-back rows
#
# Rows run one after another and each stops by itself (loadgen ramps, holds --duration, hangs up).
# Only loopback is used. The raw loadgen tables are kept in $OUT_DIR for the numbers not summarised.
# Each row says what was offered, served (connected) and refused: the server runs with
# --max-calls-per-client 0, since the load generator is a single client.
#
# As root, everything runs in a network namespace the script creates (its own loopback) and
# deletes afterwards, unless --host-netns. The host's loopback carries whatever firewall state
# the host has: with Docker's NAT rules loaded, every loopback datagram also goes through
# conntrack, which cost 1,000 calls here ~8 points of loss. An edge host exempts its media
# ports from conntrack (a NOTRACK rule); the namespace measures the software without it.
set -euo pipefail
cd "$(dirname "$0")/../.."

source bench/lib.sh
run_in_own_netns bench "$0" "$@"

SESSIONS="100 500 1000"
DIRECT_SESSIONS="100"
DURATION=60
RAMP=50
RUNS=1
SERVER_ARGS=""
WHERE="the host's network namespace"
OUT_DIR="${OUT_DIR:-/tmp/voice-edge-load}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sessions) SESSIONS="$2"; shift 2 ;;
    --direct-sessions) DIRECT_SESSIONS="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --ramp) RAMP="$2"; shift 2 ;;
    --server-args) SERVER_ARGS="$2"; shift 2 ;;
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
# The load generator may be pinned to another build, so two servers are compared under the
# same load: VOICE_EDGE_LOADGEN_BIN=/path/to/voice-edge.
LOADGEN_BIN="${VOICE_EDGE_LOADGEN_BIN:-$BIN}"
mkdir -p "$OUT_DIR"


# One row: start a server (relay path, or --direct), load it, stop it, summarise.
run_row() {
  local mode="$1" n="$2" http udp pid out
  http=$(free_port); udp=$(free_port)
  local extra=()
  [[ "$mode" == direct ]] && extra=(--direct)
  # The load generator is one client: the per-client cap (100) would refuse the rest.
  "$BIN" --http "127.0.0.1:$http" --relay "127.0.0.1:$udp" --max-calls-per-client 0 "${extra[@]}" $SERVER_ARGS \
    >"$OUT_DIR/server-$mode-$n.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$http/admin/stats" >/dev/null && break; sleep 0.1; done
  out="$OUT_DIR/loadgen-$mode-$n.md"
  "$LOADGEN_BIN" loadgen --url "http://127.0.0.1:$http" --sessions "$n" --duration "$DURATION" --ramp "$RAMP" \
    --server-pid "$pid" --setup-timeout 10 >"$out" 2>"$OUT_DIR/loadgen-$mode-$n.err" || true
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  awk -v mode="$mode" -v n="$n" -F'|' '
    function t(s) { gsub(/^ +| +$/, "", s); return s }
    /offer posted → DTLS connected/ { dtls = t($3) " / " t($5) }
    /offer posted → first echoed/   { first = t($3) }
    /^\| echo RTT/                  { rtt = t($3) " / " t($5) }
    /sessions connected/            { split(t($3), a, " "); failed = a[3]; served = a[1] }
    /^\| offers refused/             { split(t($3), a, " "); refused = a[1] }
    /^\| loss/                      { split(t($3), a, " "); loss = a[1] " %" }
    /^\| server CPU/                { split(t($3), a, " "); cpu = a[1] " %" }
    /^\| server RSS/                { m = t($3); sub(/.*MB, /, "", m); sub(/ per session/, "", m); rss = m }
    /^\| loadgen CPU/               { split(t($3), a, " "); lcpu = a[1] " %" }
    END { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n, served, refused + 0, mode, dtls, first, rtt, loss, failed, cpu, rss, lcpu }
  ' "$out"
}

echo "## voice-edge loadgen, ${DURATION} s per row after a ${RAMP}/s ramp ($(nproc) cores shared by server and loadgen, in $WHERE; $(date -u +%F))"
echo
echo "A row that refused offers (429/503) is not a clean run: its other figures are for fewer calls."
echo
echo "| offered | served | refused | path | offer → DTLS connected p50 / p99 ms | → first echo p50 ms | echo RTT p50 / p99 ms | loss | failed calls | server CPU (one core = 100 %) | server RSS per call | loadgen CPU |"
echo "|---:|---:|---:|---|---|---:|---|---:|---:|---:|---:|---:|"
for _ in $(seq "$RUNS"); do
  for n in $DIRECT_SESSIONS; do run_row direct "$n"; run_row relay "$n"; done
  for n in $SESSIONS; do
    [[ " $DIRECT_SESSIONS " == *" $n "* ]] && continue
    run_row relay "$n"
  done
done
echo
echo "Raw loadgen tables: $OUT_DIR/loadgen-*.md"
