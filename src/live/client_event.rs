//! The Live client events as types: the session matches on these variants rather than on type
//! strings, and their fields are decoded once, by the same rules (and errors) as Realtime's
//! (`crate::realtime::client_event`).
//!
//! Names follow the `openai` package's `LiveClientEvent` union. Events voice-edge knows but does
//! not implement (fixtures, DTMF, Decisions) are variants too, so each gets its own error rather
//! than "unknown type".

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::live::server_event::{LiveServerEvent, Span};
use crate::realtime::ClientError;
use crate::realtime::client_event::fields;

#[derive(Debug, Clone, PartialEq)]
pub enum LiveClientEvent {
    SessionUpdate {
        session: Value,
    },
    InputAudioMute,
    InputAudioUnmute,
    /// `session.instructions.append`, `session.thinking.append`, `session.commentary.append`.
    Append(AppendKind, Append),
    ResponseItemCreate {
        item: Map<String, Value>,
    },
    ResponseCreate,
    SessionClose,
    SessionStart,
    InputAudioAppend(InputAudioAppend),
    OutputAudioFixturePlay,
    TransportDtmfSend,
    /// `decision.create`, `decision.item.create`, `decision.item.delete`.
    Decision,
}

/// Which of the three appends: each is acknowledged as its own `.appended` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendKind {
    Instructions,
    Thinking,
    Commentary,
}

impl AppendKind {
    pub fn acknowledgement(self, at: Span) -> LiveServerEvent {
        match self {
            AppendKind::Instructions => LiveServerEvent::InstructionsAppended(at),
            AppendKind::Thinking => LiveServerEvent::ThinkingAppended(at),
            AppendKind::Commentary => LiveServerEvent::CommentaryAppended(at),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Append {
    pub content: String,
    /// Required, and may be null: `None` when absent (refused), `Some(None)` for null.
    #[serde(default, deserialize_with = "present")]
    pub delegation_id: Option<Option<String>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct InputAudioAppend {
    /// Base64 audio in the session's format.
    pub audio: String,
}

#[derive(Deserialize)]
struct SessionField {
    session: Value,
}

#[derive(Deserialize)]
struct ItemField {
    item: Map<String, Value>,
}

/// A field that must be present but may be null.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

impl LiveClientEvent {
    /// The event of type `kind`, from its JSON object (`type` and `event_id` included).
    pub fn decode(kind: &str, body: &Map<String, Value>) -> Result<Self, ClientError> {
        use LiveClientEvent as E;
        let body = || Value::Object(body.clone());
        Ok(match kind {
            "session.update" => {
                let f: SessionField = fields(body())?;
                E::SessionUpdate { session: f.session }
            }
            "session.input_audio.mute" => E::InputAudioMute,
            "session.input_audio.unmute" => E::InputAudioUnmute,
            "session.instructions.append" => E::Append(AppendKind::Instructions, fields(body())?),
            "session.thinking.append" => E::Append(AppendKind::Thinking, fields(body())?),
            "session.commentary.append" => E::Append(AppendKind::Commentary, fields(body())?),
            "response.item.create" => {
                let f: ItemField = fields(body())?;
                E::ResponseItemCreate { item: f.item }
            }
            "response.create" => E::ResponseCreate,
            "session.close" => E::SessionClose,
            "session.start" => E::SessionStart,
            "session.input_audio.append" => E::InputAudioAppend(fields(body())?),
            "session.output_audio.fixture.play" => E::OutputAudioFixturePlay,
            "transport.dtmf.send" => E::TransportDtmfSend,
            "decision.create" | "decision.item.create" | "decision.item.delete" => E::Decision,
            other => {
                return Err(ClientError::invalid(
                    "type",
                    format!("'{other}' is not a Live client event"),
                ));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(v: Value) -> Result<LiveClientEvent, ClientError> {
        let Value::Object(body) = v else {
            panic!("an object")
        };
        let kind = body["type"].as_str().unwrap().to_owned();
        LiveClientEvent::decode(&kind, &body)
    }

    #[test]
    fn appends_need_a_delegation_id_that_may_be_null() {
        assert_eq!(
            decode(
                json!({"type": "session.thinking.append", "content": "hm", "delegation_id": null})
            )
            .unwrap(),
            LiveClientEvent::Append(
                AppendKind::Thinking,
                Append {
                    content: "hm".into(),
                    delegation_id: Some(None)
                }
            )
        );
        let LiveClientEvent::Append(_, a) =
            decode(json!({"type": "session.commentary.append", "content": "x"})).unwrap()
        else {
            panic!("an append")
        };
        assert_eq!(a.delegation_id, None, "absent is told apart from null");
        let e = decode(json!({"type": "session.commentary.append", "content": 3})).unwrap_err();
        assert_eq!(
            (e.code.as_ref(), e.param.as_deref()),
            ("invalid_type", Some("content"))
        );
    }

    #[test]
    fn wrong_fields_and_types_are_named() {
        let e = decode(json!({"type": "response.item.create", "item": "x"})).unwrap_err();
        assert_eq!(
            (e.code.as_ref(), e.param.as_deref()),
            ("invalid_type", Some("item"))
        );
        let e = decode(json!({"type": "session.input_audio.append"})).unwrap_err();
        assert_eq!(
            (e.code.as_ref(), e.param.as_deref()),
            ("missing_required_parameter", Some("audio"))
        );
        let e = decode(json!({"type": "session.updat"})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("type"));
    }
}
