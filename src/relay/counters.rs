//! Relay counters, one per outcome, so an operator can tell a flood from a misroute.
//!
//! Each worker has its own set (written by that worker only, read by the admin endpoint), so
//! the hot path pays one uncontended relaxed add and no cache line is shared between workers.

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

        impl CounterSnapshot {
            /// Every counter with its name, for the metrics endpoint.
            pub fn named(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }

        impl std::ops::AddAssign for CounterSnapshot {
            fn add_assign(&mut self, o: Self) { $(self.$name += o.$name;)* }
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
    /// Flows restored from the Redis flow cache after a restart.
    flows_recovered_cache,
    /// Flows learned from a transceiver's outbound packets after a restart.
    flows_learned_outbound,
    /// Datagrams from unknown sources held while the cache was asked for their flow, then
    /// forwarded when it answered (after a restart, the packet that asked is not lost).
    held_then_forwarded,
    /// Flows removed after idling.
    flows_expired,
    /// Flows their owner gave up (its call ended, or it no longer knows the client), so the
    /// client's next call is routed afresh.
    flows_released,
    /// Unknown source, not a STUN binding request, and no flow known anywhere. Includes the
    /// datagrams held for a cache lookup, which `held_then_forwarded` counts again if the flow
    /// was found.
    dropped_not_stun,
    /// Unknown source, STUN but no parsable USERNAME.
    dropped_bad_stun,
    /// The ufrag's route did not decode or its MAC failed (forged or foreign).
    dropped_bad_route,
    /// The route names another cluster than this relay's.
    dropped_wrong_cluster,
    /// The route names a transceiver (or cluster) not in the membership.
    dropped_unknown_transceiver,
    /// The flow table is at its cap; established flows are kept.
    dropped_table_full,
    /// A datagram on the link socket from a non-member, or without a valid link header.
    dropped_bad_link,
    /// A datagram larger than a receive slot (2,048 bytes less the header room): dropped whole
    /// rather than forwarded cut short.
    dropped_oversize,
    /// Flow-cache lookups started for unknown sources.
    cache_lookups,
    /// Flow records or lookups that could not be queued for the cache thread.
    cache_queue_full,
    /// Flow records written to Redis.
    cache_writes,
    /// Flow-cache writes that failed (Redis down); retried when it returns.
    cache_write_errors,
    /// Attempts to connect to the flow cache's Redis that failed: unreachable, or refused (a
    /// wrong or missing password, a database that does not exist). Logged when the reason
    /// changes.
    cache_connect_errors,
    /// Socket send errors (datagrams the kernel refused or had no room for).
    send_errors,
    /// Datagrams the kernel dropped before the relay read them (a socket's receive buffer was
    /// full, or an in-memory link's queue): the relay did not keep up.
    dropped_socket_full,
    /// One-second windows a worker spent saturated (drops, or too little idle time), its
    /// cluster out of placement (see [`crate::saturation`]).
    saturated_windows,
}

impl Counters {
    #[inline]
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    pub fn add(c: &AtomicU64, n: u64) {
        if n > 0 {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }
}
