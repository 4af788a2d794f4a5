//! The `/v1/realtime/calls` resource: an SDP offer in, a placed call and its answer out; a new
//! offer on a live call (ICE restart); hang-up. Everything a client does to a call goes through
//! here, so the offer checks and the error mapping are written once for create and renegotiate.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::rejection::QueryRejection;
use axum::extract::{ConnectInfo, FromRequest, Multipart, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use crate::transceiver::AnswerError;

use super::call_limits::{self, Admit, Slot};
use super::{ApiError, ClusterView, MAX_OFFER_BYTES, Signaling, bearer, key_error, placement};
use crate::control::TransceiverControl;
use crate::model::ModelKind;
use crate::transceiver::{CallCommand, CallError, CallId, CallReply, CallSetup};

/// The model a call starts with: the call's own session config first, then the key's, then
/// `?model=`, then echo. A name that is not ours (the SDK's `gpt-realtime-2.1`, as the real
/// service ignores `?model=` on /calls) passes to the next source; a malformed or unknown
/// `script:` name is refused here, before a transceiver spends anything on the call.
pub(super) fn model_for(names: [Option<&str>; 3]) -> Result<ModelKind, ApiError> {
    for name in names.into_iter().flatten() {
        let kind = ModelKind::parse(name)
            .map_err(|e| ApiError::invalid("invalid_model", e.to_string()))?;
        if let Some(kind) = kind {
            if let ModelKind::Script(script) = &kind {
                crate::model::script::library::find(script)
                    .map_err(|e| ApiError::invalid("unknown_script", e))?;
            }
            return Ok(kind);
        }
    }
    Ok(ModelKind::Echo)
}

/// What answers a new call: one of the stubs, or (with `--upstream`) the upstream model of
/// this name.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Answerer {
    Stub(ModelKind),
    Upstream(String),
}

/// [`model_for`] with an upstream: the first model named decides, a stub's name choosing the
/// stub and any other name the upstream model of that name (`upstream:NAME` always the
/// upstream's, a stub name included); naming none chooses the upstream's default
/// (`--upstream-model`). Without an upstream, [`model_for`]'s rules.
pub(super) fn answerer_for(
    sig: &Signaling,
    names: [Option<&str>; 3],
) -> Result<Answerer, ApiError> {
    let Some(upstream) = &sig.upstream else {
        return model_for(names).map(Answerer::Stub);
    };
    match names.into_iter().flatten().next() {
        None => Ok(Answerer::Upstream(upstream.model.clone())),
        // The upstream's own stubs, when it is another voice-edge: `upstream:echo`.
        Some(name) if name.trim().starts_with(crate::upstream::FORCE_PREFIX) => {
            let model = name.trim()[crate::upstream::FORCE_PREFIX.len()..].trim();
            if model.is_empty() {
                return Err(ApiError::invalid(
                    "invalid_model",
                    "`upstream:` must be followed by the upstream's model name",
                ));
            }
            Ok(Answerer::Upstream(model.to_owned()))
        }
        Some(name) => match ModelKind::parse(name) {
            Ok(None) => Ok(Answerer::Upstream(name.trim().to_owned())),
            _ => model_for([Some(name), None, None]).map(Answerer::Stub),
        },
    }
}

/// A call's setup for `answerer`, with its connect-time session (the key's, then the
/// request's own): checked by the stubs' rules for a stub, passed as it is to an upstream,
/// which checks it itself (its `error` reaches the caller).
pub(super) fn setup_for(
    answerer: Answerer,
    key_session: Option<&Value>,
    own: Option<&Value>,
) -> Result<CallSetup, ApiError> {
    match answerer {
        Answerer::Stub(model) => {
            let session = starting_session(&model, key_session, own)?;
            Ok(CallSetup {
                session,
                ..model.into()
            })
        }
        Answerer::Upstream(model) => Ok(CallSetup {
            upstream: Some(crate::upstream::UpstreamCall {
                model,
                session: [key_session, own].into_iter().flatten().cloned().collect(),
            }),
            ..ModelKind::Echo.into()
        }),
    }
}

