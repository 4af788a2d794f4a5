//! The boundary between a transceiver and the voice model behind it.
//!
//! A transceiver hands the model the caller's encoded audio frames as they arrive and asks it for
//! frames to send back, once per loop turn. Keeping this interface to "frames in, frames out"
//! (with the model choosing when to speak) is what lets a real backend be plugged in later
//! without the transceiver knowing anything about turns, voices or text.

pub mod echo;

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
    fn name(&self) -> &'static str;
    fn on_audio(&mut self, now: Instant, frame: AudioIn<'_>);
    fn poll_audio(&mut self, now: Instant) -> Option<AudioOut>;
}

/// Picks a model by the name a session asks for; unknown names fall back to echo so a client's
/// `model: "gpt-realtime"` still gets an answer offline.
pub fn by_name(_name: &str) -> Box<dyn Model> {
    Box::new(echo::Echo::default())
}
