//! Signaling: the OpenAI Realtime WebRTC HTTP flow, the demo page, and admin endpoints.
//!
//! `POST /v1/realtime/calls` takes an SDP offer, places the call on a transceiver and returns
//! the answer with `201` and `Location: /v1/realtime/calls/<id>`, as the real service does, so
//! existing clients work by changing only their base URL.

mod errors;
pub mod keys;
mod placement;
mod web;

pub use errors::ApiError;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use tower_http::cors::{Any, CorsLayer};

use crate::control::TransceiverControl;
use crate::transceiver::CallError;

/// Offers from browsers are a few KB; anything near this is not an offer.
pub const MAX_OFFER_BYTES: usize = 64 * 1024;

/// One cluster as signaling sees it: where clients send media, and who can answer.
#[derive(Clone)]
pub struct ClusterView {
    pub id: u16,
    /// The address put in answers' candidate (the cluster relay, or the global relay).
    pub media_addr: SocketAddr,
    pub transceivers: Vec<Arc<dyn TransceiverControl>>,
}

/// Where signaling learns which transceivers exist: a fixed list in the all-in-one process,
/// Redis membership with the roles split ([`crate::membership::RedisDirectory`]).
pub trait Directory: Send + Sync {
    /// The clusters and their live, placeable transceivers, now.
    fn clusters(&self) -> Arc<Vec<ClusterView>>;
}

/// The all-in-one's directory: the transceivers it started, for its whole life.
pub struct StaticDirectory(pub Arc<Vec<ClusterView>>);

impl Directory for StaticDirectory {
    fn clusters(&self) -> Arc<Vec<ClusterView>> {
        self.0.clone()
    }
}

type StatsFn = Arc<dyn Fn() -> Value + Send + Sync>;
/// Operator actions the embedding process offers (`POST /admin/actions/{name}`), e.g. the
/// all-in-one's dev-only relay restart.
pub type AdminAction = Arc<dyn Fn(&str) -> Result<Value, String> + Send + Sync>;

#[derive(Clone)]
pub struct Signaling {
    directory: Arc<dyn Directory>,
    /// Makes pick-and-reserve atomic across concurrent offers.
    placement: Arc<Mutex<()>>,
    stats: StatsFn,
    admin: Option<AdminAction>,
    keys: Arc<keys::Keys>,
    counters: Arc<CallCounters>,
}

/// What `/metrics` counts of the call API.
#[derive(Default)]
struct CallCounters {
    created: std::sync::atomic::AtomicU64,
    /// Offers refused because no transceiver could take them (503).
    unplaced: std::sync::atomic::AtomicU64,
    /// Offers a transceiver could not answer (a bad offer) or did not answer (gone).
    failed: std::sync::atomic::AtomicU64,
}

impl Signaling {
    pub fn new(clusters: Vec<ClusterView>, stats: StatsFn) -> Self {
        Self::with_directory(Arc::new(StaticDirectory(Arc::new(clusters))), stats)
    }

    pub fn with_directory(directory: Arc<dyn Directory>, stats: StatsFn) -> Self {
        Signaling {
            directory,
            placement: Arc::new(Mutex::new(())),
            stats,
            admin: None,
            keys: Arc::new(keys::Keys::open()),
            counters: Arc::default(),
        }
    }

    pub fn with_keys(mut self, keys: keys::Keys) -> Self {
        self.keys = Arc::new(keys);
        self
    }

    pub fn with_admin(mut self, admin: AdminAction) -> Self {
        self.admin = Some(admin);
        self
    }

    /// Everything: the Realtime API, the demo page and `/admin/*`.
    pub fn router(self) -> Router {
        self.routes(true)
    }

    /// The Realtime API and the demo page, without `/admin/*`: for listeners that other machines
    /// reach (LAN mode), since admin actions are for the operator on this machine.
    pub fn router_without_admin(self) -> Router {
        self.routes(false)
    }

    fn routes(self, admin: bool) -> Router {
        let cors = CorsLayer::new()
            .allow_origin(Any)
            .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::OPTIONS])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                HeaderName::from_static("x-openai-agents-sdk"),
            ])
            .expose_headers([
                header::LOCATION,
                HeaderName::from_static("x-voice-edge-relay"),
                HeaderName::from_static("x-voice-edge-media"),
                HeaderName::from_static("x-voice-edge-cluster"),
                HeaderName::from_static("x-voice-edge-transceiver"),
                HeaderName::from_static("x-voice-edge-worker"),
            ]);
        let mut router = Router::new()
            .route("/v1/realtime/calls", post(create_call))
            .route("/v1/realtime/calls/{id}", patch(renegotiate))
            .route("/v1/realtime/calls/{id}/hangup", post(hangup))
            .route("/v1/realtime/client_secrets", post(client_secrets))
            .route("/health", get(|| async { "ok\n" }));
        if admin {
            router = router
                .route("/metrics", get(metrics))
                .route("/admin/stats", get(admin_stats))
                .route("/admin/calls", get(admin_calls))
                .route("/admin/actions/{name}", post(admin_action));
        }
        router
            .fallback(get(web::serve))
            .layer(DefaultBodyLimit::max(MAX_OFFER_BYTES))
            .layer(cors)
            .with_state(self)
    }
}

