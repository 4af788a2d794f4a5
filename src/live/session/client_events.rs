//! Live client events into the turn engine's operations: validation and the data channel's
//! permissions first, then one arm per event.

use serde_json::{Map, Value, json};

use super::delegation::BackendTurn;
use super::{EventSource, LiveSession};
use crate::live::client_event::{Append, AppendKind, LiveClientEvent};
use crate::live::config::{DelegationTarget, MAX_APPEND_CHARS};
use crate::live::server_event::{LiveServerEvent, Span};
use crate::model::ModelKind;
use crate::realtime::{ClientError, ClientEvent, RealtimeClientEvent, Transport};

impl LiveSession {
    /// One client event, from the data channel or a sideband.
    pub fn on_client_text(&mut self, text: &str, origin: EventSource) {
        let event = match ClientEvent::parse(text) {
            Ok(event) => event,
            Err(e) => return self.error(e, None),
        };
        let result = event.kind().and_then(|kind| {
            if origin == EventSource::DataChannel && !self.data_channel_sends(kind) {
                Err(ClientError::new(
                    "event_not_permitted",
                    format!("This session's data channel may not send '{kind}' (client.data_channel.allowed_client_events)."),
                )
                .param("type"))
            } else if self.closed {
                Err(ClientError::new("session_closed", "The session is closed."))
            } else {
                let decoded = LiveClientEvent::decode(kind, &event.body)?;
                self.dispatch(kind, decoded, event.event_id.as_deref())
            }
        });
        if let Err(e) = result {
            self.error(e, event.event_id);
        }
        self.pump();
    }

    /// `kind` is the event's `type`, for the errors that name it.
    fn dispatch(
        &mut self,
        kind: &str,
        event: LiveClientEvent,
        event_id: Option<&str>,
    ) -> Result<(), ClientError> {
        use LiveClientEvent as E;
        match event {
            E::SessionUpdate { session: update } => {
                let next = self.config.updated(&update)?;
                let delegation_changed = next.delegation != self.config.delegation;
                self.config = next;
                if delegation_changed {
                    self.configure_engine();
                }
                let session = self.resource();
                self.emit(LiveServerEvent::SessionUpdated { session }, event_id);
            }
            E::InputAudioMute => {
                self.muted = true;
                self.emit(LiveServerEvent::InputAudioMuted {}, event_id);
            }
            E::InputAudioUnmute => {
                self.muted = false;
                self.emit(LiveServerEvent::InputAudioUnmuted {}, event_id);
            }
            E::Append(which, append) => self.append(which, append, event_id)?,
            E::ResponseItemCreate { item } => {
                self.require_responses(kind)?;
                self.engine_event(
                    RealtimeClientEvent::item_create(engine_item(item)),
                    event_id,
                );
            }
            E::ResponseCreate => {
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
                self.engine_event(RealtimeClientEvent::response_create(None), event_id);
            }
            E::SessionClose => self.close("close_requested", event_id),
            E::SessionStart => {
                return Err(ClientError::new(
                    "session_already_started",
                    "The session has started: session.start is only the first message of a Live WebSocket (a WebRTC session starts when it is created).",
                ));
            }
            E::InputAudioAppend(a) if self.conv.transport() == Transport::WebSocket => {
                // The host feeds the audio to the media side; appends have no acknowledgement.
                use base64::Engine as _;
                if base64::engine::general_purpose::STANDARD
                    .decode(&a.audio)
                    .is_err()
                {
                    return Err(ClientError::invalid("audio", "it is not valid base64"));
                }
            }
            E::InputAudioAppend(_) => {
                return Err(ClientError::new(
                    "invalid_transport",
                    "On WebRTC the caller's audio travels on the audio track; session.input_audio.append is for the primary WebSocket.",
                ));
            }
            E::OutputAudioFixturePlay => {
                return Err(ClientError::new(
                    "unsupported_event",
                    "voice-edge does not implement audio fixtures yet; on OpenAI they play over a primary WebSocket or a sideband.",
                ));
            }
            E::TransportDtmfSend => {
                return Err(ClientError::new(
                    "invalid_transport",
                    "DTMF needs a SIP session's sideband.",
                ));
            }
            E::Decision => {
                return Err(ClientError::new(
                    "unsupported_event",
                    "voice-edge does not implement Decisions delegation.",
                ));
            }
        }
        Ok(())
    }

    /// `session.instructions.append`, `session.thinking.append`, `session.commentary.append`.
    fn append(
        &mut self,
        which: AppendKind,
        append: Append,
        event_id: Option<&str>,
    ) -> Result<(), ClientError> {
        let Append {
            content,
            delegation_id,
        } = append;
        if content.trim().is_empty() {
            return Err(ClientError::invalid("content", "it is empty"));
        }
        if content.chars().count() > MAX_APPEND_CHARS {
            return Err(ClientError::invalid(
                "content",
                "it is limited to 500 tokens",
            ));
        }
        let delegation = match delegation_id {
            None => return Err(ClientError::missing("delegation_id")),
            Some(None) => None,
            Some(Some(id)) => {
                if DelegationTarget::of(&self.config) == DelegationTarget::Responses {
                    return Err(ClientError::invalid(
                        "delegation_id",
                        "delegation ids are not accepted with Responses delegation",
                    ));
                }
                match self.delegations.iter().position(|d| d.id == id) {
                    Some(i) => Some(i),
                    None => {
                        return Err(ClientError::invalid(
                            "delegation_id",
                            format!("no delegation '{id}' in this session"),
                        ));
                    }
                }
            }
        };
        let acked = which.acknowledgement(Span::at(self.now_ms));
        match which {
            AppendKind::Instructions => {
                let item = json!({"type": "message", "role": "system",
                    "content": [{"type": "input_text", "text": content}]});
                self.engine_event(RealtimeClientEvent::item_create(item), None);
                self.emit(acked.clone(), event_id);
            }
            AppendKind::Thinking => {
                self.ack_due = None;
                self.emit(acked.clone(), event_id);
            }
            AppendKind::Commentary => {
                self.ack_due = None;
                self.emit(acked.clone(), event_id);
                let in_band = matches!(self.conv.model_kind(), ModelKind::Script(_));
                match delegation {
                    Some(i) if !self.delegations[i].answered => {
                        self.delegations[i].answered = true;
                        let call_id = self.delegations[i].call_id.clone();
                        let output = json!({"type": "function_call_output",
                            "call_id": call_id, "output": content});
                        self.engine_event(RealtimeClientEvent::item_create(output), None);
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
        if DelegationTarget::of(&self.config) == DelegationTarget::Responses {
            return Ok(());
        }
        Err(ClientError::new(
            "delegation_required",
            format!("'{kind}' needs Responses delegation (session.delegation.type 'responses')."),
        ))
    }

    fn data_channel_sends(&self, kind: &str) -> bool {
        self.config
            .data_channel()
            .and_then(|dc| dc.allowed_client_events.as_ref())
            .is_none_or(|allowed| allowed.allows(|k| k == kind))
    }
}

/// A Responses input item as the turn engine takes it: a message's string content becomes
/// one text part.
fn engine_item(item: Map<String, Value>) -> Value {
    let mut item = Value::Object(item);
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
