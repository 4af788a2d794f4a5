#!/usr/bin/env bash
# CPU per call at load, bridged vs stub, with real WebRTC calls from `voice-edge loadgen` (run by
# bench/upstream/run.sh, which starts the servers):
#   bash bench/upstream/load.sh BIN EDGE_URL EDGE_PID UPSTREAM_PID CALLS
# Rows, one after another on the same edge, each a loadgen run that ramps, holds, hangs up and stops:
#   stub loopback   the edge reflects each packet (no codec work): the network reference
#   stub echo       the edge decodes every frame for its VAD (what a turn-based stub costs while listening)
#   bridged, listening  ?model=upstream:echo: every frame decoded, resampled and appended upstream, whose
#                   echo hears no turn in loadgen's tagged frames and so never answers: the cost of a
#                   caller being heard
#   bridged, full duty  ?model=upstream:loopback: the same, and the upstream's loopback sends every frame
#                   straight back as deltas, resampled and encoded to Opus: both ways all the time (a real
#                   model speaks only part of the time)
# CPU is utime+stime from /proc over the loadgen run (ramp and hang-up included), per process, as % of
# one core; per call is that over the calls connected.
# The returned audio of a bridged call is re-encoded, so loadgen's echo matching (RTT, loss) does not
# apply to that row; its setup and failure counts do.
set -euo pipefail
BIN="$1" EDGE="$2" EDGE_PID="$3" UP_PID="$4" CALLS="$5"
DURATION="${BENCH_UPSTREAM_DURATION:-20}"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
printf '\n### CPU per call at %s calls (loadgen, %s s hold)\n\n' "$CALLS" "$DURATION"
echo '| row | offered | connected | refused | failed | edge CPU % | upstream CPU % | edge % per call | both % per call |'
echo '|---|---:|---:|---:|---:|---:|---:|---:|---:|'
for row in "stub loopback=loopback" "stub echo=echo" "bridged, listening=upstream:echo" "bridged, full duty=upstream:loopback"; do
  name="${row%%=*}" model="${row#*=}"
  e0=$(ticks "$EDGE_PID") u0=$(ticks "$UP_PID") t0=$(date +%s.%N)
  out=$("$BIN" loadgen --url "$EDGE" --sessions "$CALLS" --duration "$DURATION" --ramp 50 --model "$model" --server-pid "$EDGE_PID" 2>&1) || true
  e1=$(ticks "$EDGE_PID") u1=$(ticks "$UP_PID") t1=$(date +%s.%N)
  echo "$out" > "/tmp/bench-upstream-load-${model//:/_}.md"
  # "| sessions connected (DTLS) / failed | C / F of N |", "| offers refused for load (429/503) | R of N |"
  connected=$(echo "$out" | awk -F'|' '/^\| sessions connected/ {split($3, a, " "); print a[1]; exit}')
  failed=$(echo "$out" | awk -F'|' '/^\| sessions connected/ {split($3, a, " "); print a[3]; exit}')
  refused=$(echo "$out" | awk -F'|' '/^\| offers refused/ {split($3, a, " "); print a[1]; exit}')
  awk -v n="$name" -v c="$CALLS" -v con="${connected:-?}" -v r="${refused:-0}" -v f="${failed:-?}" -v e="$((e1 - e0))" -v u="$((u1 - u0))" \
      -v t0="$t0" -v t1="$t1" -v hz="$HZ" 'BEGIN {
    wall = t1 - t0; ec = 100 * e / hz / wall; uc = 100 * u / hz / wall;
    k = (con + 0 > 0) ? con + 0 : c;
    printf "| %s | %d | %s | %s | %s | %.1f | %.1f | %.3f | %.3f |\n", n, c, con, r, f, ec, uc, ec / k, (ec + uc) / k }'
done
echo
echo "(loadgen's own tables: /tmp/bench-upstream-load-*.md)"