/// The stub a call starts with. `?model=` names one of ours (`echo`, `tts`, `loopback`) or is
/// ignored, as the real service ignores it on /calls (older beta clients send OpenAI model
/// names there); a later `session.update` can still switch between `echo` and `tts`.
fn model_for(requested: Option<&str>) -> String {
    match requested.map(|m| m.trim().to_ascii_lowercase()) {
        Some(m) if m == "tts" || m == "loopback" || m == "echo" => m,
        _ => "echo".to_owned(),
    }
}

#[derive(Deserialize)]
struct CallQuery {
    model: Option<String>,
    /// Pins the call to a cluster (for tests and operators); default is least loaded.
    cluster: Option<u16>,
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

fn key_error(e: keys::KeyError) -> ApiError {
    ApiError {
        status: StatusCode::UNAUTHORIZED,
        kind: "invalid_request_error",
        code: "invalid_api_key",
        message: e.message().to_owned(),
    }
}

/// The offer and, for multipart requests (openai-node's `realtime.calls.create`), the session
/// config sent with it.
async fn read_offer(req: Request) -> Result<(String, Option<Value>), ApiError> {
    let ctype = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let mime = ctype
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let too_large = |e: String| {
        ApiError::invalid(
            "body_too_large",
            format!("offer rejected: {e} (limit {MAX_OFFER_BYTES} bytes)"),
        )
        .with_status(StatusCode::PAYLOAD_TOO_LARGE)
    };
    match mime.as_str() {
        "application/sdp" => {
            let body = axum::body::to_bytes(req.into_body(), MAX_OFFER_BYTES)
                .await
                .map_err(|e| too_large(e.to_string()))?;
            let sdp = String::from_utf8(body.to_vec())
                .map_err(|_| ApiError::invalid("invalid_sdp", "the offer is not UTF-8 text"))?;
            Ok((sdp, None))
        }
        "multipart/form-data" => {
            let mut mp = Multipart::from_request(req, &())
                .await
                .map_err(|e| ApiError::invalid("invalid_multipart", e.to_string()))?;
            let (mut sdp, mut session) = (None, None);
            while let Some(field) = mp
                .next_field()
                .await
                .map_err(|e| ApiError::invalid("invalid_multipart", e.to_string()))?
            {
                let name = field.name().unwrap_or("").to_owned();
                let text = field.text().await.map_err(|e| too_large(e.to_string()))?;
                match name.as_str() {
                    "sdp" => sdp = Some(text),
                    "session" => {
                        session = Some(serde_json::from_str::<Value>(&text).map_err(|e| {
                            ApiError::invalid("invalid_session", format!("the session part is not JSON: {e}"))
                        })?)
                    }
                    _ => {}
                }
            }
            let sdp = sdp.ok_or_else(|| ApiError::invalid("missing_sdp", "the multipart body has no `sdp` part"))?;
            Ok((sdp, session))
        }
        _ => Err(ApiError::invalid(
            "unsupported_content_type",
            format!(
                "POST the SDP offer with Content-Type: application/sdp, or multipart/form-data with an `sdp` part (got {ctype:?})"
            ),
        )
        .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE)),
    }
}

/// Cheap checks before a transceiver spends anything on the offer.
fn check_offer(offer: &str) -> Result<(), ApiError> {
    if !offer.trim_start().starts_with("v=0") {
        return Err(ApiError::invalid(
            "invalid_sdp",
            "the body is not an SDP offer (it must start with v=0)",
        ));
    }
    if !offer.lines().any(|l| l.starts_with("m=audio")) {
        return Err(ApiError::invalid(
            "no_audio",
            "the offer has no audio m-line",
        ));
    }
    if !offer.lines().any(|l| l.starts_with("a=fingerprint:")) {
        return Err(ApiError::invalid(
            "no_dtls_fingerprint",
            "the offer has no a=fingerprint line; DTLS-SRTP needs the client's certificate fingerprint",
        ));
    }
    Ok(())
}

