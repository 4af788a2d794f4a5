#!/usr/bin/env bash
# Relay restarts under load through the compose stack (issue 29: "no pause on restart"): the longest
# silence any call hears while relay containers are restarted, in one run, for
#   pair    compose.yaml as it is: relay-a and relay-b share one network namespace (relay-net), so
#           their UDP sockets form one SO_REUSEPORT group; restarted one at a time, each only once
#           the other answers /health again (a rolling restart);
#   before  compose.yaml before the pair ($BEFORE_REV): one relay container, which owns its network
#           namespace, restarted in place: nothing serves until it is back;
#   still   the pair, no restart: the gaps this machine gives the same calls anyway;
#   single  (not by default) the pair's file with relay-b scaled to 0: one relay restarted in place
#           in a namespace that stays up.
#
#   VOICE_EDGE_BIN=/path/to/voice-edge bash bench/compose/restart.sh [--sessions 100]
#       [--restarts 10] [--every 3] [--ramp 50] [--layouts "pair before still"] [--advertise IP]
#   VOICE_EDGE_BIN_BEFORE=/path/to/main's   (the relay image of the `before` layout; default VOICE_EDGE_BIN)
#
# Per layout: a fresh stack (`up`, 2 transceivers), `voice-edge loadgen` on this host holding
# --sessions calls (loopback model, 20 ms echoed packets) through the host's address (Docker's
# DNAT, as bench/compose/load.sh), and once every call is up, --restarts container restarts
# (`docker restart -t 1`: what `docker-compose restart -t 1` does, without a Python start-up's
# CPU on this small machine at each restart) --every seconds apart. The load generator reports
# each call's longest silence between two echoes ("worst call": that figure's max over the whole
# hold) and logs every silence of 50 ms or more with its time (--gap-log), which
# bench/restart_gaps.py puts down to a restart when it overlaps one (from the stop until 1 s after
# the relay answers /health again) and to the machine otherwise. Every row says what was offered, connected,
# refused and failed. Bounded: loadgen holds for a fixed time, each wait has a deadline, the stack
# is taken `down` after each layout and on exit. Needs Docker and the base images
# (tests/compose/run.sh sets both up); tags voice-edge:local from the binaries.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

SESSIONS=100 RESTARTS=10 EVERY=3 RAMP=50 LAYOUTS="pair before still" ADVERTISE=""
# main before the relay pair: compose.yaml with one relay container.
BEFORE_REV="${BEFORE_REV:-d03510d}"
while [ $# -gt 0 ]; do
  case "$1" in
    --sessions) SESSIONS="$2"; shift 2 ;;
    --restarts) RESTARTS="$2"; shift 2 ;;
    --every) EVERY="$2"; shift 2 ;;
    --ramp) RAMP="$2"; shift 2 ;;
    --layouts) LAYOUTS="$2"; shift 2 ;;
    --advertise) ADVERTISE="$2"; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
BIN="${VOICE_EDGE_BIN:?set VOICE_EDGE_BIN to a built (static) voice-edge}"
BIN_BEFORE="${VOICE_EDGE_BIN_BEFORE:-$BIN}"
"$BIN" loadgen --help | grep -q -- --gap-log || { echo "$BIN's loadgen has no --gap-log (too old)" >&2; exit 1; }
OUT_DIR="${OUT_DIR:-/tmp/voice-edge-compose-restart}"
mkdir -p "$OUT_DIR"
source bench/compose/lib.sh
compose_bench_env
PROJECT="verestart$$"
FILE=compose.yaml
dc() { "${COMPOSE[@]}" -p "$PROJECT" -f "$FILE" -f bench/compose/load.override.yaml "$@"; }
LG=""
cleanup() {
  [ -n "$LG" ] && kill "$LG" 2>/dev/null || true
  dc down -v --remove-orphans >/dev/null 2>&1 || true
}
trap cleanup EXIT

