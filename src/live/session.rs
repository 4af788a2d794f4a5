//! One Live session's protocol state: Live client events in, Live server events out, over the
//! Realtime turn engine (see the module docs of [`super`]).
//!
//! Like the engine it wraps, it owns no I/O and no clock: the host sets the session time
//! ([`LiveSession::tick`], milliseconds since the session was created) before feeding it, and
//! the timeline fields (`start_ms`, `end_ms`, `offset_ms`) come from that.

use std::collections::VecDeque;

use serde_json::{Map, Value, json};

use super::config::{self, DelegationTarget, LiveStart, MAX_APPEND_CHARS};
use crate::model::ModelKind;
use crate::realtime::{Action, ClientError, Conversation, Transport};

/// Where a client event came from. The frontend's data channel obeys the session's
/// `client.data_channel` permissions; a sideband (the app's trusted backend) does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    DataChannel,
    Sideband,
}

/// What the model says on its own when it delegates, unless the app's commentary or thinking
/// arrives within `acknowledgement_delay_ms`.
pub const ACKNOWLEDGEMENT: &str = "One moment.";
/// The function the turn engine is given under client delegation: a model's call to it (or,
/// in a script, to any function) is a delegation to the app.
const DELEGATE_TOOL: &str = "delegate";
/// Output transcript deltas are released as their words are played; each is stamped with the
/// span its word takes at the engine's pacing estimate.
const MS_PER_WORD: u64 = 400;

struct Delegation {
    id: String,
    /// The turn engine's function call this delegation is.
    call_id: String,
    target: DelegationTarget,
    answered: bool,
}

/// A `response.create` on the Responses backend: the turn engine's next response is its
/// answer, and its output is also reported as nested Responses events.
struct BackendTurn {
    delegation_id: Option<String>,
    client_event_id: Option<String>,
    response_id: Option<String>,
    text: String,
    /// Function calls it made, reported again in its `response.completed`.
    calls: Vec<Value>,
}

pub struct LiveSession {
    conv: Conversation,
    /// The `SessionResource` as `session.started`/`session.updated` report it.
    session: Value,
    frames: VecDeque<String>,
    actions: VecDeque<Action>,
    next_event: u64,
    next_id: u64,
    now_ms: u64,
    started: bool,
    closed: bool,
    muted: bool,
    /// Startup history ends with a user message: the model answers it once the channel opens.
    answer_history: bool,
    /// Input time of the turn being heard (speech start, speech end).
    turn_span: (u64, u64),
    /// Session time minus input time: input audio is timed from the caller's first packet,
    /// Live's timeline from the session's creation.
    input_offset: u64,
    /// The turn's transcript words, held until it is complete so their times can split the
    /// turn.
    input_words: Vec<String>,
    /// Text the model is to say once it is not speaking: commentary and acknowledgements.
    to_say: VecDeque<String>,
    /// An acknowledgement is due at this session time unless commentary or thinking comes first.
    ack_due: Option<u64>,
    delegations: Vec<Delegation>,
    backend: Option<BackendTurn>,
}

impl LiveSession {
    /// `id` is the session's `live_…` id; `expires_at` is in Unix seconds. On a WebSocket the
    /// audio travels as events (`session.input_audio.append`, `session.output_audio.delta`) in
    /// the session's `audio.format`.
    pub fn new(
        id: String,
        model: &ModelKind,
        start: LiveStart,
        expires_at: u64,
        transport: Transport,
    ) -> Self {
        let mut session = json!({"id": id, "expires_at": expires_at, "status": "active"});
        for (k, v) in start.session.as_object().into_iter().flatten() {
            session[k] = v.clone();
        }
        let mut conv = Conversation::new(id, model);
        conv.set_transport(transport);
        let mut s = LiveSession {
            conv,
            session,
            frames: VecDeque::new(),
            actions: VecDeque::new(),
            next_event: 0,
            next_id: 0,
            now_ms: 0,
            started: false,
            closed: false,
            muted: false,
            answer_history: false,
            turn_span: (0, 0),
            input_offset: 0,
            input_words: Vec::new(),
            to_say: VecDeque::new(),
            ack_due: None,
            delegations: Vec::new(),
            backend: None,
        };
        s.configure_engine();
        s.load_history();
        // The engine's own `session.created`/`updated` and item events are not Live events.
        while s.conv.poll_frame().is_some() {}
        s
    }

