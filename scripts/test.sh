#!/usr/bin/env bash
# The one test command: installs what is missing, checks style and provenance (rustfmt, clippy with
# the undocumented-unsafe lint, the vendored crates against crates.io), then runs the Rust unit +
# integration tests with the compose stack (built around the static binary the tests built) alongside,
# then the end-to-end tests (headless Chromium and Firefox, the official OpenAI clients), two files at
# a time. Prints how long each step took. `just check` is the quick loop for an edit (fmt, clippy,
# unit tests).
#
#   bash scripts/test.sh            # from anywhere
#
# Environment: VOICE_EDGE_BIN overrides the server binary the e2e test runs (path relative to the repo
# root); by default it is the target/x86_64-unknown-linux-gnu/release/voice-edge that `cargo test --release` built.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '\n==> %s\n' "$*" >&2; }

# Each step's wall time, printed as a table at the end (and on failure, up to the failing step).
steps=()
step_start=$SECONDS
step_name=""
step() {
  [ -n "$step_name" ] && steps+=("$(printf '| %-44s | %5d |' "$step_name" $((SECONDS - step_start)))")
  step_name="$1"
  step_start=$SECONDS
  [ -n "$1" ] && log "$1"
  return 0
}
report() {
  step ""
  printf '\n| step | s |\n|---|---:|\n' >&2
  printf '%s\n' "${steps[@]}" >&2
  printf '| %-44s | %5d |\n' "total" "$SECONDS" >&2
}
trap report EXIT
step "install what the tests need"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "error: need root (or sudo) to run: $*" >&2
    return 1
  fi
}

# ---------------------------------------------------------------------------------------------------------
# 1. System packages (Debian/Ubuntu apt). Everything the tests need is installed here, in one apt line.
# ---------------------------------------------------------------------------------------------------------
apt_pkgs=()
command -v node >/dev/null 2>&1 || apt_pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || apt_pkgs+=(npm)
[ -x /usr/bin/chromium ] || apt_pkgs+=(chromium)
# Firefox: Debian's ESR, driven over WebDriver BiDi by puppeteer-core (tests/e2e/firefox.mjs).
[ -x /usr/bin/firefox-esr ] || apt_pkgs+=(firefox-esr)
# The tts model (and the echo model's text replies) speak through espeak-ng when it is installed.
command -v espeak-ng >/dev/null 2>&1 || apt_pkgs+=(espeak-ng)
# The Python client test (tests/python) makes a venv; Debian's python3 needs python3-venv for that (ensurepip).
command -v python3 >/dev/null 2>&1 || apt_pkgs+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || apt_pkgs+=(python3-venv)
# --- services used by tests: add later ones (databases, brokers, …) here --------------------------------
[ -x /usr/bin/redis-server ] || apt_pkgs+=(redis-server)
# The multi-host test puts each role in its own network namespace (ip netns, veth, a bridge).
command -v ip >/dev/null 2>&1 || apt_pkgs+=(iproute2)
# The compose stack test: Docker's engine and Debian's compose (v1), curl to probe it.
# (`docker` alone may be a client without an engine: dockerd is what the compose test needs.)
command -v dockerd >/dev/null 2>&1 || apt_pkgs+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || apt_pkgs+=(docker-compose)
command -v curl >/dev/null 2>&1 || apt_pkgs+=(curl)
# ---------------------------------------------------------------------------------------------------------
if [ "${#apt_pkgs[@]}" -gt 0 ]; then
  log "installing: ${apt_pkgs[*]}"
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "${apt_pkgs[@]}"
fi

node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -lt 18 ]; then
  echo "error: Node.js >= 18 is needed for tests/e2e (found $(node --version))" >&2
  exit 1
fi

