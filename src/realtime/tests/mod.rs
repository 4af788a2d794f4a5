//! Engine tests. Every emitted frame is parsed and checked against docs/realtime-protocol.md §4
//! "Fields per event" and the SDK's item rules by [`Harness`], so each test also checks the wire
//! shapes.

mod check;
mod items;
mod mcp;
mod responses;
mod scripts;
mod session;
mod tools;
mod turn;

use std::collections::HashSet;

use serde_json::{Value, json};

use super::{Action, Conversation};
use crate::model::Reply;

/// A conversation plus everything it emitted, checked as it is drained.
pub(super) struct Harness {
    pub c: Conversation,
    seen: HashSet<String>,
}

impl Harness {
    /// An opened conversation with `session.created` already drained and checked.
    pub fn open(model: &str) -> Harness {
        let mut h = Harness {
            c: Conversation::new(
                "sess_test".into(),
                &crate::model::ModelKind::parse(model)
                    .ok()
                    .flatten()
                    .unwrap_or_default(),
            ),
            seen: HashSet::new(),
        };
        h.c.on_channel_open();
        let created = h.frames();
        assert_eq!(types(&created), ["session.created"]);
        h
    }

    /// Drains and checks the pending frames.
    pub fn frames(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(text) = self.c.poll_frame() {
            let v: Value = serde_json::from_str(&text).expect("frame is JSON");
            let id = v["event_id"].as_str().expect("string event_id").to_owned();
            assert!(id.starts_with("event_"), "{id}");
            assert!(self.seen.insert(id), "duplicate event_id in {v}");
            check::fields(&v);
            out.push(v);
        }
        out
    }

    pub fn actions(&mut self) -> Vec<Action> {
        std::iter::from_fn(|| self.c.poll_action()).collect()
    }

    /// Sends one client event and returns the checked frames it produced.
    pub fn send(&mut self, event: Value) -> Vec<Value> {
        self.c.on_client_text(&event.to_string());
        self.frames()
    }

    /// Sends and expects exactly one `error` echoing `event_id`; returns its `error` object.
    pub fn expect_error(&mut self, event: Value) -> Value {
        let echo = event["event_id"].clone();
        let out = self.send(event);
        assert_eq!(types(&out), ["error"], "{out:?}");
        assert_eq!(out[0]["error"]["event_id"], echo);
        out[0]["error"].clone()
    }

    /// A VAD turn from `start` to `end` ms; returns the frames and the Speak action's ids.
    pub fn vad_turn(&mut self, start: u64, end: u64) -> (Vec<Value>, Option<(String, Reply)>) {
        self.c.on_speech_started(start);
        self.c.on_speech_stopped(end);
        let frames = self.frames();
        (frames, self.take_speak())
    }

    /// The first `Speak` among the pending actions.
    pub fn take_speak(&mut self) -> Option<(String, Reply)> {
        self.actions().into_iter().find_map(|a| match a {
            Action::Speak {
                response_id, reply, ..
            } => Some((response_id, reply)),
            _ => None,
        })
    }

    /// `sendMessage(text)` as the SDK sends it, then `response.create`.
    pub fn send_message(&mut self, text: &str, n: u32) -> Vec<Value> {
        let mut out = self.send(json!({
            "type": "conversation.item.create",
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        }));
        out.extend(self.send(json!({
            "type": "response.create", "event_id": format!("agents_js_response_create_{n}")
        })));
        out
    }
}

pub(super) fn types(frames: &[Value]) -> Vec<&str> {
    frames.iter().map(|f| f["type"].as_str().unwrap()).collect()
}

pub(super) fn of_type<'a>(frames: &'a [Value], kind: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["type"] == kind).collect()
}

/// Concatenated transcript/text deltas.
pub(super) fn deltas(frames: &[Value]) -> String {
    frames
        .iter()
        .filter(|f| {
            f["type"] == "response.output_audio_transcript.delta"
                || f["type"] == "response.output_text.delta"
        })
        .map(|f| f["delta"].as_str().unwrap())
        .collect()
}
