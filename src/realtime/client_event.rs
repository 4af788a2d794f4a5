//! The Realtime client events as types: what the engine takes, from a client's JSON text (decoded
//! here, with the service's error for each way a field can be wrong) or built directly by another
//! dialect sitting on the engine (Live), so nothing is written to text only to be parsed again.
//!
//! The names follow the `openai` package's `RealtimeClientEvent` union. The session, item and
//! response objects stay JSON values for now: their rules live in `session_config`, `items` and
//! `client` and are checked where they are applied.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::events::ClientError;

/// One client event, decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum RealtimeClientEvent {
    SessionUpdate(SessionUpdate),
    InputAudioBufferAppend(InputAudioBufferAppend),
    InputAudioBufferCommit,
    InputAudioBufferClear,
    ConversationItemCreate(ConversationItemCreate),
    ConversationItemRetrieve(ItemRef),
    ConversationItemDelete(ItemRef),
    ConversationItemTruncate(ConversationItemTruncate),
    ResponseCreate(ResponseCreate),
    ResponseCancel(ResponseCancel),
    OutputAudioBufferClear,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SessionUpdate {
    pub session: Value,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct InputAudioBufferAppend {
    /// Base64 audio in the session's input format.
    pub audio: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ConversationItemCreate {
    pub item: Value,
    #[serde(default)]
    pub previous_item_id: Option<String>,
}

/// `conversation.item.retrieve` and `conversation.item.delete`: an item named by id.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ItemRef {
    pub item_id: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ConversationItemTruncate {
    pub item_id: String,
    pub content_index: u64,
    pub audio_end_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct ResponseCreate {
    /// The response's parameters; absent or null means the session's.
    #[serde(default)]
    pub response: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct ResponseCancel {
    #[serde(default)]
    pub response_id: Option<String>,
}

impl RealtimeClientEvent {
    /// Every `type` the engine handles, for the unknown-type error.
    pub const TYPES: &[&str] = &[
        "session.update",
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
        "input_audio_buffer.clear",
        "conversation.item.create",
        "conversation.item.retrieve",
        "conversation.item.delete",
        "conversation.item.truncate",
        "response.create",
        "response.cancel",
        "output_audio_buffer.clear",
    ];

    /// `conversation.item.create` appending `item`.
    pub fn item_create(item: Value) -> Self {
        Self::ConversationItemCreate(ConversationItemCreate {
            item,
            previous_item_id: None,
        })
    }

    /// `response.create`, with the session's parameters (`None`) or these.
    pub fn response_create(response: Option<Value>) -> Self {
        Self::ResponseCreate(ResponseCreate { response })
    }

    pub fn session_update(session: Value) -> Self {
        Self::SessionUpdate(SessionUpdate { session })
    }

    /// Decodes the event of type `kind` from its JSON object (`type` and `event_id` included,
    /// ignored here). Fields the event does not define are ignored, as the service ignores them
    /// at this level; a required field absent or null is `missing_required_parameter`, one of
    /// the wrong type `invalid_type`, each naming the field.
    pub fn decode(kind: &str, body: Map<String, Value>) -> Result<Self, ClientError> {
        use RealtimeClientEvent as E;
        let body = Value::Object(body);
        Ok(match kind {
            "session.update" => E::SessionUpdate(fields(body)?),
            "input_audio_buffer.append" => E::InputAudioBufferAppend(fields(body)?),
            "input_audio_buffer.commit" => E::InputAudioBufferCommit,
            "input_audio_buffer.clear" => E::InputAudioBufferClear,
            "conversation.item.create" => E::ConversationItemCreate(fields(body)?),
            "conversation.item.retrieve" => E::ConversationItemRetrieve(fields(body)?),
            "conversation.item.delete" => E::ConversationItemDelete(fields(body)?),
            "conversation.item.truncate" => E::ConversationItemTruncate(fields(body)?),
            "response.create" => E::ResponseCreate(fields(body)?),
            "response.cancel" => E::ResponseCancel(fields(body)?),
            "output_audio_buffer.clear" => E::OutputAudioBufferClear,
            other => {
                return Err(ClientError::invalid(
                    "type",
                    format!("'{other}' (supported: {})", Self::TYPES.join(", ")),
                ));
            }
        })
    }
}

/// The event's fields as `T`, or the service's error naming the field that is wrong. Live's
/// client events are decoded by the same rules.
///
/// serde reports what was wrong in its error text and where through `serde_path_to_error`; the
/// text's shapes ("missing field `x`", "invalid type: …, expected …") are serde's own and have
/// been stable across its releases, and a shape not recognised still gives an `invalid_value`
/// naming the field.
pub(crate) fn fields<T: DeserializeOwned>(body: Value) -> Result<T, ClientError> {
    decode_at("", body)
}

/// `value` as `T`, the error's `param` the path of what was wrong under `prefix` (`session`
/// gives `session.audio.input.format`). A key a `deny_unknown_fields` type does not have is
/// the service's `unknown_parameter`.
pub(crate) fn decode_at<T: DeserializeOwned>(prefix: &str, value: Value) -> Result<T, ClientError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = match (prefix, inner.as_str()) {
            (p, "." | "") => p.to_owned(),
            ("", i) => i.to_owned(),
            (p, i) if i.starts_with('[') => format!("{p}{i}"),
            (p, i) => format!("{p}.{i}"),
        };
        let at = |field: &str| match path.as_str() {
            "" => field.to_owned(),
            p => format!("{p}.{field}"),
        };
        let message = e.into_inner().to_string();
        if let Some(field) = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.strip_suffix('`'))
        {
            return ClientError::missing(&at(field));
        }
        // The path ends at the unknown key, except inside a tagged enum, whose content serde
        // buffers before the path can follow it.
        if let Some(field) = message
            .strip_prefix("unknown field `")
            .and_then(|rest| rest.split('`').next())
        {
            let ends_at_it = path == field || path.ends_with(&format!(".{field}"));
            return ClientError::unknown_parameter(if ends_at_it { path } else { at(field) });
        }
        if message.starts_with("invalid type: null") {
            return ClientError::missing(&path);
        }
        if message.starts_with("invalid type:") || message.starts_with("invalid value:") {
            let expected = message.rsplit(", expected ").next().unwrap_or("");
            let expected = match expected {
                "u64" | "u32" | "usize" => "a non-negative integer",
                "f64" => "a number",
                "a boolean" | "a string" | "an object" | "an array" => expected,
                "a map" => "an object",
                e if e.starts_with("struct ") || e.contains("tagged enum") => "an object",
                "a sequence" => "an array",
                other => other,
            };
            return ClientError::wrong_type(&path, expected);
        }
        ClientError::invalid(&path, message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(v: Value) -> Result<RealtimeClientEvent, ClientError> {
        let Value::Object(body) = v else {
            panic!("an object")
        };
        let kind = body["type"].as_str().unwrap().to_owned();
        RealtimeClientEvent::decode(&kind, body)
    }

    #[test]
    fn events_decode_into_their_types() {
        assert_eq!(
            decode(
                json!({"type": "conversation.item.truncate", "event_id": "e1",
                "item_id": "item_1", "content_index": 0, "audio_end_ms": 1500, "extra": true})
            )
            .unwrap(),
            RealtimeClientEvent::ConversationItemTruncate(ConversationItemTruncate {
                item_id: "item_1".into(),
                content_index: 0,
                audio_end_ms: 1500,
            })
        );
        assert_eq!(
            decode(json!({"type": "response.create", "response": null})).unwrap(),
            RealtimeClientEvent::ResponseCreate(ResponseCreate::default())
        );
        assert_eq!(
            decode(json!({"type": "input_audio_buffer.commit"})).unwrap(),
            RealtimeClientEvent::InputAudioBufferCommit
        );
    }

    #[test]
    fn a_wrong_field_is_named_with_the_services_code() {
        let e = |v| decode(v).unwrap_err();
        let missing = e(json!({"type": "conversation.item.delete"}));
        assert_eq!(
            (missing.code.as_ref(), missing.param.as_deref()),
            ("missing_required_parameter", Some("item_id"))
        );
        let null = e(json!({"type": "conversation.item.delete", "item_id": null}));
        assert_eq!(null.code, "missing_required_parameter");
        let number = e(json!({"type": "input_audio_buffer.append", "audio": 5}));
        assert_eq!(
            (number.code.as_ref(), number.param.as_deref()),
            ("invalid_type", Some("audio"))
        );
        assert!(
            number.message.contains("expected a string"),
            "{}",
            number.message
        );
        let negative = e(json!({"type": "conversation.item.truncate", "item_id": "i",
            "content_index": -1, "audio_end_ms": 0}));
        assert_eq!(negative.param.as_deref(), Some("content_index"));
        assert!(
            negative.message.contains("a non-negative integer"),
            "{}",
            negative.message
        );
        let unknown = e(json!({"type": "session.updat"}));
        assert_eq!(unknown.param.as_deref(), Some("type"));
        assert!(
            unknown.message.contains("supported: session.update"),
            "{}",
            unknown.message
        );
    }
}
