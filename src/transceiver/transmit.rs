//! What the sans-I/O core hands its socket loop to send. Apart from the endpoint so the fault
//! layer's per-call state, which holds datagrams back and releases them later, names it
//! without importing the endpoint.

use std::net::SocketAddr;

use bytes::BytesMut;

use crate::routing::link::LinkHeader;

/// A datagram for the socket: to a relay's link address with the link header in front, or bare
/// to a client that talks to this socket directly.
#[derive(Debug)]
pub struct Transmit {
    /// The call that wrote it (an endpoint's `CallKey`), so a layer can treat calls apart.
    pub call: u64,
    pub to: SocketAddr,
    pub link: Option<LinkHeader>,
    pub payload: BytesMut,
}
