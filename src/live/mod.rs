//! OpenAI's Live API (`/v1/live/sessions`, the `openai` package's `client.live`), spoken on the
//! same `oai-events` data channel and media path as Realtime, and over a WebSocket.
//!
//! Live differs from Realtime in who owns the turn, not in how audio travels: the model decides
//! when the caller has finished and when it was talked over, there is no turn-detection config,
//! no `input_audio_buffer.*` and no `response.create` for speech, and transcripts arrive as
//! timeline-stamped deltas with no `.done` events. So a [`LiveSession`] is a different face on
//! the one turn engine voice-edge has: it drives a [`crate::realtime::Conversation`] configured
//! the way a Live model behaves (server VAD that answers and yields to barge-in, transcription
//! on), translates Live client events into that engine's operations, and turns the engine's
//! Realtime events into Live ones. Media, VAD, barge-in, the stub models and scripts are the
//! Realtime path's code, unchanged.
//!
//! `config` holds the startup config's checks and the session resource, `client_event` the
//! client events as types, `session` the engine.

pub mod client_event;
pub mod config;
pub mod server_event;
mod session;

pub use config::{DelegationTarget, LiveConfig};
pub use session::{EventSource, LiveSession, error_frame};

use crate::model::ModelKind;
use crate::realtime::ClientError;

/// The stub a session's `model` names: ours (`echo`, `tts`, `script:NAME`), else echo
/// (`gpt-live-1` is not ours). A malformed or unknown script is refused.
pub fn model_for(config: &LiveConfig) -> Result<ModelKind, ClientError> {
    match ModelKind::parse(&config.model) {
        Err(e) => Err(ClientError::new("invalid_model", e.to_string()).param("session.model")),
        Ok(Some(ModelKind::Script(script))) => {
            crate::model::script::library::find(&script)
                .map_err(|e| ClientError::new("unknown_script", e).param("session.model"))?;
            Ok(ModelKind::Script(script))
        }
        Ok(Some(kind)) => Ok(kind),
        Ok(None) => Ok(ModelKind::Echo),
    }
}

/// The prefix of a Live session's id; the rest is a call id's routing part, so signaling routes
/// `/v1/live/sessions/{id}/…` exactly as it routes calls.
pub const ID_PREFIX: &str = "live_";
