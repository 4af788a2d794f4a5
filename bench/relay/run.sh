#!/usr/bin/env bash
# Relay benchmark (issue 3): one markdown table comparing, on this machine, direct UDP echo, nginx's UDP
# stream proxy, a minimal batched forwarder and the voice-edge relay. See bench/relay/README.md.
#
#   bash bench/relay/run.sh [bench-relay run options, e.g. --rounds 5 --only direct,voice-edge]
#
# Environment: VOICE_EDGE_BIN=path (use this binary, don't build), BENCH_NO_BUILD=1 (don't build voice-edge).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
unset CARGO_TARGET_DIR
log() { echo "bench-relay: $*" >&2; }

# 1. nginx with the stream module (Debian packages). The packages' postinst must not start a system nginx.
stream_mod() { ls /usr/lib/nginx/modules/ngx_stream_module.so >/dev/null 2>&1 || { [ -x /usr/sbin/nginx ] && /usr/sbin/nginx -V 2>&1 | grep -q -- '--with-stream\b' && ! /usr/sbin/nginx -V 2>&1 | grep -q -- '--with-stream=dynamic'; }; }
if ! [ -x /usr/sbin/nginx ] || ! stream_mod; then
  if command -v apt-get >/dev/null; then
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    log "installing nginx-light + libnginx-mod-stream with apt-get"
    added_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null && $sudo chmod +x /usr/sbin/policy-rc.d && added_policy=1
    fi
    $sudo apt-get update -qq >&2 || true
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -qq --no-install-recommends nginx-light libnginx-mod-stream >&2 \
      || $sudo apt-get install -y -qq --no-install-recommends nginx libnginx-mod-stream >&2 \
      || log "could not install nginx; its rows will be skipped"
    if [ "$added_policy" = 1 ]; then $sudo rm -f /usr/sbin/policy-rc.d; fi
  else
    log "no apt-get: install nginx with the stream module yourself; its rows will be skipped"
  fi
fi

# 2. The benchmark program (its own crate and target dir, not part of the main build).
log "building bench/relay"
cargo build --release --quiet --manifest-path "$here/Cargo.toml"
bench="$here/target/x86_64-unknown-linux-gnu/release/bench-relay"

# 3. voice-edge itself.
ve="${VOICE_EDGE_BIN:-$root/target/x86_64-unknown-linux-gnu/release/voice-edge}"
if [ -z "${VOICE_EDGE_BIN:-}" ] && [ -z "${BENCH_NO_BUILD:-}" ]; then
  log "building voice-edge (cargo build --release)"
  if ! cargo build --release --quiet --bin voice-edge >&2; then
    if [ -x "$ve" ]; then log "build failed: using the existing $ve"; else log "build failed: voice-edge rows will be skipped"; fi
  fi
fi

# 4. Run: the Rust orchestrator starts every target as a child, kills them all at the end (and on Ctrl-C).
exec "$bench" run --voice-edge "$ve" --nginx /usr/sbin/nginx "$@"
