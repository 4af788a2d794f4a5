# One image for every role: `voice-edge` (all-in-one), `voice-edge signaling`, `voice-edge transceiver`,
# `voice-edge relay`. compose.yaml runs them split; see docs/running.md ("Docker compose").
#
# The binary is static (glibc linked in: .cargo/config.toml), so the image is that binary, CA certificates
# and nothing else. Plain Dockerfile syntax (no BuildKit-only features), so the classic builder that Debian's
# docker.io and docker-compose v1 use builds it as well as BuildKit does.

# --- deps -------------------------------------------------------------------------------------------------
FROM rust:1-bookworm AS deps
WORKDIR /src
# Dependencies first, in a layer of their own: it is rebuilt only when Cargo.toml, Cargo.lock, the build
# config or the vendored crates change, not on every source edit (a cold build is minutes; this layer is
# most of it).
COPY Cargo.toml Cargo.lock ./
COPY .cargo .cargo
COPY vendor vendor
RUN mkdir -p src && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && cargo build --release --locked --bin voice-edge \
    && rm -rf src target/x86_64-unknown-linux-gnu/release/.fingerprint/voice-edge-* \
              target/x86_64-unknown-linux-gnu/release/deps/voice_edge-* \
              target/x86_64-unknown-linux-gnu/release/deps/libvoice_edge-* \
              target/x86_64-unknown-linux-gnu/release/voice-edge

# --- build ------------------------------------------------------------------------------------------------
FROM deps AS build
COPY src src
COPY web web
COPY fixtures/tts fixtures/tts
COPY fixtures/scripts fixtures/scripts
# The runtime stage's whole file system, laid out here: the binary, CA certificates (for wss:// and
# rediss:// upstreams) and an empty /tmp (scripts given inline are written there).
RUN cargo build --release --locked --bin voice-edge \
    && mkdir -p /rootfs/usr/local/bin /rootfs/etc/ssl/certs /rootfs/tmp \
    && chmod 1777 /rootfs/tmp \
    && cp target/x86_64-unknown-linux-gnu/release/voice-edge /rootfs/usr/local/bin/voice-edge \
    && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ca-certificates.crt

# --- run --------------------------------------------------------------------------------------------------
# tests/compose/run.sh builds this stage alone, from the binary the tests already built (the same
# /rootfs layout), so the stage CI runs is this text, not a copy of it.
FROM scratch
COPY --from=build /rootfs/ /
ENV PATH=/usr/local/bin
# Numeric (there is no /etc/passwd), so Kubernetes' runAsNonRoot can check it.
USER 10001
# Signaling/demo (TCP) and the relay's public media port (UDP).
EXPOSE 8080/tcp 3478/udp
# All-in-one defaults. The relay binds every interface; answers name the container's own address unless
# told the one browsers reach: `-e VOICE_EDGE_ADVERTISE=<host's LAN or public address>` with
# `-p 3478:3478/udp`. compose.yaml sets each role's own. The TTS stub speaks with the word pack the binary
# ships (there is no espeak-ng in the image).
ENV VOICE_EDGE_HTTP=0.0.0.0:8080 VOICE_EDGE_RELAY=0.0.0.0:3478
# Every role answers `voice-edge health` from its own listener (VOICE_EDGE_HEALTH_URL, set per role).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 CMD ["/usr/local/bin/voice-edge", "health"]
ENTRYPOINT ["/usr/local/bin/voice-edge"]
