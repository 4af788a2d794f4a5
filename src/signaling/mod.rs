//! Signaling: the OpenAI Realtime WebRTC HTTP flow, the demo page, and admin endpoints.
//!
//! `POST /v1/realtime/calls` takes an SDP offer, places the call on a transceiver and returns
//! the answer with `201` and `Location: /v1/realtime/calls/<id>`, as the real service does, so
//! existing clients work by changing only their base URL.
//!
//! Layout: this file holds the shared state and the router; `calls` the call resource (offers,
//! renegotiation, hang-up), `placement` which transceiver answers, `keys` API and ephemeral keys,
//! `admin` the operator's endpoints, `web` the embedded demo page, `errors` the Realtime error
//! shape.

mod admin;
mod admin_access;
pub mod call_limits;
mod calls;
mod errors;
mod faults;
pub mod keys;
mod live;
pub mod pairing;
mod placement;
mod web;
mod websocket;

pub use admin::{AdminAction, StatsFn};
pub use admin_access::AdminAccess;
pub use errors::ApiError;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderName, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, patch, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use tower_http::cors::{Any, CorsLayer};

use crate::control::TransceiverControl;

pub use crate::sdp_offer::MAX_OFFER_BYTES;

/// One cluster as signaling sees it: where clients send media, and who can answer.
#[derive(Clone)]
pub struct ClusterView {
    pub id: u16,
    /// The address put in answers' candidate (the cluster relay, or the global relay).
    pub media_addr: SocketAddr,
    pub transceivers: Vec<Arc<dyn TransceiverControl>>,
    /// The relays every call of the cluster crosses (its own, and a global one in front); while
    /// any is saturated the cluster takes no new call.
    pub relays: Vec<Arc<crate::saturation::Headroom>>,
}

impl ClusterView {
    pub fn relay_saturated(&self) -> bool {
        self.relays.iter().any(|r| r.is_saturated())
    }
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

#[derive(Clone)]
pub struct Signaling {
    directory: Arc<dyn Directory>,
    /// Makes pick-and-reserve atomic across concurrent offers.
    placement: Arc<Mutex<()>>,
    stats: StatsFn,
    admin: admin::AdminActions,
    admin_access: AdminAccess,
    keys: Arc<keys::Keys>,
    counters: Arc<CallCounters>,
    limits: call_limits::CallLimits,
    client_calls: Arc<call_limits::ClientCalls>,
    /// Where calls for a model that is not a stub go; `None`: every call is a stub's.
    upstream: Option<Arc<crate::upstream::UpstreamConfig>>,
    /// Whether the upstream answers, for `/health`.
    upstream_probe: Arc<crate::upstream::health::Probe>,
    /// Mints per client where minting is open (see [`call_limits::MintRate`]).
    mint_rate: Arc<call_limits::MintRate>,
    /// Bytes each client's WebSocket messages hold queued (see [`call_limits::ClientQueues`]).
    client_queues: Arc<call_limits::ClientQueues>,
}

/// What `/metrics` counts of the call API.
#[derive(Default)]
struct CallCounters {
    created: std::sync::atomic::AtomicU64,
    /// Offers refused because no transceiver could take them (503).
    unplaced: std::sync::atomic::AtomicU64,
    /// Offers refused because their client holds `--max-calls-per-client` calls (429).
    client_capped: std::sync::atomic::AtomicU64,
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
            admin: admin::AdminActions::None,
            admin_access: AdminAccess::default(),
            keys: Arc::new(keys::Keys::open()),
            counters: Arc::default(),
            limits: Default::default(),
            client_calls: Arc::new(call_limits::ClientCalls::new(
                call_limits::CallLimits::default().max_calls_per_client,
            )),
            upstream: None,
            upstream_probe: Arc::default(),
            mint_rate: Arc::default(),
            client_queues: Arc::default(),
        }
    }

    /// Calls for a model that is not a stub go to `upstream` (see [`crate::upstream`]).
    pub fn with_upstream(mut self, upstream: Option<crate::upstream::UpstreamConfig>) -> Self {
        self.upstream = upstream.map(Arc::new);
        self
    }

    pub fn with_call_limits(mut self, limits: call_limits::CallLimits) -> Self {
        self.limits = limits;
        self.client_calls = Arc::new(call_limits::ClientCalls::new(limits.max_calls_per_client));
        self
    }

    pub fn with_keys(mut self, keys: keys::Keys) -> Self {
        self.keys = Arc::new(keys);
        self
    }

    /// Offers `admin` as `POST /admin/actions/{name}`; unless `dev_admin`, every action is
    /// refused with 403 (see [`admin::AdminActions`]).
    pub fn with_admin(mut self, admin: AdminAction, dev_admin: bool) -> Self {
        self.admin = if dev_admin {
            admin::AdminActions::Enabled(admin)
        } else {
            admin::AdminActions::Disabled
        };
        self
    }

    /// Require `Authorization: Bearer <token>` on `/metrics` and `/admin/*` (see
    /// [`admin_access`]); without one they serve loopback only.
    pub fn with_admin_token(mut self, token: Option<String>) -> Self {
        self.admin_access = AdminAccess {
            token: token.map(Into::into),
        };
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

    /// [`Self::router_without_admin`] for LAN mode's listener: the API only with `pairing`'s
    /// key (see [`pairing`]).
    pub fn router_for_lan(self, pairing: pairing::Pairing) -> Router {
        let guard = pairing::Guard {
            pairing,
            keys: self.keys.clone(),
        };
        self.routes(false)
            .layer(axum::middleware::from_fn_with_state(guard, pairing::guard))
    }

    fn routes(self, admin: bool) -> Router {
        let cors = CorsLayer::new()
            .allow_origin(Any)
            .allow_methods([
                Method::GET,
                Method::POST,
                Method::PATCH,
                Method::DELETE,
                Method::OPTIONS,
            ])
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
        let public = Router::new()
            .route("/v1/realtime/calls", post(calls::create_call))
            .route("/v1/realtime/calls/{id}", patch(calls::renegotiate))
            .route("/v1/realtime/calls/{id}/hangup", post(calls::hangup))
            .route("/v1/realtime/calls/{id}/events", get(calls::events))
            .route(
                "/v1/realtime/calls/{id}/faults",
                post(faults::inject)
                    .get(faults::status)
                    .delete(faults::clear),
            )
            .route("/v1/realtime/client_secrets", post(client_secrets))
            .route("/v1/realtime", get(websocket::realtime))
            // Live sessions are calls with Live events: ids route the same way.
            .route(
                "/v1/live/sessions",
                post(live::create_session).get(live::connect),
            )
            .route("/v1/live/sessions/{id}/hangup", post(calls::hangup))
            .route("/v1/live/sessions/{id}/events", get(calls::events))
            .route("/v1/live/sessions/{id}/attach", get(live::attach))
            .route("/v1/live/sessions/{id}/content", get(live::content))
            .route("/health", get(health))
            .route("/demo/config.json", get(demo_config))
            .fallback(any(web::serve))
            .layer(cors);
        let router = if admin {
            // No CORS here, and the guard refuses web pages: admin is for the operator.
            let admin = Router::new()
                .route("/metrics", get(admin::metrics))
                .route("/admin/stats", get(admin::stats))
                .route("/admin/calls", get(admin::live_calls))
                .route("/admin/actions/{name}", post(admin::action))
                .route_layer(axum::middleware::from_fn_with_state(
                    self.admin_access.clone(),
                    admin_access::guard,
                ));
            public.merge(admin)
        } else {
            public
        };
        router
            .layer(DefaultBodyLimit::max(MAX_OFFER_BYTES))
            .layer(axum::middleware::from_fn(errors::request_timeout))
            .layer(axum::middleware::from_fn(errors::json_errors))
            .with_state(self)
    }
}

