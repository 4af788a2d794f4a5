//! Live's server events as one serde type, so the set the session can send is a list the
//! compiler holds, each with its fields, instead of a type string beside a `json!` body.
//!
//! The session inside `session.*` events is `config.rs`'s typed resource; the wrapped Responses
//! API event inside `response.event` stays JSON, another protocol's stream passed through.

use serde::Serialize;
use serde_json::Value;

use super::config::SessionResource;
use crate::realtime::ClientError;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum LiveServerEvent {
    #[serde(rename = "session.started")]
    SessionStarted { session: SessionResource },
    #[serde(rename = "session.updated")]
    SessionUpdated { session: SessionResource },
    #[serde(rename = "session.closed")]
    SessionClosed {
        reason: &'static str,
        session: SessionResource,
        usage: Usage,
    },
    #[serde(rename = "session.usage.updated")]
    UsageUpdated { usage: Usage },
    #[serde(rename = "info")]
    Info { code: &'static str, message: String },
    #[serde(rename = "error")]
    Error { error: LiveError },
    #[serde(rename = "session.input_audio.muted")]
    InputAudioMuted {},
    #[serde(rename = "session.input_audio.unmuted")]
    InputAudioUnmuted {},
    #[serde(rename = "session.instructions.appended")]
    InstructionsAppended(Span),
    #[serde(rename = "session.thinking.appended")]
    ThinkingAppended(Span),
    #[serde(rename = "session.commentary.appended")]
    CommentaryAppended(Span),
    #[serde(rename = "session.input_transcript.delta")]
    InputTranscriptDelta {
        delta: String,
        #[serde(flatten)]
        span: Span,
    },
    #[serde(rename = "session.output_transcript.delta")]
    OutputTranscriptDelta {
        delta: String,
        #[serde(flatten)]
        span: Span,
    },
    /// The model's audio: on a WebSocket base64 in the output format, without times; reflected
    /// to a sideband as 24 kHz PCM16 with its place on the session's timeline.
    #[serde(rename = "session.output_audio.delta")]
    OutputAudioDelta {
        delta: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        start_ms: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        end_ms: Option<u64>,
    },
    /// The caller's audio reflected to a sideband (24 kHz PCM16, before the input mute): the
    /// client command's type and key, but not an acknowledgment of one.
    #[serde(rename = "session.input_audio.append")]
    InputAudioAppend { audio: String },
    #[serde(rename = "session.delegation.created")]
    DelegationCreated {
        delegation: DelegationRef,
        offset_ms: u64,
    },
    /// One event of a delegated Responses API response, as that API streams it.
    #[serde(rename = "response.event")]
    ResponseEvent {
        event: Value,
        delegation_id: Option<String>,
    },
}

/// Where on the session's timeline (ms) a piece of input or output lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    pub start_ms: u64,
    pub end_ms: u64,
}

impl Span {
    /// A point on the timeline: what an appended instruction or thought occupies.
    pub fn at(ms: u64) -> Span {
        Span {
            start_ms: ms,
            end_ms: ms,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Usage {
    /// Session time so far.
    pub seconds: f64,
}

/// Live's `error` object: the client's event id inside as well as on the frame.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveError {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_event_id: Option<String>,
}

impl LiveError {
    pub fn new(e: ClientError, client_event_id: Option<&str>) -> LiveError {
        LiveError {
            kind: e.kind,
            code: e.code.into_owned(),
            message: e.message,
            param: e.param,
            client_event_id: client_event_id.map(str::to_owned),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DelegationRef {
    pub id: String,
    pub target: &'static str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
}

/// One frame on the wire: the event, its `event_id` (numbered per session), and the client's
/// `client_event_id` when the event answers one.
#[derive(Serialize)]
struct Frame<'a> {
    #[serde(flatten)]
    event: &'a LiveServerEvent,
    event_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_event_id: Option<&'a str>,
}

impl LiveServerEvent {
    /// The frame text: `event_<n>` as its `event_id`.
    pub fn to_frame(&self, n: u64, client_event_id: Option<&str>) -> String {
        let frame = Frame {
            event: self,
            event_id: format!("event_{n:06}"),
            client_event_id,
        };
        serde_json::to_string(&frame).expect("Live server events serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_type_event_id_fields_and_the_client_event_id() {
        let e = LiveServerEvent::OutputTranscriptDelta {
            delta: "hi".into(),
            span: Span {
                start_ms: 10,
                end_ms: 310,
            },
        };
        let v: Value = serde_json::from_str(&e.to_frame(7, Some("c1"))).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type": "session.output_transcript.delta", "event_id": "event_000007",
                "delta": "hi", "start_ms": 10, "end_ms": 310, "client_event_id": "c1"})
        );
        let muted: Value =
            serde_json::from_str(&LiveServerEvent::InputAudioMuted {}.to_frame(1, None)).unwrap();
        assert_eq!(
            muted,
            serde_json::json!({"type": "session.input_audio.muted", "event_id": "event_000001"})
        );
        let acked: Value =
            serde_json::from_str(&LiveServerEvent::ThinkingAppended(Span::at(5)).to_frame(2, None))
                .unwrap();
        assert_eq!(acked["type"], "session.thinking.appended");
        assert_eq!(
            (acked["start_ms"].as_u64(), acked["end_ms"].as_u64()),
            (Some(5), Some(5))
        );
    }
}
