//! Audio for the stub models: Opus or G.711 in and out, server VAD, text to speech and paced playback.
//!
//! The pieces, in the order a turn uses them:
//! - [`input::Listener`] takes the caller's Opus packets as they arrive: it keeps them in an
//!   [`InputBuffer`] on the input-time axis Realtime events count in, decodes them
//!   ([`OpusDecoder`], concealing losses) and runs [`Vad`] over the PCM, yielding
//!   [`VadEvent::SpeechStarted`] / [`VadEvent::SpeechStopped`].
//! - The echo model fetches the turn's packets with [`InputBuffer::frames_between`]; the TTS model
//!   gets PCM and word times from the synthesis [`tts::Pool`] (a fixed set of workers off the
//!   socket loop; a job stops when its response is cancelled).
//! - A [`Player`] sends either one back in real time, 20 ms per frame, encoding TTS PCM with
//!   [`OpusEncoder`] as it goes, and stops at once on barge-in.
//!
//! The call's [`Codec`] is Opus or G.711 (PCMU/PCMA, [`g711`]); the Listener and Player take it
//! and use its decoder, encoder and RTP clock, so nothing else branches on it. Durations of
//! packets and RTP timestamps are in that clock's ticks (48 kHz or 8 kHz); PCM is 48 kHz mono
//! throughout. Nothing here does I/O on a socket or reads a clock by itself.

pub mod codec;
pub mod g711;
pub mod input;
pub mod player;
pub mod resample;
pub mod tts;
pub mod vad;
pub mod wav;

pub use codec::{
    Codec, CodecError, Decoder, Encoder, EncoderConfig, FRAME_SAMPLES, OpusDecoder, OpusEncoder,
    SAMPLE_RATE, SILENCE_FRAME, packet_samples,
};
pub use input::{Arrival, InputBuffer, Listener};
pub use player::{OutFrame, Player};
pub use tts::{Speech, Synth, synthesize, synthesize_with};
pub use vad::{Vad, VadConfig, VadEvent};

/// Signal measures the audio modules' tests share.
#[cfg(test)]
pub(crate) mod test_signal {
    /// RMS level relative to full scale; an empty signal reads as silence, not NaN.
    pub fn rms_dbfs(x: &[i16]) -> f64 {
        let p = x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / x.len().max(1) as f64;
        10.0 * (p / 32768f64.powi(2) + 1e-13).log10()
    }
}
