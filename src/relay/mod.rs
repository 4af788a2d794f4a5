//! The relay: owns the public UDP port and routes every datagram to the owner of its session,
//! without terminating anything.
//!
//! A datagram from an unknown source is routable only if it is a STUN binding request whose
//! USERNAME starts with a server ufrag carrying a valid route MAC; that creates a flow. Every
//! later datagram of the flow (DTLS, SRTP, SCTP, consent checks) is forwarded by address alone.
//! Anything else is dropped and counted — unless the flow is recovered first, from the Redis
//! flow cache or from the transceiver's own outbound packets, which is how media resumes within
//! a packet or two after a relay restart.
//!
//! The relay never imports transceiver code: the ufrag codec and the link header in
//! [`crate::routing`] are the whole contract between them. The same code runs both tiers: a
//! cluster relay routes by transceiver id, a global relay by cluster id to cluster relays.

pub mod counters;
pub mod flow_cache;
pub mod flows;
pub mod route;
pub mod socket;
mod worker;

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use counters::{CounterSnapshot, Counters};
pub use flow_cache::FlowCacheConfig;
use flows::SharedFlows;

use crate::routing::RouteKeys;
use crate::routing::members::ClusterMembers;

/// Which part of the route this relay acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Routes by transceiver id; hints for another cluster are dropped.
    Cluster { cluster: u16 },
    /// Routes by cluster id to that cluster's relay, which routes on.
    Global,
}

/// Set in a link header's ingress field when the datagram entered through an upstream (global)
/// relay; the low bits index [`RelayConfig::upstreams`]. Transceivers echo the field back, so the
/// relay knows where a reply goes without keeping state for it.
pub const VIA_UPSTREAM: u32 = 1 << 31;

#[derive(Clone)]
pub struct RelayConfig {
    /// The public address clients send to (and the candidate in every answer).
    pub listen: SocketAddr,
    /// The link socket's address (transceivers answer to it; a global relay forwards to it).
    pub link: SocketAddr,
    pub tier: Tier,
    /// Route id → next hop's link address: transceivers (cluster tier) or cluster relays (global).
    pub next_hops: HashMap<u16, SocketAddr>,
    /// Cluster tier: worker sockets per transceiver, on consecutive ports from its address; the
    /// route's worker byte picks one. A worker byte at or above this is dropped.
    pub hop_workers: u8,
    /// Global relays allowed to hand this relay client datagrams over the link.
    pub upstreams: Vec<SocketAddr>,
    pub route_keys: RouteKeys,
    /// Worker threads, each with its own SO_REUSEPORT sockets and flow table.
    pub workers: usize,
    /// Pin each worker to a core.
    pub pin: bool,
    pub flow_idle: Duration,
    /// Per worker.
    pub max_flows: usize,
    /// Learn flows from transceivers' outbound packets (while recovering from a restart).
    pub learn_outbound: bool,
    pub cache: Option<FlowCacheConfig>,
    /// Next hops that change while the relay runs (Redis membership); when set, its contents
    /// replace `next_hops` in every worker and the cache thread as soon as they change.
    pub live_hops: Option<Arc<LiveHops>>,
    /// Next hops in this process (the all-in-one's transceivers) reached in memory rather than
    /// by UDP; the relay registers its own link address there too, for their replies.
    pub local_links: Option<Arc<crate::routing::local_link::LocalLinks>>,
    /// Where the workers say whether they keep up; signaling reads it (in this process, or
    /// through the relay's record in Redis) and places no call behind a saturated relay. Kept
    /// across a restart: the new workers report to the same one.
    pub headroom: Arc<crate::saturation::Headroom>,
}

/// The next-hop table as membership updates it. Workers read the version (one atomic load per
/// poll turn) and copy the table only when it moved, so the hot path stays lock-free.
#[derive(Debug, Default)]
pub struct LiveHops {
    version: AtomicU64,
    table: Mutex<(HashMap<u16, SocketAddr>, u8)>,
    /// Membership has been read at least once (even if it named no member).
    loaded: AtomicBool,
}

impl LiveHops {
    /// Replaces the table (hop id → worker 0's link address) and the most workers any hop has
    /// (routes naming a worker beyond a hop's own count were never minted by it); a no-op when
    /// nothing changed.
    pub fn set(&self, hops: HashMap<u16, SocketAddr>, workers: u8) {
        let mut cur = self.table.lock().unwrap();
        if cur.0 != hops || cur.1 != workers {
            *cur = (hops, workers);
            self.version.fetch_add(1, Ordering::Release);
        }
        self.loaded.store(true, Ordering::Release);
    }

    /// Waits until membership has been read once, at most `timeout`; whether it was.
    pub fn wait_loaded(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.loaded.load(Ordering::Acquire) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }

    pub fn get(&self) -> HashMap<u16, SocketAddr> {
        self.table.lock().unwrap().0.clone()
    }

