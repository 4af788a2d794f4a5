#!/usr/bin/env bash
# Re-captures the browser seeds of fuzz/corpus/{stun_peek,link_header,route_decode,sdp_offer}:
# Chromium, Firefox and the official Realtime SDK make real calls to a real voice-edge while the
# loopback interface is sniffed (see fuzz/README.md). client_events/ is written by hand and kept.
#
# Needs root (raw socket), chromium, firefox-esr, `npm ci` in tests/e2e and
# `cargo build --release --bin voice-edge`.
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
echo "capture kept in $out"
