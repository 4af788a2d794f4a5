//! Whether the upstream answers, for `GET /health`: one WebSocket upgrade with the server's
//! key, closed at once, its result kept for [`FRESH`] so a health checker polling every
//! second opens at most one upstream session per interval.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::UpstreamConfig;
use super::link::{self, LinkEnd, UpstreamEvent};

/// A probe's answer is reused for this long.
pub const FRESH: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UpstreamHealth {
    pub url: String,
    /// The upgrade was answered with 101.
    pub answers: bool,
    /// Why not, as a caller's `error` would say it (no key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub checked_ms_ago: u64,
}

#[derive(Default)]
pub struct Probe {
    last: Mutex<Option<(Instant, bool, Option<String>)>>,
}

impl Probe {
    /// The upstream's health, probing it (for its default model) when the last answer is stale.
    pub async fn check(&self, cfg: &UpstreamConfig) -> UpstreamHealth {
        let cached = self
            .last
            .lock()
            .expect("probe lock")
            .clone()
            .filter(|(at, _, _)| at.elapsed() < FRESH);
        let (at, answers, error) = match cached {
            Some(last) => last,
            None => {
                let (answers, error) = probe(cfg).await;
                let last = (Instant::now(), answers, error);
                *self.last.lock().expect("probe lock") = Some(last.clone());
                last
            }
        };
        UpstreamHealth {
            url: cfg.url.clone(),
            answers,
            error,
            checked_ms_ago: at.elapsed().as_millis() as u64,
        }
    }
}

async fn probe(cfg: &UpstreamConfig) -> (bool, Option<String>) {
    let (link, mut events) = link::open_to_channel(cfg.url_for(&cfg.model), cfg.key.clone());
    let first = tokio::time::timeout(
        link::CONNECT_TIMEOUT + Duration::from_secs(1),
        events.recv(),
    )
    .await;
    drop(link);
    match first {
        Ok(Some(UpstreamEvent::Open)) => (true, None),
        Ok(Some(UpstreamEvent::Closed(end))) => (false, Some(super::bridge::describe(&end).1)),
        Ok(_) | Err(_) => (false, Some(super::bridge::describe(&LinkEnd::Timeout).1)),
    }
}
