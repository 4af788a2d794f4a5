//! The control API's JSON bodies and its error codes, shared by [`super::server`] and
//! [`super::client`] so the two cannot drift apart.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::transceiver::admission::Refusal;
use crate::transceiver::{AnswerError, CallError, CallInfo, CreatedCall};

/// Every path starts here; a version in the path lets a rolling upgrade run two at once.
pub const PREFIX: &str = "/control/v1";

#[derive(Debug, Serialize, Deserialize)]
pub struct CreateCall {
    pub offer_sdp: String,
    /// Flattened: `model` as before, and `live` only for a Live session.
    #[serde(flatten)]
    pub setup: crate::transceiver::CallSetup,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Created {
    pub call_id: String,
    pub answer_sdp: String,
    pub cluster: u16,
    pub transceiver: u16,
    pub worker: u8,
    pub candidate: SocketAddr,
    /// The transceiver's load right after this call, and when (its clock, Unix ms): fresher than
    /// its last heartbeat, so a burst of offers spreads instead of piling onto one transceiver.
    #[serde(default)]
    pub load: usize,
    #[serde(default)]
    pub at_ms: u64,
}

impl From<CreatedCall> for Created {
    fn from(c: CreatedCall) -> Self {
        Created {
            call_id: c.call_id,
            answer_sdp: c.answer_sdp,
            cluster: c.cluster,
            transceiver: c.transceiver,
            worker: c.worker,
            candidate: c.candidate,
            load: 0,
            at_ms: 0,
        }
    }
}

impl From<Created> for CreatedCall {
    fn from(c: Created) -> Self {
        CreatedCall {
            call_id: c.call_id,
            answer_sdp: c.answer_sdp,
            cluster: c.cluster,
            transceiver: c.transceiver,
            worker: c.worker,
            candidate: c.candidate,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Calls {
    pub calls: Vec<CallInfo>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Status {
    pub cluster: u16,
    pub id: u16,
    pub live_calls: usize,
    pub load: usize,
    pub draining: bool,
    pub workers: usize,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Error {
    pub error: ErrorBody,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
}

/// `GET /sessions`: the [`crate::websocket::SessionRequest`] as JSON.
#[derive(Debug, Serialize, Deserialize)]
pub struct SessionQuery {
    pub request: String,
}

/// A call error as a status and a code; [`call_error`] reads it back, so a bad offer stays the
/// client's 400 and a stopped transceiver stays a 503 across the network.
pub fn error_parts(e: &CallError) -> (u16, &'static str) {
    match e {
        CallError::Answer(AnswerError::BadSdp(_)) => (400, "bad_sdp"),
        CallError::Answer(AnswerError::NoAudio) => (400, "no_audio"),
        CallError::Answer(AnswerError::Negotiation(_)) => (400, "negotiation"),
        CallError::Answer(AnswerError::OverBudget(_)) => (429, "recording_budget_exceeded"),
        CallError::Unavailable(_) => (503, "unavailable"),
        CallError::Full(_, r) => (503, r.code()),
        CallError::Control(_) => (502, "control"),
        CallError::FaultRefused(_) => (409, "fault_refused"),
        CallError::Refused(_) => (409, "refused"),
    }
}

/// The inverse of [`error_parts`], for the client.
pub fn call_error(id: u16, status: u16, body: &str) -> CallError {
    let parsed: Option<Error> = serde_json::from_str(body).ok();
    let (code, message) = match parsed {
        Some(e) => (e.error.code, e.error.message),
        None => (String::new(), body.chars().take(200).collect()),
    };
    match code.as_str() {
        "bad_sdp" => AnswerError::BadSdp(strip(&message, "the offer is not valid SDP: ")).into(),
        "no_audio" => AnswerError::NoAudio.into(),
        "negotiation" => {
            AnswerError::Negotiation(strip(&message, "could not answer the offer: ")).into()
        }
        "recording_budget_exceeded" => AnswerError::OverBudget(message).into(),
        "unavailable" => CallError::Unavailable(id),
        "fault_refused" => CallError::FaultRefused(message),
        "refused" => CallError::Refused(message),
        c if Refusal::from_code(c).is_some() => CallError::Full(id, Refusal::from_code(c).unwrap()),
        _ => CallError::Control(format!(
            "transceiver {id} answered {status}: {code} {message}"
        )),
    }
}

/// Error messages travel with their Display prefix; the rebuilt error adds it again.
fn strip(message: &str, prefix: &str) -> String {
    message.strip_prefix(prefix).unwrap_or(message).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_survive_the_round_trip() {
        let cases = [
            CallError::from(AnswerError::BadSdp("line 3".into())),
            AnswerError::NoAudio.into(),
            AnswerError::Negotiation("no fingerprint".into()).into(),
            AnswerError::OverBudget("this client already holds its 1048576 bytes".into()).into(),
            CallError::Unavailable(7),
            CallError::Full(7, Refusal::Saturated),
            CallError::Full(7, Refusal::TooManyConnecting),
        ];
        for e in cases {
            let (status, code) = error_parts(&e);
            let body = serde_json::to_string(&Error {
                error: ErrorBody {
                    code: code.into(),
                    message: e.to_string(),
                },
            })
            .unwrap();
            let back = call_error(7, status, &body);
            assert_eq!(back.to_string(), e.to_string());
            assert_eq!(error_parts(&back), (status, code));
        }
        // Anything else (a proxy's HTML page, say) is a control-path failure, not the client's.
        let e = call_error(7, 502, "<html>bad gateway</html>");
        assert!(matches!(e, CallError::Control(_)), "{e:?}");
        assert_eq!(error_parts(&e).0, 502);
    }
}
