//! voice-edge: a WebRTC edge for voice AI.
//!
//! A thin [`relay`] owns the one public UDP port and routes each packet to the [`transceiver`]
//! that owns its session, using the route hidden in the ICE ufrag ([`routing`]). Transceivers
//! terminate ICE/DTLS/SRTP/SCTP on one shared socket each and bridge audio and data-channel
//! events to a [`model`]. [`signaling`] speaks the OpenAI Realtime WebRTC HTTP flow and places
//! calls; [`allinone`] wires everything into one process for `cargo run`.

pub mod allinone;
pub mod audio;
pub mod cache;
pub mod control;
pub mod flags;
pub mod https;
pub mod loadgen;
pub mod media_address;
pub mod membership;
pub mod model;
pub mod ops;
pub mod realtime;
pub mod relay;
pub mod roles;
pub mod routing;
pub mod signaling;
pub mod transceiver;
pub mod udp_batch;
pub mod wakeup;
