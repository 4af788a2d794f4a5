//! What the bridge reads and writes on the wire: the few fields of an event it acts on (the
//! rest passes untouched), the events it sends of its own accord, the session formats it
//! forces and shows, and how a link's end reads in an `error` event.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audio::Codec;
use crate::upstream::link::{self, CONNECT_TIMEOUT, LinkEnd};

/// Caller audio kept while the upstream connects: 3 s of 20 ms appends, the oldest dropped
/// first (the connect bound is 5 s, and the link's queue must not hold a stalled connect's
/// audio, or the call would fail as stalled rather than timed out).
pub(super) const MAX_EARLY_APPENDS: usize = 150;
/// How an edge append's text starts (serde writes the tag first), in each dialect.
pub(super) const APPEND_PREFIXES: [&str; 2] = [
    r#"{"type":"input_audio_buffer.append""#,
    r#"{"type":"session.input_audio.append""#,
];

/// The `event_id`s of the edge's connect-time `session.update`s: `edge_session_N`.
pub(super) const SESSION_UPDATE_KIND: &str = "session";
pub(super) const SESSION_UPDATE_ID: &str = "edge_session_";

/// Events for the caller held until its channel opens; past this the upstream is flooding a
/// call that is not there, and the call fails.
pub(super) const MAX_HELD: usize = 4096;

/// What the edge sends upstream of its own accord.
#[derive(Serialize)]
#[serde(tag = "type")]
pub(super) enum EdgeEvent<'a> {
    #[serde(rename = "session.update")]
    SessionUpdate {
        event_id: String,
        session: &'a Value,
    },
    #[serde(rename = "input_audio_buffer.append")]
    Append { audio: String },
    #[serde(rename = "session.input_audio.append")]
    LiveAppend { audio: String },
    #[serde(rename = "response.cancel")]
    Cancel {
        event_id: String,
        response_id: &'a str,
    },
    #[serde(rename = "conversation.item.truncate")]
    Truncate {
        event_id: String,
        item_id: &'a str,
        content_index: u32,
        audio_end_ms: u64,
    },
}

impl EdgeEvent<'_> {
    pub(super) fn text(&self) -> String {
        serde_json::to_string(self).expect("edge events serialize")
    }
}

/// The fields of an upstream or client event the bridge acts on; the rest passes untouched.
#[derive(Deserialize, Default)]
pub(super) struct Peek<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(super) kind: &'a str,
    pub(super) response_id: Option<String>,
    pub(super) item_id: Option<String>,
    pub(super) content_index: Option<u32>,
    #[serde(borrow)]
    pub(super) delta: Option<&'a str>,
    pub(super) audio_start_ms: Option<u64>,
    pub(super) audio_end_ms: Option<u64>,
    pub(super) response: Option<IdOnly>,
    pub(super) error: Option<ErrorPeek>,
}

#[derive(Deserialize)]
pub(super) struct IdOnly {
    pub(super) id: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct ErrorPeek {
    pub(super) event_id: Option<String>,
    /// Live's name for it.
    pub(super) client_event_id: Option<String>,
}

/// The session's settings the bridge follows.
#[derive(Deserialize, Default)]
pub(super) struct SessionPeek {
    pub(super) audio: Option<AudioPeek>,
}
#[derive(Deserialize, Default)]
pub(super) struct AudioPeek {
    pub(super) input: Option<InputPeek>,
}
#[derive(Deserialize, Default)]
pub(super) struct InputPeek {
    pub(super) turn_detection: Option<TurnPeek>,
}
#[derive(Deserialize)]
pub(super) struct TurnPeek {
    #[serde(default = "yes")]
    pub(super) interrupt_response: bool,
    /// `server_vad`'s; `semantic_vad` names none.
    pub(super) silence_duration_ms: Option<u64>,
}
fn yes() -> bool {
    true
}

/// An `error` event's code and message for how the link ended.
pub(in crate::upstream) fn describe(end: &LinkEnd) -> (&'static str, String) {
    match end {
        LinkEnd::Refused {
            status,
            code,
            message,
        } => {
            let what = match status {
                401 => "upstream_unauthorized",
                403 => "upstream_forbidden",
                404 => "upstream_not_found",
                429 => "upstream_rate_limited",
                _ => "upstream_refused",
            };
            let detail = match (code, message) {
                (Some(c), Some(m)) => format!(" ({c}: {m})"),
                (Some(c), None) => format!(" ({c})"),
                (None, Some(m)) => format!(" ({m})"),
                (None, None) => String::new(),
            };
            (
                what,
                format!("The upstream model server refused the session: HTTP {status}{detail}."),
            )
        }
        LinkEnd::Unreachable(why) => (
            "upstream_unreachable",
            format!("The upstream model server could not be reached: {why}."),
        ),
        LinkEnd::Timeout => (
            "upstream_timeout",
            format!(
                "The upstream model server did not open the session within {} s.",
                CONNECT_TIMEOUT.as_secs()
            ),
        ),
        LinkEnd::Dropped(why) => (
            "upstream_disconnected",
            format!("The upstream model server went away mid-call: {why}."),
        ),
        LinkEnd::Stalled => (
            "upstream_stalled",
            format!(
                "The upstream model server stopped reading: {} events waited for it.",
                link::SEND_QUEUE
            ),
        ),
    }
}

/// Sets a session layer's formats to 24 kHz PCM, where it names them (the edge's choice on
/// WebRTC, whatever the client asks).
pub(super) fn force_pcm(session: &mut Value) {
    let Some(audio) = session.get_mut("audio").and_then(Value::as_object_mut) else {
        return;
    };
    for side in ["input", "output"] {
        if let Some(s) = audio.get_mut(side).and_then(Value::as_object_mut)
            && s.contains_key("format")
        {
            s.insert(
                "format".into(),
                serde_json::json!({"type": "audio/pcm", "rate": 24000}),
            );
        }
    }
}

/// A session as WebRTC shows it: its audio in the call's codec (PCM at 24 kHz for Opus, as
/// the service's WebRTC sessions say), not the upstream's.
pub(super) fn show_formats(session: &mut Value, codec: Codec) {
    let format = crate::realtime::AudioFormat::from_name(codec.realtime_format())
        .and_then(|f| serde_json::to_value(f).ok());
    let (Some(format), Some(audio)) = (
        format,
        session.get_mut("audio").and_then(Value::as_object_mut),
    ) else {
        return;
    };
    for side in ["input", "output"] {
        if let Some(s) = audio.get_mut(side).and_then(Value::as_object_mut) {
            s.insert("format".into(), format.clone());
        }
    }
}
