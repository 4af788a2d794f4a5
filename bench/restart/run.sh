#!/usr/bin/env bash
# Relay restarts under load: the longest silence any call hears while the all-in-one's relay is
# restarted in place (all its memory dropped, as a crashed and rescheduled relay pod) several times.
#
#   VOICE_EDGE_BIN=/path/to/voice-edge bash bench/restart/run.sh                 # 300 calls, 10 restarts
#   bash bench/restart/run.sh --sessions 1000 --restarts 10 --every 3
#   VOICE_EDGE_BIN=new VOICE_EDGE_BIN_BEFORE=old bash bench/restart/run.sh      # two builds, one table
#
# Per build: a fresh all-in-one (`--dev-admin` for POST /admin/actions/restart-relay, and
# `--max-calls-per-client 0`: the load generator is one client), `voice-edge loadgen` holding
# --sessions calls of 20 ms echoed packets, and once every call is up, --restarts restarts
# --every seconds apart. The load generator reports each call's longest silence between two
# echoes; a row's worst call is that figure's max, over the whole hold. It also logs every silence
# of 50 ms or more with its time (--gap-log), which bench/restart_gaps.py puts down to a restart
# when it overlaps one (from the request until 1 s after it returned) and to the machine
# otherwise: at 1,000 calls this machine gives every call a silence of 200 ms or more with no
# restart at all, so only the split says what a restart costs. Every row says what was
# offered, connected, refused and failed. Bounded: loadgen holds for a fixed time and each step
# has a timeout; everything started is stopped on exit. As root it runs in a network namespace of
# its own (see bench/load/run.sh on why).
set -euo pipefail
cd "$(dirname "$0")/../.."

source bench/lib.sh
run_in_own_netns bench "$0" "$@"

SESSIONS=300
RESTARTS=10
EVERY=3
RAMP=100
OUT_DIR="${OUT_DIR:-/tmp/voice-edge-restart}"
WHERE="the host's network namespace"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sessions) SESSIONS="$2"; shift 2 ;;
    --restarts) RESTARTS="$2"; shift 2 ;;
    --every) EVERY="$2"; shift 2 ;;
    --ramp) RAMP="$2"; shift 2 ;;
    --host-netns) shift ;;
    --inside-netns) WHERE="a network namespace of its own"; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
BIN="${VOICE_EDGE_BIN:?set VOICE_EDGE_BIN to a release build (nothing here builds it)}"
mkdir -p "$OUT_DIR"
STARTED=()
trap 'for p in "${STARTED[@]}"; do kill -TERM "$p" 2>/dev/null || true; done' EXIT

# Ramp, settle, the restarts, and 5 s after the last one.
RAMP_S=$(( (SESSIONS + RAMP - 1) / RAMP + 5 ))
HOLD=$(( RESTARTS * EVERY + 8 ))

row() {
  local name="$1" bin="$2" http udp pid lg out
  http=$(free_port); udp=$(free_port udp)
  cp "$bin" "$OUT_DIR/voice-edge-$name"
  "$OUT_DIR/voice-edge-$name" --http "127.0.0.1:$http" --relay "127.0.0.1:$udp" --dev-admin \
    --max-calls-per-client 0 >"$OUT_DIR/server-$name.log" 2>&1 &
  pid=$!
  STARTED+=("$pid")
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$http/admin/stats" >/dev/null && break; sleep 0.1; done
  out="$OUT_DIR/loadgen-$name.md"
  # The load generator is always this build's (an older one may not report echo gaps).
  timeout $(( RAMP_S + HOLD + 60 )) "$OUT_DIR/loadgen" loadgen --url "http://127.0.0.1:$http" \
    --sessions "$SESSIONS" --ramp "$RAMP" --duration "$HOLD" --setup-timeout 10 --server-pid "$pid" \
    --gap-log "$OUT_DIR/gaps-$name.txt" >"$out" 2>"$OUT_DIR/loadgen-$name.err" &
  lg=$!
  STARTED+=("$lg")
  sleep "$RAMP_S"
  local done=0 t0
  : >"$OUT_DIR/restarts-$name.txt"
  for _ in $(seq "$RESTARTS"); do
    sleep "$EVERY"
    t0=$(date +%s%3N)
    curl -sf -X POST "http://127.0.0.1:$http/admin/actions/restart-relay" >/dev/null \
      && done=$((done + 1)) && echo "$t0 $(date +%s%3N)" >>"$OUT_DIR/restarts-$name.txt"
  done
  wait "$lg" || true
  local counters
  counters=$(curl -s "http://127.0.0.1:$http/admin/stats" | python3 -c '
import json, sys
s = json.load(sys.stdin)
relays = s.get("relays") or []
c = (relays[0] if relays else {}).get("counters", {})
print(" ".join(f"{k}={c.get(k, 0)}" for k in ("flows_recovered_cache", "flows_learned_outbound", "held_then_forwarded", "dropped_not_stun", "cache_lookups", "send_errors", "forwarded_in")))
' 2>/dev/null || echo "(no counters)")
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  local attributed
  attributed=$(python3 bench/restart_gaps.py "$OUT_DIR/gaps-$name.txt" "$OUT_DIR/restarts-$name.txt")
  awk -v name="$name" -v restarts="$done" -v counters="$counters" -v attributed="$attributed" -F'|' '
    function t(s) { gsub(/^ +| +$/, "", s); return s }
    /longest echo gap per call/ { gap50 = t($3); gap99 = t($5); gapmax = t($6) }
    /sessions connected/        { split(t($3), a, " "); served = a[1]; failed = a[3]; offered = a[5] }
    /^\| offers refused/         { split(t($3), a, " "); refused = a[1] }
    /^\| loss/                   { loss = t($3); sub(/ \(.*/, "", loss) }
    END {
      split(attributed, at, "\t")
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s (%s calls ≥ 100, %s of %s restarts heard) | %s | %s |\n",
        name, offered, served, (refused == "" ? 0 : refused), failed, restarts, loss, gap50, gap99,
        gapmax, at[1], at[2], at[3], restarts, at[4], counters
    }' "$out" >>"$OUT_DIR/rows.md"
}

rm -f "$OUT_DIR/rows.md"
cp "$BIN" "$OUT_DIR/loadgen"
row this "$BIN"
[[ -n "${VOICE_EDGE_BIN_BEFORE:-}" ]] && row before "$VOICE_EDGE_BIN_BEFORE"

echo "### Relay restarts under load: $SESSIONS calls, $RESTARTS in-place restarts $EVERY s apart ($(date -u +%F), $(nproc) cores, $WHERE)"
echo
echo "| build | offered | connected | refused | failed | restarts | loss | longest echo gap per call p50 ms | p99 ms | worst call ms | longest gap at a restart ms | longest gap elsewhere ms | relay counters after |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
cat "$OUT_DIR/rows.md"
echo
echo "Raw loadgen tables: $OUT_DIR/loadgen-*.md"
