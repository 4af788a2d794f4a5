//! The frame-returning API the transceiver used before [`Conversation`] existed.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::{Action, Conversation};

/// Deprecated: a [`Conversation`] behind the old `RealtimeSession` calls, kept only while the
/// transceiver migrates. It has no media side, so each `Speak` is completed at once (every
/// `response.created` still gets its `response.done` and the SDK's response queue never
/// stalls) and other actions are dropped. New code should drive [`Conversation`] directly.
pub struct RealtimeSession {
    inner: Conversation,
}

impl RealtimeSession {
    pub fn new(session_id: String, model: &str) -> Self {
        let mut inner = Conversation::new(session_id, model);
        let expires_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() + 3600)
            .unwrap_or(0);
        inner.set_expires_at(expires_at);
        RealtimeSession { inner }
    }

    pub fn session_id(&self) -> &str {
        self.inner.session_id()
    }

    pub fn model(&self) -> &str {
        self.inner.model()
    }

    pub fn conversation(&mut self) -> &mut Conversation {
        &mut self.inner
    }

    pub fn on_open(&mut self) -> Vec<String> {
        self.inner.on_channel_open();
        self.drain()
    }

    pub fn on_client_text(&mut self, text: &str) -> Vec<String> {
        self.inner.on_client_text(text);
        self.drain()
    }

    /// A Realtime `error` frame not tied to a client event's handling.
    pub fn error(
        &mut self,
        kind: &str,
        code: &str,
        message: &str,
        event_id: Option<&str>,
    ) -> String {
        let body = json!({ "error": {
            "type": kind, "code": code, "message": message, "param": null, "event_id": event_id
        }});
        self.inner.out.emit("error", body);
        self.drain().pop().unwrap_or_default()
    }

    fn drain(&mut self) -> Vec<String> {
        loop {
            let mut progressed = false;
            while let Some(action) = self.inner.poll_action() {
                progressed = true;
                if let Action::Speak { response_id, .. } = action {
                    self.inner.on_audio_done(&response_id);
                }
            }
            if !progressed {
                break;
            }
        }
        std::iter::from_fn(|| self.inner.poll_frame()).collect()
    }
}
