//! `GET /v1/realtime`: the Realtime WebSocket, as OpenAI's clients open it.
//!
//! A URL names exactly one of `model` (a new session; the Python `openai` client, the Node one
//! with `wss:`, `@openai/agents-realtime`'s `OpenAIRealtimeWebSocket`), `intent=transcription`
//! (a transcription session) or `call_id` (a sideband on a live WebRTC call). Keys follow the
//! rules of calls: `Authorization: Bearer`, or for browsers, which cannot set headers on a
//! WebSocket, the sub-protocol `openai-insecure-api-key.<key>` beside `realtime`, which the
//! answer echoes. Signaling only checks, places and pipes; the session runs on a transceiver
//! (see [`crate::websocket`]), like a call.

use axum::extract::rejection::QueryRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use super::calls::{answerer_for, call_error, call_not_found, client_slot, setup_for};
use super::{ApiError, Signaling, bearer, key_error};
use crate::transceiver::CallSetup;
use crate::websocket::{EventStream, SessionRequest, pipe};

/// The largest client event taken: the real service's 15 MiB for an `input_audio_buffer.append`,
/// with room for the JSON around it.
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// The sub-protocol prefix that carries a key where headers cannot.
const KEY_PROTOCOL: &str = "openai-insecure-api-key.";

#[derive(Deserialize)]
pub(super) struct SocketQuery {
    model: Option<String>,
    call_id: Option<String>,
    intent: Option<String>,
}

/// What the URL asks for.
#[derive(Debug)]
enum Target {
    /// A conversation with the model `?model=` names (resolved with the key's, as for calls).
    Realtime,
    Transcription,
    Sideband(String),
}

pub(super) async fn realtime(
    State(sig): State<Signaling>,
    peer: Option<axum::Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    headers: HeaderMap,
    q: Result<Query<SocketQuery>, QueryRejection>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::invalid("invalid_query", e.body_text()))?;
    let upgrade = upgrade.map_err(|e| {
        upgrade_required(
            "/v1/realtime is a WebSocket: connect with ws:// (or wss://) and ?model=NAME, ?intent=transcription or ?call_id=ID",
            e,
        )
    })?;
    let key = key_of(&headers);
    let peer = peer.map(|p| p.0.0.ip());
    let mut slot = None;
    let (stream, reason) = match target(&q)? {
        Target::Sideband(call_id) => {
            if call_id.starts_with(crate::live::ID_PREFIX) {
                return Err(ApiError::invalid(
                    "live_session",
                    format!(
                        "{call_id} is a Live session: attach to it at /v1/live/sessions/{call_id}/attach"
                    ),
                ));
            }
            (
                attach_sideband(&sig, key.as_deref(), &call_id).await?,
                "call ended",
            )
        }
        target => {
            let key_session = sig.keys.check_call(key.as_deref()).map_err(key_error)?;
            let transcription_key = key_session
                .as_ref()
                .is_some_and(|s| s["type"] == "transcription");
            // A transcription key starts a transcription session whatever the URL asks; without
            // one, `?intent=transcription` starts one with the defaults.
            let request = if matches!(target, Target::Transcription) && !transcription_key {
                SessionRequest::Transcription
            } else {
                let key_model = key_session
                    .as_ref()
                    .and_then(|s| s.get("model"))
                    .and_then(Value::as_str);
                let answerer = answerer_for(&sig, [None, key_model, q.model.as_deref()])?;
                match setup_for(answerer, key_session.as_ref(), None)? {
                    CallSetup {
                        upstream: Some(call),
                        ..
                    } => SessionRequest::Upstream(call),
                    setup => SessionRequest::Realtime {
                        model: setup.model,
                        session: setup.session,
                    },
                }
            };
            // A session counts against its client's cap (`--max-calls-per-client`) while open.
            slot = Some(client_slot(&sig, peer).await?);
            sig.keys.claim_call(key.as_deref()).map_err(key_error)?;
            let (t, _) = sig.place(None)?;
            let stream = t.open_session(request).await.map_err(call_error)?;
            (stream, "session ended")
        }
    };
    Ok(serve_stream(&sig, peer, upgrade, stream, reason, slot))
}

