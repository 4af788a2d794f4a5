# One image for every role: `voice-edge` (all-in-one), `voice-edge relay …`, and so on.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --bin voice-edge

FROM debian:bookworm-slim
# espeak-ng gives the TTS stub a real voice; without it the binary's shipped clips are used.
RUN apt-get update && apt-get install -y --no-install-recommends espeak-ng ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/voice-edge /usr/local/bin/voice-edge
# Signaling/demo (TCP) and the relay's public media port (UDP).
EXPOSE 8080/tcp 3478/udp
# The relay binds every interface; answers name the container's own address unless told the one
# browsers reach: `-e VOICE_EDGE_ADVERTISE=<host's LAN or public address>` with `-p 3478:3478/udp`.
ENV VOICE_EDGE_HTTP=0.0.0.0:8080 VOICE_EDGE_RELAY=0.0.0.0:3478
ENTRYPOINT ["voice-edge"]