async fn create_call(
    State(sig): State<Signaling>,
    Query(q): Query<CallQuery>,
    req: Request,
) -> Result<Response, ApiError> {
    let key_session = sig
        .keys
        .check_call(bearer(req.headers()))
        .map_err(key_error)?;
    let (offer, session) = read_offer(req).await?;
    check_offer(&offer)?;
    // The stub: the call's own session config first, then the key's, then `?model=`.
    let model = session
        .as_ref()
        .or(key_session.as_ref())
        .and_then(|s| s.get("model"))
        .and_then(Value::as_str)
        .map(|m| model_for(Some(m)))
        .filter(|m| m != "echo")
        .unwrap_or_else(|| model_for(q.model.as_deref()));

    let count = |c: &std::sync::atomic::AtomicU64| {
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    let (t, media_addr) = sig
        .place(q.cluster)
        .inspect_err(|_| count(&sig.counters.unplaced))?;
    let created = t
        .create_call(offer, model)
        .await
        .inspect_err(|_| count(&sig.counters.failed))
        .map_err(call_error)?;
    count(&sig.counters.created);

    let mut resp = (StatusCode::CREATED, created.answer_sdp).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/sdp"),
    );
    let set = |h: &mut HeaderMap, k: &'static str, v: String| {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(HeaderName::from_static(k), v);
        }
    };
    set(
        h,
        "location",
        format!("/v1/realtime/calls/{}", created.call_id),
    );
    // Where the client sends media: the relay, or the transceiver itself with `--direct`.
    set(h, "x-voice-edge-media", created.candidate.to_string());
    if created.candidate == media_addr {
        set(h, "x-voice-edge-relay", media_addr.to_string());
    }
    set(h, "x-voice-edge-cluster", created.cluster.to_string());
    set(
        h,
        "x-voice-edge-transceiver",
        created.transceiver.to_string(),
    );
    set(h, "x-voice-edge-worker", created.worker.to_string());
    Ok(resp)
}

impl Signaling {
    fn place(
        &self,
        cluster: Option<u16>,
    ) -> Result<(Arc<dyn TransceiverControl>, SocketAddr), ApiError> {
        let clusters = self.directory.clusters();
        let _guard = self.placement.lock().unwrap();
        let candidates: Vec<&ClusterView> = clusters
            .iter()
            .filter(|c| cluster.is_none_or(|id| c.id == id))
            .collect();
        if candidates.is_empty() {
            return Err(match cluster {
                Some(id) => ApiError::invalid("unknown_cluster", format!("no cluster {id}")),
                None => ApiError::unavailable("no transceiver is registered"),
            });
        }
        let mut best: Option<(&ClusterView, &Arc<dyn TransceiverControl>)> = None;
        for c in candidates {
            if let Some(t) = placement::pick(&c.transceivers)
                && best.is_none_or(|(_, b)| t.load() < b.load())
            {
                best = Some((c, t));
            }
        }
        let (c, t) =
            best.ok_or_else(|| ApiError::unavailable("no transceiver is accepting calls"))?;
        t.reserve();
        Ok((t.clone(), c.media_addr))
    }
}

async fn hangup(
    State(sig): State<Signaling>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let t = sig.transceiver_of(&id).ok_or_else(|| call_not_found(&id))?;
    if t.hangup(id.clone()).await.map_err(call_error)? {
        Ok(StatusCode::OK.into_response())
    } else {
        Err(call_not_found(&id))
    }
}

/// `PATCH /v1/realtime/calls/{id}` with a new SDP offer for a live call, typically an ICE
/// restart after the client's network changed (`pc.restartIce()` then a new offer). The call
/// keeps its id, its session and its DTLS association; the body of the 200 is the answer.
/// This is our extension: the Realtime API has no renegotiation endpoint. It sits on the
/// call's `Location`, as WHIP (RFC 9725) puts ICE restarts on the session resource.
async fn renegotiate(
    State(sig): State<Signaling>,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, ApiError> {
    let t = sig.transceiver_of(&id).ok_or_else(|| call_not_found(&id))?;
    let (offer, _) = read_offer(req).await?;
    check_offer(&offer)?;
    let answer = t
        .renegotiate(id.clone(), offer)
        .await
        .map_err(call_error)?
        .ok_or_else(|| call_not_found(&id))?;
    Ok((
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/sdp"),
        )],
        answer,
    )
        .into_response())
}

fn call_not_found(id: &str) -> ApiError {
    ApiError::invalid("call_not_found", format!("no live call {id:?}"))
        .with_status(StatusCode::NOT_FOUND)
}

