//! Realtime and Live sessions over a WebSocket (`GET /v1/realtime?model=…`,
//! `/v1/live/sessions`): the second transport a [`crate::call::Call`] runs on, beside WebRTC.
//!
//! Why a transceiver hosts them and not signaling: a session is stateful and speaks through
//! the transceiver's synthesis pool, like a call; signaling stays a stateless front door that
//! places the session and pipes frames ([`EventStream`]), in-process or across the control API.
//! Why not on the socket workers: a WebSocket session has no datagrams, so it needs nothing
//! from the UDP loop and must not add to it. Each session is one task driving a [`WsSession`]
//! (the sans-I/O core) with a timer.

mod host;
mod pipe;
mod session;

pub use crate::call::event_stream::{EventStream, STREAM_CAPACITY};
pub use host::spawn;
pub use pipe::pipe;
pub use session::{SessionRequest, WsSession};
