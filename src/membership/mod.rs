//! Cluster membership: which transceiver id lives at which internal address.
//!
//! The ufrag carries a small transceiver *index*, never an address, so that a forged or replayed
//! hint can only ever name a member; membership is the only place ids become addresses. The
//! all-in-one process and a relay given `--transceiver ID=ADDR` use a static table
//! ([`ClusterMembers`]); with the roles split, transceivers register in Redis with a heartbeat
//! and a TTL ([`registry`]), and signaling ([`RedisDirectory`]) and relays read it.

mod directory;
pub mod registry;

pub use directory::RedisDirectory;
pub use registry::{MemberRecord, Registration};

pub use crate::routing::members::{ClusterMembers, parse_member};