/// A bad offer is the client's fault (400); a stopped transceiver is ours (503).
fn call_error(e: CallError) -> ApiError {
    match e {
        CallError::Answer(a) => ApiError::invalid("invalid_offer", a.to_string()),
        CallError::Unavailable(_) | CallError::Control(_) => ApiError::unavailable(e.to_string()),
    }
}

impl Signaling {
    /// The transceiver a call id names (the id encodes cluster and transceiver).
    fn transceiver_of(&self, call_id: &str) -> Option<Arc<dyn TransceiverControl>> {
        let place = crate::transceiver::call_id::decode(call_id)?;
        self.directory
            .clusters()
            .iter()
            .find(|c| c.id == place.cluster)?
            .transceivers
            .iter()
            .find(|t| t.id() == place.transceiver)
            .cloned()
    }
}

/// Prometheus text: the call API's counters and the transceivers placement sees.
async fn metrics(State(sig): State<Signaling>) -> Response {
    use std::sync::atomic::Ordering::Relaxed;
    let mut out = String::new();
    let c = &sig.counters;
    crate::ops::family(
        &mut out,
        "voice_edge_signaling_offers_total",
        "counter",
        "Call offers by outcome: created, unplaced (no transceiver could take it), failed.",
        &[
            (&[("outcome", "created")], c.created.load(Relaxed) as f64),
            (&[("outcome", "unplaced")], c.unplaced.load(Relaxed) as f64),
            (&[("outcome", "failed")], c.failed.load(Relaxed) as f64),
        ],
    );
    let clusters = sig.directory.clusters();
    let mut per: Vec<(String, String, f64, f64)> = vec![];
    for cl in clusters.iter() {
        for t in &cl.transceivers {
            per.push((
                cl.id.to_string(),
                t.id().to_string(),
                t.load() as f64,
                t.is_draining() as u8 as f64,
            ));
        }
    }
    let labels: Vec<[(&str, &str); 2]> = per
        .iter()
        .map(|(c, t, _, _)| [("cluster", c.as_str()), ("transceiver", t.as_str())])
        .collect();
    let load: Vec<(&[(&str, &str)], f64)> = labels
        .iter()
        .zip(&per)
        .map(|(l, p)| (&l[..], p.2))
        .collect();
    let draining: Vec<(&[(&str, &str)], f64)> = labels
        .iter()
        .zip(&per)
        .map(|(l, p)| (&l[..], p.3))
        .collect();
    crate::ops::family(
        &mut out,
        "voice_edge_signaling_transceiver_load",
        "gauge",
        "Live plus pending calls of each transceiver in placement.",
        &load,
    );
    crate::ops::family(
        &mut out,
        "voice_edge_signaling_transceiver_draining",
        "gauge",
        "1 when the transceiver takes no new calls.",
        &draining,
    );
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    )
        .into_response()
}

async fn admin_stats(State(sig): State<Signaling>) -> Json<Value> {
    let mut v = (sig.stats)();
    let transceivers: Vec<Value> = sig
        .directory
        .clusters()
        .iter()
        .flat_map(|c| c.transceivers.iter().map(|t| t.describe()))
        .collect();
    v["transceivers"] = Value::Array(transceivers);
    Json(v)
}

async fn admin_calls(State(sig): State<Signaling>) -> Json<Value> {
    let mut all = vec![];
    let mut unreachable = vec![];
    for c in sig.directory.clusters().iter() {
        for t in &c.transceivers {
            match t.list_calls().await {
                Ok(calls) => all.extend(calls),
                Err(e) => {
                    unreachable.push(json!({"cluster": c.id, "id": t.id(), "error": e.to_string()}))
                }
            }
        }
    }
    Json(json!({"calls": all, "unreachable": unreachable}))
}

async fn admin_action(
    State(sig): State<Signaling>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let Some(admin) = sig.admin.clone() else {
        return Err(
            ApiError::invalid("no_admin", "this process offers no admin actions")
                .with_status(StatusCode::NOT_FOUND),
        );
    };
    tokio::task::spawn_blocking(move || admin(&name))
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?
        .map(Json)
        .map_err(|e| ApiError::invalid("admin_action_failed", e))
}

async fn client_secrets(
    State(sig): State<Signaling>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    sig.keys.check_mint(bearer(&headers)).map_err(key_error)?;
    let req: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::invalid("invalid_json", format!("the body is not JSON: {e}")))?
    };
    sig.keys
        .mint(&req)
        .map(Json)
        .map_err(|m| ApiError::invalid("invalid_request", m))
}
