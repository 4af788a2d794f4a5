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
//! response's state and wire objects, `replies` what the echo and TTS models say, `client` the
//! dispatch of client events, `turn_detection` the caller-side turn events (fed by the media
//! side's [`crate::audio::vad`] detector; named apart from it because it decides turns, not
//! speech), `turn` the response lifecycle, `events` the outgoing queues.

mod client;
mod events;
mod expiry;
mod input;
mod items;
mod replies;
mod response;
mod session_config;
pub mod session_limits;
mod turn;
mod turn_detection;

#[cfg(test)]
mod tests;

pub use session_config::TurnDetection;
// The fuzz target checks the item cap holds whatever the client sends.
pub(crate) use items::MAX_ITEMS;

use serde_json::Value;

use events::Outbox;
use input::UncommittedInput;
use items::ItemStore;
use response::ActiveResponse;

/// What the media side must do; polled with [`Conversation::poll_action`].
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Start producing audio for a response. The media side answers with
    /// [`Conversation::on_audio_progress`] / [`Conversation::on_audio_done`].
    Speak {
        response_id: String,
        item_id: String,
        reply: Reply,
    },
    /// Stop this response's outgoing audio immediately (cancel, output_audio_buffer.clear,
    /// barge-in). A later `on_audio_done` for it is ignored.
    StopAudio { response_id: String },
    /// Drop buffered caller audio (input_audio_buffer.clear).
    ClearInput,
}

/// What a response says, decided here and rendered by the media side. Not `Speech`: that is
/// [`crate::audio::tts::Speech`], the PCM a `Text` reply becomes once synthesized.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Play back the caller's own audio between these input times (the echo model).
    EchoInput {
        input_item_id: String,
        audio_start_ms: u64,
        audio_end_ms: u64,
    },
    /// Synthesize and speak this text (the TTS stub; also the echo model's answer to a text
    /// message). The text is exactly the transcript the client receives.
    Text { text: String },
}

/// Which stub model answers. Chosen by model name; see [`Conversation::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Says the caller's audio turn back; answers text with "You said: …".
    Echo,
    /// Speaks the text it is given (a user text message, or `instructions`).
    Tts,
}

impl Behaviour {
    /// `Some` only for the names this server implements; other names leave the behaviour as it
    /// was (see [`Conversation::new`]).
    pub fn from_model_name(name: &str) -> Option<Behaviour> {
        match name.trim().to_ascii_lowercase().as_str() {
            "echo" => Some(Behaviour::Echo),
            "tts" => Some(Behaviour::Tts),
            _ => None,
        }
    }
}

/// One call's Realtime protocol state. See the module docs.
pub struct Conversation {
    session_id: String,
    conversation_id: String,
    config: Value,
    behaviour: Behaviour,
    out: Outbox,
    items: ItemStore,
    input: UncommittedInput,
    active: Option<ActiveResponse>,
    /// The most recent response, for `output_audio_buffer.cleared` when nothing is playing.
    last_response_id: Option<String>,
    /// A VAD turn ended while a response was still running with `interrupt_response: false`;
    /// it is answered when that response ends rather than being refused or dropped.
    auto_response_queued: bool,
    /// Once assistant audio exists the voice is fixed, as on the real service.
    audio_produced: bool,
    opened: bool,
    next_id: u64,
}

impl Conversation {
    /// `model` picks the stub: `"tts"` speaks given text, `"echo"` and every other name (such as
    /// the SDK default `"gpt-realtime-2.1"`) echo. A later `session.update` records any model
    /// name, but only `"echo"`/`"tts"` switch the behaviour: the SDK repeats its configured model
    /// in every update, and a call placed as `tts` (demo switch, `?model=`, multipart session)
    /// must not silently fall back to echo because the SDK still says `gpt-realtime-2.1`.
    pub fn new(session_id: String, model: &str) -> Self {
        let conversation_id = match session_id.strip_prefix("sess_") {
            Some(rest) => format!("conv_{rest}"),
            None => format!("conv_{session_id}"),
        };
        Conversation {
            config: session_config::default_config(&session_id, model),
            behaviour: Behaviour::from_model_name(model).unwrap_or(Behaviour::Echo),
            session_id,
            conversation_id,
            out: Outbox::default(),
            items: ItemStore::default(),
            input: UncommittedInput::default(),
            active: None,
            last_response_id: None,
            auto_response_queued: false,
            audio_produced: false,
            opened: false,
            next_id: 0,
        }
    }

    /// The session's `expires_at` (unix seconds). The engine has no clock, so the transport sets
    /// it; until then the field is absent, as the types allow.
    pub fn set_expires_at(&mut self, unix_secs: u64) {
        self.config["expires_at"] = Value::from(unix_secs);
    }

    /// Emits `session.created` once, with the full effective config.
    pub fn on_channel_open(&mut self) {
        if self.opened {
            return;
        }
        self.opened = true;
        let session = self.config.clone();
        self.out
            .emit("session.created", serde_json::json!({ "session": session }));
    }

    /// The next server event, a JSON text frame with `type` and a string `event_id`.
    pub fn poll_frame(&mut self) -> Option<String> {
        self.out.frames.pop_front()
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        self.out.actions.pop_front()
    }

    /// `None` when `turn_detection` is null: then the media side's VAD edges only bound manual
    /// commits and never start responses or barge-in.
    pub fn turn_detection(&self) -> Option<TurnDetection> {
        session_config::turn_detection(&self.config)
    }

    /// The model name as last configured (recorded verbatim).
    pub fn model(&self) -> &str {
        self.config["model"].as_str().unwrap_or("echo")
    }

    pub fn behaviour(&self) -> Behaviour {
        self.behaviour
    }

    /// The voice name; a `{id}` voice object yields its id.
    pub fn voice(&self) -> &str {
        session_config::voice_name(&self.config["audio"]["output"]["voice"])
    }

    /// The full effective session object, as sent in `session.updated`.
    pub fn config(&self) -> &Value {
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
