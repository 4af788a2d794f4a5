//! The OpenAI Realtime protocol spoken on the `oai-events` data channel, as a deterministic engine.
//!
//! A [`Conversation`] is one call's protocol state. The transport feeds it client text frames and
//! the media side feeds it voice-activity edges and playback progress; it answers with server
//! event frames ([`Conversation::poll_frame`]) and media [`Action`]s ([`Conversation::poll_action`]).
//! It owns no I/O, thread or clock (every time is passed in), so the whole event grammar of
//! `docs/realtime-protocol.md` §4–7 can be checked in unit tests, and the order of events and the ids
//! they carry are decided in exactly one place.
//!
//! Layout: `session_config` holds the effective session object and `session.update` rules,
//! `session_limits` the bounds that keep the session within one data-channel message,
//! `items` the ordered conversation, `input` the caller's uncommitted audio, `response` one
//! response's state and wire objects, `prompt` what a response answers (for the model),
//! `tool_calls` the function-call output items, `client_event` and `server_event` the events as
//! types,
//! `client` their dispatch, `turn_detection` the caller-side turn events (fed by the media
//! side's [`crate::audio::vad`] detector; named apart from it because it decides turns, not
//! speech), `turn` the response lifecycle, `events` the outgoing queues.
//!
//! What a response says is not decided here: the call's [`crate::model::Model`] plans it from
//! the [`crate::model::ResponseContext`] the engine builds, and the engine turns the plan into
//! events and media actions.

mod audio_out;
mod client;
pub mod client_event;
pub mod connect_session;
mod events;
mod expiry;
mod input;
mod items;
mod mcp;
mod planned_mcp;
mod prompt;
mod response;
pub mod server_event;
mod session_config;
pub mod session_limits;
mod tool_calls;
mod turn;
mod turn_detection;

#[cfg(test)]
mod tests;

pub use session_config::{AudioFormat, SessionConfig, TurnDetection};
// The Live engine reports its refusals in the same terms (see `crate::live`).
pub use client_event::RealtimeClientEvent;
pub use events::{ClientError, ClientEvent};
pub use server_event::{RealtimeServerEvent, ServerEventFrame};
// The fuzz target checks the item cap holds whatever the client sends.
pub(crate) use items::MAX_ITEMS;

use serde_json::Value;

use crate::model::{Model, ModelKind, Reply};

use events::Outbox;
use input::UncommittedInput;
use items::ItemStore;
use response::{ActiveResponse, Playout};

/// How many times faster than real time a reply is generated on WebRTC: the service's models
/// make audio well ahead of playback, so the transcript and `response.done` arrive while the
/// caller is still hearing the reply. A barge-in then truncates what was heard instead of
/// cancelling a finished response. 1.0 generates at playback pace, as a slow model would.
pub const GENERATION_PACE: f64 = 4.0;

/// What the media side must do; polled with [`Conversation::poll_action`].
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Start producing audio for a response. The media side answers with
    /// [`Conversation::on_audio_progress`] / [`Conversation::on_audio_done`].
    Speak {
        response_id: String,
        item_id: String,
        reply: Reply,
        /// Silence before the audio starts (a scripted slow model); 0 for the stubs.
        delay_ms: u64,
        /// The voice a text reply is spoken in: the response's, else the session's.
        voice: String,
        /// On a WebSocket, this response's codec when `response.create` asked for another
        /// `audio.output.format` than the session's; `None` keeps the session's.
        codec: Option<crate::audio::Codec>,
    },
    /// Stop this response's outgoing audio immediately (cancel, output_audio_buffer.clear,
    /// barge-in). A later `on_audio_done` for it is ignored.
    StopAudio { response_id: String },
    /// Drop buffered caller audio (input_audio_buffer.clear).
    ClearInput,
    /// A response with nothing to play waits this long before its output (a scripted slow
    /// model); the media side answers with [`Conversation::on_hold_over`].
    Hold { response_id: String, delay_ms: u64 },
    /// End the call once the events before this action are sent (the session expired).
    EndCall,
    /// Run this request on an MCP server off the engine (see `mcp`); the host answers with
    /// [`Conversation::on_mcp_outcome`] and the same `key`.
    Mcp {
        key: String,
        request: crate::mcp::McpRequest,
    },
}

