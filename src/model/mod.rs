//! Frame-level models: the boundary for backends that take audio frames in and give frames back.
//!
//! Today that is `loopback` (immediate reflection, the network reference). The conversational
//! stubs (`echo`, `tts`) are turn-based and driven by the Realtime engine
//! ([`crate::realtime`]) with the [`crate::audio`] pipeline; a real model backend would plug in
//! here or behind the engine's `Action`s.
//!
//! A transceiver hands the model the caller's encoded audio frames as they arrive and asks it for
//! frames to send back, once per loop turn. Keeping this interface to "frames in, frames out"
//! (with the model choosing when to speak) is what lets a real backend be plugged in later
//! without the transceiver knowing anything about turns, voices or text.

pub mod loopback;

use std::time::Instant;

/// One encoded audio frame from the caller (Opus, as negotiated on the audio m-line).
#[derive(Debug, Clone, Copy)]
pub struct AudioIn<'a> {
    pub payload: &'a [u8],
    pub rtp_timestamp: u32,
    pub sequence: u16,
}

/// One encoded frame for the caller, with how much 48 kHz media time it covers so the sender
/// can advance its RTP timestamp without decoding.
#[derive(Debug, Clone)]
pub struct AudioOut {
    pub payload: bytes::Bytes,
    pub samples_48k: u32,
}

pub trait Model: Send {
    fn on_audio(&mut self, now: Instant, frame: AudioIn<'_>);
    fn poll_audio(&mut self, now: Instant) -> Option<AudioOut>;
}

/// The frame-level model used when a call asks for `loopback`.
pub fn loopback() -> Box<dyn Model> {
    Box::new(loopback::Loopback::default())
}
