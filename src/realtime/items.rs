//! The conversation: an ordered, capped list of items and the rules for client-made items.

use base64::Engine;
use serde_json::{Map, Value, json};

use super::events::{ClientError, required_str};
use super::session_config::AudioFormat;

/// Oldest items are dropped beyond this, silently, the way the service truncates context; it
/// bounds a call's memory however long it runs.
pub const MAX_ITEMS: usize = 500;

/// Where an item's audio came from, which decides what the models answer and what truncation
/// may do. Kept beside the item because none of it is on the wire.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum AudioSource {
    /// Created by the client, or an item whose audio we do not hold.
    Client,
    /// A committed span of the caller's RTP audio (input time base).
    Input { start_ms: u64, end_ms: u64 },
    /// Audio that arrived as `input_audio_buffer.append`, of this length.
    Appended { ms: u64 },
    /// The silent span committed by an idle timeout.
    Idle { start_ms: u64, end_ms: u64 },
    /// Assistant audio: the full transcript's words and the audio length, so truncation can
    /// cut proportionally (and re-cut from the original) to what was heard.
    Assistant { words: Vec<String>, audio_ms: u64 },
}

#[derive(Debug, Clone)]
pub(super) struct Item {
    pub value: Value,
    pub origin: AudioSource,
}

impl Item {
    pub fn id(&self) -> &str {
        self.value["id"].as_str().unwrap_or_default()
    }

    pub fn role(&self) -> Option<&str> {
        if self.value["type"] == "message" {
            self.value["role"].as_str()
        } else {
            None
        }
    }

    /// The text a model can answer: `input_text`/`output_text` text and audio transcripts.
    pub fn text(&self) -> Option<String> {
        let parts: Vec<&str> = self.value["content"]
            .as_array()?
            .iter()
            .filter_map(|c| match c["type"].as_str() {
                Some("input_text" | "output_text") => c["text"].as_str(),
                Some("input_audio" | "output_audio") => c["transcript"].as_str(),
                _ => None,
            })
            .filter(|t| !t.trim().is_empty())
            .collect();
        (!parts.is_empty()).then(|| parts.join(" "))
    }
}

#[derive(Default)]
pub(super) struct ItemStore {
    items: Vec<Item>,
}

