//! The Live dialect of a bridge: a Live WebRTC session carried to an upstream Live WebSocket.

use std::time::Instant;

use serde_json::Value;

use super::rtp_audio::RtpAudio;
use super::wire::{Peek, SESSION_UPDATE_ID, SESSION_UPDATE_KIND};
use super::{Bridge, Dialect, LIVE_STREAM, Phase};
use crate::audio::Codec;

impl Bridge {
    /// A bridge for a Live WebRTC session `call_id` to an upstream Live WebSocket, started with
    /// `session` (the checked config of `POST /v1/live/sessions`, its model the upstream's).
    pub fn live_rtp(
        now: Instant,
        call_id: &str,
        codec: Codec,
        append_ms: u32,
        mut session: Value,
    ) -> Bridge {
        let mut b = Bridge::with(now, Some(RtpAudio::new(codec, append_ms)), &[]);
        b.dialect = Dialect::Live {
            call_id: call_id.to_owned(),
        };
        // The WebSocket's format, which a WebRTC config never names: PCM at 24 kHz.
        if let Some(obj) = session.as_object_mut() {
            let audio = obj.entry("audio").or_insert_with(|| serde_json::json!({}));
            if let Some(audio) = audio.as_object_mut() {
                audio.insert(
                    "format".into(),
                    serde_json::json!({"type": "audio/pcm", "rate": 24000}),
                );
            }
        }
        let event_id = b.edge_id(SESSION_UPDATE_KIND);
        b.to_upstream.push_back(
            serde_json::json!({"type": "session.start", "event_id": event_id, "session": session})
                .to_string(),
        );
        b.updates_unanswered = 1;
        b
    }

    /// A Live upstream's event. Its session is shown under the edge's id; its audio is one
    /// stream played out, not forwarded; `session.closed` ends the call after it.
    pub(super) fn on_live_text(&mut self, text: &str, peek: Peek<'_>) {
        match peek.kind {
            "session.started" | "session.updated" => {
                let Ok(mut event) = serde_json::from_str::<Value>(text) else {
                    return;
                };
                if let (Some(session), Dialect::Live { call_id }) = (
                    event.get_mut("session").and_then(Value::as_object_mut),
                    &self.dialect,
                ) {
                    session.insert("id".into(), call_id.as_str().into());
                }
                self.session = event.get("session").cloned();
                if peek.kind == "session.started" && self.phase == Phase::Connecting {
                    self.phase = Phase::Open;
                    self.updates_unanswered = 0;
                }
                self.for_caller(event.to_string());
            }
            "session.output_audio.delta" => {
                if let Some(delta) = peek.delta {
                    self.on_delta(LIVE_STREAM.into(), String::new(), 0, delta);
                }
            }
            "session.closed" => {
                self.for_caller(text.to_owned());
                self.phase = Phase::Over;
            }
            "error" => {
                let answers = peek.error.and_then(|e| e.client_event_id.or(e.event_id));
                self.for_caller(text.to_owned());
                // A refused start leaves nothing to talk to.
                if answers.is_some_and(|id| id.starts_with(SESSION_UPDATE_ID))
                    && self.phase == Phase::Connecting
                {
                    self.stop();
                }
            }
            _ => self.for_caller(text.to_owned()),
        }
    }
}
