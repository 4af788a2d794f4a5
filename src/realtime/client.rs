//! Client events: parse, validate, then act. Every handler validates completely before it emits
//! anything, so a refused event leaves no partial output and no state change; the dispatcher
//! turns the refusal into an `error` echoing the client's `event_id`, and the session goes on.

use serde_json::Value;

use super::client_event::decode_at;
use super::client_event::{
    ConversationItemCreate, ConversationItemTruncate, InputAudioBufferAppend, ItemRef,
    RealtimeClientEvent, ResponseCancel, ResponseCreate,
};
use super::events::{ClientError, ClientEvent};
use super::items::{AudioSource, Item, audio_ms, client_item};
use super::response::ResponseRequest;
use super::server_event::{ItemInPlace, RealtimeServerEvent};
use super::session_config::{
    AudioFormat, MaxTokens, Modality, SessionUpdate, Voice, check_format, check_max_tokens,
    check_modalities,
};
use super::session_limits::{check_session, check_update_size};
use super::{Action, Conversation, SessionType, Transport, input::Pending};
use crate::model::{self, ModelKind};

impl Conversation {
    /// Handles one client JSON text frame.
    pub fn on_client_text(&mut self, text: &str) {
        // `session.created` must come first even if the transport reports a message before it
        // reports the channel open.
        self.on_channel_open();
        let ClientEvent { body, event_id } = match ClientEvent::parse(text) {
            Ok(event) => event,
            Err(e) => return self.out.error(e),
        };
        let kind = body.get("type").and_then(Value::as_str).map(str::to_owned);
        let event = match kind {
            Some(kind) => RealtimeClientEvent::decode(&kind, body),
            None => Err(ClientError::missing("type")),
        };
        let result = event.and_then(|event| {
            if let RealtimeClientEvent::SessionUpdate(_) = event
                && self.transport == super::Transport::WebRtc
            {
                check_update_size(text.len())?;
            }
            self.dispatch(event)
        });
        if let Err(mut e) = result {
            e.event_id = event_id;
            self.out.error(e);
        }
    }

    /// Handles one client event built by the caller (Live, which sits on this engine); an error
    /// echoes `event_id`.
    pub fn on_client_event(&mut self, event: RealtimeClientEvent, event_id: Option<String>) {
        self.on_channel_open();
        if let Err(mut e) = self.dispatch(event) {
            e.event_id = event_id;
            self.out.error(e);
        }
    }

    fn dispatch(&mut self, event: RealtimeClientEvent) -> Result<(), ClientError> {
        use RealtimeClientEvent as E;
        match event {
            E::SessionUpdate(u) => self.session_update(&u.session),
            E::InputAudioBufferAppend(a) => self.input_append(a),
            E::InputAudioBufferCommit => self.input_commit(),
            E::InputAudioBufferClear => {
                self.input.clear();
                self.out.act(Action::ClearInput);
                self.out.emit(RealtimeServerEvent::InputCleared);
                Ok(())
            }
            E::ConversationItemCreate(c) => self.item_create(c),
            E::ConversationItemRetrieve(ItemRef { item_id }) => {
                let item = self
                    .items
                    .get(&item_id)
                    .ok_or_else(|| not_found(&item_id))?
                    .value
                    .clone();
                self.out
                    .emit(RealtimeServerEvent::ConversationItemRetrieved { item });
                Ok(())
            }
            E::ConversationItemDelete(ItemRef { item_id }) => self.item_delete(&item_id),
            E::ConversationItemTruncate(t) => self.item_truncate(t),
            E::ResponseCreate(c) => self.response_create(c),
            E::ResponseCancel(c) => self.response_cancel(c),
            E::OutputAudioBufferClear if self.transport == Transport::WebSocket => {
                Err(ClientError::invalid(
                    "type",
                    "'output_audio_buffer.clear' is only supported for WebRTC; on a WebSocket the \
                     client plays the audio: send response.cancel and conversation.item.truncate",
                ))
            }
            E::OutputAudioBufferClear => {
                self.output_clear();
                Ok(())
            }
        }
    }

    fn session_update(&mut self, update: &Value) -> Result<(), ClientError> {
        self.apply_session(update)?;
        let session = self.session_object();
        self.out
            .emit(RealtimeServerEvent::SessionUpdated { session });
        self.sync_mcp();
        Ok(())
    }

    /// The session a call starts with (an ephemeral key's, a `/calls` request's `session`
    /// part), applied before `session.created` with the rules of `session.update`, so it is
    /// in force from the first turn and refused for what an update would be refused for.
    pub fn start_session(&mut self, session: &Value) -> Result<(), ClientError> {
        self.apply_session(session)
    }

