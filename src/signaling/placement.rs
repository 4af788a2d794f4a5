//! Placement: which transceiver answers a new call.
//!
//! Least-loaded among those not draining and admitting calls, so a transceiver being taken out
//! of service gets no new calls while its live ones finish, and one at capacity or saturated
//! (see [`crate::transceiver::admission`]) is passed over while another has room; ties go to
//! the lowest id, which keeps tests and logs predictable.

use std::sync::Arc;

use crate::control::TransceiverControl;

pub fn pick(transceivers: &[Arc<dyn TransceiverControl>]) -> Option<&Arc<dyn TransceiverControl>> {
    transceivers
        .iter()
        .filter(|t| !t.is_draining() && t.admits_calls())
        .min_by_key(|t| (t.load(), t.id()))
}