    /// Copies the table into `cfg` if it changed since `seen`; true when it did.
    pub(crate) fn refresh(&self, seen: &mut u64, cfg: &mut RelayConfig) -> bool {
        let v = self.version.load(Ordering::Acquire);
        if v == *seen {
            return false;
        }
        let (hops, workers) = self.table.lock().unwrap().clone();
        cfg.next_hops = hops;
        cfg.hop_workers = workers.max(1);
        *seen = v;
        true
    }
}

impl RelayConfig {
    /// A cluster relay in front of `members`.
    pub fn new(listen: SocketAddr, members: ClusterMembers, route_keys: RouteKeys) -> Self {
        RelayConfig {
            listen,
            link: SocketAddr::new(listen.ip(), 0),
            tier: Tier::Cluster {
                cluster: members.cluster,
            },
            next_hops: members.transceivers,
            hop_workers: members.workers,
            upstreams: vec![],
            route_keys,
            workers: 1,
            pin: false,
            flow_idle: Duration::from_secs(30),
            max_flows: 100_000,
            learn_outbound: true,
            cache: None,
            live_hops: None,
            local_links: None,
            headroom: Arc::default(),
        }
    }

    /// A global relay in front of cluster relays (cluster id → cluster relay link address).
    pub fn global(
        listen: SocketAddr,
        cluster_relays: HashMap<u16, SocketAddr>,
        route_keys: RouteKeys,
    ) -> Self {
        RelayConfig {
            tier: Tier::Global,
            next_hops: cluster_relays,
            ..Self::new(listen, ClusterMembers::new(0), route_keys)
        }
    }

    /// Where worker `worker` of next hop `hop` listens: the hop's port plus the worker index.
    /// A global relay forwards to cluster relays, which have no workers to address.
    pub(crate) fn next_hop(&self, hop: u16, worker: u8) -> Option<SocketAddr> {
        let base = *self.next_hops.get(&hop)?;
        match self.tier {
            Tier::Global => Some(base),
            Tier::Cluster { .. } if worker < self.hop_workers.max(1) => base
                .port()
                .checked_add(worker as u16)
                .map(|p| SocketAddr::new(base.ip(), p)),
            Tier::Cluster { .. } => None,
        }
    }

    /// Every address a next hop may answer from, with its route id.
    pub(crate) fn next_hop_addrs(&self) -> HashMap<SocketAddr, u16> {
        let mut out = HashMap::new();
        for &id in self.next_hops.keys() {
            for w in 0..self.hop_workers.max(1) {
                if let Some(a) = self.next_hop(id, w) {
                    out.insert(a, id);
                }
            }
        }
        out
    }

    fn scope(&self) -> String {
        match self.tier {
            Tier::Cluster { cluster } => format!("c{cluster}"),
            Tier::Global => "g".to_owned(),
        }
    }
}

pub struct RelayHandle {
    pub public_addr: SocketAddr,
    pub link_addr: SocketAddr,
    worker_counters: Vec<Arc<Counters>>,
    cache_counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    /// One per worker: the stop wakes each at once.
    wakers: Vec<crate::wakeup::Waker>,
    threads: Vec<JoinHandle<()>>,
    cache_thread: Option<JoinHandle<()>>,
    cache_tx: Option<flow_cache::CacheSender>,
}

impl RelayHandle {
    /// All workers' counters summed, plus the cache thread's.
    pub fn counters(&self) -> CounterSnapshot {
        let mut s = self.cache_counters.snapshot();
        for c in &self.worker_counters {
            s += c.snapshot();
        }
        s
    }

    pub fn worker_counters(&self) -> Vec<CounterSnapshot> {
        self.worker_counters.iter().map(|c| c.snapshot()).collect()
    }

    /// Stops the workers and the cache thread and waits for them (at most one poll tick).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for w in &self.wakers {
            w.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        drop(self.cache_tx.take());
        if let Some(t) = self.cache_thread.take() {
            let _ = t.join();
        }
    }
}

/// Binds the sockets and starts the workers (and the cache thread when configured).
pub fn spawn(cfg: RelayConfig) -> anyhow::Result<RelayHandle> {
    let sockets = RelaySockets::bind(cfg.listen, cfg.link, cfg.workers)?;
    spawn_bound(cfg, sockets)
}

/// Every worker's public and link socket, bound before the relay starts.
///
/// Binding is separate from starting so a process that must tell others the relay's addresses
/// first (the all-in-one: transceivers advertise the public address, cluster relays accept the
/// global relay's link) can learn OS-chosen ports and keep them. Binding, releasing and binding
/// again would let another SO_REUSEPORT socket grab the port in between and share its traffic.
pub struct RelaySockets {
    publics: Vec<UdpSocket>,
    links: Vec<UdpSocket>,
    pub public_addr: SocketAddr,
    pub link_addr: SocketAddr,
}

