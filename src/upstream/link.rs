//! The WebSocket to the upstream model, one per bridged call: a task on one process-wide
//! runtime that connects (with the server's key), then carries text frames both ways.
//!
//! Why a task and not the worker: the transceiver's workers are socket loops that must never
//! wait on a remote server, so the link's I/O runs beside them and talks to its call through
//! two bounded queues. Outgoing frames go through [`UpstreamLink::send`], which never waits:
//! a full queue means the upstream stopped reading, and the call fails rather than stall the
//! worker. Incoming frames go to `deliver`, which may wait (the worker's mailbox is bounded),
//! and then the upstream's own TCP window holds it back.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};

/// The upgrade (TCP, TLS and the HTTP answer) must finish within this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Frames waiting to go upstream: ≈ 5 s of 20 ms appends. Past it the upstream is stalled.
pub const SEND_QUEUE: usize = 256;
/// Frames from a link read ahead of its call.
const RECEIVE_QUEUE: usize = 64;

/// What a link reports to its call.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamEvent {
    /// The upgrade was answered: frames flow from now on.
    Open,
    Text(String),
    /// The link is over; nothing follows.
    Closed(LinkEnd),
}

/// How a link ended, for the caller's `error` event. Never carries the key.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkEnd {
    /// The upgrade was answered with an HTTP error (401, 404, 429…), with the upstream's
    /// error code and message when its body had them.
    Refused {
        status: u16,
        code: Option<String>,
        message: Option<String>,
    },
    Unreachable(String),
    Timeout,
    /// Closed, or broken, after it was open.
    Dropped(String),
    /// It stopped reading: [`SEND_QUEUE`] frames wait.
    Stalled,
}

/// The call's end of its link: dropping it closes the WebSocket (or abandons the connect).
#[derive(Debug)]
pub struct UpstreamLink {
    tx: mpsc::Sender<String>,
    _cancel: oneshot::Sender<()>,
}

/// The link's queue to the upstream is full.
#[derive(Debug, PartialEq, Eq)]
pub struct Full;

impl UpstreamLink {
    /// Queues `text` for the upstream without waiting.
    pub fn send(&self, text: String) -> Result<(), Full> {
        match self.tx.try_send(text) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => Err(Full),
            // The task is gone; it has reported why (its last event).
            Err(mpsc::error::TrySendError::Closed(_)) => Ok(()),
        }
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| crate::background::runtime("upstream"))
}

/// Opens `url` with `key` as its bearer token; what happens comes to `deliver`, in order,
/// until it returns false (nobody listens) or the link ends.
pub fn open<D, F>(url: String, key: Option<String>, deliver: D) -> UpstreamLink
where
    D: FnMut(UpstreamEvent) -> F + Send + 'static,
    F: Future<Output = bool> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(SEND_QUEUE);
    let (cancel, cancelled) = oneshot::channel();
    runtime().spawn(run(url, key, rx, cancelled, deliver));
    UpstreamLink {
        tx,
        _cancel: cancel,
    }
}

/// Like [`open`], for a host already on tokio (the WebSocket door): the events come on a
/// channel instead of a callback.
pub fn open_to_channel(
    url: String,
    key: Option<String>,
) -> (UpstreamLink, mpsc::Receiver<UpstreamEvent>) {
    let (events, rx) = mpsc::channel(RECEIVE_QUEUE);
    let link = open(url, key, move |event| {
        let events = events.clone();
        async move { events.send(event).await.is_ok() }
    });
    (link, rx)
}

