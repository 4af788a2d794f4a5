//! voice-edge: a WebRTC edge for voice AI.
//!
//! A packet from a browser enters at a [`relay`], which finds the call's owner from the route in
//! the ICE ufrag ([`routing`]) and forwards it to a [`transceiver`]; the transceiver terminates
//! ICE/DTLS/SRTP/SCTP and hands the call's events to the [`realtime`] engine and its audio to the
//! [`audio`] pipeline or a [`model`]. Around that path, [`signaling`] creates calls, [`control`]
//! and [`membership`] tell it where transceivers are, and [`allinone`] or [`roles`] wire it all
//! into processes. The modules below are declared in that order: the packet path first.
//!
//! # Glossary
//!
//! - **call**: one client's connection to the edge and everything it holds, whatever the
//!   transport: a WebRTC peer on a transceiver worker, or a WebSocket session. It has one id
//!   ([`transceiver::call_id`]: `rtc_…` for Realtime, `live_…` for Live), which says where it
//!   lives, and every per-call operation on it is one [`transceiver::CallCommand`].
//! - **session**: the protocol's name for a call's configuration and lifetime
//!   (`session.created`, `session.update`); in this code, the transport's per-call state
//!   (a transceiver's `Session`, a WebSocket `WsSession`).
//! - **conversation**: the Realtime protocol state of one call, [`realtime::Conversation`]: the
//!   items, the responses and the turn engine. A Live call's
//!   [`live::LiveSession`] is a translation over one.
//! - **engine**: which protocol a call's events speak (Realtime or Live), the code that turns
//!   client events and voice activity into server events and media actions.
//! - **worker**: one socket and one thread, of a relay or of a transceiver, owning its calls or
//!   flows outright; other threads reach it only through its mailbox.

// The packet path.

// The public door: one UDP port, many calls. One public port per session cannot be opened,
// balanced or moved with containers, yet every packet of a call must reach the one process
// holding its ICE and DTLS state; the relay squares that by reading just enough of a client's
// first packet to find the owner, then forwarding by address, stateless and allocation-free.
pub mod relay;

// The contract between relay and transceiver, and the only code they share: the route in the
// server's ICE ufrag (MAC'd, so a forged ufrag cannot steer packets inward), the STUN peek and
// the link header that carries the client's address over the internal hop. Pure codecs, so the
// two sides cannot drift apart and the parsers can be fuzzed.
pub mod routing;

// The other half of what relay and transceiver share: batched `recvmmsg`/`sendmmsg`, because on
// a busy UDP socket the per-call cost of the kernel, not the packet work, is where time goes,
// and the batching crates batch segments to one destination while ours go to many.
pub mod udp_batch;

// How those socket loops sleep and are woken: each on its own `polling::Poller` (the poller
// under async-io), so a datagram wakes exactly the thread that reads it, not a shared reactor
// that hands it over.
pub mod wakeup;

// Whether those loops keep up, judged by each from its own windows: the transceivers' workers
// and the relay's share one rule, and placement reads both.
pub mod saturation;

// Whether an SDP offer can be honoured, from its text alone: signaling refuses what a
// transceiver could only answer and then fail, and the transceiver picks the codec from it.
pub mod sdp_offer;

// A call apart from its transport: the engine, the media side, jobs, the event log,
// sidebands and recordings, with the one pump both transports drive.
pub mod call;

// The WebSocket transport: Realtime and Live sessions whose audio rides inside the events.
pub mod websocket;

// Where WebRTC ends: ICE-lite, DTLS, SRTP and SCTP for many calls on one socket per worker,
// through the sans-I/O `rtc` core, because the async `webrtc` stack binds a socket per call.
// It bridges each call's audio and `oai-events` channel to the engine and the models.
pub mod transceiver;

// The OpenAI Realtime protocol as a deterministic engine (events in, events and media actions
// out, no I/O or clock), so existing Realtime clients work unchanged and the event grammar is
// tested without a network.
pub mod realtime;

// OpenAI's Live API on the same data channel: Live events over the Realtime turn engine, so
// model-owned turns, delegation and timeline transcripts reuse its media and models.
pub mod live;

// A real model behind the edge: each call bridged to an upstream Realtime WebSocket (OpenAI, or
// a local server speaking the protocol), with the edge's playout making what only WebRTC has.
pub mod upstream;

// What the stub models hear and say: Opus in and out, server VAD, text to speech and paced
// playback; the media half of a conversation, again without sockets or clocks.
pub mod audio;

// The boundary a real model backend plugs into: audio frames in, frames out, per call. Today
// the `loopback` model, the network reference; `echo` and `tts` go through `realtime`.
pub mod model;

// A session's MCP tools: the requests the turn engine emits and their outcomes, run on a real
// MCP server by the official SDK's client off the worker threads.
pub mod mcp;

// The tokio threads that the socket loops hand network work to (MCP requests, upstream links).
pub mod background;

// Creating calls, and knowing where they can go.

// The HTTP front door: the Realtime WebRTC flow (offers, keys, hang-up, ICE restart), placement
// on the least-loaded transceiver, the demo page and the operator's endpoints. Calls are
// created here and nowhere else.
pub mod signaling;

// How signaling reaches a transceiver: one trait, a function call in the all-in-one and
// authenticated JSON over HTTP between split roles, so the call flow is one code path.
pub mod control;

// Which transceiver id lives at which address: static in the all-in-one, Redis leases with the
// roles split. Routes carry ids, never addresses; this is the one place ids become addresses.
pub mod membership;

// Which address the relay binds and which one answers name. They differ behind NAT, in
// containers and for Firefox on loopback, and an answer naming the wrong one never connects.
pub mod media_address;

// Running it.

// Every HTTP listener (signaling, admin, LAN mode's HTTPS, metrics, the control API) behind one
// accept loop with a header timeout and a connection cap, which `axum::serve` does not have.
pub mod http_server;

// `/metrics` and `/health` on a listener of their own in each split role, and the
// `voice-edge health` probe a container's HEALTHCHECK runs.
pub mod ops;

// LAN mode's HTTPS listener: a phone's browser grants the microphone only in a secure context.
pub mod https;

// The embedded Redis-protocol server, so `cargo run` has the relays' flow cache without Redis.
pub mod cache;

// Wall-clock time for the protocol fields that carry it, read in one place.
pub mod unix_time;

// Settings are flags with environment twins, declared once on the config that uses them.
pub mod flags;

// The split roles (signaling, transceiver) as processes of the one binary: the same modules,
// wired through Redis membership and the control API instead of function calls.
pub mod roles;

// Everything above in one process, wired by function calls: what `cargo run` starts.
pub mod allinone;

// Not part of the edge: `voice-edge loadgen` opens many real WebRTC calls against one and
// reports what they saw, so load is measured with the same binary and `rtc` core.
pub mod loadgen;

// Not part of the edge either: the parsers above fed arbitrary bytes, shared by the cargo-fuzz
// targets in `fuzz/` and the stable test that replays their corpus (tests/integration/fuzz_corpus.rs).
#[doc(hidden)]
pub mod fuzzing;

/// The floors the modules above sit on, checked against their imports.
#[cfg(test)]
mod layers;

/// The heap a part of a test keeps, counted by the test build's allocator.
#[cfg(test)]
mod heap_probe;
