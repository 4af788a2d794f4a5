//! Where the transport changes the events: the server's output buffer (WebRTC) and audio as
//! `response.output_audio.delta` (WebSocket). See [`super::Transport`].

use base64::Engine as _;
use serde_json::{Value, json};

use super::{Conversation, Transport};

impl Conversation {
    /// `output_audio_buffer.started`/`stopped`/`cleared`: WebRTC only, since on a WebSocket
    /// the client holds the audio and the server has no buffer to report.
    pub(super) fn emit_output_buffer(&mut self, kind: &str, response_id: Option<String>) {
        if self.transport == Transport::WebRtc {
            self.out.emit(kind, json!({ "response_id": response_id }));
        }
    }

    /// One piece of outgoing audio in the session's output format (WebSocket): a
    /// `response.output_audio.delta` for the response that is speaking. A frame-level model
    /// (`loopback`) speaks outside responses; its audio goes out under the fixed ids
    /// `resp_loopback`/`item_loopback` so a client still has one stream to follow.
    pub fn on_audio_out(&mut self, audio: &[u8]) {
        let mut body = match self.active.as_ref().filter(|r| r.audio && r.message) {
            Some(r) => r.locator(),
            None if self.model.kind().is_frame_level() => json!({
                "response_id": "resp_loopback", "item_id": "item_loopback",
                "output_index": 0, "content_index": 0,
            }),
            None => return, // a response that already ended; its audio is not wanted
        };
        body["delta"] = Value::from(base64::engine::general_purpose::STANDARD.encode(audio));
        self.out.emit("response.output_audio.delta", body);
    }
}
