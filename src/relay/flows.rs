//! The relay's flow table: client 5-tuple → owning transceiver.
//!
//! Owned by one thread, so it needs no lock. Capacity is reserved up front and capped: a flood
//! of new sources is refused at the cap rather than evicting flows that carry live calls, and
//! idle flows age out on a sweep instead of per packet.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct Flow {
    pub owner: SocketAddr,
    pub transceiver: u16,
    pub last_seen: Instant,
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

    pub fn insert(
        &mut self,
        client: SocketAddr,
        owner: SocketAddr,
        transceiver: u16,
        now: Instant,
    ) -> Insert {
        if let Some(f) = self.flows.get_mut(&client) {
            *f = Flow {
                owner,
                transceiver,
                last_seen: now,
            };
            return Insert::Updated;
        }
        if self.flows.len() >= self.cap {
            return Insert::Full;
        }
        self.flows.insert(
            client,
            Flow {
                owner,
                transceiver,
                last_seen: now,
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

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
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
}