/// How the client is connected, which changes a few events: on WebRTC the server plays the
/// audio and reports its output buffer (`output_audio_buffer.*`); on a WebSocket the audio
/// travels as `response.output_audio.delta` events, the client plays it, and there is no
/// server output buffer to report or clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    #[default]
    WebRtc,
    WebSocket,
}

/// What a session is for: a conversation (`type: "realtime"`) or transcription only
/// (`type: "transcription"`, a WebSocket opened with `?intent=transcription`), whose turns are
/// transcribed and never answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionType {
    #[default]
    Realtime,
    Transcription,
}

impl SessionType {
    pub fn name(self) -> &'static str {
        match self {
            SessionType::Realtime => "realtime",
            SessionType::Transcription => "transcription",
        }
    }
}

/// One call's Realtime protocol state. See the module docs.
pub struct Conversation {
    session_id: String,
    conversation_id: String,
    config: SessionConfig,
    model: Box<dyn Model>,
    /// Responses started so far: a response's index, which scripts match on.
    responses_started: u64,
    out: Outbox,
    items: ItemStore,
    input: UncommittedInput,
    active: Option<ActiveResponse>,
    /// A completed response whose audio still plays (WebRTC; see [`GENERATION_PACE`]).
    playout: Option<Playout>,
    /// The response whose `output_audio_buffer.started` waits for `playout` to end: its audio
    /// is queued behind it.
    buffer_waiting: Option<String>,
    generation_pace: f64,
    /// The most recent response, for `output_audio_buffer.cleared` when nothing is playing.
    last_response_id: Option<String>,
    /// A VAD turn ended while a response was still running with `interrupt_response: false`;
    /// it is answered when that response ends rather than being refused or dropped.
    auto_response_queued: bool,
    /// Once assistant audio exists the voice is fixed, as on the real service.
    audio_produced: bool,
    opened: bool,
    next_id: u64,
    transport: Transport,
    mcp: mcp::McpState,
}

impl Conversation {
    /// `model` picks the stub. A later `session.update` records any model name, but only ours
    /// (see [`ModelKind::parse`]) switch the model: the SDK repeats its configured model in every
    /// update, and a call placed as `tts` (demo switch, `?model=`, multipart session) must not
    /// silently fall back to echo because the SDK still says `gpt-realtime-2.1`.
    pub fn new(session_id: String, model: &ModelKind) -> Self {
        let conversation_id = match session_id.strip_prefix("sess_") {
            Some(rest) => format!("conv_{rest}"),
            None => format!("conv_{session_id}"),
        };
        Conversation {
            config: SessionConfig::new(&session_id, &model.to_string()),
            model: crate::model::build(model),
            responses_started: 0,
            session_id,
            conversation_id,
            out: Outbox::default(),
            items: ItemStore::default(),
            input: UncommittedInput::default(),
            active: None,
            playout: None,
            buffer_waiting: None,
            generation_pace: GENERATION_PACE,
            last_response_id: None,
            auto_response_queued: false,
            audio_produced: false,
            opened: false,
            next_id: 0,
            transport: Transport::WebRtc,
            mcp: mcp::McpState::default(),
        }
    }

    /// A WebSocket session's conversation (see [`Transport`]); set before the first event.
    pub fn set_transport(&mut self, transport: Transport) {
        self.transport = transport;
    }

    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// How far ahead of playback replies are generated on WebRTC (see [`GENERATION_PACE`]);
    /// at most 1.0 generates at playback pace. Set before the first response.
    pub fn set_generation_pace(&mut self, pace: f64) {
        self.generation_pace = pace;
    }

    /// How fast the media side sends a reply's audio, in seconds of audio per second: on a
    /// WebSocket, where the client plays it, as fast as it is made; on WebRTC, where the
    /// server plays it, in real time.
    pub fn send_pace(&self) -> f64 {
        match self.transport {
            Transport::WebSocket => self.generation_pace.max(1.0),
            Transport::WebRtc => 1.0,
        }
    }

    /// Makes this a transcription session (see [`SessionType`]): transcription on by default,
    /// responses never started. Set before the first event.
    pub fn set_transcription_only(&mut self) {
        self.config.kind = SessionType::Transcription;
        self.config.audio.input.transcription = Some(session_config::Transcription {
            model: Some("gpt-4o-transcribe".into()),
            language: None,
            prompt: Some(String::new()),
        });
    }

    pub fn session_type(&self) -> SessionType {
        self.config.kind
    }

