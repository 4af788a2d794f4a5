//! The event stream between a client's WebSocket and the call it speaks to (a WebSocket
//! session, or a sideband of a WebRTC call): text frames both ways, in bounded queues, so
//! whichever side hosts the call never waits on a slow socket.

/// A client's event stream to a call: text frames both ways. The call's side ends when the
/// client side is dropped; the stream ends (`from_session` yields `None`) when the call ends
/// (it expired, the call a sideband is attached to ended, or the client fell behind).
pub struct EventStream {
    pub to_session: tokio::sync::mpsc::Sender<String>,
    pub from_session: tokio::sync::mpsc::Receiver<String>,
}

/// Frames queued each way before the sender waits (client to call) or the stream is cut
/// (a sideband that stopped reading: a call's socket thread never waits for it).
pub const STREAM_CAPACITY: usize = 1024;