    /// A session body over the current config, the model switched if it names another of
    /// ours; nothing changes on an error.
    fn apply_session(&mut self, update: &Value) -> Result<(), ClientError> {
        let update = SessionUpdate::decode(update)?;
        let named = update.model.clone();
        let next = self.config.updated(update, self.audio_produced)?;
        // The size bounds come from the data channel's message size: a WebSocket carries
        // messages of up to 16 MiB, so its sessions are not held to them.
        if self.transport == super::Transport::WebRtc {
            check_session(&next.instructions, &next.tools, &next)?;
        }
        let switch_to = match named.as_deref().map(ModelKind::parse) {
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
        Ok(())
    }

    /// On WebRTC audio arrives as RTP, and appended audio is only measured, which is all a
    /// commit of it needs (the models answer it in words, since the media side never holds
    /// it). On a WebSocket appended audio *is* the input: the media side decodes it and reports
    /// it like RTP (`on_input_audio`, VAD edges), so here it is only checked.
    fn input_append(&mut self, a: InputAudioBufferAppend) -> Result<(), ClientError> {
        let ms = audio_ms(&a.audio, self.config.audio.input.format)
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

    fn item_create(&mut self, c: ConversationItemCreate) -> Result<(), ClientError> {
        let raw = &c.item;
        let previous = c.previous_item_id.as_deref();
        if let Some(p) = previous
            && p != "root"
            && self.items.get(p).is_none()
        {
            return Err(ClientError::invalid(
                "previous_item_id",
                format!("item '{p}' does not exist in the conversation"),
            ));
        }
        let format = self.config.audio.input.format;
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
        let item = client_item(raw, || self.new_id("item"), format)?;
        // As the service does: an output must answer a call the conversation holds, or the
        // model would be handed an answer to nothing.
        if item.value["type"] == "function_call_output" {
            let call_id = &item.value["call_id"];
            let known = self
                .items
                .iter()
                .any(|i| i.value["type"] == "function_call" && i.value["call_id"] == *call_id);
            if !known {
                return Err(ClientError::new(
                    "invalid_tool_call_id",
                    format!(
                        "Tool call ID '{}' not found in conversation.",
                        call_id.as_str().unwrap_or_default()
                    ),
                ));
            }
        }
        let approval = match (&item.value["type"], &item.value["approval_request_id"]) {
            (t, Value::String(request)) if t == "mcp_approval_response" => {
                if !self.awaits_approval(request) {
                    return Err(ClientError::new(
                        "invalid_approval_request_id",
                        format!("No pending MCP approval request with id '{request}'."),
                    )
                    .param("item.approval_request_id"));
                }
                Some((request.clone(), item.value["approve"] == true))
            }
            _ => None,
        };
        let value = item.value.clone();
        let previous = self.items.insert_after(previous, item)?;
        let placed = ItemInPlace {
            previous_item_id: previous,
            item: value,
        };
        self.out
            .emit(RealtimeServerEvent::ConversationItemAdded(placed.clone()));
        self.out
            .emit(RealtimeServerEvent::ConversationItemDone(placed));
        if let Some((request, approve)) = approval {
            self.on_approval(&request, approve);
        }
        Ok(())
    }

    fn item_delete(&mut self, id: &str) -> Result<(), ClientError> {
        self.items.get(id).ok_or_else(|| not_found(id))?;
        self.refuse_if_in_progress(id)?;
        self.items.remove(id);
        self.out.emit(RealtimeServerEvent::ConversationItemDeleted {
            item_id: id.to_owned(),
        });
        Ok(())
    }

    /// Cuts an assistant audio item to `audio_end_ms`, keeping the transcript words heard by
    /// then. The service documents that truncation deletes the transcript so no unheard text
    /// stays in context; we know each word's time, so we keep exactly the heard prefix, which
    /// meets that intent and keeps the SDK's history readable.
    fn item_truncate(&mut self, t: ConversationItemTruncate) -> Result<(), ClientError> {
        let ConversationItemTruncate {
            item_id: id,
            content_index,
            audio_end_ms: end_ms,
        } = t;
        let index = usize::try_from(content_index).unwrap_or(usize::MAX);
        self.refuse_if_in_progress(&id)?;
        self.truncate_item(&id, index, end_ms)
    }

    /// The truncation itself, whoever asks: the client, or the server for a playout it
    /// stopped (see `clear_playout`).
    pub(super) fn truncate_item(
        &mut self,
        id: &str,
        index: usize,
        end_ms: u64,
    ) -> Result<(), ClientError> {
        let item = self.items.get_mut(id).ok_or_else(|| not_found(id))?;
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
        self.out
            .emit(RealtimeServerEvent::ConversationItemTruncated {
                item_id: id.to_owned(),
                content_index: index,
                audio_end_ms: end_ms,
            });
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
    fn response_create(&mut self, c: ResponseCreate) -> Result<(), ClientError> {
        if self.session_type() == SessionType::Transcription {
            return Err(ClientError::invalid(
                "type",
                "a transcription session has no responses; open the WebSocket with ?model= for a conversation",
            ));
        }
        let request = self.parse_response_request(c.response.as_ref())?;
        if let Some(active) = &self.active {
            let text_only = request.text_only.unwrap_or(self.config.text_only());
            if request.out_of_band && text_only {
                self.respond_beside(request);
                return Ok(());
            }
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
        let p: ResponseParams = match raw {
            None | Some(Value::Null) => return Ok(ResponseRequest::default()),
            Some(r) => decode_at("response", r.clone())?,
        };
        if let Some(m) = &p.output_modalities {
            check_modalities(m, "response.output_modalities")?;
        }
        if let Some(m) = p.max_output_tokens {
            check_max_tokens(m, "response.max_output_tokens")?;
        }
        let output = p.audio.and_then(|a| a.output).unwrap_or_default();
        if let Some(f) = output.format {
            check_format(f, "response.audio.output.format")?;
        }
        if let Some(m) = &p.metadata
            && m.len() > 16
        {
            return Err(ClientError::invalid(
                "response.metadata",
                format!("{} keys (at most 16)", m.len()),
            ));
        }
        let input = match &p.input {
            Some(items) => Some(self.resolve_input(items)?),
            None => None,
        };
        Ok(ResponseRequest {
            instructions: p.instructions,
            text_only: p.output_modalities.map(|m| m == [Modality::Text]),
            voice: output.voice.map(|v| v.name().to_owned()),
            format: output.format,
            metadata: p.metadata,
            max_output_tokens: p.max_output_tokens,
            out_of_band: p.conversation == Some(ConversationMode::None),
            input,
            tools: p.tools,
            tool_choice: p.tool_choice,
            parallel_tool_calls: p.parallel_tool_calls,
            beside: false,
            approved_mcp: None,
        })
    }

    /// `response.input` items: references to conversation items, or inline items (validated
    /// like `conversation.item.create`, never stored).
    fn resolve_input(&self, raw: &[Value]) -> Result<Vec<Item>, ClientError> {
        let format = self.config.audio.input.format;
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

    fn response_cancel(&mut self, c: ResponseCancel) -> Result<(), ClientError> {
        let wanted = c.response_id.as_deref();
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
        let cancelled = self.active.is_some();
        if cancelled {
            self.cancel_and_clear("client_cancelled");
        }
        // A finished response still playing is cleared and truncated to what was heard.
        let cleared = self.clear_playout();
        if cancelled {
            self.after_response();
        } else if !cleared {
            let id = self.last_response_id.clone();
            self.emit_output_buffer(RealtimeServerEvent::OutputBufferCleared { response_id: id });
        }
    }
}

/// `RealtimeResponseCreateParams` (the `openai` package's types): a key it does not have is
/// refused with its path (`unknown_parameter`), as `session.update` refuses one, rather than
/// ignored: a typo must not look like a default. `null` is the same as absent: the session's.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ResponseParams {
    conversation: Option<ConversationMode>,
    instructions: Option<String>,
    output_modalities: Option<Vec<Modality>>,
    audio: Option<ResponseAudio>,
    metadata: Option<serde_json::Map<String, Value>>,
    max_output_tokens: Option<MaxTokens>,
    /// Item references or inline items, resolved against the conversation.
    input: Option<Vec<Value>>,
    tools: Option<Vec<crate::model::tools::Tool>>,
    tool_choice: Option<crate::model::tools::ToolChoice>,
    parallel_tool_calls: Option<bool>,
    /// Accepted for the round trip of an SDK's config; nothing here acts on them.
    prompt: Option<serde_json::Map<String, Value>>,
    reasoning: Option<serde_json::Map<String, Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum ConversationMode {
    Auto,
    None,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ResponseAudio {
    output: Option<ResponseAudioOutput>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ResponseAudioOutput {
    format: Option<AudioFormat>,
    voice: Option<Voice>,
}

fn not_found(id: &str) -> ClientError {
    ClientError::new(
        "item_not_found",
        format!("The item with id '{id}' does not exist in the conversation."),
    )
    .param("item_id")
}