    /// The session object as the client sees it: the whole effective config for a realtime
    /// session; for a transcription session the fields its type has.
    pub(crate) fn session_object(&self) -> Value {
        let c = &self.config;
        let object = match c.kind {
            SessionType::Realtime => serde_json::to_value(c),
            SessionType::Transcription => serde_json::to_value(TranscriptionSession {
                kind: SessionType::Transcription,
                object: "realtime.transcription_session",
                id: &c.id,
                expires_at: c.expires_at,
                include: &c.include,
                audio: TranscriptionAudio {
                    input: &c.audio.input,
                },
            }),
        };
        object.expect("a session serialises")
    }

    /// The session's `expires_at` (unix seconds). The engine has no clock, so the transport sets
    /// it; until then the field is absent, as the types allow.
    pub fn set_expires_at(&mut self, unix_secs: u64) {
        self.config.expires_at = Some(unix_secs);
    }

    /// The session's `audio.input.format` and `audio.output.format` (`audio/pcmu`, `audio/pcma`):
    /// a G.711 call's audio is that on the wire, and a client may read it back. Set before the
    /// channel opens, so `session.created` says it.
    pub fn set_audio_format(&mut self, format: AudioFormat) {
        self.config.audio.input.format = format;
        self.config.audio.output.format = format;
    }

    /// Emits `session.created` once, with the full effective config.
    pub fn on_channel_open(&mut self) {
        if self.opened {
            return;
        }
        self.opened = true;
        let session = self.session_object();
        self.out
            .emit(RealtimeServerEvent::SessionCreated { session });
        self.sync_mcp();
    }

    /// A `session.created` with the session as it is now, for one more client joining the
    /// session (a sideband attaching to a call); not queued for the others.
    pub fn welcome_frame(&mut self) -> String {
        let session = self.session_object();
        self.out
            .make(RealtimeServerEvent::SessionCreated { session })
            .to_text()
    }

    /// The next server event as the text frame a transport sends: a JSON object with `type` and
    /// a string `event_id`.
    pub fn poll_frame(&mut self) -> Option<String> {
        self.poll_event().map(|e| e.to_text())
    }

    /// The next server event, typed, for a dialect on top of this engine.
    pub fn poll_event(&mut self) -> Option<ServerEventFrame> {
        self.out.events.pop_front()
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        self.out.actions.pop_front()
    }

    /// `None` when `turn_detection` is null: then the media side's VAD edges only bound manual
    /// commits and never start responses or barge-in.
    pub fn turn_detection(&self) -> Option<TurnDetection> {
        self.config.turn_detection()
    }

    /// The model name as last configured (recorded verbatim).
    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// The model answering now (the call's, or the last one `session.update` named).
    pub fn model_kind(&self) -> ModelKind {
        self.model.kind()
    }

    /// For the media side's frame-level path (`loopback`).
    pub fn model_mut(&mut self) -> &mut dyn Model {
        self.model.as_mut()
    }

    /// The voice name; a `{id}` voice object yields its id.
    pub fn voice(&self) -> &str {
        self.config.audio.output.voice.name()
    }

    /// The full effective session, as sent in `session.updated`.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The response currently in progress (created, `response.done` not yet sent).
    pub fn active_response(&self) -> Option<&str> {
        self.active.as_ref().map(|r| r.id.as_str())
    }

    /// A conversation item as `conversation.item.retrieve` would return it.
    pub fn item(&self, item_id: &str) -> Option<&Value> {
        self.items.get(item_id).map(|i| &i.value)
    }

    /// Ids of the conversation items in order (the oldest are dropped beyond 500).
    pub fn item_ids(&self) -> Vec<&str> {
        self.items.ids().collect()
    }

    fn new_id(&mut self, prefix: &str) -> String {
        loop {
            self.next_id += 1;
            let id = format!("{prefix}_{:06}", self.next_id);
            // Client-created items may carry any id; never hand out one already in use.
            if self.items.get(&id).is_none() {
                return id;
            }
        }
    }
}

/// A transcription session as the client sees it: the fields its type has, borrowed from the
/// effective config.
#[derive(serde::Serialize)]
struct TranscriptionSession<'a> {
    #[serde(rename = "type")]
    kind: SessionType,
    object: &'static str,
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<u64>,
    include: &'a Option<Vec<String>>,
    audio: TranscriptionAudio<'a>,
}

#[derive(serde::Serialize)]
struct TranscriptionAudio<'a> {
    input: &'a session_config::AudioInput,
}
