//! Live's sideband audio reflection: a sideband attached to a Live call hears the call's audio
//! as events, as the service sends it — the caller's as `session.input_audio.append` (before
//! the input mute, so a muted caller is still heard there) and the model's as
//! `session.output_audio.delta` with its `start_ms`/`end_ms` on the session's timeline, both
//! mono PCM16LE at 24 kHz whatever the call's codec.
//!
//! Kept only while a sideband is attached: each direction is decoded a second time (its own
//! decoder, so the media side's state is untouched), which a call nobody watches should not
//! pay for. Realtime sidebands get no audio; the Realtime API sends them none.

use base64::Engine as _;

use crate::audio::Codec;
use crate::audio::codec::Decoder;
use crate::live::server_event::LiveServerEvent;

pub struct Reflection {
    caller: Decoder,
    model: Decoder,
}

impl Reflection {
    /// `input` is the caller's codec, `output` the model's.
    pub fn new(input: Codec, output: Codec) -> Reflection {
        Reflection {
            caller: Decoder::new(input),
            model: Decoder::new(output),
        }
    }

    /// The caller's frame as the sideband event; `None` for one that does not decode.
    pub fn caller(&mut self, frame: &[u8]) -> Option<String> {
        let audio = base64_pcm(&self.caller.decode_24k(frame).ok()?);
        event(&LiveServerEvent::InputAudioAppend { audio })
    }

    /// The model's frame, sent at `at_ms` of the session, as the sideband event.
    pub fn model(&mut self, at_ms: u64, frame: &[u8]) -> Option<String> {
        let pcm = self.model.decode_24k(frame).ok()?;
        let end_ms = at_ms + (pcm.len() / 24) as u64;
        event(&LiveServerEvent::OutputAudioDelta {
            delta: base64_pcm(&pcm),
            start_ms: Some(at_ms),
            end_ms: Some(end_ms),
        })
    }
}

fn base64_pcm(pcm: &[i16]) -> String {
    let bytes: Vec<u8> = pcm.iter().flat_map(|s| s.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn event(e: &LiveServerEvent) -> Option<String> {
    serde_json::to_string(e).ok()
}
