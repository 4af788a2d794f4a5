#!/usr/bin/env bash
# Soak test (issue 29, "An hour at load"): one all-in-one server holds ~300 real WebRTC calls
# with churn (calls ending and new ones arriving all the time) for an hour, sampled every
# minute for RSS, open files, threads, live calls and CPU. At the end it prints the per-minute
# samples, the totals over every load-generator run, and a verdict: clean only if no call
# failed or was refused, no packet was lost, and RSS / open files stayed flat.
#
#   VOICE_EDGE_BIN=/path/to/voice-edge bash bench/soak/run.sh               # 60 min, 6 lanes × 50 calls, hold 120 s
#   VOICE_EDGE_BIN=/path/to/voice-edge bash bench/soak/run.sh --minutes 4 --lanes 3 --calls-per-lane 20 --hold 40
#
# Not for CI: it takes --minutes of wall time. VOICE_EDGE_BIN is a built binary (the script
# never builds). Churn: --lanes load-generator lanes, each looping `voice-edge loadgen` with
# --calls-per-lane calls held --hold seconds, then starting the next run at once; the lanes'
# first runs are staggered by hold / lanes, so some calls hang up and new ones arrive every
# few seconds. Every loadgen run's table is kept in $OUT_DIR (default /tmp/voice-edge-soak),
# with the samples (samples.tsv) and the summary (summary.md).
#
# Every loop is bounded and stops by itself: lanes start no run after --minutes are up (the
# last run of each lane is shortened to end ~10 s after that), every loadgen runs under
# `timeout`, the sampler takes --minutes + 1 samples, and on exit (or Ctrl-C) everything the
# script started is stopped.
#
# As root, everything runs in a network namespace the script creates (its own loopback) and
# deletes afterwards, unless --host-netns (see bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."

usage() {
  cat <<'EOF'
Usage: VOICE_EDGE_BIN=/path/to/voice-edge bash bench/soak/run.sh [options]

  --minutes M          total time under load (default 60)
  --lanes K            load-generator lanes running side by side (default 6)
  --calls-per-lane N   calls each loadgen run holds (default 50; K × N calls live)
  --hold H             seconds each loadgen run holds its calls before hanging up (default 120);
                       lanes' first runs are staggered by H / K
  --server-args "..."  extra arguments for the server
  --loadgen-nice N     the load generators' nice value (default 10; 0 to share the cores evenly)
  --host-netns         run on the host's loopback instead of a namespace of its own
  -h, --help           this text

Output: markdown tables on stdout; raw loadgen tables, samples and the summary in
$OUT_DIR (default /tmp/voice-edge-soak).
EOF
}
for a in "$@"; do [[ "$a" == -h || "$a" == --help ]] && { usage; exit 0; }; done

source bench/lib.sh
run_in_own_netns soak "$0" "$@"

MINUTES=60
LANES=6
CALLS=50
HOLD=120
RAMP=50
SERVER_ARGS=""
# The load generators stand in for clients on other machines, so they yield the shared cores to
# the server: at nice 0 the six of them starting and ending runs held the server's workers'
# timers 10-36 ms late (bench/soak/README.md).
LOADGEN_NICE=10
WHERE="the host's network namespace"
OUT_DIR="${OUT_DIR:-/tmp/voice-edge-soak}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --minutes) MINUTES="$2"; shift 2 ;;
    --lanes) LANES="$2"; shift 2 ;;
    --calls-per-lane) CALLS="$2"; shift 2 ;;
    --hold) HOLD="$2"; shift 2 ;;
    --server-args) SERVER_ARGS="$2"; shift 2 ;;
    --loadgen-nice) LOADGEN_NICE="$2"; shift 2 ;;
    --host-netns) shift ;;
    --inside-netns) WHERE="a network namespace of its own"; shift ;;
    *) echo "unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ "$LOADGEN_NICE" =~ ^[0-9]+$ ]] && ((LOADGEN_NICE <= 19)) || { echo "--loadgen-nice must be 0-19" >&2; exit 2; }
