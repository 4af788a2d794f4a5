//! Relay counters, one per outcome, so an operator can tell a flood from a misroute.
//!
//! Plain relaxed atomics: each is written by one thread and read by the admin endpoint, so no
//! ordering between them is needed and the hot path pays one uncontended add.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        #[derive(Default, Debug)]
        pub struct Counters { $($(#[$doc])* pub $name: AtomicU64,)* }

        #[derive(Default, Debug, Clone, Copy, Serialize, PartialEq, Eq)]
        pub struct CounterSnapshot { $(pub $name: u64,)* }

        impl Counters {
            pub fn snapshot(&self) -> CounterSnapshot {
                CounterSnapshot { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }
    };
}

counters! {
    /// Client → transceiver datagrams forwarded.
    forwarded_in,
    /// Transceiver → client datagrams forwarded.
    forwarded_out,
    /// Flows created from a routable STUN binding request.
    flows_created,
    /// Flows removed after idling.
    flows_expired,
    /// Unknown source, and not a STUN binding request.
    dropped_not_stun,
    /// Unknown source, STUN but no parsable USERNAME.
    dropped_bad_stun,
    /// The ufrag's route did not decode or its MAC failed (forged or foreign).
    dropped_bad_route,
    /// The route names another cluster than this relay's.
    dropped_wrong_cluster,
    /// The route names a transceiver id not in the membership.
    dropped_unknown_transceiver,
    /// The flow table is at its cap; established flows are kept.
    dropped_table_full,
    /// A datagram on the internal socket from a non-member, or without a valid link header.
    dropped_bad_link,
    /// Flow records that could not be queued for the cache writer.
    cache_queue_full,
    /// Socket send errors.
    send_errors,
}

impl Counters {
    #[inline]
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}
