//! The control API between signaling and transceivers: create a call from an offer, run a
//! per-call operation ([`CallCommand`]: hang up, renegotiate, events, faults, recording), list,
//! drain, load, and the two streams (a WebSocket session, a sideband).
//!
//! Signaling sees every transceiver through [`TransceiverControl`]. In the all-in-one process
//! that is the in-process [`TransceiverHandle`] (a function call and a channel to the worker);
//! with the roles split it is a [`RemoteTransceiver`], which speaks the same operations as JSON
//! over HTTP to the transceiver's control listener ([`server`]), authenticated with the cluster
//! secret. One trait, two implementations, so placement and the Realtime HTTP flow are the same
//! code in both shapes.

pub mod client;
mod local;
pub mod server;
mod stream;
mod wire;

pub use client::RemoteTransceiver;

use serde_json::Value;

use crate::transceiver::{CallCommand, CallError, CallId, CallInfo, CallReply, CreatedCall};
use crate::websocket::{EventStream, SessionRequest};

/// What signaling can ask of one transceiver, wherever it runs.
#[async_trait::async_trait]
pub trait TransceiverControl: Send + Sync {
    fn cluster(&self) -> u16;
    fn id(&self) -> u16;
    /// Live calls plus calls being set up: what placement balances on.
    fn load(&self) -> usize;
    fn is_draining(&self) -> bool;
    /// Whether it would take a call now (not at capacity, not saturated: see
    /// [`crate::transceiver::admission`]); placement passes over one that would only refuse.
    fn admits_calls(&self) -> bool;
    /// Counts a call as placed here until its [`TransceiverControl::create_call`] returns, so
    /// concurrent placements spread instead of all picking the same idle transceiver.
    fn reserve(&self);
    /// A summary for `/admin/stats`.
    fn describe(&self) -> Value;

    /// Answers `offer_sdp` with a new call on this transceiver.
    async fn create_call(
        &self,
        offer_sdp: String,
        setup: crate::transceiver::CallSetup,
    ) -> Result<CreatedCall, CallError>;
    /// Runs a per-call operation on the call's owner (see
    /// [`crate::transceiver::call_command`]); `Ok(None)` when the call is not here.
    async fn call(
        &self,
        call_id: &CallId,
        command: CallCommand,
    ) -> Result<Option<CallReply>, CallError>;
    async fn list_calls(&self) -> Result<Vec<CallInfo>, CallError>;
    /// Stops taking new calls; live ones continue until they end.
    async fn drain(&self) -> Result<(), CallError>;
    /// Starts a Realtime session over a WebSocket on this transceiver (see
    /// [`crate::websocket`]); placement must have called
    /// [`TransceiverControl::reserve`] first.
    async fn open_session(&self, request: SessionRequest) -> Result<EventStream, CallError> {
        let _ = request;
        Err(CallError::Unavailable(self.id()))
    }
    /// Attaches a sideband to a live call (see [`crate::call::sideband`]); `Ok(None)`
    /// when the call is not here.
    async fn attach_sideband(&self, call_id: &CallId) -> Result<Option<EventStream>, CallError> {
        let _ = call_id;
        Err(CallError::Unavailable(self.id()))
    }
}

/// Compares a presented secret with the expected one in time independent of where they differ,
/// so the comparison leaks nothing about the secret.
pub fn secret_matches(presented: &[u8], expected: &[u8]) -> bool {
    use hmac::Mac;
    // HMAC both under a per-process key and compare the tags with the MAC's constant-time check:
    // equal-length tags, whatever the inputs' lengths.
    let key: [u8; 32] = *PROCESS_KEY;
    let tag = |m: &[u8]| {
        let mut h = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).expect("any key length");
        h.update(m);
        h
    };
    let expected_tag = tag(expected).finalize().into_bytes();
    tag(presented).verify_slice(&expected_tag).is_ok()
}

static PROCESS_KEY: std::sync::LazyLock<[u8; 32]> = std::sync::LazyLock::new(rand::random);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_by_value() {
        assert!(secret_matches(b"s3cret", b"s3cret"));
        assert!(!secret_matches(b"s3cret", b"s3cres"));
        assert!(!secret_matches(b"", b"s3cret"));
        assert!(!secret_matches(b"s3cret-and-more", b"s3cret"));
    }
}