for v in MINUTES LANES CALLS HOLD; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "--${v,,} must be a positive integer" >&2; exit 2; }
done

BIN="${VOICE_EDGE_BIN:-}"
[[ -n "$BIN" && -x "$BIN" ]] || { echo "set VOICE_EDGE_BIN to a built voice-edge binary" >&2; exit 2; }
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR"/lane*-run*.md "$OUT_DIR"/lane*-run*.err "$OUT_DIR"/lane*.runs \
  "$OUT_DIR"/samples.tsv "$OUT_DIR"/summary.md "$OUT_DIR"/server.log

bench_workdir soak   # $WORK, $PIDS; on exit everything in $PIDS gets SIGTERM (SIGKILL 5 s later)

http=$(free_port); udp=$(free_port)
# The load generator is one client: the per-client cap (100 calls) would refuse the rest.
"$BIN" --http "127.0.0.1:$http" --relay "127.0.0.1:$udp" --max-calls-per-client 0 $SERVER_ARGS \
  >"$OUT_DIR/server.log" 2>&1 &
SERVER=$!
PIDS+=("$SERVER")
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$http/admin/stats" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$http/admin/stats" >/dev/null || { echo "server did not come up" >&2; exit 1; }

CLK_TCK=$(getconf CLK_TCK)
START=$(date +%s)
DEADLINE=$((START + MINUTES * 60))

# One lane: loadgen runs back to back until the deadline; the first one waits lane × hold / lanes.
# Each run is bounded by `timeout`; the last one is shortened to end ~10 s after the deadline,
# so calls are still live at the last sample.
lane() {
  local i="$1" run=0 child="" now left dur t0 rc
  trap '[[ -n "$child" ]] && kill -TERM "$child" 2>/dev/null; exit 143' TERM INT
  sleep $((i * HOLD / LANES)) & child=$!
  wait "$child" || true
  while kill -0 "$SERVER" 2>/dev/null; do
    now=$(date +%s); left=$((DEADLINE - now))
    ((left > 0)) || break
    dur=$((left + 10 < HOLD ? left + 10 : HOLD))
    run=$((run + 1)); t0=$now
    local base="$OUT_DIR/lane$i-run$(printf %03d "$run")"
    timeout -k 10 $((dur + CALLS / RAMP + 90)) \
      nice -n "$LOADGEN_NICE" "$BIN" loadgen --url "http://127.0.0.1:$http" --sessions "$CALLS" --duration "$dur" \
      --ramp "$RAMP" --setup-timeout 10 --server-pid "$SERVER" >"$base.md" 2>"$base.err" &
    child=$!
    rc=0; wait "$child" || rc=$?
    child=""
    echo "$run $CALLS $dur $rc" >>"$OUT_DIR/lane$i.runs"
    # A run that ends at once (server gone, loadgen refused its arguments) must not spin.
    (($(date +%s) - t0 >= 5)) || sleep 5
  done
}

# One sample line: label, seconds since start, live calls, RSS kB, fds, threads, CPU ticks.
sample() {
  local label="$1" live rss fds thr ticks
  if [[ -r /proc/$SERVER/status ]]; then
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER/status")
    thr=$(awk '/^Threads:/ {print $2}' "/proc/$SERVER/status")
    fds=$(ls "/proc/$SERVER/fd" 2>/dev/null | wc -l)
    ticks=$(sed 's/^.*) //' "/proc/$SERVER/stat" | awk '{print $12 + $13}')
  else
    rss=-; thr=-; fds=-; ticks=-
  fi
  live=$(curl -s -m 5 "http://127.0.0.1:$http/admin/stats" 2>/dev/null \
    | jq -r '[.transceivers[].live_calls] | add // 0' 2>/dev/null) || true
  [[ -n "$live" ]] || live=-
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$(($(date +%s) - START))" "$live" "$rss" "$fds" "$thr" "$ticks" \
    >>"$OUT_DIR/samples.tsv"
}