impl ItemStore {
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.items.iter().map(Item::id)
    }

    pub fn last_id(&self) -> Option<String> {
        self.items.last().map(|i| i.id().to_owned())
    }

    pub fn get(&self, id: &str) -> Option<&Item> {
        self.items.iter().find(|i| i.id() == id)
    }

    pub fn get_mut(&mut self, id: &str) -> Option<&mut Item> {
        self.items.iter_mut().find(|i| i.id() == id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Item> {
        self.items.iter()
    }

    pub fn iter_rev(&self) -> impl Iterator<Item = &Item> {
        self.items.iter().rev()
    }

    /// Appends and returns the id of the item before it.
    pub fn push(&mut self, item: Item) -> Option<String> {
        let previous = self.last_id();
        self.items.push(item);
        self.enforce_cap();
        previous
    }

    /// Inserts after `previous` (`"root"` = at the start, `None` = at the end) and returns the
    /// effective previous id; an unknown `previous` is refused.
    pub fn insert_after(
        &mut self,
        previous: Option<&str>,
        item: Item,
    ) -> Result<Option<String>, ClientError> {
        let index = match previous {
            None => self.items.len(),
            Some("root") => 0,
            Some(p) => match self.items.iter().position(|i| i.id() == p) {
                Some(i) => i + 1,
                None => {
                    return Err(ClientError::invalid(
                        "previous_item_id",
                        format!("item '{p}' does not exist in the conversation"),
                    ));
                }
            },
        };
        let effective = index.checked_sub(1).map(|i| self.items[i].id().to_owned());
        self.items.insert(index, item);
        self.enforce_cap();
        Ok(effective)
    }

    pub fn previous_of(&self, id: &str) -> Option<String> {
        let i = self.items.iter().position(|i| i.id() == id)?;
        i.checked_sub(1).map(|p| self.items[p].id().to_owned())
    }

    pub fn remove(&mut self, id: &str) -> Option<Item> {
        let i = self.items.iter().position(|i| i.id() == id)?;
        Some(self.items.remove(i))
    }

    fn enforce_cap(&mut self) {
        if self.items.len() > MAX_ITEMS {
            let excess = self.items.len() - MAX_ITEMS;
            self.items.drain(..excess);
        }
    }
}

/// The user item a committed audio span becomes. The `transcript` key must be present even
/// when null: the SDK's item schema `.parse()`s it and throws otherwise.
pub(super) fn user_audio_item(id: &str, origin: AudioSource) -> Item {
    Item {
        value: json!({
            "id": id,
            "object": "realtime.item",
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_audio", "transcript": null}]
        }),
        origin,
    }
}

pub(super) fn assistant_item(id: &str) -> Item {
    Item {
        value: json!({
            "id": id,
            "object": "realtime.item",
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": []
        }),
        origin: AudioSource::Client,
    }
}

/// Validates a `conversation.item.create` item and normalises it to the server's shape
/// (`object`, `status: completed`, an id when absent, `transcript` present on audio parts).
/// Audio bytes in `input_audio` parts are dropped after measuring them, so a client cannot grow
/// the server's memory with them; `retrieve` then shows the part without `audio`, like
/// `response.done` never carries audio either.
pub(super) fn client_item(
    raw: &Value,
    new_id: impl FnOnce() -> String,
    input_format: AudioFormat,
) -> Result<Item, ClientError> {
    let Value::Object(raw) = raw else {
        return Err(ClientError::missing("item"));
    };
    let id = match raw.get("id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 64 => Some(s.clone()),
        Some(other) => return Err(ClientError::invalid("item.id", other)),
    };
    let kind = required_str(raw, "type", "item.type")?;
    let mut out = Map::new();
    out.insert("id".into(), Value::Null);
    out.insert("object".into(), Value::from("realtime.item"));
    out.insert("type".into(), Value::from(kind));
    let mut appended_ms = 0;
    match kind {
        "message" => {
            let role = required_str(raw, "role", "item.role")?;
            let allowed: &[&str] = match role {
                "user" => &["input_text", "input_audio", "input_image"],
                "system" => &["input_text"],
                "assistant" => &["output_text", "output_audio"],
                other => return Err(ClientError::invalid("item.role", other)),
            };
            let Some(Value::Array(parts)) = raw.get("content") else {
                return Err(ClientError::missing("item.content"));
            };
            if parts.is_empty() {
                return Err(ClientError::invalid("item.content", "must not be empty"));
            }
            let mut content = Vec::with_capacity(parts.len());
            for (i, part) in parts.iter().enumerate() {
                let param = format!("item.content[{i}]");
                let (part, ms) = content_part(part, allowed, &param, input_format)?;
                appended_ms += ms;
                content.push(part);
            }
            out.insert("role".into(), Value::from(role));
            out.insert("status".into(), Value::from("completed"));
            out.insert("content".into(), Value::Array(content));
        }
        "function_call_output" => {
            let call_id = required_str(raw, "call_id", "item.call_id")?;
            let output = required_str(raw, "output", "item.output")?;
            out.insert("status".into(), Value::from("completed"));
            out.insert("call_id".into(), Value::from(call_id));
            out.insert("output".into(), Value::from(output));
        }
        "mcp_approval_response" => {
            let request = required_str(raw, "approval_request_id", "item.approval_request_id")?;
            let Some(Value::Bool(approve)) = raw.get("approve") else {
                return Err(ClientError::wrong_type("item.approve", "a boolean"));
            };
            out.insert("approval_request_id".into(), Value::from(request));
            out.insert("approve".into(), Value::Bool(*approve));
            match raw.get("reason") {
                None | Some(Value::Null) => {}
                Some(Value::String(r)) => {
                    out.insert("reason".into(), Value::from(r.as_str()));
                }
                Some(_) => return Err(ClientError::wrong_type("item.reason", "a string")),
            }
        }
        "function_call" => {
            for key in ["call_id", "name", "arguments"] {
                let v = required_str(raw, key, &format!("item.{key}"))?;
                out.insert(key.into(), Value::from(v));
            }
            out.insert("status".into(), Value::from("completed"));
        }
        other => {
            return Err(ClientError::invalid(
                "item.type",
                format!(
                    "'{other}' (expected message, function_call, function_call_output or \
                     mcp_approval_response)"
                ),
            ));
        }
    }
    out.insert("id".into(), Value::from(id.unwrap_or_else(new_id)));
    let origin = if appended_ms > 0 {
        AudioSource::Appended { ms: appended_ms }
    } else {
        AudioSource::Client
    };
    Ok(Item {
        value: Value::Object(out),
        origin,
    })
}

fn content_part(
    part: &Value,
    allowed: &[&str],
    param: &str,
    input_format: AudioFormat,
) -> Result<(Value, u64), ClientError> {
    let Value::Object(part) = part else {
        return Err(ClientError::wrong_type(param, "an object"));
    };
    let kind = required_str(part, "type", &format!("{param}.type"))?;
    if !allowed.contains(&kind) {
        return Err(ClientError::invalid(
            &format!("{param}.type"),
            format!("'{kind}' is not allowed here (expected one of {allowed:?})"),
        ));
    }
    let text_of = |key: &str| required_str(part, key, &format!("{param}.{key}"));
    Ok(match kind {
        "input_text" | "output_text" => (json!({"type": kind, "text": text_of("text")?}), 0),
        "input_audio" | "output_audio" => {
            let transcript = match part.get("transcript") {
                None | Some(Value::Null) => Value::Null,
                Some(Value::String(s)) => Value::from(s.as_str()),
                Some(_) => {
                    return Err(ClientError::wrong_type(
                        &format!("{param}.transcript"),
                        "a string",
                    ));
                }
            };
            let ms = match part.get("audio") {
                None | Some(Value::Null) => 0,
                Some(Value::String(b64)) => audio_ms(b64, input_format).ok_or_else(|| {
                    ClientError::invalid(&format!("{param}.audio"), "not valid base64")
                })?,
                Some(_) => {
                    return Err(ClientError::wrong_type(
                        &format!("{param}.audio"),
                        "a base64 string",
                    ));
                }
            };
            (json!({"type": kind, "transcript": transcript}), ms)
        }
        _ => (Value::Object(part.clone()), 0),
    })
}

/// Duration of base64 audio in the session's input format (PCM16 24 kHz, or 8 kHz G.711).
pub(super) fn audio_ms(b64: &str, format: AudioFormat) -> Option<u64> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?
        .len() as u64;
    Some(bytes / format.bytes_per_ms())
}