/// A plain GET where a WebSocket belongs: 426 Upgrade Required, saying what to connect with.
pub(super) fn upgrade_required(
    what: &str,
    e: axum::extract::ws::rejection::WebSocketUpgradeRejection,
) -> ApiError {
    ApiError::invalid("websocket_required", format!("{what} ({})", e.body_text()))
        .with_status(StatusCode::from_u16(426).unwrap_or(StatusCode::BAD_REQUEST))
}

/// A sideband on call `call_id`, for the key that created the call.
pub(super) async fn attach_sideband(
    sig: &Signaling,
    key: Option<&str>,
    call_id: &str,
) -> Result<EventStream, ApiError> {
    let call = super::calls::owned_call(sig, key, call_id)?;
    call.transceiver
        .attach_sideband(&call.id)
        .await
        .map_err(call_error)?
        .ok_or_else(|| call_not_found(call_id))
}

/// Answers an upgrade with `stream` piped to the socket; `slot` is held until it closes. What
/// the client sends waits counted in its `peer`'s pool too.
pub(super) fn serve_stream(
    sig: &Signaling,
    peer: Option<std::net::IpAddr>,
    upgrade: WebSocketUpgrade,
    mut stream: EventStream,
    reason: &'static str,
    slot: Option<super::call_limits::Slot>,
) -> Response {
    stream.to_session = stream.to_session.counted_in(sig.client_queues.of(peer));
    upgrade
        .protocols(["realtime"])
        .max_message_size(MAX_MESSAGE_BYTES)
        .on_upgrade(move |socket| async move {
            pipe(socket, stream, reason).await;
            drop(slot);
        })
}

/// The one thing the URL names, or why it names none or several.
fn target(q: &SocketQuery) -> Result<Target, ApiError> {
    let transcription = match q.intent.as_deref() {
        None => false,
        Some("transcription") => true,
        Some(other) => {
            return Err(ApiError::invalid(
                "invalid_intent",
                format!("unknown intent {other:?}; the only intent is 'transcription'"),
            ));
        }
    };
    match (&q.model, &q.call_id, transcription) {
        (Some(_), None, false) => Ok(Target::Realtime),
        (None, None, true) => Ok(Target::Transcription),
        (None, Some(id), false) => Ok(Target::Sideband(id.clone())),
        _ => Err(ApiError::invalid(
            "invalid_query",
            "give exactly one of ?model=NAME, ?intent=transcription or ?call_id=ID",
        )),
    }
}

/// The key from `Authorization: Bearer`, else from the `openai-insecure-api-key.` sub-protocol.
pub(super) fn key_of(headers: &HeaderMap) -> Option<String> {
    if let Some(k) = bearer(headers) {
        return Some(k.to_owned());
    }
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|p| p.trim().strip_prefix(KEY_PROTOCOL).map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(model: Option<&str>, call_id: Option<&str>, intent: Option<&str>) -> SocketQuery {
        SocketQuery {
            model: model.map(Into::into),
            call_id: call_id.map(Into::into),
            intent: intent.map(Into::into),
        }
    }

    #[test]
    fn a_url_names_exactly_one_thing() {
        assert!(matches!(
            target(&q(Some("echo"), None, None)),
            Ok(Target::Realtime)
        ));
        assert!(matches!(
            target(&q(None, None, Some("transcription"))),
            Ok(Target::Transcription)
        ));
        assert!(matches!(
            target(&q(None, Some("rtc_x"), None)),
            Ok(Target::Sideband(_))
        ));
        assert!(target(&q(None, None, None)).is_err());
        assert!(target(&q(Some("echo"), Some("rtc_x"), None)).is_err());
        assert!(target(&q(Some("echo"), None, Some("transcription"))).is_err());
        assert!(target(&q(None, None, Some("translation"))).is_err());
    }

    #[test]
    fn keys_come_from_the_header_or_the_sub_protocol() {
        let mut h = HeaderMap::new();
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            "realtime, openai-insecure-api-key.ek_abc, openai-beta.realtime-v1"
                .parse()
                .unwrap(),
        );
        assert_eq!(key_of(&h).as_deref(), Some("ek_abc"));
        h.insert(header::AUTHORIZATION, "Bearer sk-1".parse().unwrap());
        assert_eq!(key_of(&h).as_deref(), Some("sk-1"));
        assert_eq!(key_of(&HeaderMap::new()), None);
    }
}
