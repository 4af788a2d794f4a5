#!/usr/bin/env bash
# Call setup through the compose stack vs the all-in-one process, side by side in one run: the same
# load generator (real WebRTC calls, loopback model) against each, rounds interleaved so a noisy moment
# hits both; prints one markdown table of medians over the rounds.
#
#   bash bench/compose/run.sh [--rounds 5] [--calls 10]
#
# Needs the compose image built (docker compose build, or tests/compose/run.sh) and
# target/x86_64-unknown-linux-gnu/release/voice-edge (cargo build --release). Ports: compose on 8080/3478 as in compose.yaml,
# the all-in-one on 18080/13478.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROUNDS=5 CALLS=10
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --calls) CALLS="$2"; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--calls N]" >&2; exit 2 ;;
  esac
done
BIN=target/x86_64-unknown-linux-gnu/release/voice-edge
[ -x "$BIN" ] || { echo "build it first: cargo build --release" >&2; exit 1; }
if docker compose version >/dev/null 2>&1; then COMPOSE=(docker compose); else COMPOSE=(docker-compose); fi
export VOICE_EDGE_ADMIN_TOKEN="${VOICE_EDGE_ADMIN_TOKEN:-local-dev-admin-token}"
PROJECT="vebench$$"
dc() { "${COMPOSE[@]}" -p "$PROJECT" -f compose.yaml "$@"; }
OUT=$(mktemp -d)
cleanup() {
  [ -n "${AIO:-}" ] && kill "$AIO" 2>/dev/null || true
  dc down -v --remove-orphans >/dev/null 2>&1 || true
  rm -rf "$OUT"
}
trap cleanup EXIT

dc up -d --scale transceiver=2 >/dev/null 2>&1
RUST_LOG=warn "$BIN" --http 127.0.0.1:18080 --relay auto:13478 >"$OUT/aio.log" 2>&1 &
AIO=$!
for url in http://127.0.0.1:8080/health http://127.0.0.1:18080/health; do
  for _ in $(seq 1 100); do curl -fsS --max-time 1 "$url" >/dev/null 2>&1 && break; sleep 0.2; done
done
for _ in $(seq 1 60); do
  n=$(curl -fsS -H "Authorization: Bearer $VOICE_EDGE_ADMIN_TOKEN" http://127.0.0.1:8081/admin/stats 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["transceivers"]))' 2>/dev/null || echo 0)
  [ "$n" = 2 ] && break; sleep 0.5
done

run() { # run NAME URL ROUND
  RUST_LOG=error "$BIN" loadgen --url "$2" --sessions "$CALLS" --duration 3 --ramp 20 --model loopback --workers 1 --http-concurrency 2 \
    >"$OUT/$1-$3.txt" 2>/dev/null
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then run compose http://127.0.0.1:8080 "$r"; run allinone http://127.0.0.1:18080 "$r"
  else run allinone http://127.0.0.1:18080 "$r"; run compose http://127.0.0.1:8080 "$r"; fi
  echo "round $r/$ROUNDS done" >&2
done

python3 - "$OUT" "$ROUNDS" "$CALLS" <<'PY'
import glob, re, statistics, sys
out, rounds, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = {"offer posted → answer received": "answer", "offer posted → DTLS connected": "dtls",
        "offer posted → first echoed packet": "echo", "echo RTT": "rtt"}
def parse(path):
    t = open(path).read()
    got = {}
    for label, key in rows.items():
        m = re.search(r"^\| " + re.escape(label) + r" \| ([0-9.]+) \| ([0-9.]+) \|", t, re.M)
        if m: got[key] = (float(m.group(1)), float(m.group(2)))
    m = re.search(r"sessions connected \(DTLS\) / failed \| (\d+) / (\d+)", t)
    got["failed"] = int(m.group(2)) if m else None
    m = re.search(r"^\| loss[^|]*\| ([0-9.]+) %", t, re.M)
    got["loss"] = float(m.group(1)) if m else None
    return got
res = {n: [parse(p) for p in sorted(glob.glob(f"{out}/{n}-*.txt"))] for n in ("allinone", "compose")}
def med(n, key, i): 
    v = [r[key][i] for r in res[n] if key in r]
    return statistics.median(v) if v else float("nan")
print(f"Call setup, compose stack vs all-in-one: median over {rounds} interleaved rounds of {calls} calls "
      "(voice-edge loadgen on this host, loopback model); ms")
print()
print("| path | offer → answer p50 | offer → DTLS connected p50 / p90 | offer → first echo p50 | echo RTT p50 | failed calls | loss |")
print("|---|---:|---:|---:|---:|---:|---:|")
names = {"allinone": "all-in-one (one process, relay on the host's address)",
         "compose": "compose (signaling, relay, 2 transceivers, Redis; docker port publishing)"}
for n in ("allinone", "compose"):
    failed = sum(r["failed"] or 0 for r in res[n])
    loss = max((r["loss"] or 0) for r in res[n]) if res[n] else float("nan")
    print(f"| {names[n]} | {med(n,'answer',0):.2f} | {med(n,'dtls',0):.2f} / {med(n,'dtls',1):.2f} | "
          f"{med(n,'echo',0):.2f} | {med(n,'rtt',0):.2f} | {failed} | ≤ {loss:.3f} % |")
PY
