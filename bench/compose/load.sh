#!/usr/bin/env bash
# N real WebRTC calls through the compose stack (issue 29): Redis, the relay, transceivers and
# signaling in containers of their own, media crossing Docker's bridge between them. The load
# generator runs on this host and reaches the relay on the host's own address, so its datagrams
# take Docker's NAT (DNAT on the published port) rather than the userland proxy that serves
# loopback; answers advertise that address (VOICE_EDGE_ADVERTISE).
#
#   VOICE_EDGE_BIN=/path/to/voice-edge bash bench/compose/load.sh [--sessions 1000] [--duration 60]
#       [--ramp 50] [--transceivers 2] [--advertise IP]
#
# Needs Docker running and the base images (tests/compose/run.sh sets both up). It tags
# voice-edge:local from VOICE_EDGE_BIN (tests/compose/image.sh), so the containers run the build
# being measured. Prints what was offered, served, refused and failed, the loss, and each
# container's CPU and memory over the hold; the load generator's full table is kept in
# $OUT_DIR (default /tmp/voice-edge-compose-load), with every container's log (compose.log).
# Stops by itself; `down` on exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

SESSIONS=1000 DURATION=60 RAMP=50 TRANSCEIVERS=2 ADVERTISE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --sessions) SESSIONS="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --ramp) RAMP="$2"; shift 2 ;;
    --transceivers) TRANSCEIVERS="$2"; shift 2 ;;
    --advertise) ADVERTISE="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
BIN="${VOICE_EDGE_BIN:?set VOICE_EDGE_BIN to a built (static) voice-edge}"
OUT_DIR="${OUT_DIR:-/tmp/voice-edge-compose-load}"
mkdir -p "$OUT_DIR"
source bench/compose/lib.sh
compose_bench_env
PROJECT="veload$$"
dc() { "${COMPOSE[@]}" -p "$PROJECT" -f compose.yaml -f bench/compose/load.override.yaml "$@"; }
# Every container's log is kept ($OUT_DIR/compose.log): who refused, who saturated, and when.
cleanup() {
  dc logs --no-color >"$OUT_DIR/compose.log" 2>&1 || true
  dc down -v --remove-orphans >/dev/null 2>&1 || true
}
trap cleanup EXIT

bash tests/compose/image.sh "$BIN" >"$OUT_DIR/image.log" 2>&1 || { cat "$OUT_DIR/image.log" >&2; exit 1; }
dc up -d --scale transceiver="$TRANSCEIVERS" >/dev/null 2>&1
members() {
  curl -fsS --max-time 2 -H "Authorization: Bearer $VOICE_EDGE_ADMIN_TOKEN" http://127.0.0.1:8081/admin/stats 2>/dev/null \
    | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["transceivers"]))' 2>/dev/null || echo 0
}
for _ in $(seq 150); do [ "$(members)" = "$TRANSCEIVERS" ] && break; sleep 0.2; done
[ "$(members)" = "$TRANSCEIVERS" ] || { echo "the transceivers did not register" >&2; exit 1; }

# Each container's main process, by service: CPU ticks and RSS read from /proc on this host.
declare -A PID_OF
for id in $(dc ps -q); do
  name=$(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}}' "$id")
  n=$(docker inspect -f '{{index .Config.Labels "com.docker.compose.container-number"}}' "$id")
  PID_OF["$name-$n"]=$(docker inspect -f '{{.State.Pid}}' "$id")
done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
# Datagrams the container's network namespace dropped for a full socket buffer (Udp RcvbufErrors).
udp_drops() { awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "RcvbufErrors") c = i; h = 1 } else print $c }' "/proc/$1/net/snmp"; }
declare -A T0 RSS0 DROPS0
for k in "${!PID_OF[@]}"; do
  RSS0[$k]=$(rss_kb "${PID_OF[$k]}")
  DROPS0[$k]=$(udp_drops "${PID_OF[$k]}")
done

"$BIN" loadgen --url "http://$ADVERTISE:8080" --sessions "$SESSIONS" --duration "$DURATION" --ramp "$RAMP" \
  --setup-timeout 20 >"$OUT_DIR/loadgen.md" 2>"$OUT_DIR/loadgen.err" &
LG=$!
# The hold's middle: from 10 s after the ramp to 5 s before the hang-up.
ramp_s=$(( (SESSIONS + RAMP - 1) / RAMP ))
window=$(( DURATION - 15 ))
[ "$window" -gt 0 ] || { echo "--duration must exceed 15 s" >&2; exit 2; }
sleep $(( ramp_s + 10 ))
for k in "${!PID_OF[@]}"; do T0[$k]=$(ticks "${PID_OF[$k]}"); done
sleep "$window"
hz=$(getconf CLK_TCK)
declare -A CPU RSS
for k in "${!PID_OF[@]}"; do
  p=${PID_OF[$k]}
  CPU[$k]=$(awk -v a="${T0[$k]}" -v b="$(ticks "$p")" -v hz="$hz" -v s="$window" 'BEGIN { printf "%.0f", (b - a) / hz / s * 100 }')
  RSS[$k]="$(( RSS0[$k] / 1024 )) → $(( $(rss_kb "$p") / 1024 )) MB"
done
wait "$LG" || true
# Drops over the whole run, read after the hang-up.
rows=()
for k in $(printf '%s
' "${!PID_OF[@]}" | sort); do
  rows+=("| $k | ${CPU[$k]} % | ${RSS[$k]} | $(( $(udp_drops "${PID_OF[$k]}") - DROPS0[$k] )) |")
done

field() { sed -n "s/^| $1 | \(.*\) |$/\1/p" "$OUT_DIR/loadgen.md"; }
echo "## $SESSIONS calls through compose ($TRANSCEIVERS transceivers), hold ${DURATION} s, $(date -u +%F)"
echo
echo "| offered | connected / failed | refused | loss | echo RTT p50 / p99 ms | offer → DTLS p50 / p99 ms |"
echo "|---:|---|---:|---|---|---|"
rtt=$(field 'echo RTT' | awk -F'|' '{gsub(/ /,""); print $1 " / " $3}')
dtls=$(field 'offer posted → DTLS connected' | awk -F'|' '{gsub(/ /,""); print $1 " / " $3}')
refused=$(field 'offers refused for load (429\/503)' | awk '{print $1}')
echo "| $SESSIONS | $(field 'sessions connected (DTLS) \/ failed') | ${refused:-0} | $(field 'loss (packets sent > 2 s before the end)') | $rtt | $dtls |"
echo
echo "Each container: CPU (of one core) over ${window} s of the hold, RSS idle → live, and the"
echo "datagrams its network namespace dropped for a full socket buffer over the run:"
echo
echo "| container | CPU | RSS | UDP receive drops |"
echo "|---|---:|---|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "load generator: $(field 'loadgen CPU (steady)')"
