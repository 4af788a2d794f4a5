//! The split roles, each its own process of the one binary (`voice-edge signaling`,
//! `voice-edge transceiver`; the relay role is [`crate::relay`] on its own): the same modules
//! the all-in-one process wires by function calls, wired here through Redis membership and the
//! control API instead.

pub mod signaling;
pub mod transceiver;
