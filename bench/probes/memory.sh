#!/usr/bin/env bash
# The memory one client can make the server hold (issue 30's probes), for two binaries side by side:
# stored Live recordings from one address, and a flood of 15 MiB WebSocket messages nobody reads.
#
#   bash bench/probes/memory.sh BEFORE_BIN AFTER_BIN [--sessions 40] [--seconds 300] [--floods 4] [--messages 16]
#
# Each binary gets a fresh server per run; the binaries are copied first so a rebuild cannot swap
# them mid-run. Prints one markdown table. Nothing here builds.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
[[ $# -ge 2 ]] || { echo "usage: $0 BEFORE_BIN AFTER_BIN [probe args]" >&2; exit 2; }
BEFORE="$1" AFTER="$2"; shift 2
[[ -d "$ROOT/tests/e2e/node_modules/ws" ]] || (cd "$ROOT/tests/e2e" && npm ci --no-audit --no-fund --silent)
source "$ROOT/bench/lib.sh"
bench_workdir probes
cp "$BEFORE" "$WORK/before"; cp "$AFTER" "$WORK/after"
for which in before after; do
  node "$HERE/memory.mjs" --bin "$WORK/$which" "$@" | sed "s/^/$which /" >>"$WORK/results"
done
python3 - "$WORK/results" <<'PY'
import json, sys
rows = [(l.split(' ', 1)[0], json.loads(l.split(' ', 1)[1])) for l in open(sys.argv[1])]
print("| binary | probe | offered | served | refused | failed | RSS before MB | RSS peak/after MB | RSS settled MB |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for which, r in rows:
    if r["probe"] == "recordings":
        print(f"| {which} | {r['sessions']} stored sessions × {r['seconds']} s | {r['sessions']} | {r['started']} ({r['stopped']} cut short) | {r['refused']} | {r['failed']} | {r['before']:.0f} | {r['after']:.0f} | |")
    else:
        print(f"| {which} | {r['sockets']} sockets × {r['messages']} × 15 MiB | {r['offered']} | {r['sent'] - r['unsent']} | 0 | 0 | {r['before']:.0f} | {r['peak']:.0f} | {r['settled']:.0f} |")
PY
