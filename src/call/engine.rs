//! Which protocol a call's `oai-events` channel speaks: Realtime, or Live over the same turn
//! engine (see [`crate::live`]). The session and the media side see one interface; only the
//! events on the channel differ.

use crate::live::{EventSource, LiveConfig, LiveSession};
use crate::model::ModelKind;
use crate::realtime::{Action, Conversation};

/// What answers a new call: the model, and for a Live session its checked startup config.
/// Crosses the control API, so it is plain data.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CallSetup {
    pub model: ModelKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveConfig>,
    /// A Realtime call's starting session, checked by signaling (see
    /// [`crate::realtime::connect_session`]); `None` starts from the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<serde_json::Value>,
    /// The call goes to the upstream model (see [`crate::upstream`]) instead of `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<crate::upstream::UpstreamCall>,
    /// The client's address as signaling saw it (see `signaling::call_limits::client_of`), for
    /// what the transceiver counts per client (a recording's bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<std::net::IpAddr>,
}

impl From<ModelKind> for CallSetup {
    fn from(model: ModelKind) -> Self {
        CallSetup {
            model,
            live: None,
            session: None,
            upstream: None,
            client: None,
        }
    }
}

/// Realtime's `error` for a session closed after `idle` without a client event.
pub fn idle_error(idle: std::time::Duration) -> crate::realtime::ClientError {
    crate::realtime::ClientError::new(
        "session_idle_timeout",
        format!(
            "The session was closed after {} s without a client event.",
            idle.as_secs()
        ),
    )
}

pub enum Engine {
    Realtime(Box<Conversation>),
    Live(Box<LiveSession>),
}

impl Engine {
    /// `call_id` names the call. A Realtime session's id is random (`sess_…`: it is printed
    /// everywhere, and must not carry the call id, which is a capability); a Live session's
    /// is the call's own id (`live_…`), as the Live API names its sessions.
    pub fn new(call_id: &str, setup: CallSetup, expires_at: u64) -> Engine {
        match setup.live {
            Some(start) => Engine::Live(Box::new(LiveSession::new(
                call_id.to_owned(),
                &setup.model,
                start,
                expires_at,
                crate::realtime::Transport::WebRtc,
            ))),
            None => {
                // Random, not the call id's hex: the session id is printed in every
                // session.created, event export and app log, and the call id is what grants
                // the call's events, faults, sidebands and hang-up.
                let random = hex::encode(rand::random::<[u8; 12]>());
                let mut conv = Conversation::new(format!("sess_{random}"), &setup.model);
                conv.set_expires_at(expires_at);
                if let Some(session) = &setup.session {
                    crate::realtime::connect_session::start_checked(&mut conv, session, call_id);
                }
                Engine::Realtime(Box::new(conv))
            }
        }
    }

    /// The turn engine, which the media side drives.
    pub fn conversation(&mut self) -> &mut Conversation {
        match self {
            Engine::Realtime(c) => c,
            Engine::Live(l) => l.conversation_mut(),
        }
    }

    /// The session time (ms since the call was created), for Live's timeline fields.
    pub fn tick(&mut self, session_ms: u64) {
        if let Engine::Live(l) = self {
            l.tick(session_ms);
        }
    }

    /// When the protocol itself next needs time (session ms): a Live acknowledgement.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self {
            Engine::Live(l) => l.poll_timeout(),
            Engine::Realtime(_) => None,
        }
    }

    pub fn on_timeout(&mut self) {
        if let Engine::Live(l) = self {
            l.on_timeout();
        }
    }

    pub fn on_channel_open(&mut self) {
        match self {
            Engine::Realtime(c) => c.on_channel_open(),
            Engine::Live(l) => l.on_channel_open(),
        }
    }

    pub fn on_client_text(&mut self, text: &str, origin: EventSource) {
        match self {
            Engine::Realtime(c) => c.on_client_text(text),
            Engine::Live(l) => l.on_client_text(text, origin),
        }
    }

    pub fn poll_frame(&mut self) -> Option<String> {
        match self {
            Engine::Realtime(c) => c.poll_frame(),
            Engine::Live(l) => l.poll_frame(),
        }
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        match self {
            Engine::Realtime(c) => c.poll_action(),
            Engine::Live(l) => l.poll_action(),
        }
    }

    /// The first frame for one more client joining (a sideband): the session as it is now.
    pub fn welcome_frame(&mut self) -> String {
        match self {
            Engine::Realtime(c) => c.welcome_frame(),
            Engine::Live(l) => l.welcome_frame(),
        }
    }

    /// The session hit its maximum duration.
    pub fn expire(&mut self) {
        match self {
            Engine::Realtime(c) => c.expire_session(),
            Engine::Live(l) => l.expire(),
        }
    }

    /// The transport closes the session for being idle: Realtime's `error` (code
    /// `session_idle_timeout`), or Live's `session.closed` (its reasons have no idle one: the
    /// session reached the end of its time, `expired`).
    pub fn idle_out(&mut self, idle: std::time::Duration) {
        match self {
            Engine::Realtime(c) => c.close_with(idle_error(idle)),
            Engine::Live(l) => l.expire(),
        }
    }

    /// The call is ending under the engine (see [`LiveSession::end`]); true when that made
    /// events. Realtime has none for it: its sidebands just close.
    pub fn end(&mut self, reason: &'static str) -> bool {
        match self {
            Engine::Live(l) => {
                l.end(reason);
                true
            }
            Engine::Realtime(_) => false,
        }
    }

    /// The client event that carries audio on a WebSocket.
    pub fn append_event(&self) -> &'static str {
        match self {
            Engine::Realtime(_) => "input_audio_buffer.append",
            Engine::Live(_) => "session.input_audio.append",
        }
    }

    pub fn is_live(&self) -> bool {
        matches!(self, Engine::Live(_))
    }

    /// Whether the caller's audio may reach the model (Live's input mute).
    pub fn hears_input(&self) -> bool {
        match self {
            Engine::Live(l) => !l.input_muted(),
            Engine::Realtime(_) => true,
        }
    }

    /// Whether the call's own data channel receives this frame (Live's frontend permissions);
    /// sidebands receive every frame.
    pub fn data_channel_receives(&self, frame: &str) -> bool {
        match self {
            Engine::Live(l) => l.data_channel_receives(frame),
            Engine::Realtime(_) => true,
        }
    }
}
