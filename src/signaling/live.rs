//! `/v1/live/sessions`: OpenAI's Live WebRTC flow. The app's server posts the browser's offer
//! with the session config as JSON and gets the answer back as JSON (`201`); the session then
//! runs on a transceiver like any call, with Live events on its `oai-events` channel (see
//! [`crate::live`]). A Live session's id is its call id (`live_…`), so hang-up, the event log
//! and the `attach` sideband route exactly as they do for Realtime calls.

use std::net::SocketAddr;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::calls::{
    Answerer, answerer_for, call_error, call_not_found, check_offer, client_slot, model_for,
    place_call, placement_headers,
};
use super::websocket::{attach_sideband, key_of, serve_stream, upgrade_required};
use super::{ApiError, MAX_OFFER_BYTES, Signaling, bearer, key_error};
use crate::live::config::parse_create;
use crate::transceiver::{CallCommand, CallReply, CallSetup};
use crate::websocket::SessionRequest;

/// The JSON body carries the offer plus a config of at most a few hundred KiB (history is
/// bounded to 128 messages, instructions to 16k tokens).
const MAX_BODY_BYTES: usize = MAX_OFFER_BYTES + 512 * 1024;

/// `POST /v1/live/sessions`.
pub(super) async fn create_session(
    State(sig): State<Signaling>,
    req: Request,
) -> Result<Response, ApiError> {
    let key = bearer(req.headers()).map(str::to_owned);
    let key_session = sig.keys.check_call(key.as_deref()).map_err(key_error)?;
    let mime = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime != "application/json" {
        return Err(ApiError::invalid(
            "unsupported_content_type",
            format!(
                "POST the Live session as JSON ({{session, transport: {{type: \"webrtc\", sdp}}}}) with Content-Type: application/json (got {mime:?})"
            ),
        )
        .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE));
    }
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let body = axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES)
        .await
        .map_err(|e| {
            ApiError::invalid(
                "body_too_large",
                format!("request rejected: {e} (limit {MAX_BODY_BYTES} bytes)"),
            )
            .with_status(StatusCode::PAYLOAD_TOO_LARGE)
        })?;
    let body: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::invalid("invalid_json", format!("the body is not JSON: {e}")))?;
    let (start, offer) = parse_create(&body).map_err(ApiError::from_client)?;
    check_offer(&offer)?;
    let names = [
        Some(start.model.as_str()),
        key_session
            .as_ref()
            .and_then(|s| s.get("model"))
            .and_then(Value::as_str),
        None,
    ];
    // With an upstream that has a Live WebSocket, a model that is not a stub is bridged there,
    // started with the config as the app sent it (checked above) and the upstream's model name.
    let live_upstream = sig
        .upstream
        .as_ref()
        .is_some_and(|u| u.live_url().is_some());
    let answerer = if live_upstream {
        answerer_for(&sig, names)?
    } else {
        Answerer::Stub(model_for(names)?)
    };
    let slot = client_slot(&sig, peer).await?;
    sig.keys.claim_call(key.as_deref()).map_err(key_error)?;
    let setup = match answerer {
        Answerer::Stub(model) => CallSetup {
            model,
            live: Some(start),
            session: None,
            upstream: None,
            client: None,
        },
        Answerer::Upstream(name) => {
            let mut session = body["session"].clone();
            session["model"] = name.clone().into();
            CallSetup {
                model: crate::model::ModelKind::Echo,
                live: Some(start),
                session: None,
                upstream: Some(crate::upstream::UpstreamCall {
                    model: name,
                    session: vec![session],
                }),
                client: None,
            }
        }
    };
    let placed = place_call(&sig, slot, key.as_deref(), offer, setup, None).await?;
    let body = json!({
        "session": {"id": placed.call_id},
        "transport": {"type": "webrtc", "sdp": placed.answer_sdp},
    });
    let mut resp = (StatusCode::CREATED, axum::Json(body)).into_response();
    let location = format!("/v1/live/sessions/{}", placed.call_id);
    placement_headers(resp.headers_mut(), &placed, location);
    Ok(resp)
}

/// `GET /v1/live/sessions` upgraded to a WebSocket: a Live session whose first message is
/// `session.start` (the `openai` package's `LiveWS`). Keys, limits and placement are the
/// Realtime WebSocket's; the session runs on a transceiver.
pub(super) async fn connect(
    State(sig): State<Signaling>,
    peer: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let upgrade = upgrade.map_err(|e| {
        upgrade_required(
            "GET /v1/live/sessions is the Live WebSocket (send session.start first); create a WebRTC session with POST",
            e,
        )
    })?;
    let key = key_of(&headers);
    sig.keys.check_call(key.as_deref()).map_err(key_error)?;
    let peer = peer.map(|p| p.0.0.ip());
    let slot = client_slot(&sig, peer).await?;
    sig.keys.claim_call(key.as_deref()).map_err(key_error)?;
    let (t, _) = sig.place(None)?;
    // Minted here, with the placement in it as a call's id has, so the session is found again
    // by its id (its recording) and owned by the key that opened it.
    let id = crate::transceiver::call_id::mint_with(
        crate::live::ID_PREFIX,
        crate::transceiver::call_id::CallPlace {
            cluster: t.cluster(),
            transceiver: t.id(),
            worker: 0,
        },
    );
    sig.keys.record_owner(&id, key.as_deref());
    let stream = t
        .open_session(SessionRequest::Live {
            id,
            client: slot.client(),
        })
        .await
        .map_err(call_error)?;
    Ok(serve_stream(
        &sig,
        peer,
        upgrade,
        stream,
        "session ended",
        Some(slot),
    ))
}

/// `GET /v1/live/sessions/{id}/attach`: a sideband on a Live session (the app's trusted backend,
/// with the key that created it). It first gets `session.started` with the session as it is now,
/// then every server event; its client events are not bound by `client.data_channel`.
pub(super) async fn attach(
    State(sig): State<Signaling>,
    peer: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let upgrade =
        upgrade.map_err(|e| upgrade_required("/v1/live/sessions/{id}/attach is a WebSocket", e))?;
    if !id.starts_with(crate::live::ID_PREFIX) {
        return Err(call_not_found(&id));
    }
    let stream = attach_sideband(&sig, key_of(&headers).as_deref(), &id).await?;
    let peer = peer.map(|p| p.0.0.ip());
    Ok(serve_stream(
        &sig,
        peer,
        upgrade,
        stream,
        "session ended",
        None,
    ))
}

/// `GET /v1/live/sessions/{id}/content`: the recording of an ended session started with
/// `store: true`, a stereo WAV (caller left, model right, 24 kHz), for the key that created it,
/// for a few minutes after it ended (see [`crate::call::recording`]).
pub(super) async fn content(
    State(sig): State<Signaling>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let call = super::calls::owned_call(&sig, bearer(&headers), &id)?;
    let wav = match call.run(CallCommand::Recording).await? {
        Some(CallReply::Recording { wav }) => Some(wav),
        Some(other) => return Err(call_error(other.unexpected("recording"))),
        None => None,
    };
    let Some(wav) = wav else {
        return Err(ApiError::invalid(
            "recording_not_found",
            format!(
                "no recording of {id:?}: a session is recorded when started with store: true, and its recording is here from when it ends until {} minutes later",
                crate::call::recording::ENDED_TTL.as_secs() / 60
            ),
        )
        .with_status(StatusCode::NOT_FOUND));
    };
    Ok(([(header::CONTENT_TYPE, "audio/wav")], wav).into_response())
}
