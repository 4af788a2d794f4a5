#!/usr/bin/env bash
# Re-captures the browser seeds of fuzz/corpus/{stun_peek,link_header,route_decode,sdp_offer}:
# Chromium, Firefox and the official Realtime SDK make real calls to a real voice-edge while the
# loopback interface is sniffed (see fuzz/README.md). client_events/ is written by hand and kept.
#
# Needs root (raw socket), chromium, firefox-esr, `npm ci` in tests/e2e,
# `cargo build --release --bin voice-edge`, and nightly with cargo-fuzz for the cmin pass.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="$(mktemp -d)"
python3 fuzz/seeds/sniff.py "$out/udp.jsonl" &
sniffer=$!
trap 'kill "$sniffer" 2>/dev/null || true' EXIT
sleep 1
node fuzz/seeds/capture.mjs "$out"
sleep 1
python3 fuzz/seeds/make_corpus.py "$out"

# Drop the seeds that add no coverage: cargo fuzz cmin on a copy, then delete by content, so the
# files kept keep their names.
for t in stun_peek link_header route_decode sdp_offer; do
  tmp="$out/cmin-$t"
  mkdir -p "$tmp"
  cp "fuzz/corpus/$t/"* "$tmp/"
  (cd fuzz && cargo +nightly fuzz cmin --sanitizer none "$t" "$tmp" >"$out/cmin-$t.log" 2>&1)
  keep="$(for f in "$tmp"/*; do sha1sum <"$f"; done)"
  for f in "fuzz/corpus/$t/"*; do
    grep -qF "$(sha1sum <"$f")" <<<"$keep" || rm "$f"
  done
  echo "$t: $(ls "fuzz/corpus/$t" | wc -l) seeds after cmin"
done
echo "capture kept in $out"