#[derive(Deserialize)]
pub(super) struct CallQuery {
    model: Option<String>,
    /// Pins the call to a cluster (for tests and operators); default is least loaded.
    cluster: Option<u16>,
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

/// Refuses, before a transceiver spends anything on it, an offer this server cannot honour
/// (see [`crate::sdp_offer`]): such a call would get an answer and then only time out.
pub(crate) fn check_offer(offer: &str) -> Result<(), ApiError> {
    crate::sdp_offer::check_offer(offer)
        .map(|_| ())
        .map_err(|e| ApiError::invalid(e.code(), e.to_string()))
}

pub(super) async fn create_call(
    State(sig): State<Signaling>,
    q: Result<Query<CallQuery>, QueryRejection>,
    req: Request,
) -> Result<Response, ApiError> {
    let Query(q) = q.map_err(|e| {
        ApiError::invalid(
            "invalid_query",
            format!(
                "bad query string (expected ?model=NAME&cluster=ID): {}",
                e.body_text()
            ),
        )
    })?;
    let key = bearer(req.headers()).map(str::to_owned);
    let key_session = sig.keys.check_call(key.as_deref()).map_err(key_error)?;
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let slot = client_slot(&sig, peer)
        .await
        .inspect_err(|_| count(&sig.counters.client_capped))?;
    sig.keys.claim_call(key.as_deref()).map_err(key_error)?;
    let (offer, session) = read_offer(req).await?;
    check_offer(&offer)?;
    let model_of = |s: &Option<Value>| {
        s.as_ref()
            .and_then(|s| s.get("model"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let answerer = answerer_for(
        &sig,
        [
            model_of(&session).as_deref(),
            model_of(&key_session).as_deref(),
            q.model.as_deref(),
        ],
    )?;
    let setup = setup_for(answerer, key_session.as_ref(), session.as_ref())?;
    let created = place_call(&sig, slot, key.as_deref(), offer, setup, q.cluster).await?;
    let mut resp = (StatusCode::CREATED, created.answer_sdp.clone()).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/sdp"),
    );
    placement_headers(
        h,
        &created,
        format!("/v1/realtime/calls/{}", created.call_id),
    );
    Ok(resp)
}

/// A call's starting session: the key's, then the request's own over it, checked as
/// `session.update`s would be (a `400` naming the field); `None` when neither gave one.
pub(super) fn starting_session(
    model: &ModelKind,
    key_session: Option<&Value>,
    own: Option<&Value>,
) -> Result<Option<Value>, ApiError> {
    let layers: Vec<&Value> = [key_session, own].into_iter().flatten().collect();
    if layers.is_empty() {
        return Ok(None);
    }
    crate::realtime::connect_session::check(model, &layers)
        .map(Some)
        .map_err(ApiError::from_client)
}

/// A checked offer placed as a new call: the transceiver answers it, the client's slot and the
/// key's ownership are recorded. Shared by Realtime's `/calls` and Live's `/sessions`.
pub(super) async fn place_call(
    sig: &Signaling,
    slot: Slot,
    key: Option<&str>,
    offer: String,
    mut setup: crate::transceiver::CallSetup,
    cluster: Option<u16>,
) -> Result<Placed, ApiError> {
    setup.client = slot.client();
    let (t, media_addr) = sig
        .place(cluster)
        .inspect_err(|_| count(&sig.counters.unplaced))?;
    let created = t
        .create_call(offer, setup)
        .await
        .inspect_err(|_| count(&sig.counters.failed))
        .map_err(call_error)?;
    count(&sig.counters.created);
    slot.placed(&created.call_id);
    sig.keys.record_owner(&created.call_id, key);
    Ok(Placed {
        created,
        media_addr,
    })
}

/// A placed call and the media address its cluster advertises.
pub(super) struct Placed {
    pub created: crate::transceiver::CreatedCall,
    pub media_addr: SocketAddr,
}

impl std::ops::Deref for Placed {
    type Target = crate::transceiver::CreatedCall;
    fn deref(&self) -> &Self::Target {
        &self.created
    }
}

/// `Location` and where the call went: media address, relay, cluster, transceiver, worker.
pub(super) fn placement_headers(h: &mut HeaderMap, placed: &Placed, location: String) {
    let set = |h: &mut HeaderMap, k: &'static str, v: String| {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(HeaderName::from_static(k), v);
        }
    };
    let created = &placed.created;
    set(h, "location", location);
    // Where the client sends media: the relay, or the transceiver itself with `--direct`.
    set(h, "x-voice-edge-media", created.candidate.to_string());
    if created.candidate == placed.media_addr {
        set(h, "x-voice-edge-relay", placed.media_addr.to_string());
    }
    set(h, "x-voice-edge-cluster", created.cluster.to_string());
    set(
        h,
        "x-voice-edge-transceiver",
        created.transceiver.to_string(),
    );
    set(h, "x-voice-edge-worker", created.worker.to_string());
}

fn count(c: &std::sync::atomic::AtomicU64) {
    c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// A place in the client's count of calls (see [`call_limits`]), or 429 when it holds
/// `--max-calls-per-client` that are still live. A WebSocket session holds its slot for its
/// whole life (it never becomes a call id), so it counts until its socket closes.
pub(super) async fn client_slot(sig: &Signaling, peer: Option<IpAddr>) -> Result<Slot, ApiError> {
    let refused = || {
        ApiError::invalid(
            "too_many_calls",
            format!(
                "this client already holds {} calls (--max-calls-per-client); end one or retry later",
                sig.limits.max_calls_per_client
            ),
        )
        .with_status(StatusCode::TOO_MANY_REQUESTS)
        .with_retry_after(call_limits::RECHECK.as_secs())
    };
    match sig.client_calls.admit(peer, Instant::now()) {
        Admit::Yes(slot) => Ok(slot),
        Admit::Full => Err(refused()),
        Admit::Recheck(ids) => {
            let live = sig.live_among(&ids).await;
            if let Some(ip) = peer {
                sig.client_calls.keep_live(ip, &ids, &live);
            }
            match sig.client_calls.admit(peer, Instant::now()) {
                Admit::Yes(slot) => Ok(slot),
                _ => Err(refused()),
            }
        }
    }
}

impl Signaling {
    /// Which of `ids` are live calls now, asking each transceiver that holds some. A
    /// transceiver that does not answer keeps its calls counted.
    async fn live_among(&self, ids: &[String]) -> HashSet<String> {
        let mut by_transceiver: Vec<(Arc<dyn TransceiverControl>, Vec<&String>)> = vec![];
        for id in ids {
            let Some(t) = CallId::parse(id).and_then(|id| self.transceiver_of(&id)) else {
                continue;
            };
            match by_transceiver.iter_mut().find(|(u, _)| Arc::ptr_eq(u, &t)) {
                Some((_, v)) => v.push(id),
                None => by_transceiver.push((t, vec![id])),
            }
        }
        let mut live = HashSet::new();
        for (t, mine) in by_transceiver {
            match t.list_calls().await {
                Ok(calls) => {
                    let now: HashSet<String> = calls.into_iter().map(|c| c.call_id).collect();
                    live.extend(mine.into_iter().filter(|id| now.contains(*id)).cloned());
                }
                Err(_) => live.extend(mine.into_iter().cloned()),
            }
        }
        live
    }

    pub(super) fn place(
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
        // Every call of a cluster crosses its relay: one that drops datagrams would take audio
        // from the calls it already carries, whatever room the transceivers have.
        let (candidates, behind_saturated_relay): (Vec<&ClusterView>, Vec<&ClusterView>) =
            candidates.into_iter().partition(|c| !c.relay_saturated());
        if candidates.is_empty() {
            let ids: Vec<String> = behind_saturated_relay
                .iter()
                .map(|c| c.id.to_string())
                .collect();
            return Err(at_capacity(&format!(
                "the relay of cluster {} is saturated",
                ids.join(", ")
            )));
        }
        let mut best: Option<(&ClusterView, &Arc<dyn TransceiverControl>)> = None;
        for c in candidates {
            if let Some(t) = placement::pick(&c.transceivers)
                && best.is_none_or(|(_, b)| t.load() < b.load())
            {
                best = Some((c, t));
            }
        }
        let (c, t) = best.ok_or_else(|| {
            let open = clusters
                .iter()
                .flat_map(|c| &c.transceivers)
                .any(|t| !t.is_draining());
            if open {
                at_capacity("every transceiver is at capacity or saturated")
            } else {
                ApiError::unavailable("no transceiver is accepting calls")
            }
        })?;
        if self.limits.max_calls > 0 {
            let total: usize = clusters
                .iter()
                .flat_map(|c| &c.transceivers)
                .map(|t| t.load())
                .sum();
            if total >= self.limits.max_calls {
                return Err(at_capacity(&format!(
                    "{total} calls are placed, the most this server takes (--max-calls {})",
                    self.limits.max_calls
                )));
            }
        }
        t.reserve();
        Ok((t.clone(), c.media_addr))
    }
}

pub(super) async fn hangup(
    State(sig): State<Signaling>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let call = owned_call(&sig, bearer(&headers), &id)?;
    match call.run(CallCommand::Hangup).await? {
        Some(CallReply::Ended) => {
            sig.client_calls.ended(&id);
            Ok(StatusCode::OK.into_response())
        }
        Some(other) => Err(call_error(other.unexpected("hangup"))),
        None => Err(call_not_found(&id)),
    }
}

#[derive(Deserialize)]
pub(super) struct EventsQuery {
    /// Only events with `seq >= since`, so a test or page can poll for what is new.
    #[serde(default)]
    since: u64,
}

/// `GET /v1/realtime/calls/{id}/events`: every Realtime event of the call, both directions, as
/// JSON Lines (see [`crate::call::event_log`]), for test assertions and bug reports.
/// Whoever may hang the call up may read it, and still can for a few minutes after it ended.
pub(super) async fn events(
    State(sig): State<Signaling>,
    Path(id): Path<String>,
    q: Result<Query<EventsQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let call = owned_call(&sig, bearer(&headers), &id)?;
    let Query(q) = q.map_err(|e| {
        ApiError::invalid(
            "invalid_query",
            format!("bad query string (expected ?since=SEQ): {}", e.body_text()),
        )
    })?;
    let command = CallCommand::Events { since: q.since };
    match call.run(command).await? {
        Some(CallReply::Events { jsonl }) => Ok(ok_as("application/jsonl", jsonl)),
        Some(other) => Err(call_error(other.unexpected("events"))),
        None => Err(call_not_found(&id)),
    }
}

/// A `200` with this body and `Content-Type`.
fn ok_as(content_type: &'static str, body: String) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}

/// `PATCH /v1/realtime/calls/{id}` with a new SDP offer for a live call, typically an ICE
/// restart after the client's network changed (`pc.restartIce()` then a new offer). The call
/// keeps its id, its session and its DTLS association; the body of the 200 is the answer.
/// This is our extension: the Realtime API has no renegotiation endpoint. It sits on the
/// call's `Location`, as WHIP (RFC 9725) puts ICE restarts on the session resource.
pub(super) async fn renegotiate(
    State(sig): State<Signaling>,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, ApiError> {
    let call = owned_call(&sig, bearer(req.headers()), &id)?;
    let (offer, _) = read_offer(req).await?;
    check_offer(&offer)?;
    let command = CallCommand::Renegotiate { offer_sdp: offer };
    match call.run(command).await? {
        Some(CallReply::Answer { answer_sdp }) => Ok(ok_as("application/sdp", answer_sdp)),
        Some(other) => Err(call_error(other.unexpected("renegotiate"))),
        None => Err(call_not_found(&id)),
    }
}

/// A call `key` may act on, and the transceiver that holds it.
pub(super) struct OwnedCall {
    pub id: CallId,
    pub transceiver: Arc<dyn TransceiverControl>,
}

impl OwnedCall {
    /// Runs a per-call operation on the call's transceiver: `Ok(None)` when it no longer
    /// holds the call; a control failure is already the API's error.
    pub async fn run(&self, command: CallCommand) -> Result<Option<CallReply>, ApiError> {
        self.transceiver
            .call(&self.id, command)
            .await
            .map_err(call_error)
    }
}

/// Call `id` and its transceiver, if `key` may act on it. Authorized before the id is parsed or
/// looked up, so a stranger learns nothing about which ids are live.
pub(super) fn owned_call(
    sig: &Signaling,
    key: Option<&str>,
    id: &str,
) -> Result<OwnedCall, ApiError> {
    sig.keys.check_owner(key, id).map_err(key_error)?;
    let parsed = CallId::parse(id).ok_or_else(|| call_not_found(id))?;
    let transceiver = sig
        .transceiver_of(&parsed)
        .ok_or_else(|| call_not_found(id))?;
    Ok(OwnedCall {
        id: parsed,
        transceiver,
    })
}

pub(super) fn call_not_found(id: &str) -> ApiError {
    ApiError::invalid("call_not_found", format!("no live call {id:?}"))
        .with_status(StatusCode::NOT_FOUND)
}

/// Refused for load: the client should come back in a moment, not give up.
fn at_capacity(why: &str) -> ApiError {
    ApiError::unavailable(format!("voice-edge is at capacity: {why}; retry shortly"))
        .with_retry_after(crate::transceiver::admission::RETRY_AFTER.as_secs())
}

/// A bad offer is the client's fault (400); a stopped transceiver is ours (503).
pub(super) fn call_error(e: CallError) -> ApiError {
    match e {
        CallError::FaultRefused(m) => {
            ApiError::invalid("fault_refused", m).with_status(StatusCode::CONFLICT)
        }
        CallError::Refused(m) => ApiError::invalid("refused", m).with_status(StatusCode::CONFLICT),
        CallError::Answer(a @ AnswerError::OverBudget(_)) => {
            ApiError::invalid("recording_budget_exceeded", a.to_string())
                .with_status(StatusCode::TOO_MANY_REQUESTS)
        }
        CallError::Answer(a) => ApiError::invalid("invalid_offer", a.to_string()),
        CallError::Full(..) => at_capacity(&e.to_string()),
        CallError::Unavailable(_) | CallError::Control(_) => ApiError::unavailable(e.to_string()),
    }
}

impl Signaling {
    /// The transceiver a call id names (the id encodes cluster and transceiver).
    pub(super) fn transceiver_of(&self, call_id: &CallId) -> Option<Arc<dyn TransceiverControl>> {
        let place = call_id.place();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_name_that_is_ours_picks_the_model() {
        // An explicit echo in the call's session wins over ?model= (it once lost to it).
        assert_eq!(
            model_for([Some("echo"), None, Some("tts")]).unwrap(),
            ModelKind::Echo
        );
        // The SDK's model name is not ours: the next source decides.
        assert_eq!(
            model_for([Some("gpt-realtime-2.1"), None, Some("loopback")]).unwrap(),
            ModelKind::Loopback
        );
        assert_eq!(
            model_for([None, Some("script:weather"), Some("tts")]).unwrap(),
            ModelKind::Script("weather".into())
        );
        assert_eq!(model_for([None, None, None]).unwrap(), ModelKind::Echo);
        let code = |names| model_for(names).unwrap_err().code;
        assert_eq!(code([None, None, Some("script:nope")]), "unknown_script");
        assert_eq!(code([Some("script:a/b"), None, None]), "invalid_model");
    }
}