async fn run<D, F>(
    url: String,
    key: Option<String>,
    mut outgoing: mpsc::Receiver<String>,
    mut cancelled: oneshot::Receiver<()>,
    mut deliver: D,
) where
    D: FnMut(UpstreamEvent) -> F + Send + 'static,
    F: Future<Output = bool> + Send + 'static,
{
    let connect = async {
        let mut request = url
            .as_str()
            .into_client_request()
            .map_err(|e| LinkEnd::Unreachable(format!("bad upstream URL: {e}")))?;
        if let Some(key) = &key {
            let value = format!("Bearer {key}").parse().map_err(|_| {
                LinkEnd::Unreachable("the upstream key is not a header value".into())
            })?;
            request
                .headers_mut()
                .insert(tungstenite::http::header::AUTHORIZATION, value);
        }
        match tokio::time::timeout(CONNECT_TIMEOUT, tokio_tungstenite::connect_async(request)).await
        {
            Err(_) => Err(LinkEnd::Timeout),
            Ok(Err(e)) => Err(end_of(e, key.as_deref())),
            Ok(Ok((ws, _))) => Ok(ws),
        }
    };
    let ws = tokio::select! {
        ws = connect => ws,
        _ = &mut cancelled => return,
    };
    let ws = match ws {
        Ok(ws) => ws,
        Err(end) => {
            deliver(UpstreamEvent::Closed(end)).await;
            return;
        }
    };
    if !deliver(UpstreamEvent::Open).await {
        return;
    }
    let (mut sink, mut stream) = ws.split();
    loop {
        tokio::select! {
            out = outgoing.recv() => match out {
                Some(text) => {
                    if let Err(e) = sink.send(Message::text(text)).await {
                        let why = scrub(&e.to_string(), key.as_deref());
                        deliver(UpstreamEvent::Closed(LinkEnd::Dropped(why))).await;
                        return;
                    }
                }
                // The call is gone: a clean close.
                None => {
                    let _ = sink.send(Message::Close(None)).await;
                    return;
                }
            },
            message = stream.next() => {
                let end = match message {
                    Some(Ok(Message::Text(text))) => {
                        if !deliver(UpstreamEvent::Text(text.to_string())).await {
                            return;
                        }
                        continue;
                    }
                    // Pings are answered by tungstenite; the protocol has no binary frames.
                    Some(Ok(Message::Close(frame))) => LinkEnd::Dropped(match frame {
                        Some(f) => format!("the upstream closed the WebSocket ({} {})", u16::from(f.code), scrub(&f.reason, key.as_deref())),
                        None => "the upstream closed the WebSocket".into(),
                    }),
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => LinkEnd::Dropped(scrub(&e.to_string(), key.as_deref())),
                    None => LinkEnd::Dropped("the upstream connection ended".into()),
                };
                deliver(UpstreamEvent::Closed(end)).await;
                return;
            }
        }
    }
}

/// A failed upgrade, as the caller may see it.
fn end_of(e: tungstenite::Error, key: Option<&str>) -> LinkEnd {
    match e {
        tungstenite::Error::Http(response) => {
            #[derive(serde::Deserialize)]
            struct Body {
                error: Option<Detail>,
            }
            #[derive(serde::Deserialize)]
            struct Detail {
                code: Option<String>,
                message: Option<String>,
            }
            let detail = response
                .body()
                .as_deref()
                .and_then(|b| serde_json::from_slice::<Body>(b).ok())
                .and_then(|b| b.error);
            let (code, message) = detail.map_or((None, None), |d| (d.code, d.message));
            LinkEnd::Refused {
                status: response.status().as_u16(),
                code,
                message: message.map(|m| scrub(&m, key)),
            }
        }
        e => LinkEnd::Unreachable(scrub(&e.to_string(), key)),
    }
}

/// The key, wherever an upstream's message or an error's text repeats it, replaced.
fn scrub(text: &str, key: Option<&str>) -> String {
    match key {
        Some(k) if k.len() >= 4 => text.replace(k, "[upstream key]"),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_keeps_status_and_code_and_never_the_key() {
        let body = br#"{"error":{"code":"invalid_api_key","message":"Incorrect API key provided: sk-test-123."}}"#;
        let response = tungstenite::http::Response::builder()
            .status(401)
            .body(Some(body.to_vec()))
            .unwrap();
        let end = end_of(
            tungstenite::Error::Http(response.into()),
            Some("sk-test-123"),
        );
        assert_eq!(
            end,
            LinkEnd::Refused {
                status: 401,
                code: Some("invalid_api_key".into()),
                message: Some("Incorrect API key provided: [upstream key].".into()),
            }
        );
    }
}
