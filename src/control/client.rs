//! Signaling's side of the control API: a transceiver in another process, reached over HTTP.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::TransceiverControl;
use super::wire::{self, PREFIX};
use crate::transceiver::{CallCommand, CallError, CallId, CallInfo, CallReply, CreatedCall};

/// Answering an offer takes milliseconds; a control call this slow means the transceiver is
/// stuck or gone, and the client is better off with a 503 now than a hang.
const TIMEOUT: Duration = Duration::from_secs(5);

/// What the transceiver last reported through membership (see [`crate::membership`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Reported {
    pub load: usize,
    pub draining: bool,
    /// When the transceiver measured it (its clock): older news never replaces newer.
    pub at_ms: u64,
}

impl Reported {
    /// Takes `load` if it was measured no earlier than the one held.
    fn newer_load(&mut self, load: usize, at_ms: u64) {
        if at_ms >= self.at_ms {
            self.load = load;
            self.at_ms = at_ms;
        }
    }
}

pub struct RemoteTransceiver {
    cluster: u16,
    id: u16,
    control: SocketAddr,
    authorization: String,
    http: Client<HttpConnector, Full<Bytes>>,
    reported: Mutex<Reported>,
    /// Placed here by this signaling process and not answered yet: membership reports lag by
    /// up to a heartbeat, and a burst of offers must still spread.
    pending: AtomicUsize,
    /// Until when it is taken to refuse calls, after it last answered one with "at capacity":
    /// membership heartbeats are too slow to carry a state that changes every second.
    refusing_until: Mutex<Option<std::time::Instant>>,
}

impl RemoteTransceiver {
    pub fn new(cluster: u16, id: u16, control: SocketAddr, secret: &str) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(2)));
        RemoteTransceiver {
            cluster,
            id,
            control,
            authorization: format!("Bearer {secret}"),
            // Under the control listener's idle timeout (`http_server::HEADER_TIMEOUT`): a pooled
            // connection is dropped here before the transceiver closes it, so a request never
            // goes out on a connection the other side is closing.
            http: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(5))
                .build(connector),
            reported: Mutex::new(Reported::default()),
            pending: AtomicUsize::new(0),
            refusing_until: Mutex::new(None),
        }
    }

    pub fn control_addr(&self) -> SocketAddr {
        self.control
    }

    /// A heartbeat's news: load and draining as the transceiver sees them. The load is kept
    /// only if it is newer than the one the last answered call brought back.
    pub fn update(&self, r: Reported) {
        let mut cur = self.reported.lock().unwrap();
        cur.draining = r.draining;
        cur.newer_load(r.load, r.at_ms);
    }

    async fn request<B: Serialize, T: DeserializeOwned>(
        &self,
        method: hyper::Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<(u16, Option<T>), CallError> {
        let body = match body {
            Some(b) => Bytes::from(serde_json::to_vec(b).map_err(|e| self.failed(e))?),
            None => Bytes::new(),
        };
        let req = hyper::Request::builder()
            .method(method)
            .uri(format!("http://{}{PREFIX}{path}", self.control))
            .header(hyper::header::AUTHORIZATION, &self.authorization)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(body))
            .map_err(|e| self.failed(e))?;
        let resp = tokio::time::timeout(TIMEOUT, self.http.request(req))
            .await
            .map_err(|_| self.failed(format!("no reply within {TIMEOUT:?}")))?
            .map_err(|e| self.failed(e))?;
        let status = resp.status().as_u16();
        let bytes = tokio::time::timeout(TIMEOUT, resp.into_body().collect())
            .await
            .map_err(|_| self.failed("body timed out"))?
            .map_err(|e| self.failed(e))?
            .to_bytes();
        match status {
            200..=299 if bytes.is_empty() => Ok((status, None)),
            200..=299 => serde_json::from_slice(&bytes)
                .map(|v| (status, Some(v)))
                .map_err(|e| self.failed(format!("bad reply: {e}"))),
            404 => Ok((404, None)),
            _ => Err(wire::call_error(
                self.id,
                status,
                &String::from_utf8_lossy(&bytes),
            )),
        }
    }

    fn failed(&self, e: impl std::fmt::Display) -> CallError {
        CallError::Control(format!("transceiver {} at {}: {e}", self.id, self.control))
    }
}

