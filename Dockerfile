# One image for every role: `voice-edge` (all-in-one), `voice-edge signaling`, `voice-edge transceiver`,
# `voice-edge relay`. compose.yaml runs them split; see README.md ("Docker compose").
#
# Plain Dockerfile syntax (no BuildKit-only features), so the classic builder that Debian's docker.io and
# docker-compose v1 use builds it as well as BuildKit does.

# --- build ------------------------------------------------------------------------------------------------
FROM rust:1-bookworm AS build
WORKDIR /src
# Dependencies first, in a layer of their own: it is rebuilt only when Cargo.toml, Cargo.lock or the
# vendored crates change, not on every source edit (a cold build is minutes; this layer is most of it).
COPY Cargo.toml Cargo.lock ./
COPY vendor vendor
RUN mkdir -p src && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && cargo build --release --locked --bin voice-edge \
    && rm -rf src target/release/.fingerprint/voice-edge-* target/release/deps/voice_edge-* \
              target/release/deps/libvoice_edge-* target/release/voice-edge
COPY src src
COPY web web
COPY fixtures/tts fixtures/tts
COPY fixtures/scripts fixtures/scripts
RUN cargo build --release --locked --bin voice-edge && strip target/release/voice-edge

# --- run --------------------------------------------------------------------------------------------------
FROM debian:bookworm-slim
# espeak-ng gives the TTS stub a real voice; without it the binary's shipped clips are used.
RUN apt-get update && apt-get install -y --no-install-recommends espeak-ng ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin voice-edge
COPY --from=build /src/target/release/voice-edge /usr/local/bin/voice-edge
# Numeric, so Kubernetes' runAsNonRoot can check it without reading /etc/passwd.
USER 10001
# Signaling/demo (TCP) and the relay's public media port (UDP).
EXPOSE 8080/tcp 3478/udp
# All-in-one defaults. The relay binds every interface; answers name the container's own address unless
# told the one browsers reach: `-e VOICE_EDGE_ADVERTISE=<host's LAN or public address>` with
# `-p 3478:3478/udp`. compose.yaml sets each role's own.
ENV VOICE_EDGE_HTTP=0.0.0.0:8080 VOICE_EDGE_RELAY=0.0.0.0:3478
# Every role answers `voice-edge health` from its own listener (VOICE_EDGE_HEALTH_URL, set per role).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 CMD ["voice-edge", "health"]
ENTRYPOINT ["voice-edge"]
