//! The turn engine's side: it is configured the way a Live model behaves, and its Realtime
//! server events come back out as Live ones, stamped on the session's timeline.

use serde_json::{Value, json};

use super::LiveSession;
use super::delegation::DELEGATE_TOOL;
use crate::live::config::{DelegationTarget, InputRole};
use crate::live::server_event::{LiveServerEvent, Span};
use crate::realtime::server_event::ErrorObject;
use crate::realtime::{ClientError, RealtimeClientEvent, RealtimeServerEvent};

/// Output transcript deltas are released as their words are played; each is stamped with the
/// span its word takes at the engine's pacing estimate.
const MS_PER_WORD: u64 = 400;

impl LiveSession {
    /// Configures the turn engine as a Live model behaves: it answers when the caller stops,
    /// yields when talked over, transcribes every turn, and delegates through a function call.
    pub(super) fn configure_engine(&mut self) {
        let (tools, choice) = match DelegationTarget::of(&self.config) {
            DelegationTarget::Client => (
                vec![json!({
                    "type": "function",
                    "name": DELEGATE_TOOL,
                    "description": "Hand a task to the app.",
                    "parameters": {"type": "object", "properties": {"task": {"type": "string"}}},
                })],
                json!("auto"),
            ),
            DelegationTarget::Responses | DelegationTarget::Decisions => {
                let r = self
                    .config
                    .delegation
                    .as_ref()
                    .and_then(|d| d.responses.as_ref());
                let tools: Vec<Value> = r
                    .and_then(|r| r.tools.as_ref())
                    .into_iter()
                    .flatten()
                    .filter(|t| t.kind == "function")
                    .map(|t| {
                        let parameters = t
                            .parameters
                            .clone()
                            .filter(Value::is_object)
                            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                        json!({"type": "function", "name": t.name,
                               "description": t.description.as_deref().unwrap_or(""),
                               "parameters": parameters})
                    })
                    .collect();
                let choice = match r.and_then(|r| r.tool_choice.clone()) {
                    Some(c @ (Value::String(_) | Value::Object(_))) => c,
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
        if let Some(i) = &self.config.instructions {
            session["instructions"] = Value::from(i.as_str());
        }
        // The voice is fixed at startup, so the engine never sees it change after audio.
        session["audio"]["output"] = json!({"voice": serde_json::to_value(&self.config.audio.output.voice).expect("a voice serialises")});
        self.engine_event(RealtimeClientEvent::session_update(session), None);
        // Set on the engine, not sent as an update: Live also takes 16 kHz PCM, which a
        // Realtime session.update refuses.
        if let Some(format) = self.config.audio.format {
            self.conv.set_audio_format(format.realtime());
        }
    }

    /// Startup history becomes the engine's conversation (developer messages as system ones).
    pub(super) fn load_history(&mut self) {
        let items = self.config.input.clone();
        for item in &items {
            let text = item.text();
            let (role, part) = match item.role {
                InputRole::Developer => ("system", "input_text"),
                InputRole::Assistant => ("assistant", "output_text"),
                InputRole::User => ("user", "input_text"),
            };
            let item = json!({"type": "message", "role": role,
                "content": [{"type": part, "text": text}]});
            self.engine_event(RealtimeClientEvent::item_create(item), None);
        }
        self.answer_history = items.last().is_some_and(|i| i.role == InputRole::User);
    }

    /// Moves the turn engine's events into Live ones.
    pub(super) fn pump(&mut self) {
        let heard = self.conv.input_heard_ms();
        if heard > 0 && self.now_ms > heard {
            self.input_offset = self.now_ms - heard;
        }
        while let Some(frame) = self.conv.poll_event() {
            self.translate(frame.event);
        }
    }

    fn translate(&mut self, ev: RealtimeServerEvent) {
        use RealtimeServerEvent as E;
        match ev {
            E::SpeechStarted { audio_start_ms, .. } => self.turn_span = (audio_start_ms, 0),
            E::SpeechStopped { audio_end_ms, .. } => self.turn_span.1 = audio_end_ms,
            E::InputTranscriptionDelta { delta, .. } => self.input_words.push(delta),
            E::InputTranscriptionCompleted { .. } => self.input_transcript(),
            E::ResponseCreated { response } => {
                if let Some(b) = self.backend.as_mut().filter(|b| b.response_id.is_none()) {
                    let id = response["id"].as_str().unwrap_or_default().to_owned();
                    b.response_id = Some(id.clone());
                    let model = self.config.responses_model();
                    let response = json!({"id": id, "object": "response", "status": "in_progress",
                                          "model": model, "output": []});
                    self.backend_event(json!({"type": "response.created", "response": response}));
                }
            }
            E::OutputTranscriptDelta { at, delta } | E::OutputTextDelta { at, delta } => {
                let words = delta.split_whitespace().count().max(1) as u64;
                let span = Span {
                    start_ms: self.now_ms,
                    end_ms: self.now_ms + words * MS_PER_WORD,
                };
                let delta_event = LiveServerEvent::OutputTranscriptDelta {
                    delta: delta.clone(),
                    span,
                };
                self.emit(delta_event, None);
                if let Some(b) = self
                    .backend
                    .as_mut()
                    .filter(|b| b.response_id.as_deref() == Some(at.response_id.as_str()))
                {
                    b.text.push_str(&delta);
                    self.backend_event(json!({"type": "response.output_text.delta",
                        "item_id": at.item_id, "output_index": 0, "content_index": 0,
                        "delta": delta}));
                }
            }
            // On a WebSocket the audio itself travels as events.
            E::OutputAudioDelta { delta, .. } => {
                let (start_ms, end_ms) = (None, None);
                let delta = LiveServerEvent::OutputAudioDelta {
                    delta,
                    start_ms,
                    end_ms,
                };
                self.emit(delta, None);
            }
            E::OutputItemDone(done) if done.item["type"] == "function_call" => {
                self.delegate(&done.item);
            }
            E::ResponseDone { response } => {
                let id = response["id"].as_str();
                if let Some(b) = self.backend.take_if(|b| b.response_id.as_deref() == id) {
                    self.backend_done(b, &response);
                }
                let usage = self.usage();
                self.emit(LiveServerEvent::UsageUpdated { usage }, None);
                self.say_next();
            }
            E::Error { error } => self.engine_error(error),
            // The rest (session, item, buffer and part events) have no Live counterpart.
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
            let span = Span {
                start_ms: start + span * i / n,
                end_ms: start + span * (i + 1) / n,
            };
            self.emit(
                LiveServerEvent::InputTranscriptDelta { delta: w, span },
                None,
            );
        }
    }

    /// An `error` from the turn engine: about a client event we passed on (its id comes back),
    /// a model's failure, or a script's `session_expired`, which ends a Live session.
    fn engine_error(&mut self, e: ErrorObject) {
        if e.code == "session_expired" {
            return self.close("expired", None);
        }
        let error = ClientError {
            kind: if e.kind == "server_error" {
                "server_error"
            } else {
                "invalid_request_error"
            },
            code: e.code.into(),
            message: e.message,
            param: e.param,
            event_id: None,
        };
        self.error(error, e.event_id);
    }
}
