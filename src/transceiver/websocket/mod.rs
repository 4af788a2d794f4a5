//! Realtime sessions over a WebSocket (`GET /v1/realtime?model=…`), hosted by a transceiver.
//!
//! Why here and not in signaling: a session is stateful and speaks through the transceiver's
//! synthesis pool, like a call; signaling stays a stateless front door that places the session
//! and pipes frames ([`EventStream`]), in-process or across the control API. Why not on the
//! socket workers: a WebSocket session has no datagrams, so it needs nothing from the UDP loop
//! and must not add to it. Each session is one task driving a [`WsSession`] (the sans-I/O core)
//! with a timer.

mod framer;
mod host;
mod pipe;
mod session;

pub use host::spawn;
pub use pipe::pipe;
pub use session::{SessionRequest, WsSession};

/// A client's event stream to a session on a transceiver: text frames both ways. The session
/// ends when the client side is dropped; the stream ends (`from_session` yields `None`) when
/// the session ends (it expired, the call it is attached to ended, or it fell behind).
pub struct EventStream {
    pub to_session: tokio::sync::mpsc::Sender<String>,
    pub from_session: tokio::sync::mpsc::Receiver<String>,
}

/// Frames queued each way before the sender waits (client to session) or the stream is cut
/// (a sideband that stopped reading: a call's socket thread never waits for it).
pub const STREAM_CAPACITY: usize = 1024;
