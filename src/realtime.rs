//! The OpenAI Realtime event protocol spoken on the `oai-events` data channel.
//!
//! Clients written for the real service wait for `session.updated` before `connect()` resolves
//! (or give up after 5 s), and drop any event without a string `event_id`; this module keeps
//! those rules in one place so the transceiver only moves text frames.

use serde_json::{Map, Value, json};
use std::time::{SystemTime, UNIX_EPOCH};

/// Per-call protocol state: the effective session config and the event id counter.
pub struct RealtimeSession {
    config: Value,
    next_event: u64,
    session_id: String,
}

impl RealtimeSession {
    pub fn new(session_id: String, model: &str) -> Self {
        let expires_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() + 3600)
            .unwrap_or(0);
        let config = json!({
            "type": "realtime",
            "object": "realtime.session",
            "id": session_id,
            "model": model,
            "expires_at": expires_at,
            "output_modalities": ["audio"],
            "instructions": "",
            "tools": [],
            "tool_choice": "auto",
            "max_output_tokens": "inf",
            "tracing": null,
            "truncation": "auto",
            "prompt": null,
            "include": null,
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "transcription": null,
                    "noise_reduction": null,
                    "turn_detection": {
                        "type": "server_vad",
                        "threshold": 0.5,
                        "prefix_padding_ms": 300,
                        "silence_duration_ms": 500,
                        "create_response": true,
                        "interrupt_response": true,
                        "idle_timeout_ms": null
                    }
                },
                "output": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "voice": "alloy",
                    "speed": 1.0
                }
            }
        });
        RealtimeSession {
            config,
            next_event: 0,
            session_id,
        }
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The model name the client asked for (it arrives inside `session.update`).
    pub fn model(&self) -> &str {
        self.config["model"].as_str().unwrap_or("echo")
    }

    fn event(&mut self, kind: &str, mut body: Map<String, Value>) -> String {
        self.next_event += 1;
        body.insert("type".into(), Value::String(kind.into()));
        body.insert(
            "event_id".into(),
            Value::String(format!("event_{}_{}", self.session_id, self.next_event)),
        );
        Value::Object(body).to_string()
    }

    /// `session.created`, sent as soon as the client's channel opens.
    pub fn on_open(&mut self) -> Vec<String> {
        let mut b = Map::new();
        b.insert("session".into(), self.config.clone());
        vec![self.event("session.created", b)]
    }

    /// Handles one client text frame and returns the server frames to send back.
    pub fn on_client_text(&mut self, text: &str) -> Vec<String> {
        let parsed: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                return vec![self.error(
                    "invalid_request_error",
                    "invalid_json",
                    &format!("could not parse event JSON: {e}"),
                    None,
                )];
            }
        };
        let client_event_id = parsed
            .get("event_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match parsed.get("type").and_then(Value::as_str) {
            Some("session.update") => match parsed.get("session") {
                Some(Value::Object(update)) => {
                    merge(&mut self.config, &Value::Object(update.clone()));
                    let mut b = Map::new();
                    b.insert("session".into(), self.config.clone());
                    vec![self.event("session.updated", b)]
                }
                _ => vec![self.error(
                    "invalid_request_error",
                    "missing_session",
                    "session.update needs a `session` object",
                    client_event_id.as_deref(),
                )],
            },
            Some(other) => {
                let msg = format!("event type `{other}` is not supported by this server yet");
                vec![self.error(
                    "invalid_request_error",
                    "unsupported_event",
                    &msg,
                    client_event_id.as_deref(),
                )]
            }
            None => vec![self.error(
                "invalid_request_error",
                "missing_type",
                "event has no `type`",
                client_event_id.as_deref(),
            )],
        }
    }

    /// Realtime error shape; `error.event_id` echoes the client's event so SDKs waiting on it
    /// (for example a pending `response.create`) are released.
    pub fn error(
        &mut self,
        kind: &str,
        code: &str,
        message: &str,
        event_id: Option<&str>,
    ) -> String {
        let mut b = Map::new();
        b.insert(
            "error".into(),
            json!({"type": kind, "code": code, "message": message, "param": null, "event_id": event_id}),
        );
        self.event("error", b)
    }
}

/// Applies a partial update: objects merge key by key, everything else (including `null`,
/// which is how clients clear `turn_detection` or `noise_reduction`) replaces.
fn merge(into: &mut Value, update: &Value) {
    match (into, update) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn created_then_updated_with_merged_config() {
        let mut s = RealtimeSession::new("sess_1".into(), "echo");
        let created = parse(&s.on_open()[0]);
        assert_eq!(created["type"], "session.created");
        assert!(created["event_id"].is_string());
        let out = s.on_client_text(
            r#"{"type":"session.update","session":{"type":"realtime","model":"gpt-realtime-2.1",
               "audio":{"input":{"turn_detection":{"type":"semantic_vad"},"noise_reduction":null}}}}"#,
        );
        let updated = parse(&out[0]);
        assert_eq!(updated["type"], "session.updated");
        assert_eq!(updated["session"]["model"], "gpt-realtime-2.1");
        assert_eq!(
            updated["session"]["audio"]["input"]["turn_detection"]["type"],
            "semantic_vad"
        );
        // Untouched fields keep their values.
        assert_eq!(updated["session"]["audio"]["output"]["voice"], "alloy");
        assert_ne!(created["event_id"], updated["event_id"]);
    }

    #[test]
    fn unknown_and_malformed_events_get_errors_echoing_event_id() {
        let mut s = RealtimeSession::new("sess_2".into(), "echo");
        let e = parse(&s.on_client_text(r#"{"type":"nope","event_id":"c1"}"#)[0]);
        assert_eq!(e["type"], "error");
        assert_eq!(e["error"]["event_id"], "c1");
        let e = parse(&s.on_client_text("{not json")[0]);
        assert_eq!(e["error"]["code"], "invalid_json");
    }
}