impl RelaySockets {
    /// Binds `workers` sockets on each address (SO_REUSEPORT); port 0 means the first socket
    /// picks it and the others follow.
    pub fn bind(listen: SocketAddr, link: SocketAddr, workers: usize) -> anyhow::Result<Self> {
        anyhow::ensure!(workers >= 1, "a relay needs at least one worker");
        let mut publics = vec![socket::bind_reuseport(listen)?];
        let public_addr = publics[0].local_addr()?;
        let mut links = vec![socket::bind_reuseport(link)?];
        let link_addr = links[0].local_addr()?;
        for _ in 1..workers {
            publics.push(socket::bind_reuseport(public_addr)?);
            links.push(socket::bind_reuseport(link_addr)?);
        }
        Ok(RelaySockets {
            publics,
            links,
            public_addr,
            link_addr,
        })
    }
}

/// Starts the workers (and the cache thread when configured) on sockets already bound;
/// `cfg.listen`, `cfg.link` and `cfg.workers` are taken from the sockets.
pub fn spawn_bound(cfg: RelayConfig, sockets: RelaySockets) -> anyhow::Result<RelayHandle> {
    let RelaySockets {
        publics,
        links,
        public_addr,
        link_addr,
    } = sockets;
    let cfg = RelayConfig {
        listen: public_addr,
        link: link_addr,
        workers: publics.len(),
        ..cfg
    };

    let stop = Arc::new(AtomicBool::new(false));
    let sleepers = (0..publics.len())
        .map(|_| crate::wakeup::Sleeper::new().map(|s| s.paced(crate::wakeup::SERVER_LOOP_PACE)))
        .collect::<std::io::Result<Vec<_>>>()?;
    let wakers: Vec<_> = sleepers.iter().map(|s| s.waker()).collect();
    let shared = Arc::new(SharedFlows::new(cfg.max_flows, cfg.flow_idle));
    let cache_counters = Arc::new(Counters::default());
    let (cache_tx, cache_thread) = match &cfg.cache {
        Some(c) => {
            let (tx, t) = flow_cache::CacheThread {
                cfg: c.clone(),
                scope: cfg.scope(),
                relay: cfg.clone(),
                shared: shared.clone(),
                counters: cache_counters.clone(),
                wakers: wakers.clone(),
            }
            .spawn()?;
            (Some(tx), Some(t))
        }
        None => (None, None),
    };

    let cores = if cfg.pin {
        core_affinity::get_core_ids().unwrap_or_default()
    } else {
        vec![]
    };
    let started = Instant::now();
    // In-process next hops reply through these queues, one per worker, registered under the
    // link address (a restarted relay's replace the old ones).
    let mut inboxes = vec![];
    if let Some(local) = &cfg.local_links {
        let mut senders = vec![];
        for waker in &wakers {
            let (tx, rx) = crate::routing::local_link::local_link(waker.clone());
            senders.push(tx);
            inboxes.push(Some(rx));
        }
        local.register(link_addr, senders);
    } else {
        inboxes.resize_with(publics.len(), || None);
    }
    let mut worker_counters = vec![];
    let mut threads = vec![];
    let per_worker = publics.into_iter().zip(links).zip(inboxes).zip(sleepers);
    for (i, (((public, link), inbox), sleeper)) in per_worker.enumerate() {
        let counters = Arc::new(Counters::default());
        worker_counters.push(counters.clone());
        let w = worker::Worker::new(worker::WorkerParts {
            index: i as u32,
            public,
            link,
            cfg: cfg.clone(),
            counters,
            shared: shared.clone(),
            cache: cache_tx.clone(),
            stop: stop.clone(),
            sleeper,
            started,
            inbox,
        });
        let core = (!cores.is_empty()).then(|| cores[i % cores.len()]);
        threads.push(
            std::thread::Builder::new()
                .name(format!("relay-{i}"))
                .spawn(move || {
                    if let Some(core) = core {
                        core_affinity::set_for_current(core);
                    }
                    w.run()
                })?,
        );
    }
    log::info!(
        "relay ({:?}) on udp {public_addr}, link {link_addr}, {} worker(s){}",
        cfg.tier,
        cfg.workers,
        if cfg.pin { ", pinned" } else { "" }
    );
    Ok(RelayHandle {
        public_addr,
        link_addr,
        worker_counters,
        cache_counters,
        stop,
        wakers,
        threads,
        cache_thread,
        cache_tx,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_counts_as_read_once_set_even_when_empty() {
        let hops = LiveHops::default();
        assert!(!hops.wait_loaded(Duration::from_millis(5)), "never read");
        // What the table held already: no new version, but membership was read.
        hops.set(HashMap::new(), 0);
        assert!(hops.wait_loaded(Duration::ZERO), "read, with no member yet");
    }
}