/// Decrements the pending count however the call setup ends.
struct Pending<'a>(&'a AtomicUsize);
impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[async_trait::async_trait]
impl TransceiverControl for RemoteTransceiver {
    fn cluster(&self) -> u16 {
        self.cluster
    }

    fn id(&self) -> u16 {
        self.id
    }

    fn load(&self) -> usize {
        self.reported.lock().unwrap().load + self.pending.load(Ordering::Relaxed)
    }

    fn is_draining(&self) -> bool {
        self.reported.lock().unwrap().draining
    }

    fn admits_calls(&self) -> bool {
        self.refusing_until
            .lock()
            .unwrap()
            .is_none_or(|t| std::time::Instant::now() >= t)
    }

    fn reserve(&self) {
        self.pending.fetch_add(1, Ordering::Relaxed);
    }

    fn describe(&self) -> Value {
        let r = *self.reported.lock().unwrap();
        json!({"cluster": self.cluster, "id": self.id, "control": self.control,
               "reported_load": r.load, "pending": self.pending.load(Ordering::Relaxed),
               "draining": r.draining, "where": "remote"})
    }

    async fn create_call(
        &self,
        offer_sdp: String,
        setup: crate::transceiver::CallSetup,
    ) -> Result<CreatedCall, CallError> {
        let _pending = Pending(&self.pending);
        let (status, created) = self
            .request::<_, wire::Created>(
                hyper::Method::POST,
                "/calls",
                Some(&wire::CreateCall { offer_sdp, setup }),
            )
            .await
            .inspect_err(|e| {
                if matches!(e, CallError::Full(..)) {
                    *self.refusing_until.lock().unwrap() = Some(
                        std::time::Instant::now() + crate::transceiver::admission::RETRY_AFTER,
                    );
                }
            })?;
        let created =
            created.ok_or_else(|| self.failed(format!("status {status} without a call")))?;
        self.reported
            .lock()
            .unwrap()
            .newer_load(created.load, created.at_ms);
        Ok(CreatedCall::from(created))
    }

    async fn call(
        &self,
        call_id: &CallId,
        command: CallCommand,
    ) -> Result<Option<CallReply>, CallError> {
        // A CallId is a prefix and hex digits: nothing in it needs escaping in a path.
        let (_, reply) = self
            .request::<_, CallReply>(
                hyper::Method::POST,
                &format!("/calls/{call_id}/command"),
                Some(&command),
            )
            .await?;
        Ok(reply)
    }

    async fn list_calls(&self) -> Result<Vec<CallInfo>, CallError> {
        let (_, calls) = self
            .request::<(), wire::Calls>(hyper::Method::GET, "/calls", None)
            .await?;
        Ok(calls.map(|c| c.calls).unwrap_or_default())
    }

    async fn drain(&self) -> Result<(), CallError> {
        self.request::<(), Value>(hyper::Method::POST, "/drain", None)
            .await
            .map(|_| ())
    }

    async fn open_session(
        &self,
        request: crate::websocket::SessionRequest,
    ) -> Result<crate::websocket::EventStream, CallError> {
        let _pending = Pending(&self.pending);
        let json = serde_json::to_string(&request).map_err(|e| self.failed(e))?;
        let url = format!(
            "ws://{}{PREFIX}/sessions?request={}",
            self.control,
            urlencode(&json)
        );
        super::stream::dial(self.id, &url, &self.authorization, TIMEOUT)
            .await?
            .ok_or_else(|| self.failed("no session endpoint"))
    }

    async fn attach_sideband(
        &self,
        call_id: &CallId,
    ) -> Result<Option<crate::websocket::EventStream>, CallError> {
        let url = format!("ws://{}{PREFIX}/calls/{call_id}/sideband", self.control);
        super::stream::dial(self.id, &url, &self.authorization, TIMEOUT).await
    }
}

/// Percent-encodes everything but the unreserved characters (RFC 3986), for a query value.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