    /// The turn engine, for the media side (VAD edges, playback progress, frames).
    pub fn conversation_mut(&mut self) -> &mut Conversation {
        &mut self.conv
    }

    pub fn conversation(&self) -> &Conversation {
        &self.conv
    }

    pub fn session(&self) -> &Value {
        &self.session
    }

    /// The input is muted (`session.input_audio.mute`): the caller's audio must not reach the
    /// model.
    pub fn input_muted(&self) -> bool {
        self.muted
    }

    /// Sets the session time, in milliseconds since the session was created.
    pub fn tick(&mut self, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
    }

    /// When the session next needs [`LiveSession::on_timeout`] (session time, ms).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.ack_due
    }

    pub fn on_timeout(&mut self) {
        if self.ack_due.is_some_and(|t| t <= self.now_ms) {
            self.ack_due = None;
            self.say(ACKNOWLEDGEMENT.to_owned());
        }
    }

    /// The data channel opened: `session.started`, the first event; then an answer to startup
    /// history that ends with the user speaking.
    pub fn on_channel_open(&mut self) {
        self.start(None);
    }

    /// Starts the session: on WebRTC when the channel opens, on a WebSocket on `session.start`
    /// (whose `event_id` is `client_event_id`).
    pub fn start(&mut self, client_event_id: Option<&str>) {
        if self.started {
            return;
        }
        self.started = true;
        self.conv.on_channel_open();
        while self.conv.poll_frame().is_some() {}
        self.emit(
            "session.started",
            json!({"session": self.session}),
            client_event_id,
        );
        if let Some(dc) = self.session["client"]["data_channel"].as_object()
            && !dc.is_empty()
        {
            let message = format!(
                "This data channel may send {} and receives {}.",
                describe_permission(&dc.get("allowed_client_events").cloned()),
                describe_permission(&dc.get("allowed_server_events").cloned()),
            );
            self.emit(
                "info",
                json!({"code": "data_channel_permissions", "message": message}),
                None,
            );
        }
        if std::mem::take(&mut self.answer_history) {
            self.engine_event(json!({"type": "response.create"}));
        }
        self.pump();
    }

    /// `session.started` for one more client joining the session (a sideband).
    pub fn welcome_frame(&mut self) -> String {
        self.make("session.started", json!({"session": self.session}), None)
    }

    pub fn poll_frame(&mut self) -> Option<String> {
        self.pump();
        self.frames.pop_front()
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front().or_else(|| self.conv.poll_action())
    }

    /// The session hit its maximum duration: `session.closed` (`expired`), then the call ends.
    pub fn expire(&mut self) {
        self.close("expired", None);
    }

    /// Whether the frontend's data channel may receive this server event (`client.data_channel.
    /// allowed_server_events`); sidebands receive everything.
    pub fn data_channel_receives(&self, frame: &str) -> bool {
        let Some(allowed) = self.session["client"]["data_channel"]
            .get("allowed_server_events")
            .and_then(Value::as_array)
        else {
            return true;
        };
        let Ok(event) = serde_json::from_str::<Value>(frame) else {
            return false;
        };
        allowed.iter().any(|sel| {
            sel["type"] == event["type"]
                && (sel["response_event"].is_null()
                    || sel["response_event"] == event["event"]["type"])
        })
    }

    /// One client event, from the data channel or a sideband.
    pub fn on_client_text(&mut self, text: &str, origin: Origin) {
        let obj = match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(obj)) => obj,
            Ok(_) => {
                return self.error(
                    ClientError::new("invalid_json", "An event must be a JSON object."),
                    None,
                );
            }
            Err(e) => {
                let e =
                    ClientError::new("invalid_json", format!("Could not parse event JSON: {e}"));
                return self.error(e, None);
            }
        };
        let event_id = obj
            .get("event_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let result = match obj.get("type").and_then(Value::as_str) {
            None => Err(ClientError::missing("type")),
            Some(kind) if origin == Origin::DataChannel && !self.data_channel_sends(kind) => {
                Err(ClientError::new(
                    "event_not_permitted",
                    format!("This session's data channel may not send '{kind}' (client.data_channel.allowed_client_events)."),
                )
                .param("type"))
            }
            Some(_) if self.closed => Err(ClientError::new(
                "session_closed",
                "The session is closed.",
            )),
            Some(kind) => self.dispatch(kind, &obj, event_id.as_deref()),
        };
        if let Err(e) = result {
            self.error(e, event_id);
        }
        self.pump();
    }

    fn dispatch(
        &mut self,
        kind: &str,
        obj: &Map<String, Value>,
        event_id: Option<&str>,
    ) -> Result<(), ClientError> {
        match kind {
            "session.update" => {
                let update = obj
                    .get("session")
                    .ok_or_else(|| ClientError::missing("session"))?;
                let next = config::apply_update(&self.session, update)?;
                let delegation_changed = next["delegation"] != self.session["delegation"];
                self.session = next;
                if delegation_changed {
                    self.configure_engine();
                }
                self.emit(
                    "session.updated",
                    json!({"session": self.session}),
                    event_id,
                );
            }
            "session.input_audio.mute" => {
                self.muted = true;
                self.emit("session.input_audio.muted", json!({}), event_id);
            }
            "session.input_audio.unmute" => {
                self.muted = false;
                self.emit("session.input_audio.unmuted", json!({}), event_id);
            }
            "session.instructions.append"
            | "session.thinking.append"
            | "session.commentary.append" => {
                self.append(kind, obj, event_id)?;
            }
            "response.item.create" => {
                self.require_responses(kind)?;
                let item = match obj.get("item") {
                    Some(Value::Object(item)) => engine_item(item),
                    Some(_) => return Err(ClientError::wrong_type("item", "an object")),
                    None => return Err(ClientError::missing("item")),
                };
                self.engine_event(
                    json!({"type": "conversation.item.create", "event_id": event_id, "item": item}),
                );
            }
            "response.create" => {
                self.require_responses(kind)?;
                if self.conv.active_response().is_some() {
                    return Err(ClientError::new(
                        "response_in_progress",
                        "The Responses backend is still answering; wait for its response.completed.",
                    ));
                }
                let delegation_id = self
                    .delegations
                    .iter()
                    .rev()
                    .find(|d| d.target == DelegationTarget::Responses)
                    .map(|d| d.id.clone());
                self.backend = Some(BackendTurn {
                    delegation_id,
                    client_event_id: event_id.map(str::to_owned),
                    response_id: None,
                    text: String::new(),
                    calls: Vec::new(),
                });
                self.engine_event(json!({"type": "response.create", "event_id": event_id}));
            }
            "session.close" => self.close("close_requested", event_id),
            "session.start" => {
                return Err(ClientError::new(
                    "session_already_started",
                    "The session has started: session.start is only the first message of a Live WebSocket (a WebRTC session starts when it is created).",
                ));
            }
            "session.input_audio.append" if self.conv.transport() == Transport::WebSocket => {
                // The host feeds the audio to the media side; appends have no acknowledgement.
                use base64::Engine as _;
                match obj.get("audio") {
                    Some(Value::String(b64)) => {
                        if base64::engine::general_purpose::STANDARD
                            .decode(b64)
                            .is_err()
                        {
                            return Err(ClientError::invalid("audio", "it is not valid base64"));
                        }
                    }
                    Some(_) => return Err(ClientError::wrong_type("audio", "a base64 string")),
                    None => return Err(ClientError::missing("audio")),
                }
            }
            "session.input_audio.append" => {
                return Err(ClientError::new(
                    "invalid_transport",
                    "On WebRTC the caller's audio travels on the audio track; session.input_audio.append is for the primary WebSocket.",
                ));
            }
            "session.output_audio.fixture.play" => {
                return Err(ClientError::new(
                    "unsupported_event",
                    "voice-edge does not implement audio fixtures yet; on OpenAI they play over a primary WebSocket or a sideband.",
                ));
            }
            "transport.dtmf.send" => {
                return Err(ClientError::new(
                    "invalid_transport",
                    "DTMF needs a SIP session's sideband.",
                ));
            }
            "decision.create" | "decision.item.create" | "decision.item.delete" => {
                return Err(ClientError::new(
                    "unsupported_event",
                    "voice-edge does not implement Decisions delegation.",
                ));
            }
            other => {
                return Err(ClientError::invalid(
                    "type",
                    format!("'{other}' is not a Live client event"),
                ));
            }
        }
        Ok(())
    }

    /// `session.instructions.append`, `session.thinking.append`, `session.commentary.append`.
    fn append(
        &mut self,
        kind: &str,
        obj: &Map<String, Value>,
        event_id: Option<&str>,
    ) -> Result<(), ClientError> {
        let content = match obj.get("content") {
            Some(Value::String(s)) if s.trim().is_empty() => {
                return Err(ClientError::invalid("content", "it is empty"));
            }
            Some(Value::String(s)) if s.chars().count() > MAX_APPEND_CHARS => {
                return Err(ClientError::invalid(
                    "content",
                    "it is limited to 500 tokens",
                ));
            }
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(ClientError::wrong_type("content", "a string")),
            None => return Err(ClientError::missing("content")),
        };
        let delegation = match obj.get("delegation_id") {
            None => return Err(ClientError::missing("delegation_id")),
            Some(Value::Null) => None,
            Some(Value::String(id)) => {
                if DelegationTarget::of(&self.session) == DelegationTarget::Responses {
                    return Err(ClientError::invalid(
                        "delegation_id",
                        "delegation ids are not accepted with Responses delegation",
                    ));
                }
                match self.delegations.iter().position(|d| &d.id == id) {
                    Some(i) => Some(i),
                    None => {
                        return Err(ClientError::invalid(
                            "delegation_id",
                            format!("no delegation '{id}' in this session"),
                        ));
                    }
                }
            }
            Some(_) => return Err(ClientError::wrong_type("delegation_id", "a string or null")),
        };
        let acked = kind.replace(".append", ".appended");
        let at = json!({"start_ms": self.now_ms, "end_ms": self.now_ms});
        match kind {
            "session.instructions.append" => {
                self.engine_event(json!({"type": "conversation.item.create", "item": {
                    "type": "message", "role": "system",
                    "content": [{"type": "input_text", "text": content}]}}));
                self.emit(&acked, at, event_id);
            }
            "session.thinking.append" => {
                self.ack_due = None;
                self.emit(&acked, at, event_id);
            }
            _ => {
                self.ack_due = None;
                self.emit(&acked, at, event_id);
                let in_band = matches!(self.conv.model_kind(), ModelKind::Script(_));
                match delegation {
                    Some(i) if !self.delegations[i].answered => {
                        self.delegations[i].answered = true;
                        let call_id = self.delegations[i].call_id.clone();
                        self.engine_event(json!({"type": "conversation.item.create", "item": {
                            "type": "function_call_output", "call_id": call_id, "output": content}}));
                        if in_band {
                            // A script says what follows a delegation's result in its
                            // `tool_output` turn.
                            self.to_say.push_back(String::new());
                            self.say_next();
                            return Ok(());
                        }
                        self.say(content);
                    }
                    _ => self.say(content),
                }
            }
        }
        Ok(())
    }

    fn require_responses(&self, kind: &str) -> Result<(), ClientError> {
        if DelegationTarget::of(&self.session) == DelegationTarget::Responses {
            return Ok(());
        }
        Err(ClientError::new(
            "delegation_required",
            format!("'{kind}' needs Responses delegation (session.delegation.type 'responses')."),
        ))
    }

    fn close(&mut self, reason: &str, event_id: Option<&str>) {
        if self.closed {
            return;
        }
        self.closed = true;
        self.to_say.clear();
        self.ack_due = None;
        if let Some(r) = self.conv.active_response().map(str::to_owned) {
            self.actions.push_back(Action::StopAudio { response_id: r });
        }
        let body = json!({"reason": reason, "session": self.session, "usage": self.usage()});
        self.emit("session.closed", body, event_id);
        self.actions.push_back(Action::EndCall);
    }

    fn usage(&self) -> Value {
        json!({"seconds": self.now_ms as f64 / 1000.0})
    }

    /// Queues `text` for the model to say; an empty text answers in the conversation (a
    /// script's `tool_output` turn).
    fn say(&mut self, text: String) {
        self.to_say.push_back(text);
        self.say_next();
    }

    fn say_next(&mut self) {
        if self.closed || self.conv.active_response().is_some() {
            return;
        }
        let Some(text) = self.to_say.pop_front() else {
            return;
        };
        let event = if text.is_empty() {
            json!({"type": "response.create"})
        } else {
            // Out of band and with no input: the stubs say the instructions verbatim.
            json!({"type": "response.create", "response": {
                "conversation": "none", "input": [], "instructions": text}})
        };
        self.engine_event(event);
    }

    /// Configures the turn engine as a Live model behaves: it answers when the caller stops,
    /// yields when talked over, transcribes every turn, and delegates through a function call.
    fn configure_engine(&mut self) {
        let (tools, choice) = match DelegationTarget::of(&self.session) {
            DelegationTarget::Client => (
                vec![json!({
                    "type": "function",
                    "name": DELEGATE_TOOL,
                    "description": "Hand a task to the app.",
                    "parameters": {"type": "object", "properties": {"task": {"type": "string"}}},
                })],
                json!("auto"),
            ),
            DelegationTarget::Responses => {
                let r = &self.session["delegation"]["responses"];
                let tools: Vec<Value> = r["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|t| t["type"] == "function")
                    .map(|t| {
                        json!({"type": "function", "name": t["name"],
                               "description": t["description"].as_str().unwrap_or(""),
                               "parameters": if t["parameters"].is_object() { t["parameters"].clone() } else { json!({"type": "object", "properties": {}}) }})
                    })
                    .collect();
                let choice = match &r["tool_choice"] {
                    c @ (Value::String(_) | Value::Object(_)) => c.clone(),
                    _ => json!("auto"),
                };
                (tools, choice)
            }
        };
        let mut session = json!({
            "type": "realtime",
            "audio": {"input": {
                "transcription": {"model": "gpt-4o-transcribe"},
                "turn_detection": {"type": "server_vad", "create_response": true, "interrupt_response": true},
            }},
            "tools": tools,
            "tool_choice": choice,
        });
        if let Some(i) = self.session["instructions"].as_str() {
            session["instructions"] = Value::from(i);
        }
        let format = &self.session["audio"]["format"];
        if let Some(kind) = format["type"].as_str() {
            // Realtime's format objects: a rate only for PCM.
            let f = if kind == "audio/pcm" {
                json!({"type": kind, "rate": 24_000})
            } else {
                json!({"type": kind})
            };
            session["audio"]["input"]["format"] = f.clone();
            session["audio"]["output"] = json!({"format": f});
        }
        self.engine_event(json!({"type": "session.update", "session": session}));
    }

    /// Startup history becomes the engine's conversation (developer messages as system ones).
    fn load_history(&mut self) {
        let items = self.session["input"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for item in &items {
            let text = config::input_text(item);
            let (role, part) = match item["role"].as_str() {
                Some("developer") => ("system", "input_text"),
                Some("assistant") => ("assistant", "output_text"),
                _ => ("user", "input_text"),
            };
            self.engine_event(json!({"type": "conversation.item.create", "item": {
                "type": "message", "role": role, "content": [{"type": part, "text": text}]}}));
        }
        self.answer_history = items.last().is_some_and(|i| i["role"] == "user");
    }

    fn engine_event(&mut self, event: Value) {
        self.conv.on_client_text(&event.to_string());
    }

    /// Moves the turn engine's events into Live ones.
    fn pump(&mut self) {
        let heard = self.conv.input_heard_ms();
        if heard > 0 && self.now_ms > heard {
            self.input_offset = self.now_ms - heard;
        }
        while let Some(frame) = self.conv.poll_frame() {
            let Ok(ev) = serde_json::from_str::<Value>(&frame) else {
                continue;
            };
            self.translate(&ev);
        }
    }

    fn translate(&mut self, ev: &Value) {
        match ev["type"].as_str().unwrap_or_default() {
            "input_audio_buffer.speech_started" => {
                self.turn_span = (ev["audio_start_ms"].as_u64().unwrap_or(0), 0);
            }
            "input_audio_buffer.speech_stopped" => {
                self.turn_span.1 = ev["audio_end_ms"].as_u64().unwrap_or(self.turn_span.0);
            }
            "conversation.item.input_audio_transcription.delta" => {
                if let Some(d) = ev["delta"].as_str() {
                    self.input_words.push(d.to_owned());
                }
            }
            "conversation.item.input_audio_transcription.completed" => self.input_transcript(),
            "response.created" => {
                if let Some(b) = self.backend.as_mut().filter(|b| b.response_id.is_none()) {
                    let id = ev["response"]["id"].as_str().unwrap_or_default().to_owned();
                    b.response_id = Some(id.clone());
                    let model = self.session["delegation"]["responses"]["model"].clone();
                    let response = json!({"id": id, "object": "response", "status": "in_progress",
                                          "model": model, "output": []});
                    self.backend_event(json!({"type": "response.created", "response": response}));
                }
            }
            "response.output_audio_transcript.delta" | "response.output_text.delta" => {
                let delta = ev["delta"].as_str().unwrap_or_default();
                let words = delta.split_whitespace().count().max(1) as u64;
                let body = json!({"delta": delta, "start_ms": self.now_ms,
                                  "end_ms": self.now_ms + words * MS_PER_WORD});
                self.emit("session.output_transcript.delta", body, None);
                if let Some(b) = self
                    .backend
                    .as_mut()
                    .filter(|b| b.response_id.as_deref() == ev["response_id"].as_str())
                {
                    b.text.push_str(delta);
                    let item_id = ev["item_id"].clone();
                    self.backend_event(json!({"type": "response.output_text.delta", "item_id": item_id,
                                              "output_index": 0, "content_index": 0, "delta": delta}));
                }
            }
            // On a WebSocket the audio itself travels as events.
            "response.output_audio.delta" => {
                self.emit(
                    "session.output_audio.delta",
                    json!({"delta": ev["delta"]}),
                    None,
                );
            }
            "response.output_item.done" if ev["item"]["type"] == "function_call" => {
                self.delegate(&ev["item"]);
            }
            "response.done" => {
                let id = ev["response"]["id"].as_str();
                if let Some(b) = self.backend.take_if(|b| b.response_id.as_deref() == id) {
                    self.backend_done(b, &ev["response"]);
                }
                self.emit(
                    "session.usage.updated",
                    json!({"usage": self.usage()}),
                    None,
                );
                self.say_next();
            }
            "error" => self.engine_error(&ev["error"]),
            _ => {}
        }
    }

    /// The turn's words as `session.input_transcript.delta`s, each stamped with its share of
    /// the turn (input audio time).
    fn input_transcript(&mut self) {
        let words = std::mem::take(&mut self.input_words);
        let (start, end) = self.turn_span;
        let (start, end) = (
            start + self.input_offset,
            end.max(start) + self.input_offset,
        );
        let n = words.len().max(1) as u64;
        let span = end - start;
        for (i, w) in words.into_iter().enumerate() {
            let i = i as u64;
            let body = json!({"delta": w, "start_ms": start + span * i / n,
                              "end_ms": start + span * (i + 1) / n});
            self.emit("session.input_transcript.delta", body, None);
        }
    }

    /// The model called a function: a delegation to the app (client) or to the Responses
    /// backend, whose function call the app then sees as nested Responses events.
    fn delegate(&mut self, call: &Value) {
        let target = DelegationTarget::of(&self.session);
        let call_id = call["call_id"].as_str().unwrap_or_default().to_owned();
        if target == DelegationTarget::Responses
            && self
                .backend
                .as_ref()
                .is_some_and(|b| b.response_id.is_some())
        {
            // The backend, answering the app's `response.create`, asks for a tool's result:
            // part of that response, not a new delegation.
            return self.report_call(call, &call_id, None, "");
        }
        let id = self.new_id("del");
        let mut delegation = json!({"id": id, "target": target.name(), "type": "delegation"});
        let response_id = (target == DelegationTarget::Responses).then(|| self.new_id("resp"));
        if let Some(r) = &response_id {
            delegation["response_id"] = Value::from(r.as_str());
        }
        self.emit(
            "session.delegation.created",
            json!({"delegation": delegation, "offset_ms": self.now_ms}),
            None,
        );
        self.delegations.push(Delegation {
            id: id.clone(),
            call_id: call_id.clone(),
            target,
            answered: false,
        });
        if let Some(response_id) = response_id {
            self.report_call(call, &call_id, Some(&id), &response_id);
        }
        let delay = self.session["delegation"]["acknowledgement_delay_ms"]
            .as_u64()
            .unwrap_or(0);
        if delay == 0 {
            self.say(ACKNOWLEDGEMENT.to_owned());
        } else {
            self.ack_due = Some(self.now_ms + delay);
        }
    }

    /// A Responses delegation's function call as nested Responses events. Within the app's own
    /// `response.create` they belong to that response; a call the Live model made on a spoken
    /// turn gets a response of its own.
    fn report_call(
        &mut self,
        call: &Value,
        call_id: &str,
        delegation_id: Option<&str>,
        response_id: &str,
    ) {
        let item = |status: &str, arguments: &Value| {
            json!({"type": "function_call", "id": call["id"], "call_id": call_id,
                   "name": call["name"], "arguments": arguments, "status": status})
        };
        let done = item("completed", &call["arguments"]);
        let events = [
            json!({"type": "response.output_item.added", "output_index": 0, "item": item("in_progress", &json!(""))}),
            json!({"type": "response.function_call_arguments.done", "item_id": call["id"], "output_index": 0,
                   "name": call["name"], "arguments": call["arguments"]}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
        ];
        if let Some(b) = self.backend.as_mut().filter(|b| b.response_id.is_some()) {
            b.calls.push(done);
            for event in events {
                self.backend_event(event);
            }
            return;
        }
        let model = self.session["delegation"]["responses"]["model"].clone();
        let response = |status: &str, output: Vec<Value>| json!({"id": response_id, "object": "response", "status": status, "model": model, "output": output});
        let created =
            json!({"type": "response.created", "response": response("in_progress", vec![])});
        let completed = json!({"type": "response.completed", "response": response("completed", vec![done.clone()])});
        for event in std::iter::once(created).chain(events).chain([completed]) {
            self.wrap_response_event(event, delegation_id, None);
        }
    }

    fn backend_event(&mut self, event: Value) {
        let (delegation, client) = match &self.backend {
            Some(b) => (b.delegation_id.clone(), b.client_event_id.clone()),
            None => (None, None),
        };
        self.wrap_response_event(event, delegation.as_deref(), client.as_deref());
    }

    fn backend_done(&mut self, b: BackendTurn, response: &Value) {
        let status = match response["status"].as_str() {
            Some("completed") => "completed",
            Some("cancelled") => "cancelled",
            _ => "incomplete",
        };
        let mut output = b.calls.clone();
        if !b.text.is_empty() {
            output.push(
                json!({"type": "message", "role": "assistant", "status": "completed",
                               "content": [{"type": "output_text", "text": b.text}]}),
            );
        }
        let model = self.session["delegation"]["responses"]["model"].clone();
        let kind = if status == "completed" {
            "response.completed"
        } else {
            "response.incomplete"
        };
        let event = json!({"type": kind, "response": {"id": b.response_id, "object": "response",
                           "status": status, "model": model, "output": output}});
        self.backend = Some(b);
        self.backend_event(event);
        self.backend = None;
    }

    fn wrap_response_event(
        &mut self,
        event: Value,
        delegation_id: Option<&str>,
        client_event_id: Option<&str>,
    ) {
        self.emit(
            "response.event",
            json!({"event": event, "delegation_id": delegation_id}),
            client_event_id,
        );
    }

    /// An `error` from the turn engine: about a client event we passed on (its id comes back),
    /// a model's failure, or a script's `session_expired`, which ends a Live session.
    fn engine_error(&mut self, e: &Value) {
        if e["code"] == "session_expired" {
            return self.close("expired", None);
        }
        let error = ClientError {
            kind: if e["type"] == "server_error" {
                "server_error"
            } else {
                "invalid_request_error"
            },
            code: e["code"].as_str().unwrap_or("error").to_owned().into(),
            message: e["message"].as_str().unwrap_or_default().to_owned(),
            param: e["param"].as_str().map(str::to_owned),
            event_id: None,
        };
        self.error(error, e["event_id"].as_str().map(str::to_owned));
    }

    fn error(&mut self, e: ClientError, client_event_id: Option<String>) {
        let body = error_body(e, client_event_id.as_deref());
        self.emit("error", body, client_event_id.as_deref());
    }

    fn data_channel_sends(&self, kind: &str) -> bool {
        match self.session["client"]["data_channel"].get("allowed_client_events") {
            Some(Value::Array(list)) => list.iter().any(|k| k == kind),
            _ => true,
        }
    }

    fn emit(&mut self, kind: &str, body: Value, client_event_id: Option<&str>) {
        let frame = self.make(kind, body, client_event_id);
        self.frames.push_back(frame);
    }

    fn make(&mut self, kind: &str, body: Value, client_event_id: Option<&str>) -> String {
        self.next_event += 1;
        frame(kind, self.next_event, body, client_event_id)
    }

    fn new_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}_{:06}", self.next_id)
    }
}

