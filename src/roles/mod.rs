//! The split roles, each its own process of the one binary (`voice-edge relay`,
//! `voice-edge signaling`, `voice-edge transceiver`): the same modules the all-in-one process
//! wires by function calls, wired here through Redis membership and the control API instead.

pub mod relay;
pub mod signaling;
pub mod transceiver;