members() {
  curl -fsS --max-time 2 -H "Authorization: Bearer $VOICE_EDGE_ADMIN_TOKEN" http://127.0.0.1:8081/admin/stats 2>/dev/null \
    | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["transceivers"]))' 2>/dev/null || echo 0
}
# Each relay's metrics listener as the compose file publishes it on this host's loopback.
declare -A METRICS=([relay-a]=9091 [relay-b]=9092 [relay]=9091)
healthy() { curl -fsS --max-time 1 "http://127.0.0.1:${METRICS[$1]}/health" >/dev/null 2>&1; }
wait_healthy() { # wait_healthy SERVICE SECONDS
  local deadline=$((SECONDS + $2))
  until healthy "$1"; do
    [ $SECONDS -lt $deadline ] || { echo "$1 did not answer /health within $2 s" >&2; return 1; }
    sleep 0.05
  done
}
# The relays' counters that say how flows came back, summed over the relays running now.
counters() {
  local keys="flows_recovered_cache flows_learned_outbound held_then_forwarded dropped_not_stun dropped_bad_link"
  for r in "$@"; do curl -fsS --max-time 2 "http://127.0.0.1:${METRICS[$r]}/metrics" 2>/dev/null || true; done \
    | awk -v keys="$keys" '
      /^voice_edge_relay_events_total\{/ { match($0, /event="[^"]*"/); k = substr($0, RSTART + 7, RLENGTH - 8); v[k] += $NF }
      END { n = split(keys, ks, " "); for (i = 1; i <= n; i++) printf "%s%s=%d", (i > 1 ? " " : ""), ks[i], v[ks[i]] }'
}
now_ms() { date +%s%3N; }

# Ramp, settle, the restarts (each --every s apart, plus up to 2 s for the restart itself), then
# at least 5 s after the last one.
RAMP_S=$(( (SESSIONS + RAMP - 1) / RAMP + 5 ))
HOLD=$(( RESTARTS * (EVERY + 2) + 8 ))
rm -f "$OUT_DIR"/rows.md "$OUT_DIR"/restarts-*.txt "$OUT_DIR"/gaps-*.txt

layout() {
  local name="$1" relays scale=() bin="$BIN" out="$OUT_DIR/loadgen-$1.md"
  FILE=compose.yaml
  case "$name" in
    pair|still) relays=(relay-a relay-b) ;;
    single) relays=(relay-a); scale=(--scale relay-b=0) ;;
    before)
      relays=(relay); bin="$BIN_BEFORE"; FILE="$OUT_DIR/compose-before.yaml"
      git show "$BEFORE_REV:compose.yaml" >"$FILE" 2>/dev/null || { echo "before: no compose.yaml at $BEFORE_REV" >&2; return 0; }
      ;;
    *) echo "unknown layout $name (pair, before, still, single)" >&2; exit 2 ;;
  esac
  bash tests/compose/image.sh "$bin" >"$OUT_DIR/image.log" 2>&1 || { cat "$OUT_DIR/image.log" >&2; exit 1; }
  dc up -d --scale transceiver=2 "${scale[@]}" >"$OUT_DIR/up-$name.log" 2>&1 || { cat "$OUT_DIR/up-$name.log" >&2; exit 1; }
  for _ in $(seq 150); do [ "$(members)" = 2 ] && break; sleep 0.2; done
  [ "$(members)" = 2 ] || { echo "$name: the transceivers did not register" >&2; exit 1; }
  local r
  for r in "${relays[@]}"; do wait_healthy "$r" 20; done
  declare -A ID
  for r in "${relays[@]}"; do ID[$r]=$(dc ps -q "$r"); done

  timeout $(( RAMP_S + HOLD + 60 )) "$BIN" loadgen --url "http://$ADVERTISE:8080" --sessions "$SESSIONS" \
    --ramp "$RAMP" --duration "$HOLD" --setup-timeout 20 --gap-log "$OUT_DIR/gaps-$name.txt" \
    >"$out" 2>"$OUT_DIR/loadgen-$name.err" &
  LG=$!
  sleep "$RAMP_S"
  local i t0
  : >"$OUT_DIR/restarts-$name.txt"
  for i in $(seq 0 $((RESTARTS - 1))); do
    sleep "$EVERY"
    [ "$name" = still ] && continue
    r=${relays[$((i % ${#relays[@]}))]}
    # Rolling: the other relay answered /health after its own restart before this one stops.
    t0=$(now_ms)
    docker restart -t 1 "${ID[$r]}" >/dev/null && wait_healthy "$r" 20 \
      && echo "$t0 $(now_ms) $r" >>"$OUT_DIR/restarts-$name.txt"
  done
  kill -0 "$LG" 2>/dev/null || echo "$name: the calls ended before the last restart (raise the hold)" >&2
  local c
  c=$(counters "${relays[@]}")
  wait "$LG" || true
  LG=""
  dc down -v --remove-orphans >/dev/null 2>&1 || true
  local attributed
  attributed=$(python3 bench/restart_gaps.py "$OUT_DIR/gaps-$name.txt" "$OUT_DIR/restarts-$name.txt")
  python3 - "$name" "$out" "$attributed" "$OUT_DIR/restarts-$name.txt" "$c" >>"$OUT_DIR/rows.md" <<'PY'
import re, sys
name, table, attributed, restarts_path, counters = sys.argv[1:6]
t = open(table).read()
def row(label):
    m = re.search(r"^\| " + re.escape(label) + r" \| (.*) \|$", t, re.M)
    return [c.strip() for c in m.group(1).split("|")] if m else []
conn = row("sessions connected (DTLS) / failed")
served, failed, offered = (re.match(r"(\d+) / (\d+) of (\d+)", conn[0]).groups() if conn else ("?", "?", "?"))
refused = (row("offers refused for load (429/503)") or ["0"])[0].split()[0]
loss = (row("loss (packets sent > 2 s before the end)") or ["?"])[0].split(" (")[0]
gap = row("longest echo gap per call") or ["?"] * 5
restarts = sum(1 for line in open(restarts_path) if line.split())
at_restart, over, _, elsewhere = attributed.split("\t")
labels = {"pair": "relay pair, rolling restarts (relay-a, relay-b, …)",
          "before": "one relay container restarted in place (before)",
          "still": "relay pair, no restart (reference)",
          "single": "relay pair's file, relay-b scaled to 0, relay-a restarted in place"}
print(f"| {labels[name]} | {offered} | {served} | {refused} | {failed} | {restarts} | {loss} | "
      f"{gap[0]} / {gap[2]} | {gap[3]} | {at_restart} ({over} calls ≥ 100) | {elsewhere} | {counters} |")
PY
}

for l in $LAYOUTS; do layout "$l"; done

echo "### Relay restarts through compose: $SESSIONS calls, $RESTARTS container restarts $EVERY s apart ($(date -u +%F), $(nproc) cores)"
echo
echo "| layout | offered | connected | refused | failed | restarts | loss | longest echo gap per call p50 / p99 ms | worst call ms | longest gap at a restart ms | longest gap elsewhere ms | relay counters after (relays running at the end) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
cat "$OUT_DIR/rows.md"
echo
echo "Raw loadgen tables, gap logs and restart times: $OUT_DIR"
