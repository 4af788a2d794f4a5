//! A real model behind the edge: each call bridged to an upstream Realtime WebSocket (OpenAI's
//! `wss://api.openai.com/v1/realtime`, or a local server that speaks the protocol).
//!
//! Why a bridge on the transceiver, and not the browser talking to the model: the browser
//! speaks WebRTC, the model servers speak WebSocket, and only the call's owner has both the
//! decoded audio and the playout clock that WebRTC's `output_audio_buffer.*` events and
//! truncation by what was heard are made from. Everything the edge already does to a call
//! (event log, faults, recordings, sidebands) then works in front of a real model.
//!
//! Layout: [`bridge`] is the protocol state machine (sans-I/O, tested in virtual time),
//! [`link`] the WebSocket task that carries its frames, [`health`] the probe `GET /health`
//! reports.

pub mod bridge;
pub mod health;
pub mod link;

pub use bridge::Bridge;
pub use link::{LinkEnd, UpstreamEvent, UpstreamLink};

/// A model name with this prefix goes upstream whatever follows (`upstream:echo` asks an
/// upstream that is another voice-edge for its echo stub); other names go upstream unless
/// they name one of the edge's own stubs.
pub const FORCE_PREFIX: &str = "upstream:";

/// Where calls whose model is not a stub go, and with what key. The key stays in this
/// process: it is sent only as the upstream request's `Authorization`, and never printed
/// (`Debug` hides it).
#[derive(Clone, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// `ws://` or `wss://`, without `?model=` (added per call).
    pub url: String,
    pub key: Option<String>,
    /// The model a call asks for when it names none (`--upstream-model`).
    pub model: String,
    /// Caller audio is sent upstream in appends of this many milliseconds.
    pub append_ms: u32,
}

impl std::fmt::Debug for UpstreamConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamConfig")
            .field("url", &self.url)
            .field("key", &self.key.as_ref().map(|_| "<set>"))
            .field("model", &self.model)
            .field("append_ms", &self.append_ms)
            .finish()
    }
}

/// Appends of 20 ms: the measured best turn latency (see the README's upstream table).
pub const DEFAULT_APPEND_MS: u32 = 20;

impl UpstreamConfig {
    /// Checks the URL's scheme; `append_ms` is bounded to the 20–100 ms the issue allows.
    pub fn new(
        url: &str,
        key: Option<String>,
        model: &str,
        append_ms: u32,
    ) -> Result<Self, String> {
        let url = url.trim().trim_end_matches('/').to_owned();
        if !(url.starts_with("ws://") || url.starts_with("wss://")) {
            return Err(format!(
                "--upstream must be a ws:// or wss:// URL (got {url:?})"
            ));
        }
        if url.contains("?model=") || url.contains("&model=") {
            return Err("--upstream takes the URL without ?model= (use --upstream-model)".into());
        }
        if !(20..=100).contains(&append_ms) {
            return Err(format!(
                "--upstream-append-ms must be 20 to 100 (got {append_ms})"
            ));
        }
        if model.trim().is_empty() {
            return Err("--upstream-model must name a model".into());
        }
        Ok(UpstreamConfig {
            url,
            key: key.filter(|k| !k.trim().is_empty()),
            model: model.trim().to_owned(),
            append_ms,
        })
    }

    /// The Live WebSocket beside a Realtime one (`…/v1/realtime` → `…/v1/live/sessions`, as
    /// OpenAI and voice-edge place them); `None` for an upstream that is not at `/realtime`,
    /// whose Live sessions then stay on the stubs.
    pub fn live_url(&self) -> Option<String> {
        let (base, query) = match self.url.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (self.url.as_str(), None),
        };
        let base = base.strip_suffix("/realtime")?;
        Some(match query {
            Some(q) => format!("{base}/live/sessions?{q}"),
            None => format!("{base}/live/sessions"),
        })
    }

    /// The URL one call opens: the base with `model` in its query.
    pub fn url_for(&self, model: &str) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        let model: String = model
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    char::from(b).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        format!("{}{sep}model={model}", self.url)
    }
}

/// What a call bridged upstream starts with: the model it asks for and the connect-time
/// session layers (the ephemeral key's, then the request's own), each sent as a
/// `session.update` before any audio, in order. Crosses the control API, so plain data.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UpstreamCall {
    pub model: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session: Vec<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_take_the_model_in_their_query() {
        let c = UpstreamConfig::new(
            "wss://api.openai.com/v1/realtime/",
            None,
            "gpt-realtime",
            20,
        )
        .unwrap();
        assert_eq!(
            c.url_for("gpt-realtime"),
            "wss://api.openai.com/v1/realtime?model=gpt-realtime"
        );
        let c = UpstreamConfig::new("ws://127.0.0.1:8000/v1/realtime?x=1", None, "m", 40).unwrap();
        assert_eq!(
            c.url_for("script:weather"),
            "ws://127.0.0.1:8000/v1/realtime?x=1&model=script%3Aweather"
        );
        assert_eq!(
            c.live_url().as_deref(),
            Some("ws://127.0.0.1:8000/v1/live/sessions?x=1")
        );
        assert!(UpstreamConfig::new("https://api.openai.com", None, "m", 20).is_err());
        assert!(UpstreamConfig::new("ws://h/v1/realtime?model=a", None, "m", 20).is_err());
        assert!(UpstreamConfig::new("ws://h", None, "m", 10).is_err());
        let keyed = UpstreamConfig::new("ws://h", Some("sk-secret".into()), "m", 20).unwrap();
        assert!(!format!("{keyed:?}").contains("sk-secret"));
        assert!(
            UpstreamConfig::new("ws://h", Some(" ".into()), "m", 20)
                .unwrap()
                .key
                .is_none()
        );
    }
}
