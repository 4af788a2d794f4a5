//! Client events: parse, validate, then act. Every handler validates completely before it emits
//! anything, so a refused event leaves no partial output and no state change; the dispatcher
//! turns the refusal into an `error` echoing the client's `event_id`, and the session goes on.

use serde_json::{Map, Value, json};

use super::events::{ClientError, ClientEvent, required_str};
use super::items::{AudioSource, Item, audio_ms, client_item};
use super::response::ResponseRequest;
use super::session_config::{apply_update, validate_max_tokens, validate_modalities};
use super::session_limits::check_update_size;
use super::{Action, Conversation, SessionType, Transport, input::Pending};
use crate::model::{self, ModelKind};

/// Client event types this server handles, for the unknown-type error message.
const CLIENT_EVENTS: &[&str] = &[
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

type Obj = Map<String, Value>;

impl Conversation {
    /// Handles one client JSON text frame.
    pub fn on_client_text(&mut self, text: &str) {
        // `session.created` must come first even if the transport reports a message before it
        // reports the channel open.
        self.on_channel_open();
        let event = match ClientEvent::parse(text) {
            Ok(event) => event,
            Err(e) => return self.out.error(e),
        };
        let result = event
            .kind()
            .and_then(|kind| self.dispatch(kind, &event.body, text.len()));
        if let Err(mut e) = result {
            e.event_id = event.event_id;
            self.out.error(e);
        }
    }

    /// `len`: the event's size as received.
    fn dispatch(&mut self, kind: &str, obj: &Obj, len: usize) -> Result<(), ClientError> {
        match kind {
            "session.update" => self.session_update(obj, len),
            "input_audio_buffer.append" => self.input_append(obj),
            "input_audio_buffer.commit" => self.input_commit(),
            "input_audio_buffer.clear" => {
                self.input.clear();
                self.out.act(Action::ClearInput);
                self.out.emit("input_audio_buffer.cleared", json!({}));
                Ok(())
            }
            "conversation.item.create" => self.item_create(obj),
            "conversation.item.retrieve" => {
                let id = required_str(obj, "item_id", "item_id")?;
                let item = self
                    .items
                    .get(id)
                    .ok_or_else(|| not_found(id))?
                    .value
                    .clone();
                self.out
                    .emit("conversation.item.retrieved", json!({ "item": item }));
                Ok(())
            }
            "conversation.item.delete" => self.item_delete(obj),
            "conversation.item.truncate" => self.item_truncate(obj),
            "response.create" => self.response_create(obj),
            "response.cancel" => self.response_cancel(obj),
            "output_audio_buffer.clear" if self.transport == Transport::WebSocket => {
                Err(ClientError::invalid(
                    "type",
                    "'output_audio_buffer.clear' is only supported for WebRTC; on a WebSocket the \
                     client plays the audio: send response.cancel and conversation.item.truncate",
                ))
            }
            "output_audio_buffer.clear" => {
                self.output_clear();
                Ok(())
            }
            other => Err(ClientError::invalid(
                "type",
                format!("'{other}' (supported: {})", CLIENT_EVENTS.join(", ")),
            )),
        }
    }

    fn session_update(&mut self, obj: &Obj, len: usize) -> Result<(), ClientError> {
        check_update_size(len)?;
        let update = obj
            .get("session")
            .ok_or_else(|| ClientError::missing("session"))?;
        let next = apply_update(&self.config, update, self.audio_produced)?;
        let switch_to = match update["model"].as_str().map(ModelKind::parse) {
            Some(Err(e)) => return Err(ClientError::invalid("session.model", e)),
            Some(Ok(Some(kind))) if kind != self.model.kind() => {
                if let ModelKind::Script(name) = &kind {
                    model::script::library::find(name)
                        .map_err(|e| ClientError::invalid("session.model", e))?;
                }
                Some(kind)
            }
            _ => None,
        };
        if let Some(kind) = switch_to {
            self.model = model::build(&kind);
        }
        self.config = next;
        let session = self.session_object();
        self.out
            .emit("session.updated", json!({ "session": session }));
        Ok(())
    }

    /// On WebRTC audio arrives as RTP, and appended audio is only measured, which is all a
    /// commit of it needs (the models answer it in words, since the media side never holds
    /// it). On a WebSocket appended audio *is* the input: the media side decodes it and reports
    /// it like RTP (`on_input_audio`, VAD edges), so here it is only checked.
    fn input_append(&mut self, obj: &Obj) -> Result<(), ClientError> {
        let b64 = required_str(obj, "audio", "audio")?;
        let ms = audio_ms(b64, &self.config["audio"]["input"]["format"])
            .ok_or_else(|| ClientError::invalid("audio", "not valid base64"))?;
        if self.transport == Transport::WebRtc {
            self.input.appended_ms = self.input.appended_ms.saturating_add(ms);
        }
        Ok(())
    }

    /// A manual commit never starts a response, even in VAD mode, as the service documents.
    fn input_commit(&mut self) -> Result<(), ClientError> {
        let whole = self.transport == Transport::WebSocket;
        let Some(pending) = self.input.take_pending(whole) else {
            return Err(ClientError::new(
                "input_audio_buffer_commit_empty",
                "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio.",
            ));
        };
        match pending {
            Pending::Span {
                item_id,
                start_ms,
                end_ms,
            } => {
                let id = item_id.unwrap_or_else(|| self.new_id("item"));
                self.commit_user_audio(id, AudioSource::Input { start_ms, end_ms });
            }
            Pending::Appended { ms } => {
                let id = self.new_id("item");
                self.commit_user_audio(id, AudioSource::Appended { ms });
            }
        }
        Ok(())
    }

    fn item_create(&mut self, obj: &Obj) -> Result<(), ClientError> {
        let raw = obj
            .get("item")
            .ok_or_else(|| ClientError::missing("item"))?;
        let previous = match obj.get("previous_item_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => return Err(ClientError::wrong_type("previous_item_id", "a string")),
        };
        if let Some(p) = previous
            && p != "root"
            && self.items.get(p).is_none()
        {
            return Err(ClientError::invalid(
                "previous_item_id",
                format!("item '{p}' does not exist in the conversation"),
            ));
        }
        let format = self.config["audio"]["input"]["format"].clone();
        let id_hint = raw["id"].as_str().map(str::to_owned);
        if let Some(id) = &id_hint
            && self.items.get(id).is_some()
        {
            return Err(ClientError::new(
                "duplicate_item_id",
                format!("Item with id '{id}' already exists."),
            )
            .param("item.id"));
        }
        let item = client_item(raw, || self.new_id("item"), &format)?;
        let value = item.value.clone();
        let previous = self.items.insert_after(previous, item)?;
        let body = json!({ "previous_item_id": previous, "item": value });
        self.out.emit("conversation.item.added", body.clone());
        self.out.emit("conversation.item.done", body);
        Ok(())
    }

    fn item_delete(&mut self, obj: &Obj) -> Result<(), ClientError> {
        let id = required_str(obj, "item_id", "item_id")?;
        self.items.get(id).ok_or_else(|| not_found(id))?;
        self.refuse_if_in_progress(id)?;
        self.items.remove(id);
        self.out
            .emit("conversation.item.deleted", json!({ "item_id": id }));
        Ok(())
    }

    /// Cuts an assistant audio item to `audio_end_ms`, keeping the transcript words heard by
    /// then. The service documents that truncation deletes the transcript so no unheard text
    /// stays in context; we know each word's time, so we keep exactly the heard prefix, which
    /// meets that intent and keeps the SDK's history readable.
    fn item_truncate(&mut self, obj: &Obj) -> Result<(), ClientError> {
        let id = required_str(obj, "item_id", "item_id")?.to_owned();
        let index = obj
            .get("content_index")
            .ok_or_else(|| ClientError::missing("content_index"))?
            .as_u64()
            .ok_or_else(|| ClientError::wrong_type("content_index", "a non-negative integer"))?
            as usize;
        let end_ms = obj
            .get("audio_end_ms")
            .ok_or_else(|| ClientError::missing("audio_end_ms"))?
            .as_u64()
            .ok_or_else(|| ClientError::wrong_type("audio_end_ms", "a non-negative integer"))?;
        self.refuse_if_in_progress(&id)?;
        let item = self.items.get_mut(&id).ok_or_else(|| not_found(&id))?;
        if item.role() != Some("assistant")
            || item.value["content"][index]["type"] != "output_audio"
        {
            return Err(ClientError::invalid(
                "content_index",
                "only an assistant item's output_audio content can be truncated",
            ));
        }
        let (words, audio_ms) = match &item.origin {
            AudioSource::Assistant { words, audio_ms } => (words.clone(), *audio_ms),
            _ => (Vec::new(), 0),
        };
        if end_ms > audio_ms {
            return Err(ClientError::invalid(
                "audio_end_ms",
                format!("{end_ms} is longer than the item's {audio_ms} ms of audio"),
            ));
        }
        let kept = super::response::heard_words(&words, end_ms, audio_ms);
        let words: Vec<String> = words[..kept].to_vec();
        item.value["content"][index]["transcript"] = Value::from(words.join(" "));
        item.origin = AudioSource::Assistant {
            words,
            audio_ms: end_ms,
        };
        let body = json!({ "item_id": id, "content_index": index, "audio_end_ms": end_ms });
        self.out.emit("conversation.item.truncated", body);
        Ok(())
    }

    fn refuse_if_in_progress(&self, id: &str) -> Result<(), ClientError> {
        match &self.active {
            Some(r) if r.item_id == id && r.in_conversation => Err(ClientError::new(
                "item_in_progress",
                format!(
                    "Item '{id}' belongs to response {} which is still in progress.",
                    r.id
                ),
            )
            .param("item_id")),
            _ => Ok(()),
        }
    }

    /// Always answered: `response.created` … `response.done`, or an error echoing `event_id`
    /// (the SDK holds every later `response.create` until one of those arrives).
    fn response_create(&mut self, obj: &Obj) -> Result<(), ClientError> {
        if self.session_type == SessionType::Transcription {
            return Err(ClientError::invalid(
                "type",
                "a transcription session has no responses; open the WebSocket with ?model= for a conversation",
            ));
        }
        let request = self.parse_response_request(obj.get("response"))?;
        if let Some(active) = &self.active {
            return Err(ClientError::new(
                "conversation_already_has_active_response",
                format!(
                    "Conversation already has an active response in progress: {}. Wait until the response is finished before creating a new one.",
                    active.id
                ),
            ));
        }
        self.start_response(request);
        Ok(())
    }

    fn parse_response_request(&self, raw: Option<&Value>) -> Result<ResponseRequest, ClientError> {
        let mut req = ResponseRequest::default();
        let r = match raw {
            None | Some(Value::Null) => return Ok(req),
            Some(Value::Object(r)) => r,
            Some(_) => return Err(ClientError::wrong_type("response", "an object")),
        };
        match r.get("conversation") {
            None | Some(Value::Null) => {}
            Some(v) if v == "auto" => {}
            Some(v) if v == "none" => req.out_of_band = true,
            Some(v) => return Err(ClientError::invalid("response.conversation", v)),
        }
        match r.get("instructions") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => req.instructions = Some(s.clone()),
            Some(_) => return Err(ClientError::wrong_type("response.instructions", "a string")),
        }
        if let Some(m) = r.get("output_modalities").filter(|v| !v.is_null()) {
            validate_modalities(m, "response.output_modalities")?;
            req.text_only = Some(m[0] == "text");
        }
        match &r.get("audio").unwrap_or(&Value::Null)["output"]["voice"] {
            Value::Null => {}
            Value::String(v) => req.voice = Some(v.clone()),
            Value::Object(v) if v.get("id").is_some_and(Value::is_string) => {
                req.voice = Some(v["id"].as_str().unwrap_or_default().to_owned());
            }
            other => return Err(ClientError::invalid("response.audio.output.voice", other)),
        }
        match r.get("metadata") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) if m.len() <= 16 => {
                req.metadata = Some(Value::Object(m.clone()))
            }
            Some(other) => return Err(ClientError::invalid("response.metadata", other)),
        }
        if let Some(m) = r.get("max_output_tokens").filter(|v| !v.is_null()) {
            validate_max_tokens(m, "response.max_output_tokens")?;
            req.max_output_tokens = Some(m.clone());
        }
        match r.get("input") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => req.input = Some(self.resolve_input(items)?),
            Some(_) => return Err(ClientError::wrong_type("response.input", "an array")),
        }
        match r.get("tools") {
            None | Some(Value::Null) => {}
            Some(Value::Array(tools)) => {
                if let Some(i) = tools.iter().position(|t| !t.is_object()) {
                    return Err(ClientError::wrong_type(
                        &format!("response.tools[{i}]"),
                        "an object",
                    ));
                }
                req.tools = Some(tools.clone());
            }
            Some(_) => return Err(ClientError::wrong_type("response.tools", "an array")),
        }
        match r.get("tool_choice") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if ["auto", "none", "required"].contains(&s.as_str()) => {
                req.tool_choice = Some(Value::from(s.as_str()));
            }
            Some(v @ Value::Object(_)) => req.tool_choice = Some(v.clone()),
            Some(other) => return Err(ClientError::invalid("response.tool_choice", other)),
        }
        Ok(req)
    }

    /// `response.input` items: references to conversation items, or inline items (validated
    /// like `conversation.item.create`, never stored).
    fn resolve_input(&self, raw: &[Value]) -> Result<Vec<Item>, ClientError> {
        let format = &self.config["audio"]["input"]["format"];
        raw.iter()
            .enumerate()
            .map(|(i, v)| {
                if v["type"] == "item_reference" {
                    let id = v["id"]
                        .as_str()
                        .ok_or_else(|| ClientError::missing(&format!("response.input[{i}].id")))?;
                    self.items.get(id).cloned().ok_or_else(|| not_found(id))
                } else {
                    client_item(v, || format!("item_input_{i}"), format)
                }
            })
            .collect()
    }

    fn response_cancel(&mut self, obj: &Obj) -> Result<(), ClientError> {
        let wanted = match obj.get("response_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => return Err(ClientError::wrong_type("response_id", "a string")),
        };
        let matches = self
            .active
            .as_ref()
            .is_some_and(|r| wanted.is_none_or(|w| w == r.id));
        if !matches {
            return Err(ClientError::new(
                "response_cancel_not_active",
                "Cancellation failed: no active response found.",
            ));
        }
        self.cancel_and_clear("client_cancelled");
        self.after_response();
        Ok(())
    }

    /// Stops whatever is playing. A response still in progress is cancelled like
    /// `response.cancel` (one `response.done`, whichever of cancel/clear comes first); with
    /// nothing playing (the SDK's `interrupt()` always sends a clear, even after a cancel or
    /// after playback ended) the clear is still acknowledged, naming the latest response.
    fn output_clear(&mut self) {
        if self.active.is_some() {
            self.cancel_and_clear("client_cancelled");
            self.after_response();
        } else {
            let id = self.last_response_id.clone();
            self.emit_output_buffer("output_audio_buffer.cleared", id);
        }
    }
}

fn not_found(id: &str) -> ClientError {
    ClientError::new(
        "item_not_found",
        format!("The item with id '{id}' does not exist in the conversation."),
    )
    .param("item_id")
}
