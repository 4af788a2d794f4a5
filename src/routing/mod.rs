//! Wire codecs that let a stateless relay route WebRTC traffic.
//!
//! The relay never terminates ICE or DTLS, so everything it needs to pick an owner for a packet from a
//! client it has never seen must be recoverable from that packet alone: the STUN binding request carries
//! the server's ICE ufrag, and the ufrag carries a MAC'd route hint (the QUIC-LB idea, applied to ICE).
//!
//! Signaling mints the ufrag, the relay decodes it, and the transceiver both mints it (when it answers an
//! offer) and parses the relay's encapsulation. Keeping all three formats in one pure module means the
//! sides cannot drift apart, and the code can be fuzzed without sockets.
//!
//! - [`ufrag`]: the route hint hidden in the server's ICE ufrag.
//! - [`stun`]: RFC 7983 first-byte demux and the USERNAME peek a relay needs for an unknown source.
//! - [`link`]: the relay ↔ transceiver encapsulation header.
//! - [`local_link`]: the same link datagrams handed over in memory when both ends share a process.
//!
//! Decode and peek paths take borrowed bytes and return `Copy` values or sub-slices, so the relay can
//! call them per packet without allocating.

pub mod link;
pub mod link_sources;
pub mod local_link;
pub mod members;
pub mod stun;
pub mod ufrag;

pub use link::{LINK_HEADER_LEN, LinkError, LinkHeader, encapsulate, is_link_packet};
pub use stun::{PacketKind, PeekError, classify, peek_binding_username};
pub use ufrag::{
    RouteError, RouteHint, RouteKey, RouteKeys, UFRAG_LEN, decode, is_valid_ice_ufrag, mint,
    mint_with_nonce, random_ice_pwd,
};
