# voice-edge tasks. Each recipe is a thin wrapper over a plain command, so nothing needs `just`.

# Run the all-in-one demo (open http://127.0.0.1:8080/)
demo *ARGS:
    cargo run --release -- {{ARGS}}

# The test command CI runs (installs what the tests need)
test:
    bash scripts/test.sh

# The quick loop after an edit: formatting, clippy with warnings as errors, the unit tests (debug build)
check:
    cargo fmt --check
    cargo clippy --all-targets -- -D warnings
    cargo test --lib

# Relay benchmark table: direct echo vs nginx vs baseline forwarder vs voice-edge relay (args go to `bench-relay run`)
bench-relay *ARGS:
    bash bench/relay/run.sh {{ARGS}}

# Setup timings of the demo page in headless Chromium (median of N calls)
bench-connect RUNS="5":
    node tests/e2e/connect-timings.mjs --runs {{RUNS}}

# Demo setup timings, Chromium and Firefox side by side (median of N calls each, interleaved)
bench-browsers RUNS="10":
    node tests/e2e/browser-timings.mjs --runs {{RUNS}}

# Connect times side by side: Chromium → aiortc vs voice-edge via the relay vs voice-edge --direct (N calls each, interleaved)
bench-connect-compare RUNS="20":
    bash bench/connect/run.sh --runs {{RUNS}}

# Load table: loadgen against fresh servers at 100/500/1000 calls, relay and --direct (args go to bench/load/run.sh)
bench-load *ARGS:
    bash bench/load/run.sh {{ARGS}}

# Call setup through the compose stack vs the all-in-one, side by side (needs the compose image built)
bench-compose *ARGS:
    bash bench/compose/run.sh {{ARGS}}