/// One Live server event: `type`, `event_id` (numbered per session), the body's fields, and the
/// client's `client_event_id` when the event answers one.
fn frame(kind: &str, n: u64, body: Value, client_event_id: Option<&str>) -> String {
    let mut frame = Map::new();
    frame.insert("type".into(), Value::from(kind));
    frame.insert("event_id".into(), Value::from(format!("event_{n:06}")));
    if let Value::Object(fields) = body {
        frame.extend(fields);
    }
    if let Some(id) = client_event_id {
        frame.insert("client_event_id".into(), Value::from(id));
    }
    Value::Object(frame).to_string()
}

/// Live's `error` body: the client's event id as `client_event_id`, inside as well as out.
fn error_body(e: ClientError, client_event_id: Option<&str>) -> Value {
    let mut error = json!({"type": e.kind, "code": e.code, "message": e.message});
    if let Some(p) = e.param {
        error["param"] = Value::from(p);
    }
    if let Some(id) = client_event_id {
        error["client_event_id"] = Value::from(id);
    }
    json!({ "error": error })
}

/// An `error` frame for a client that has no session yet (a WebSocket before `session.start`).
pub fn error_frame(e: ClientError, client_event_id: Option<String>) -> String {
    let body = error_body(e, client_event_id.as_deref());
    frame("error", 0, body, client_event_id.as_deref())
}

/// A Responses input item as the turn engine takes it: a message's string content becomes
/// one text part.
fn engine_item(item: &Map<String, Value>) -> Value {
    let mut item = Value::Object(item.clone());
    if let Some(text) = item["content"].as_str().map(str::to_owned) {
        let part = if item["role"] == "assistant" {
            "output_text"
        } else {
            "input_text"
        };
        item["content"] = json!([{"type": part, "text": text}]);
        item["type"] = Value::from("message");
    }
    if item["type"].is_null() && item["role"].is_string() {
        item["type"] = Value::from("message");
    }
    item
}

fn describe_permission(p: &Option<Value>) -> String {
    match p {
        None | Some(Value::Null) => "every event".into(),
        Some(Value::String(s)) if s == "all" => "every event".into(),
        Some(Value::Array(list)) if list.is_empty() => "no events".into(),
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| {
                v.as_str()
                    .map_or_else(|| v["type"].to_string(), str::to_owned)
            })
            .collect::<Vec<_>>()
            .join(", "),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