# Node packages for the e2e tests: playwright-core (drives the system chromium, downloads no browser),
# puppeteer-core (drives the system firefox-esr over WebDriver BiDi, downloads nothing either), and for
# the Realtime client tests the official @openai/agents-realtime SDK plus esbuild, which bundles the SDK page
# in memory at test time (its platform binary is the @esbuild/<platform> optional dependency); the official
# Node openai client and ws for its OpenAIRealtimeWS (the same versions @openai/agents-realtime locks).
if [ ! -d tests/e2e/node_modules/playwright-core ] \
  || [ ! -d tests/e2e/node_modules/puppeteer-core ] \
  || [ ! -d tests/e2e/node_modules/@openai/agents-realtime ] \
  || [ ! -d tests/e2e/node_modules/esbuild ] \
  || [ ! -d tests/e2e/node_modules/openai ] \
  || [ ! -d tests/e2e/node_modules/ws ] \
  || [ tests/e2e/package-lock.json -nt tests/e2e/node_modules/.package-lock.json ]; then
  log "npm ci (tests/e2e)"
  (cd tests/e2e && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund)
fi

# Python packages for tests/e2e/python-openai.test.mjs: the official openai client (pinned, with its realtime
# extra) in a venv, made once and remade only when requirements.txt changes. The test finds it through
# VOICE_EDGE_PYTHON.
py_venv=tests/python/.venv
if [ ! -x "$py_venv/bin/python" ] || [ ! -f "$py_venv/.installed" ] \
  || [ tests/python/requirements.txt -nt "$py_venv/.installed" ]; then
  log "pip install -r tests/python/requirements.txt (into $py_venv)"
  rm -rf "$py_venv"
  python3 -m venv "$py_venv"
  "$py_venv/bin/pip" install -q --disable-pip-version-check -r tests/python/requirements.txt
  touch "$py_venv/.installed"
fi
export VOICE_EDGE_PYTHON="$PWD/$py_venv/bin/python"

# ---------------------------------------------------------------------------------------------------------
# 2. Rust unit + integration tests. Compiled once: the integration tests make cargo build the
#    voice-edge binary (with the same feature set as the tests), and the e2e test below uses exactly that
#    binary, found from cargo's build messages. Only if no test needed the binary is it built separately.
# ---------------------------------------------------------------------------------------------------------
# Dependencies compile once per machine, not once per clone: the build goes to a target directory
# kept under ~/.cache (what CI caches do), so a fresh clone rebuilds only this crate and the two
# vendored crates. Their previous builds are removed first, so the cache holds one copy of them.
# CARGO_TARGET_DIR overrides it; a first run on a new machine compiles the dependencies too.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/voice-edge/target}"
mkdir -p "$CARGO_TARGET_DIR"
for profile in debug release; do
  cargo clean --quiet --locked --profile "${profile/debug/dev}" -p voice-edge -p rtc -p rtc-ice 2>/dev/null || true
done

step "style and provenance: cargo fmt --check, clippy -D warnings, vendor.sh verify"
cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings
bash scripts/vendor.sh verify

step "build: cargo test --release --no-run"
artifacts="$(mktemp)"
trap 'rm -f "$artifacts"; report' EXIT
cargo test --release --locked --no-run --message-format=json-render-diagnostics >"$artifacts"
if [ -z "${VOICE_EDGE_BIN:-}" ]; then
  VOICE_EDGE_BIN="$(node -e '
    const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n");
    for (const l of lines) {
      if (!l.startsWith("{")) continue;
      const m = JSON.parse(l);
      if (m.reason === "compiler-artifact" && m.executable && !m.profile.test &&
          m.target.kind.includes("bin") && m.target.name === "voice-edge") console.log(m.executable);
    }' "$artifacts" | tail -n1)"
  if [ -z "$VOICE_EDGE_BIN" ]; then
    log "cargo build --release --bin voice-edge (no integration test built it)"
    cargo build --release --bin voice-edge
    VOICE_EDGE_BIN="${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release/voice-edge"
  fi
fi
export VOICE_EDGE_BIN

# The split roles as containers (section 3 below) run alongside the Rust tests: those wait on real
# sockets, timers and paced audio, not compute (measured: 27 s of CPU in 88 s of wall time), so
# the two share the cores without starving each other, and the compose stack's minute is not
# added to the total. Its output is printed when it ends.
compose_log="$(mktemp)"
trap 'rm -f "$artifacts" "$compose_log"; [ -n "${compose_pid:-}" ] && kill "$compose_pid" 2>/dev/null; report' EXIT
compose_started=$SECONDS
bash tests/compose/run.sh >"$compose_log" 2>&1 &
compose_pid=$!

