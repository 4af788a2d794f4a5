//! Where the transport changes the events: the server's output buffer (WebRTC) and audio as
//! `response.output_audio.delta` (WebSocket). See [`super::Transport`].

use super::server_event::{ContentRef, RealtimeServerEvent};
use super::{Conversation, Transport};
use base64::Engine as _;

impl Conversation {
    /// `output_audio_buffer.started`/`stopped`/`cleared`: WebRTC only, since on a WebSocket
    /// the client holds the audio and the server has no buffer to report.
    pub(super) fn emit_output_buffer(&mut self, event: RealtimeServerEvent) {
        if self.transport == Transport::WebRtc {
            self.out.emit(event);
        }
    }

    /// One piece of outgoing audio in the session's output format (WebSocket): a
    /// `response.output_audio.delta` for the response that is speaking. A frame-level model
    /// (`loopback`) speaks outside responses; its audio goes out under the fixed ids
    /// `resp_loopback`/`item_loopback` so a client still has one stream to follow.
    pub fn on_audio_out(&mut self, audio: &[u8]) {
        let at = match self.active.as_ref().filter(|r| r.audio && r.message) {
            Some(r) => r.locator(),
            None if self.model.kind().is_frame_level() => ContentRef {
                response_id: "resp_loopback".into(),
                item_id: "item_loopback".into(),
                output_index: 0,
                content_index: 0,
            },
            None => return, // a response that already ended; its audio is not wanted
        };
        let delta = base64::engine::general_purpose::STANDARD.encode(audio);
        self.out
            .emit(RealtimeServerEvent::OutputAudioDelta { at, delta });
    }
}