/// `ok` while serving; with an upstream, whether it answers too (503 when it does not, so a
/// load balancer sends calls elsewhere while the model is out of reach).
async fn health(State(sig): State<Signaling>) -> Response {
    let Some(cfg) = &sig.upstream else {
        return "ok\n".into_response();
    };
    let upstream = sig.upstream_probe.check(cfg).await;
    let status = if upstream.answers {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::json!({
        "status": if upstream.answers { "ok" } else { "upstream_unavailable" },
        "upstream": upstream,
    });
    (status, axum::Json(body)).into_response()
}

/// What the demo page offers: the upstream's default model when there is one (never its URL
/// or key, which are the server's).
async fn demo_config(State(sig): State<Signaling>) -> Json<Value> {
    let model = sig.upstream.as_ref().map(|u| u.model.clone());
    Json(json!({ "upstream_model": model }))
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
    let (status, code) = match e {
        keys::KeyError::Exhausted => (StatusCode::TOO_MANY_REQUESTS, "ephemeral_key_exhausted"),
        keys::KeyError::NotOwner => (StatusCode::FORBIDDEN, "call_forbidden"),
        _ => (StatusCode::UNAUTHORIZED, "invalid_api_key"),
    };
    ApiError {
        status,
        kind: "invalid_request_error",
        code: code.into(),
        message: e.message().to_owned(),
        retry_after: None,
        param: None,
    }
}

async fn client_secrets(
    State(sig): State<Signaling>,
    peer: Option<axum::Extension<axum::extract::ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    sig.keys.check_mint(bearer(&headers)).map_err(key_error)?;
    // Where minting needs no server key, one client must not fill the key store for everyone.
    if !sig.keys.require {
        let ip = peer.map(|p| p.0.0.ip());
        sig.mint_rate
            .take(ip, std::time::Instant::now())
            .map_err(|wait| {
                ApiError::invalid(
                    "too_many_mints",
                    format!(
                        "this client minted {} keys in the last minute; retry in {wait} s",
                        call_limits::MINTS_PER_MINUTE
                    ),
                )
                .with_status(StatusCode::TOO_MANY_REQUESTS)
                .with_retry_after(wait)
            })?;
    }
    let req: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::invalid("invalid_json", format!("the body is not JSON: {e}")))?
    };
    sig.keys.mint(&req).map(Json).map_err(|e| match e {
        keys::MintError::Invalid(m) => ApiError::invalid("invalid_request", m),
        keys::MintError::Session(e) => ApiError::from_client(e),
        keys::MintError::SessionTooLarge(n) => ApiError::invalid(
            "session_too_large",
            format!(
                "the session config is {n} bytes as JSON; a client secret carries at most {} (send long instructions with session.update instead)",
                keys::MAX_SESSION_BYTES
            ),
        ),
        keys::MintError::Full { retry_after } => ApiError {
            code: "key_store_full".into(),
            ..ApiError::unavailable(format!(
                "this server holds as many live ephemeral keys as it keeps; retry in {retry_after} s"
            ))
        }
        .with_retry_after(retry_after),
    })
}
