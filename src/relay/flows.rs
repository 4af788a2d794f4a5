//! The relay's flow tables: client address → next hop.
//!
//! Each worker owns a [`FlowTable`] (no lock on the hot path; the kernel's SO_REUSEPORT hash
//! keeps a client on one worker). Capacity is reserved up front and capped: a flood of new
//! sources is refused at the cap rather than evicting flows that carry live calls, and idle
//! flows age out on a sweep instead of per packet. [`SharedFlows`] is the slow path: flows
//! recovered from the cache or learned from outbound traffic land there, and a worker consults
//! it only for a source it does not know.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

/// Releases kept for workers that have not applied them yet. A worker applies them every loop
/// turn (at most a 50 ms tick apart), so only a burst of this many within one turn is lost, and
/// a lost one still heals: the owner releases again on the client's next datagram.
const RELEASE_LOG: usize = 4096;

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

/// Room a flow table starts with; it grows as flows arrive, up to its cap.
///
/// It used to start with room for 65,536 flows: a 13 MB table, untouched at first, whose pages
/// the kernel backed one by one as flows landed on fresh buckets. With calls ending and new
/// ones arriving, every new client address hashes somewhere new, so an hour's churn backed page
/// after page: that was the soak's RSS creep (bench/soak: +11 MB over the hour, converging as
/// the table filled; /proc/PID/smaps showed the table's mapping growing 6.5 → 7.1 MB over two
/// minutes at 300 calls while the heap in use grew by 0.1 MB). A table that grows holds what its
/// flows need; a doubling rehash moves each flow once.
const INITIAL_FLOWS: usize = 1024;

impl FlowTable {
    pub fn new(cap: usize, idle: Duration) -> Self {
        FlowTable {
            flows: HashMap::with_capacity(cap.min(INITIAL_FLOWS)),
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

    /// Forgets `client`'s flow if `owner` is where it goes; whether it did. Any other owner's
    /// word is ignored, so a next hop can only give up its own flows.
    pub fn release(&mut self, client: &SocketAddr, owner: SocketAddr) -> bool {
        if self.flows.get(client).is_some_and(|f| f.owner == owner) {
            self.flows.remove(client);
            return true;
        }
        false
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

/// Flows known to the relay but not (yet) to the worker that will see the client; and the flows
/// owners gave up, for every worker to forget.
///
/// A release reaches whichever worker the kernel hands the owner's datagram to, while the flow
/// lives in the worker that sees the client, so releases are posted here and each worker
/// applies the ones it has not seen (one atomic load per loop turn when there are none).
pub struct SharedFlows {
    inner: RwLock<FlowTable>,
    releases: Mutex<VecDeque<(u64, SocketAddr, SocketAddr)>>,
    released: AtomicU64,
    /// Bumped each time the cache brought flows back, so a worker holding datagrams for lookups
    /// looks at them then, not on every loop turn.
    recovered: AtomicU64,
}

impl SharedFlows {
    pub fn new(cap: usize, idle: Duration) -> Self {
        SharedFlows {
            inner: RwLock::new(FlowTable::new(cap, idle)),
            releases: Mutex::new(VecDeque::with_capacity(RELEASE_LOG)),
            released: AtomicU64::new(0),
            recovered: AtomicU64::new(0),
        }
    }

    /// The cache brought flows back (see `recovered`).
    pub fn mark_recovered(&self) {
        self.recovered.fetch_add(1, Ordering::Release);
    }

    /// Whether flows came back since `seen`, moving `seen` up.
    #[inline]
    pub fn recovered_since(&self, seen: &mut u64) -> bool {
        let now = self.recovered.load(Ordering::Acquire);
        std::mem::replace(seen, now) != now
    }

    /// `owner` gives up `client`: forgotten here now, by each worker at its next
    /// [`SharedFlows::releases_since`].
    pub fn release(&self, client: SocketAddr, owner: SocketAddr) {
        if let Ok(mut t) = self.inner.write() {
            t.release(&client, owner);
        }
        let Ok(mut log) = self.releases.lock() else {
            return;
        };
        let seq = self.released.load(Ordering::Relaxed) + 1;
        if log.len() == RELEASE_LOG {
            log.pop_front();
        }
        log.push_back((seq, client, owner));
        self.released.store(seq, Ordering::Release);
    }

    /// Calls `apply(client, owner)` for each release after `seen`, and moves `seen` past them.
    #[inline]
    pub fn releases_since(&self, seen: &mut u64, mut apply: impl FnMut(SocketAddr, SocketAddr)) {
        if self.released.load(Ordering::Acquire) == *seen {
            return;
        }
        let Ok(log) = self.releases.lock() else {
            return;
        };
        let after = *seen;
        for &(seq, client, owner) in log.iter().filter(|(seq, ..)| *seq > after) {
            apply(client, owner);
            *seen = seq;
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
    fn only_the_owner_releases_a_flow_and_every_worker_hears_of_it() {
        let now = Instant::now();
        let shared = SharedFlows::new(10, Duration::from_secs(30));
        let mut worker = FlowTable::new(10, Duration::from_secs(30));
        worker.insert(a(1), a(9000), 1, now);
        worker.insert(a(2), a(9000), 1, now);
        shared.insert(a(1), a(9000), 1, now);
        let mut seen = 0;
        // Another hop's word does nothing.
        shared.release(a(1), a(9001));
        shared.releases_since(&mut seen, |c, o| {
            worker.release(&c, o);
        });
        assert!(worker.contains(&a(1)) && shared.get(&a(1)).is_some());
        shared.release(a(1), a(9000));
        shared.releases_since(&mut seen, |c, o| {
            worker.release(&c, o);
        });
        assert!(!worker.contains(&a(1)) && shared.get(&a(1)).is_none());
        assert!(worker.contains(&a(2)), "only the released client goes");
        assert_eq!(seen, 2);
        // Applied once: nothing new, nothing called.
        shared.releases_since(&mut seen, |_, _| panic!("applied twice"));
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
