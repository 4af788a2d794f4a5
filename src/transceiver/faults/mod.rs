//! Faults and bad networks on demand, per call: what `POST /v1/realtime/calls/{id}/faults` asks
//! of the transceiver that holds the call, and the layer that carries them out.
//!
//! **Where they apply.** In a layer between the worker's socket loop and the endpoint
//! ([`FaultLayer`]), per call: datagrams from the client are impaired before the endpoint sees
//! them, datagrams to the client after the endpoint wrote them and before the socket. They are
//! real datagrams on the real path, so the browser's own stack meets the loss, the delay, the
//! blackout or the new NAT mapping, and reacts as it would on a bad network (its jitter buffer,
//! RTCP reports, ICE `disconnected`, consent checks from the new port). Doing it on the
//! transceiver rather than in the relay means it works in every deployment shape (all-in-one,
//! split roles, several relays, the global relay, `--direct`) over the control API signaling
//! already has: the relay is stateless about calls and has no control channel from signaling.
//! Doing it outside the endpoint keeps the sans-I/O core free of test machinery: it never
//! holds, drops or rewrites a datagram it was handed. A worker none of whose calls has a fault
//! pays one emptiness check per datagram.
//!
//! **NAT rebinding** is emulated where the layer hands a datagram on: from the fault on, the
//! call's datagrams appear to come from the same IP at another port, exactly as if the client's
//! NAT had given it a new mapping. The endpoint then handles it by its normal path: a datagram
//! from an unknown address is dropped until an authenticated binding request names the call,
//! and only the stack's answer to that request moves the call's return path (see
//! `Endpoint::handle_datagram`). Replies are translated back to the real address only when sent
//! to the new mapping; anything sent to the old one is dropped, as the NAT would.
//!
//! **Blackout** drops everything either way at the moment it would enter the network; datagrams
//! already in flight (held by a delay) still arrive.

mod call;
mod impairment;
mod layer;
mod request;

pub use layer::FaultLayer;
pub use request::{
    Direction, Fault, FaultRequestError, FaultState, NetworkSpec, Requested, parse_request,
};