# Most tests wait on real sockets, timers and paced audio rather than compute, so they run with
# more threads than this machine has cores (RUST_TEST_THREADS overrides it).
step "cargo test --release (the compose stack alongside)"
cargo test --release --locked -- --test-threads "${RUST_TEST_THREADS:-8}"
# The vendored interceptor crate's own unit tests too: its patches change how every media packet
# crosses the chain (vendor/rtc-interceptor/PATCHED.md). vendor/rtc's are not run yet: six of its
# SCTP tests expect the buffer patch 0002 stopped allocating up front (vendor/rtc/PATCHED.md).
cargo test --release --locked -p rtc-interceptor --lib

# ---------------------------------------------------------------------------------------------------------
# 3. The split roles as containers: compose.yaml built and run, a real WebRTC client on this host
#    (tests/compose/run.sh, started above), and the Kubernetes manifests validated offline
#    (deploy/validate.sh).
# ---------------------------------------------------------------------------------------------------------
step "docker compose stack (tests/compose/run.sh): the rest of its run"
compose_rc=0
wait "$compose_pid" || compose_rc=$?
compose_pid=""
sed 's/^/[compose] /' "$compose_log" >&2
log "compose stack: $((SECONDS - compose_started)) s from its start, exit $compose_rc"
[ "$compose_rc" -eq 0 ] || { echo "the compose stack test failed (above)" >&2; exit 1; }
step "Kubernetes manifests (deploy/validate.sh)"
bash deploy/validate.sh

# ---------------------------------------------------------------------------------------------------------
# 4. End to end: headless chromium, fake microphone (fixtures/*.wav): demo page → echo; the official
#    @openai/agents-realtime SDK (realtime-sdk.test.mjs) and the plain WebRTC flow (plain-flow.test.mjs);
#    tool calls through the SDK's tool() (realtime-sdk-tools.test.mjs, prints a timing table) and as raw
#    GA events (plain-tools.test.mjs); server events checked against the openai package's realtime.d.ts
#    (openai-types.mjs, read at test time);
#    headless firefox-esr: demo page and plain flow (firefox.test.mjs); LAN mode over HTTPS (lan.test.mjs);
#    per-call faults seen by Chromium's stack (faults.test.mjs); G.711 calls from Chromium limited to PCMU or
#    PCMA by setCodecPreferences (g711.test.mjs); the demo page's codec picker and sideband pane: a PCMU
#    call, a sideband attached to it steering a response both see, closed with the call (demo-sideband.test.mjs);
#    the Realtime WebSocket with official clients: Python openai, spoken/text/PCMU/transcription turns with a
#    latency table (python-openai.test.mjs); Node openai's OpenAIRealtimeWS over wss:// against --lan
#    --require-keys (openai-node-websocket.test.mjs); @openai/agents-realtime's OpenAIRealtimeWebSocket in
#    chromium with an ek_ key as a sub-protocol (browser-websocket.test.mjs); the same SDK's OpenAIRealtimeWebSocket
#    in Node: sendAudio turn, sendMessage, a RealtimeSession tool, G.711 formats, loopback (agents-websocket.test.mjs);
#    a sideband WebSocket (?call_id=) on a call held by Chromium: tool call, mirroring, hang-up (sideband.test.mjs);
#    OpenAI's Live WebRTC flow: the plain fetch + RTCPeerConnection flow and the package's OpenAILiveWebRTC
#    helper, a spoken turn, barge-in, session.close, events checked against openai's live.d.ts, and the demo
#    page's API switch on Live (live-flow.test.mjs); the Live WebSocket with the package's LiveWS: session.start,
#    a spoken turn as audio deltas, session.close (live-websocket.test.mjs).
# ---------------------------------------------------------------------------------------------------------
# The shell expands the file list: Node >= 21 no longer searches a directory given to --test.
# Files run two at a time (each starts its own server on free ports); Node's default on a 2-core
# machine is one at a time, and three at a time starved the real-time paced audio of some tests
# (a spoken turn split in two by the VAD). VOICE_EDGE_E2E_CONCURRENCY overrides it.
step "node --test tests/e2e/*.test.mjs (VOICE_EDGE_BIN=$VOICE_EDGE_BIN)"
node --test --test-concurrency="${VOICE_EDGE_E2E_CONCURRENCY:-2}" tests/e2e/*.test.mjs

log "all tests passed"
