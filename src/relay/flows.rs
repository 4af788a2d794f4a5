//! The relay's flow tables: client address → next hop.
//!
//! Each worker owns a [`FlowTable`] (no lock on the hot path; the kernel's SO_REUSEPORT hash
//! keeps a client on one worker). Capacity is reserved up front and capped: a flood of new
//! sources is refused at the cap rather than evicting flows that carry live calls, and idle
//! flows age out on a sweep instead of per packet. [`SharedFlows`] is the slow path: flows
//! recovered from the cache or learned from outbound traffic land there, and a worker consults
//! it only for a source it does not know.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::RwLock;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// Where this client's datagrams go (a transceiver, or a cluster relay for the global tier).
    pub owner: SocketAddr,
    /// The id that named the owner in the route (transceiver id, or cluster id).
    pub hop: u16,
    pub last_seen: Instant,
    /// When the flow was last written to the cache (so long flows are refreshed before the
    /// cache's TTL drops them).
    pub written: Instant,
}

pub struct FlowTable {
    flows: HashMap<SocketAddr, Flow>,
    cap: usize,
    idle: Duration,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Insert {
    New,
    Updated,
    Full,
}

impl FlowTable {
    pub fn new(cap: usize, idle: Duration) -> Self {
        FlowTable {
            flows: HashMap::with_capacity(cap.min(1 << 16)),
            cap,
            idle,
        }
    }

    /// Looks up a flow and marks it active.
    #[inline]
    pub fn touch(&mut self, client: &SocketAddr, now: Instant) -> Option<Flow> {
        let f = self.flows.get_mut(client)?;
        f.last_seen = now;
        Some(*f)
    }

    #[inline]
    pub fn contains(&self, client: &SocketAddr) -> bool {
        self.flows.contains_key(client)
    }

    pub fn insert(
        &mut self,
        client: SocketAddr,
        owner: SocketAddr,
        hop: u16,
        now: Instant,
    ) -> Insert {
        if let Some(f) = self.flows.get_mut(&client) {
            f.owner = owner;
            f.hop = hop;
            f.last_seen = now;
            return Insert::Updated;
        }
        if self.flows.len() >= self.cap {
            return Insert::Full;
        }
        self.flows.insert(
            client,
            Flow {
                owner,
                hop,
                last_seen: now,
                written: now,
            },
        );
        Insert::New
    }

    /// Removes flows idle for longer than the configured timeout; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let before = self.flows.len();
        let idle = self.idle;
        self.flows
            .retain(|_, f| now.duration_since(f.last_seen) < idle);
        before - self.flows.len()
    }

    /// Active flows whose cache entry is older than `every`; marks them written.
    pub fn due_for_refresh(
        &mut self,
        now: Instant,
        every: Duration,
        out: &mut Vec<(SocketAddr, u16, SocketAddr)>,
    ) {
        for (client, f) in self.flows.iter_mut() {
            if now.duration_since(f.written) >= every && now.duration_since(f.last_seen) < every {
                f.written = now;
                out.push((*client, f.hop, f.owner));
            }
        }
    }

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }
}

/// Flows known to the relay but not (yet) to the worker that will see the client.
pub struct SharedFlows {
    inner: RwLock<FlowTable>,
}

impl SharedFlows {
    pub fn new(cap: usize, idle: Duration) -> Self {
        SharedFlows {
            inner: RwLock::new(FlowTable::new(cap, idle)),
        }
    }

    pub fn get(&self, client: &SocketAddr) -> Option<Flow> {
        self.inner.read().ok()?.flows.get(client).copied()
    }

    pub fn insert(&self, client: SocketAddr, owner: SocketAddr, hop: u16, now: Instant) -> Insert {
        match self.inner.write() {
            Ok(mut t) => t.insert(client, owner, hop, now),
            Err(_) => Insert::Full,
        }
    }

    pub fn expire(&self, now: Instant) -> usize {
        self.inner.write().map(|mut t| t.expire(now)).unwrap_or(0)
    }

    pub fn len(&self) -> usize {
        self.inner.read().map(|t| t.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(p: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], p))
    }

    #[test]
    fn cap_refuses_new_sources_but_keeps_established() {
        let now = Instant::now();
        let mut t = FlowTable::new(2, Duration::from_secs(30));
        assert_eq!(t.insert(a(1), a(9000), 1, now), Insert::New);
        assert_eq!(t.insert(a(2), a(9000), 1, now), Insert::New);
        assert_eq!(t.insert(a(3), a(9000), 1, now), Insert::Full);
        assert!(t.touch(&a(1), now).is_some());
        assert!(t.touch(&a(3), now).is_none());
        // An established flow can still be re-routed at the cap (ICE restart).
        assert_eq!(t.insert(a(1), a(9001), 2, now), Insert::Updated);
    }

    #[test]
    fn idle_flows_expire_active_ones_stay() {
        let t0 = Instant::now();
        let mut t = FlowTable::new(10, Duration::from_secs(30));
        t.insert(a(1), a(9000), 1, t0);
        t.insert(a(2), a(9000), 1, t0);
        t.touch(&a(2), t0 + Duration::from_secs(20));
        assert_eq!(t.expire(t0 + Duration::from_secs(31)), 1);
        assert!(t.touch(&a(2), t0 + Duration::from_secs(31)).is_some());
    }

    #[test]
    fn active_flows_are_refreshed_in_the_cache_idle_ones_not() {
        let t0 = Instant::now();
        let mut t = FlowTable::new(10, Duration::from_secs(30));
        t.insert(a(1), a(9000), 1, t0);
        t.insert(a(2), a(9000), 2, t0);
        let t1 = t0 + Duration::from_secs(21);
        t.touch(&a(1), t1);
        let mut out = vec![];
        t.due_for_refresh(t1, Duration::from_secs(20), &mut out);
        assert_eq!(out, vec![(a(1), 1, a(9000))]);
        out.clear();
        t.due_for_refresh(t1, Duration::from_secs(20), &mut out);
        assert!(out.is_empty(), "refreshed twice");
    }
}