sample 0
for i in $(seq 0 $((LANES - 1))); do
  lane "$i" &
  PIDS+=("$!")
done
echo "soak: server pid $SERVER on http 127.0.0.1:$http, $LANES lanes × $CALLS calls, hold $HOLD s, $MINUTES min; samples in $OUT_DIR/samples.tsv" >&2
for m in $(seq 1 "$MINUTES"); do
  target=$((START + m * 60))
  while (($(date +%s) < target)); do sleep 1; done
  sample "$m"
  kill -0 "$SERVER" 2>/dev/null || { echo "soak: the server exited at minute $m" >&2; break; }
done
# The lanes end by themselves (their last runs are bounded by `timeout`).
for pid in "${PIDS[@]:1}"; do wait "$pid" 2>/dev/null || true; done
sleep 5
sample end
SERVER_ALIVE=yes
kill -0 "$SERVER" 2>/dev/null || SERVER_ALIVE=no
kill -INT "$SERVER" 2>/dev/null || true
wait "$SERVER" 2>/dev/null || true

summary() {
  echo "## voice-edge soak: $LANES lanes × $CALLS calls with churn (hold $HOLD s), $MINUTES min ($(nproc) cores shared by server and loadgens at nice $LOADGEN_NICE, in $WHERE; $(date -u +%F))"
  echo
  echo "Per-minute samples of the server (CPU over the interval before the sample; one core = 100 %; \"end\" is after every call hung up):"
  echo
  echo "| minute | live calls | RSS MB | open fds | threads | server CPU % |"
  echo "|---:|---:|---:|---:|---:|---:|"
  awk -F'\t' -v tck="$CLK_TCK" '
    { cpu = "–"
      if (NR > 1 && $7 != "-" && pt != "-" && $2 > ps) cpu = sprintf("%.0f", ($7 - pt) / tck / ($2 - ps) * 100)
      rss = ($4 == "-") ? "–" : sprintf("%.1f", $4 / 1024)
      printf "| %s | %s | %s | %s | %s | %s |\n", $1, $3, rss, $5, $6, cpu
      ps = $2; pt = $7 }' "$OUT_DIR/samples.tsv"
  echo

  # Totals over every loadgen run's table.
  local runs=0 offered=0 connected=0 refused=0 failed=0 broken=0 lost=0 counted=0 worst_loss=0 rtts=()
  local f n c fl r lp la lb p50 rc
  for f in "$OUT_DIR"/lane*.runs; do
    [[ -f "$f" ]] || continue
    while read -r run n _ rc; do
      local md
      md="${f%.runs}-run$(printf %03d "$run").md"
      runs=$((runs + 1)); offered=$((offered + n))
      if [[ "$rc" != 0 ]] || ! grep -q '^| sessions connected' "$md" 2>/dev/null; then
        broken=$((broken + 1)); failed=$((failed + n)); continue
      fi
      read -r c fl < <(awk -F'|' '/^\| sessions connected/ { split($3, a, " "); print a[1], a[3] }' "$md")
      r=$(awk -F'|' '/^\| offers refused/ { split($3, a, " "); print a[1] }' "$md")
      lp=0; la=0; lb=0
      read -r lp la lb < <(awk -F'|' '/^\| loss/ { s = $3; gsub(/[(%)]/, "", s); split(s, a, " "); print a[1], a[2], a[4] }' "$md") || true
      p50=$(awk -F'|' '/^\| echo RTT/ { gsub(/ /, "", $3); print $3 }' "$md")
      connected=$((connected + c)); failed=$((failed + fl)); refused=$((refused + ${r:-0}))
      lost=$((lost + ${la:-0})); counted=$((counted + ${lb:-0}))
      worst_loss=$(awk -v a="$worst_loss" -v b="${lp:-0}" 'BEGIN { print (b + 0 > a + 0) ? b : a }')
      [[ -n "$p50" && "$p50" != "–" ]] && rtts+=("$p50")
    done <"$f"
  done
  local rtt_med="–" rtt_worst="–"
  if ((${#rtts[@]} > 0)); then
    rtt_med=$(printf '%s\n' "${rtts[@]}" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
    rtt_worst=$(printf '%s\n' "${rtts[@]}" | sort -g | tail -n 1)
  fi
  echo "Totals over every loadgen run (a run that exited non-zero or left no table counts all its calls as failed):"
  echo
  echo "| loadgen runs | calls offered | connected | refused | failed | runs without a table | packets lost / counted | worst loss % | echo RTT p50 ms, median / worst of runs |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  echo "| $runs | $offered | $connected | $refused | $failed | $broken | $lost / $counted | $(printf %.3f "$worst_loss") | $rtt_med / $rtt_worst |"
  echo

  # Verdict: no failed/refused call, no loss, RSS and fds flat from warm-up to the last sample
  # under load (minute M; "end" is idle and only informative).
  local base=5 why=()
  ((MINUTES > 5)) || base=1
  local b l
  b=$(awk -F'\t' -v m="$base" '$1 == m' "$OUT_DIR/samples.tsv")
  l=$(awk -F'\t' '$1 != "end"' "$OUT_DIR/samples.tsv" | tail -n 1)
  ((failed == 0)) || why+=("$failed failed calls")
  ((refused == 0)) || why+=("$refused refused offers")
  ((broken == 0)) || why+=("$broken loadgen runs without a table")
  ((lost == 0)) || why+=("$lost packets lost (worst run $worst_loss %)")
  ((runs > 0)) || why+=("no loadgen run")
  [[ "$SERVER_ALIVE" == yes ]] || why+=("the server exited before the end")
  if [[ -n "$b" && -n "$l" ]]; then
    local bm bs lm lrss bfd lfd
    bm=$(cut -f1 <<<"$b"); lm=$(cut -f1 <<<"$l")
    bs=$(cut -f4 <<<"$b"); lrss=$(cut -f4 <<<"$l"); bfd=$(cut -f5 <<<"$b"); lfd=$(cut -f5 <<<"$l")
    if [[ "$bs" == - || "$lrss" == - ]]; then
      why+=("no RSS sample at minute $bm or $lm")
    else
      awk -v a="$bs" -v b="$lrss" 'BEGIN { exit !((b - a) / a > 0.10 || (a - b) / a > 0.10) }' \
        && why+=("RSS $(awk -v a="$bs" -v b="$lrss" 'BEGIN { printf "%.1f → %.1f MB (%+.1f %%)", a / 1024, b / 1024, (b - a) / a * 100 }') from minute $bm to $lm")
      awk -v a="$bfd" -v b="$lfd" 'BEGIN { exit !((b - a) / a > 0.05 || (a - b) / a > 0.05) }' \
        && why+=("open fds $bfd → $lfd from minute $bm to $lm")
    fi
    local flat="RSS $(awk -v a="$bs" -v b="$lrss" 'BEGIN { printf "%.1f → %.1f MB", a / 1024, b / 1024 }'), fds $bfd → $lfd (minute $bm → $lm)"
  else
    why+=("no sample at minute $base to compare with")
    local flat="no baseline sample"
  fi
  if ((${#why[@]} == 0)); then
    echo "**Verdict: clean** — no failed or refused call, no packet lost, $flat."
  else
    local joined
    joined=$(printf '%s; ' "${why[@]}")
    echo "**Verdict: not clean** — ${joined%; }."
  fi
  echo
  echo "Raw loadgen tables: $OUT_DIR/lane*-run*.md; samples: $OUT_DIR/samples.tsv; server log: $OUT_DIR/server.log"
}
summary | tee "$OUT_DIR/summary.md"
