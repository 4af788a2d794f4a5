//! Operator endpoints: `/metrics` and `/admin/*`. Served only on listeners the operator keeps
//! private (the all-in-one's loopback HTTP, the signaling role's `--admin`), never on LAN mode's
//! HTTPS, so they live apart from the public API.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{ApiError, Signaling};

/// What `/admin/stats` shows of the embedding process (its relays, its flow cache): signaling
/// knows only placement, so the process that started the rest describes it.
pub type StatsFn = Arc<dyn Fn() -> Value + Send + Sync>;
/// Operator actions the embedding process offers (`POST /admin/actions/{name}`), e.g. the
/// all-in-one's dev-only relay restart.
pub type AdminAction = Arc<dyn Fn(&str) -> Result<Value, String> + Send + Sync>;

/// Whether `POST /admin/actions/{name}` does anything here. The all-in-one's actions (restart a
/// relay, drain a transceiver) disrupt live calls and exist to test recovery, so they are off
/// unless the process was started with `--dev-admin`; the read-only endpoints are always there.
#[derive(Clone, Default)]
pub(super) enum AdminActions {
    /// This process has none (the signaling role: its transceivers are other processes).
    #[default]
    None,
    /// It has them, but was started without `--dev-admin`.
    Disabled,
    Enabled(AdminAction),
}

/// Prometheus text: the call API's counters and the transceivers placement sees.
pub(super) async fn metrics(State(sig): State<Signaling>) -> Response {
    use std::sync::atomic::Ordering::Relaxed;
    let mut out = String::new();
    let c = &sig.counters;
    crate::ops::family(
        &mut out,
        "voice_edge_signaling_offers_total",
        "counter",
        "Call offers by outcome: created, unplaced (no transceiver could take it), client_capped (the client holds --max-calls-per-client calls), failed.",
        &[
            (&[("outcome", "created")], c.created.load(Relaxed) as f64),
            (&[("outcome", "unplaced")], c.unplaced.load(Relaxed) as f64),
            (
                &[("outcome", "client_capped")],
                c.client_capped.load(Relaxed) as f64,
            ),
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

pub(super) async fn stats(State(sig): State<Signaling>) -> Json<Value> {
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

pub(super) async fn live_calls(State(sig): State<Signaling>) -> Json<Value> {
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

pub(super) async fn action(
    State(sig): State<Signaling>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    run_action(&sig, name).await.map(Json)
}

/// Runs admin action `name` if this process offers it and `--dev-admin` allows it: the one
/// gate for `/admin/actions/{name}` and the `relay_restart` fault.
pub(super) async fn run_action(sig: &Signaling, name: String) -> Result<Value, ApiError> {
    let admin = match sig.admin.clone() {
        AdminActions::Enabled(admin) => admin,
        AdminActions::Disabled => {
            return Err(ApiError::invalid(
                "dev_admin_disabled",
                format!(
                    "admin action {name:?} is a dev/test tool that disrupts live calls; start voice-edge with --dev-admin (VOICE_EDGE_DEV_ADMIN=1) to allow it"
                ),
            )
            .with_status(StatusCode::FORBIDDEN));
        }
        AdminActions::None => {
            return Err(
                ApiError::invalid("no_admin", "this process offers no admin actions")
                    .with_status(StatusCode::NOT_FOUND),
            );
        }
    };
    tokio::task::spawn_blocking(move || admin(&name))
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?
        .map_err(|e| ApiError::invalid("admin_action_failed", e))
}
