//! `/v1/realtime/calls/{id}/faults`: network impairment and failure events on demand, per call,
//! so a developer can test their app's failure paths against the real WebRTC stack in their
//! browser. Signaling checks the request and who asks (as hang-up does), then hands the fault
//! to the call's transceiver through the control API; where faults apply and why is in
//! [`crate::transceiver::faults`]. `relay_restart` is the one fault that is not the call's: it
//! restarts the relay every call shares, so it is the dev-only admin action, behind the admin
//! guard as `/admin/actions/restart-relay` is (this machine only, never another web origin, or
//! the admin token): owning a call is not enough to disrupt everyone else's.

use std::net::SocketAddr;

use axum::Extension;
use axum::Json;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use serde_json::{Value, json};

use super::calls::{OwnedCall, call_error, call_not_found, owned_call};
use super::{ApiError, Signaling, bearer};
use crate::transceiver::faults::{Fault, FaultState, Requested, parse_request};
use crate::transceiver::{CallCommand, CallReply};

/// `POST`: injects one fault (see the README's endpoint table for the body).
pub(super) async fn inject(
    State(sig): State<Signaling>,
    Path(id): Path<String>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let call = owned_call(&sig, bearer(&headers), &id)?;
    let body: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::invalid("invalid_json", format!("the body is not JSON: {e}")))?;
    let req = parse_request(&body).map_err(|e| {
        let err = ApiError::invalid("invalid_value", e.message);
        if e.param.is_empty() {
            err
        } else {
            err.with_param(e.param)
        }
    })?;
    let applied = req.name();
    let (state, extra) = match req {
        Requested::Call(fault) => (apply(&call, fault).await?, None),
        Requested::RelayRestart => {
            let peer = peer.map(|Extension(ConnectInfo(p))| p);
            super::admin_access::check(&sig.admin_access, &headers, peer)?;
            // The call must be live for its owner to restart what it runs through.
            let state = apply(&call, Fault::Status).await?;
            let relay = super::admin::run_action(&sig, "restart-relay".into()).await?;
            (state, Some(relay))
        }
    };
    let mut out = answer(&id, state, Some(applied));
    if let Some(relay) = extra {
        out["relay"] = relay;
    }
    Ok(Json(out))
}

/// `GET`: the call's fault state.
pub(super) async fn status(
    State(sig): State<Signaling>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let call = owned_call(&sig, bearer(&headers), &id)?;
    let state = apply(&call, Fault::Status).await?;
    Ok(Json(answer(&id, state, None)))
}

/// `DELETE`: removes the network impairment (what it held in flight is delivered).
pub(super) async fn clear(
    State(sig): State<Signaling>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let call = owned_call(&sig, bearer(&headers), &id)?;
    let state = apply(&call, Fault::ClearNetwork).await?;
    Ok(Json(answer(&id, state, Some("clear_network"))))
}

async fn apply(call: &OwnedCall, fault: Fault) -> Result<FaultState, ApiError> {
    match call.run(CallCommand::Fault { fault }).await? {
        Some(CallReply::Fault { state }) => Ok(state),
        Some(other) => Err(call_error(other.unexpected("fault"))),
        None => Err(call_not_found(call.id.as_str())),
    }
}

/// `{"call_id", "network", "applied", …the rest of the state}`.
fn answer(id: &str, state: FaultState, applied: Option<&str>) -> Value {
    let mut out = json!({"call_id": id, "applied": applied});
    if let (Value::Object(o), Ok(Value::Object(s))) = (&mut out, serde_json::to_value(state)) {
        o.extend(s);
    }
    if applied.is_none() {
        out.as_object_mut().map(|o| o.remove("applied"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_carries_call_network_and_applied() {
        let v = answer("rtc_x", FaultState::default(), Some("nat_rebind"));
        assert_eq!(v["call_id"], "rtc_x");
        assert_eq!(v["applied"], "nat_rebind");
        assert!(v.as_object().unwrap().contains_key("network"));
        assert!(v["network"].is_null());
        let v = answer("rtc_x", FaultState::default(), None);
        assert!(!v.as_object().unwrap().contains_key("applied"));
    }
}
