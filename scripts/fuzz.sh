#!/usr/bin/env bash
# The scheduled fuzz job: every cargo-fuzz target in fuzz/ for a bounded time, then one table.
# Nightly and libFuzzer are needed, so this is not part of scripts/test.sh; the corpus it starts from
# is replayed on stable by every `cargo test` (tests/integration/fuzz_corpus.rs). See fuzz/README.md.
#
#   bash scripts/fuzz.sh                 # 60 s per target
#   bash scripts/fuzz.sh 600             # 10 min per target
#   bash scripts/fuzz.sh 30 sdp_offer    # some targets only
#
# Environment:
#   FUZZ_RSS_MB     libFuzzer's -rss_limit_mb (and malloc limit), default 2048
#   FUZZ_TIMEOUT    seconds one input may take before it counts as a hang, default 10
#   FUZZ_SANITIZER  cargo fuzz --sanitizer, default none (see fuzz/README.md)
#
# New coverage accumulates in fuzz/work/<target>/ (git-ignored) across runs; crashes land in
# fuzz/artifacts/<target>/. Exits non-zero if any target crashed, hung, ran out of memory or failed
# to run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

secs="${1:-60}"
shift || true
rss="${FUZZ_RSS_MB:-2048}"
hang="${FUZZ_TIMEOUT:-10}"
sanitizer="${FUZZ_SANITIZER:-none}"

log() { printf '\n==> %s\n' "$*" >&2; }

if ! rustup toolchain list | grep -q '^nightly'; then
  log "installing the nightly toolchain (cargo fuzz needs -Z flags)"
  rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  log "cargo install cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

cd fuzz
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

log "cargo fuzz build (sanitizer: $sanitizer)"
cargo +nightly fuzz build --sanitizer "$sanitizer" 2>&1 | tail -n 3 >&2 \
  || { echo "error: cargo fuzz build failed" >&2; exit 1; }

# Per-target libFuzzer options beyond the common ones.
extra_args() {
  case "$1" in
    # An offer may be as long as signaling's body limit, and the answer path's cost grows with it.
    sdp_offer) echo "-max_len=65536" ;;
    client_events) echo "-max_len=16384" ;;
  esac
}

rows=()
failed=0
for t in "${targets[@]}"; do
  work="work/$t"
  arts="artifacts/$t"
  mkdir -p "$work" "$arts"
  seeds=("corpus/$t")
  [ -d "regressions/$t" ] && seeds+=("regressions/$t")
  args=(-max_total_time="$secs" -rss_limit_mb="$rss" -timeout="$hang" -print_final_stats=1)
  [ -f "dicts/$t.dict" ] && args+=(-dict="dicts/$t.dict")
  read -ra more <<<"$(extra_args "$t")"
  args+=("${more[@]}")
  before="$(find "$arts" -type f | wc -l)"
  log "$t: ${secs}s"
  # libFuzzer writes new inputs to the first directory only: the committed seeds stay untouched.
  set +e
  cargo +nightly fuzz run --sanitizer "$sanitizer" "$t" "$work" "${seeds[@]}" -- "${args[@]}" \
    >"work/$t.log" 2>&1
  rc=$?
  set -e
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "work/$t.log" | tail -n 1)"
  status="$(grep -E '^#[0-9]+' "work/$t.log" | tail -n 1)"
  cov="$(sed -nE 's/.* cov: ([0-9]+) ft: ([0-9]+).*/\1\/\2/p' <<<"$status")"
  corp="$(sed -nE 's/.* corp: ([0-9]+)\/.*/\1/p' <<<"$status")"
  crashes=$(($(find "$arts" -type f | wc -l) - before))
  if [ "$rc" -ne 0 ] || [ "$crashes" -gt 0 ]; then
    failed=1
    echo "---- $t (exit $rc): tail of fuzz/work/$t.log" >&2
    tail -n 30 "work/$t.log" >&2
  fi
  rows+=("$(printf '%-14s %12s %12s %8s %8s %6s' "$t" "${runs:-?}" "${cov:-?}" "${corp:-?}" "$crashes" "$rc")")
done

printf '\n%-14s %12s %12s %8s %8s %6s\n' target runs "cov/ft" corpus crashes exit
printf '%s\n' "${rows[@]}"
printf '(%s s per target; runs: inputs executed; cov/ft: libFuzzer edges/features; corpus: inputs kept)\n' "$secs"
if [ "$failed" -ne 0 ]; then
  echo "FAILED: see fuzz/artifacts/ and fuzz/work/*.log; fuzz/README.md says how to keep a crash" >&2
  exit 1
fi
