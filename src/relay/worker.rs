//! One relay worker: a public socket and a link socket (both SO_REUSEPORT-shared with the other
//! workers), its own flow table, batched I/O, one thread. Nothing on the forwarding path takes
//! a lock or allocates; only sources the worker has never seen reach the slow path.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::counters::Counters;
use super::flow_cache::CacheRequest;
use super::flows::{FlowTable, Insert, SharedFlows};
use super::route::{self, Route};
use super::{RelayConfig, VIA_UPSTREAM};
use crate::routing::link::{LINK_HEADER_LEN, LinkHeader};
use crate::routing::local_link::{LocalInbox, LocalRoutes};
use crate::saturation::{LoadMeter, Verdict};
use crate::udp_batch::{BATCH, RecvBatch, SendBatch};
use crate::wakeup::Sleeper;

/// The sleeper's keys for the two sockets; the stop and the in-memory link wake it by waker.
const PUBLIC: usize = 0;
const LINK: usize = 1;

/// How long a blocked worker sleeps before checking for stop and doing housekeeping.
const TICK: Duration = Duration::from_millis(50);
const HOUSEKEEPING: Duration = Duration::from_secs(1);
/// Batches drained from one socket before looking at the other, so neither direction starves.
const MAX_BATCHES_PER_TURN: usize = 8;
/// One cache lookup per unknown source per this long (the negative cache).
const LOOKUP_BACKOFF: Duration = Duration::from_secs(1);
const MAX_PENDING_LOOKUPS: usize = 4096;
/// Datagrams held while their source's flow is looked up: one (the latest) per source.
const MAX_HELD: usize = 1024;

pub(super) struct WorkerParts {
    pub index: u32,
    pub public: UdpSocket,
    pub link: UdpSocket,
    pub cfg: RelayConfig,
    pub counters: Arc<Counters>,
    pub shared: Arc<SharedFlows>,
    pub cache: Option<super::flow_cache::CacheSender>,
    pub stop: Arc<AtomicBool>,
    /// What the loop sleeps on. The relay's stop holds its waker, so a stop or a restart does
    /// not wait out a tick, and so does the in-memory link's sender.
    pub sleeper: Sleeper,
    pub started: Instant,
    /// Replies from in-process next hops (see [`crate::routing::local_link`]).
    pub inbox: Option<LocalInbox>,
}

/// Where a next hop's reply is sent.
enum ReplyTo {
    /// The global relay it came in through (link socket, header kept).
    Upstream(SocketAddr),
    /// The client, from the public socket (header stripped).
    Client(SocketAddr),
}

pub(super) struct Worker {
    index: u32,
    public: UdpSocket,
    link: UdpSocket,
    cfg: RelayConfig,
    /// Link address → route id, to recognise next hops and name learned flows.
    hop_ids: HashMap<SocketAddr, u16>,
    flows: FlowTable,
    shared: Arc<SharedFlows>,
    cache: Option<super::flow_cache::CacheSender>,
    lookups: HashMap<SocketAddr, Instant>,
    /// The latest datagram of each source being looked up, with room for the link header in
    /// front: forwarded when the flow is found, dropped with the lookup's backoff.
    held: HashMap<SocketAddr, (Instant, Vec<u8>)>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    sleeper: Sleeper,
    /// Outbound learning runs until then: after that every live flow has been seen by now.
    learn_until: Instant,
    refresh_buf: Vec<(SocketAddr, u16, SocketAddr)>,
    /// The [`super::LiveHops`] version copied into `cfg.next_hops`.
    hops_seen: u64,
    inbox: Option<LocalInbox>,
    /// The last of [`SharedFlows`]' releases this worker applied.
    releases_seen: u64,
    /// The cache's recoveries this worker has looked at its held datagrams for.
    recovered_seen: u64,
    /// In-process next hops, and the datagrams from them on their way out.
    local: LocalRoutes,
    local_out: Vec<(Vec<u8>, usize, SocketAddr)>,
    local_up: Vec<(Vec<u8>, SocketAddr)>,
    meter: LoadMeter,
}

impl Worker {
    pub(super) fn new(p: WorkerParts) -> Self {
        let hop_ids = p.cfg.next_hop_addrs();
        Worker {
            index: p.index,
            public: p.public,
            link: p.link,
            flows: FlowTable::new(p.cfg.max_flows, p.cfg.flow_idle),
            learn_until: p.started + p.cfg.flow_idle,
            cfg: p.cfg,
            hop_ids,
            shared: p.shared,
            cache: p.cache,
            lookups: HashMap::with_capacity(MAX_PENDING_LOOKUPS),
            held: HashMap::new(),
            counters: p.counters,
            stop: p.stop,
            sleeper: p.sleeper,
            refresh_buf: Vec::new(),
            hops_seen: 0,
            inbox: p.inbox,
            releases_seen: 0,
            recovered_seen: 0,
            local: LocalRoutes::default(),
            local_out: Vec::with_capacity(BATCH),
            local_up: Vec::new(),
            meter: LoadMeter::new(Instant::now()),
        }
    }

    pub(super) fn run(mut self) {
        let public_fd = self.public.as_raw_fd();
        let link_fd = self.link.as_raw_fd();
        let watched = self
            .sleeper
            .watch(self.public.as_fd(), PUBLIC)
            .and_then(|()| self.sleeper.watch(self.link.as_fd(), LINK));
        if let Err(e) = watched {
            log::error!("relay worker {}: {e}", self.index);
            return;
        }
        // Client datagrams land after room for the link header, so forwarding writes the header
        // in front and sends without copying the payload.
        let mut from_public = RecvBatch::new(LINK_HEADER_LEN);
        let mut from_link = RecvBatch::new(0);
        let mut to_link = SendBatch::new();
        let mut to_public = SendBatch::new();
        let mut last_housekeeping = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            if let Some(live) = self.cfg.live_hops.clone()
                && live.refresh(&mut self.hops_seen, &mut self.cfg)
            {
                self.hop_ids = self.cfg.next_hop_addrs();
            }
            if let Some(l) = &self.cfg.local_links {
                self.local.refresh(l);
            }
            self.meter.turn_done(Instant::now());
            self.sleeper.wait(Some(TICK));
            let woke = Instant::now();
            if self.meter.window_over(woke) {
                self.judge_load(public_fd, link_fd, woke);
            }
            self.apply_releases();
            // Only when the cache answered: a scan of every held datagram per loop turn cost
            // the relay its headroom at 1,000 calls, right when it had the most to do.
            if self.shared.recovered_since(&mut self.recovered_seen) && !self.held.is_empty() {
                self.forward_held(woke);
            }
            // A waker says only that something was queued or the relay is stopping.
            let mut handled = self.drain_local(woke, public_fd, link_fd, &mut to_public);
            if self.sleeper.is_ready(PUBLIC) {
                for _ in 0..MAX_BATCHES_PER_TURN {
                    let Ok(n) = from_public.recv(public_fd) else {
                        break;
                    };
                    handled += n;
                    let now = Instant::now();
                    for i in 0..n {
                        self.on_client_datagram(&mut from_public, i, now, &mut to_link);
                    }
                    self.flush(&mut to_link, link_fd, &from_public);
                    self.local.wake_all();
                    if n < BATCH {
                        break;
                    }
                }
            }
            if self.sleeper.is_ready(LINK) {
                for _ in 0..MAX_BATCHES_PER_TURN {
                    let Ok(n) = from_link.recv(link_fd) else {
                        break;
                    };
                    handled += n;
                    let now = Instant::now();
                    for i in 0..n {
                        self.on_link_datagram(&mut from_link, i, now, &mut to_link, &mut to_public);
                    }
                    self.flush(&mut to_public, public_fd, &from_link);
                    self.flush(&mut to_link, link_fd, &from_link);
                    self.local.wake_all();
                    if n < BATCH {
                        break;
                    }
                }
            }
            self.sleeper.turn_handled(handled);
            let now = Instant::now();
            if now.duration_since(last_housekeeping) >= HOUSEKEEPING {
                self.housekeeping(now);
                last_housekeeping = now;
            }
        }
        self.sleeper.unwatch(self.public.as_fd());
        self.sleeper.unwatch(self.link.as_fd());
        // A stopped loop is no longer saturated; its replacement (a restart) judges afresh.
        self.cfg.headroom.changed(self.meter.is_saturated(), false);
    }

    /// Closes a measurement window: does this loop keep up with what crosses it? The relay has
    /// no timers of its own; what it shows when it does not keep up is time awake and drops.
    #[cold]
    fn judge_load(&mut self, public_fd: RawFd, link_fd: RawFd, now: Instant) {
        let drops = crate::udp_batch::receive_drops(public_fd).unwrap_or(0)
            + crate::udp_batch::receive_drops(link_fd).unwrap_or(0)
            + self.inbox.as_ref().map_or(0, LocalInbox::dropped);
        let Verdict {
            window,
            saturated,
            changed,
        } = self
            .meter
            .judge(now, drops, Duration::ZERO, self.flows.len());
        Counters::add(&self.counters.dropped_socket_full, window.dropped);
        if saturated {
            Counters::inc(&self.counters.saturated_windows);
        }
        if changed {
            self.cfg.headroom.changed(!saturated, saturated);
            log::warn!(
                "relay worker {}: {} ({} flows, {:.0} % busy, {} datagrams dropped)",
                self.index,
                if saturated {
                    "saturated: its cluster takes no new calls until it recovers"
                } else {
                    "recovered: its cluster takes calls again"
                },
                window.calls,
                100.0 * window.busy_share(),
                window.dropped,
            );
        }
    }

    /// Sends what `q` queued from `from`'s slots.
    fn flush(&self, q: &mut SendBatch, fd: RawFd, from: &RecvBatch) {
        if q.is_empty() {
            return;
        }
        let r = q.flush_slots(fd, from);
        Counters::add(&self.counters.send_errors, r.failed as u64);
    }

    /// A datagram on the public socket, straight from a client.
    fn on_client_datagram(
        &mut self,
        b: &mut RecvBatch,
        i: usize,
        now: Instant,
        to_link: &mut SendBatch,
    ) {
        let Some(client) = b.addr(i) else { return };
        if b.truncated(i) {
            Counters::inc(&self.counters.dropped_oversize);
            return;
        }
        let n = b.len(i);
        let Some(owner) = self.route(client, b.received(i), now) else {
            self.hold(client, b.received(i), now);
            return;
        };
        let slot = b.slot_mut(i);
        LinkHeader {
            ingress: self.index,
            client,
        }
        .write(&mut slot[..LINK_HEADER_LEN]);
        self.forward_to_hop(b, i, 0..LINK_HEADER_LEN + n, owner, client, to_link);
        Counters::inc(&self.counters.forwarded_in);
    }

    /// A datagram on the link socket: a reply from a next hop, or a client datagram handed
    /// over by an upstream (global) relay.
    fn on_link_datagram(
        &mut self,
        b: &mut RecvBatch,
        i: usize,
        now: Instant,
        to_link: &mut SendBatch,
        to_public: &mut SendBatch,
    ) {
        let Some(from) = b.addr(i) else { return };
        if b.truncated(i) {
            Counters::inc(&self.counters.dropped_oversize);
            return;
        }
        let n = b.len(i);
        let Ok((h, _)) = LinkHeader::parse(b.received(i)) else {
            Counters::inc(&self.counters.dropped_bad_link);
            return;
        };
        if let Some(&hop) = self.hop_ids.get(&from) {
            let released = n == LINK_HEADER_LEN;
            let header = &mut b.slot_mut(i)[..LINK_HEADER_LEN];
            match self.route_reply(h, from, hop, now, released, header) {
                Some(ReplyTo::Upstream(up)) => to_link.push_slot(i, 0..n, up),
                Some(ReplyTo::Client(c)) => to_public.push_slot(i, LINK_HEADER_LEN..n, c),
                None => {}
            }
        } else if let Some(k) = self.cfg.upstreams.iter().position(|u| *u == from) {
            let Some(owner) = self.route(h.client, &b.received(i)[LINK_HEADER_LEN..], now) else {
                return;
            };
            let slot = b.slot_mut(i);
            LinkHeader {
                ingress: VIA_UPSTREAM | k as u32,
                client: h.client,
            }
            .write(&mut slot[..LINK_HEADER_LEN]);
            self.forward_to_hop(b, i, 0..n, owner, h.client, to_link);
            Counters::inc(&self.counters.forwarded_in);
        } else {
            // Only members may make the relay speak from its public address.
            Counters::inc(&self.counters.dropped_bad_link);
        }
    }

    /// Hands a link datagram (slot `i`, `range`) to its next hop: in memory when the hop is in
    /// this process, else queued for the link socket.
    #[inline]
    fn forward_to_hop(
        &mut self,
        b: &RecvBatch,
        i: usize,
        range: std::ops::Range<usize>,
        owner: SocketAddr,
        client: SocketAddr,
        to_link: &mut SendBatch,
    ) {
        let datagram = &b.slot(i)[range.clone()];
        match self
            .local
            .deliver(owner, client, self.cfg.link, &[datagram])
        {
            None => to_link.push_slot(i, range, owner),
            Some(true) => {}
            Some(false) => Counters::inc(&self.counters.send_errors),
        }
    }

    /// Replies from in-process next hops: as [`Self::on_link_datagram`] does for a next hop's
    /// reply, then sent with one `sendmmsg` per socket; returns how many.
    fn drain_local(
        &mut self,
        now: Instant,
        public_fd: RawFd,
        link_fd: RawFd,
        to_public: &mut SendBatch,
    ) -> usize {
        let Some(inbox) = self.inbox.take() else {
            return 0;
        };
        let max = BATCH * MAX_BATCHES_PER_TURN;
        let mut taken = 0;
        for (from, mut buf) in inbox.take(max) {
            taken += 1;
            let Ok((h, _)) = LinkHeader::parse(&buf) else {
                Counters::inc(&self.counters.dropped_bad_link);
                continue;
            };
            let Some(&hop) = self.hop_ids.get(&from) else {
                Counters::inc(&self.counters.dropped_bad_link);
                continue;
            };
            let released = buf.len() == LINK_HEADER_LEN;
            match self.route_reply(h, from, hop, now, released, &mut buf[..LINK_HEADER_LEN]) {
                Some(ReplyTo::Upstream(up)) => self.local_up.push((buf, up)),
                Some(ReplyTo::Client(c)) => self.local_out.push((buf, LINK_HEADER_LEN, c)),
                None => {}
            }
        }
        if taken == max {
            inbox.again();
        }
        self.inbox = Some(inbox);
        let r = to_public.send(
            public_fd,
            self.local_out
                .iter()
                .map(|(buf, start, to)| (&[][..], &buf[*start..], *to)),
        );
        let mut failed = r.failed;
        if !self.local_up.is_empty() {
            let r = to_public.send(
                link_fd,
                self.local_up
                    .iter()
                    .map(|(buf, to)| (&[][..], &buf[..], *to)),
            );
            failed += r.failed;
        }
        Counters::add(&self.counters.send_errors, failed as u64);
        self.local_out.clear();
        self.local_up.clear();
        taken
    }

    /// Where next hop `hop`'s reply (link header `h`, written at `header`) goes: back through
    /// the global relay it entered by, with the header rewritten in place (that relay reads only
    /// the client address), or to the client. `None` drops it (counted).
    ///
    /// A reply with no payload is the hop `released` the client: its flow is forgotten here and,
    /// through the global relay it came by, there too; nothing goes to the client.
    fn route_reply(
        &mut self,
        h: LinkHeader,
        from: SocketAddr,
        hop: u16,
        now: Instant,
        released: bool,
        header: &mut [u8],
    ) -> Option<ReplyTo> {
        if released {
            self.release(h.client, from);
        } else {
            self.learn_outbound(h.client, from, hop, now);
        }
        let to = if h.ingress & VIA_UPSTREAM != 0 {
            let Some(&up) = self.cfg.upstreams.get((h.ingress & !VIA_UPSTREAM) as usize) else {
                Counters::inc(&self.counters.dropped_bad_link);
                return None;
            };
            LinkHeader {
                ingress: 0,
                client: h.client,
            }
            .write(header);
            ReplyTo::Upstream(up)
        } else if released {
            return None;
        } else {
            ReplyTo::Client(h.client)
        };
        Counters::inc(&self.counters.forwarded_out);
        Some(to)
    }

    /// `owner` gave `client` up: every worker forgets the flow (if it goes to `owner`), and
    /// so does the cache, so a restarted relay does not bring it back.
    #[cold]
    fn release(&mut self, client: SocketAddr, owner: SocketAddr) {
        self.shared.release(client, owner);
        self.apply_releases();
        self.cache_request(CacheRequest::Forget { client, owner });
    }

    /// Applies the releases posted since this worker last looked.
    #[inline]
    fn apply_releases(&mut self) {
        let (flows, counters) = (&mut self.flows, &*self.counters);
        self.shared
            .releases_since(&mut self.releases_seen, |client, owner| {
                if flows.release(&client, owner) {
                    Counters::inc(&counters.flows_released);
                }
            });
    }

    /// Where a client's datagram goes: its flow, a new flow from a routable binding request,
    /// or a flow recovered after a restart. `None` drops it (counted).
    #[inline]
    fn route(&mut self, client: SocketAddr, pkt: &[u8], now: Instant) -> Option<SocketAddr> {
        if let Some(flow) = self.flows.touch(&client, now) {
            return Some(flow.owner);
        }
        self.route_new(client, pkt, now)
    }

    #[cold]
    fn route_new(&mut self, client: SocketAddr, pkt: &[u8], now: Instant) -> Option<SocketAddr> {
        let c = &*self.counters;
        let stun = match route::decide(pkt, &self.cfg.route_keys, self.cfg.tier, |hop, worker| {
            self.cfg.next_hop(hop, worker)
        }) {
            Route::Forward { hop, owner } => {
                match self.flows.insert(client, owner, hop, now) {
                    Insert::Full => {
                        Counters::inc(&c.dropped_table_full);
                        return None;
                    }
                    Insert::New => {
                        Counters::inc(&c.flows_created);
                        self.cache_request(CacheRequest::Write { client, hop, owner });
                    }
                    Insert::Updated => {}
                }
                return Some(owner);
            }
            Route::BadRoute => {
                Counters::inc(&c.dropped_bad_route);
                return None;
            }
            Route::WrongCluster => {
                Counters::inc(&c.dropped_wrong_cluster);
                return None;
            }
            Route::UnknownHop => {
                Counters::inc(&c.dropped_unknown_transceiver);
                return None;
            }
            Route::Unroutable { stun } => stun,
        };
        // Not routable by itself: was this client ours before a restart?
        if let Some(f) = self.shared.get(&client) {
            if self.flows.insert(client, f.owner, f.hop, now) == Insert::Full {
                Counters::inc(&c.dropped_table_full);
                return None;
            }
            return Some(f.owner);
        }
        if self.cache.is_some() {
            let due = self
                .lookups
                .get(&client)
                .is_none_or(|t| now.duration_since(*t) >= LOOKUP_BACKOFF);
            if due && self.lookups.len() < MAX_PENDING_LOOKUPS {
                self.lookups.insert(client, now);
                Counters::inc(&c.cache_lookups);
                self.cache_request(CacheRequest::Lookup { client });
            }
        }
        if stun {
            Counters::inc(&c.dropped_bad_stun);
        } else {
            Counters::inc(&c.dropped_not_stun);
        }
        None
    }

    /// Keeps `pkt` if its source's flow is being looked up in the cache (after a restart, the
    /// datagram that asked), replacing the one kept before.
    #[cold]
    fn hold(&mut self, client: SocketAddr, pkt: &[u8], now: Instant) {
        if !self.lookups.contains_key(&client)
            || (self.held.len() >= MAX_HELD && !self.held.contains_key(&client))
        {
            return;
        }
        let mut buf = Vec::with_capacity(LINK_HEADER_LEN + pkt.len());
        buf.resize(LINK_HEADER_LEN, 0);
        buf.extend_from_slice(pkt);
        self.held.insert(client, (now, buf));
    }

    /// Forwards each held datagram whose flow the cache has found by now; drops those whose
    /// lookup found nothing within its backoff.
    #[cold]
    fn forward_held(&mut self, now: Instant) {
        let held = std::mem::take(&mut self.held);
        for (client, (at, mut buf)) in held {
            let Some(f) = self.shared.get(&client) else {
                if now.duration_since(at) < LOOKUP_BACKOFF {
                    self.held.insert(client, (at, buf));
                }
                continue;
            };
            if self.flows.insert(client, f.owner, f.hop, now) == Insert::Full {
                Counters::inc(&self.counters.dropped_table_full);
                continue;
            }
            LinkHeader {
                ingress: self.index,
                client,
            }
            .write(&mut buf[..LINK_HEADER_LEN]);
            let sent = match self.local.deliver(f.owner, client, self.cfg.link, &[&buf]) {
                Some(ok) => ok,
                None => self.link.send_to(&buf, f.owner).is_ok(),
            };
            if sent {
                Counters::inc(&self.counters.held_then_forwarded);
            } else {
                Counters::inc(&self.counters.send_errors);
            }
        }
        self.local.wake_all();
    }

    /// A transceiver sends audio every 20 ms; after a restart that re-creates the flow before
    /// the client's next packet needs it. Limited to the recovery window so that, in steady
    /// state, the reply path never touches shared state.
    #[inline]
    fn learn_outbound(&mut self, client: SocketAddr, owner: SocketAddr, hop: u16, now: Instant) {
        if !self.cfg.learn_outbound || now >= self.learn_until || self.flows.contains(&client) {
            return;
        }
        if self.flows.insert(client, owner, hop, now) == Insert::New {
            self.shared.insert(client, owner, hop, now);
            Counters::inc(&self.counters.flows_learned_outbound);
        }
    }

    fn cache_request(&self, req: CacheRequest) {
        if let Some(tx) = &self.cache
            && tx.try_send(req).is_err()
        {
            Counters::inc(&self.counters.cache_queue_full);
        }
    }

    fn housekeeping(&mut self, now: Instant) {
        let n = self.flows.expire(now);
        Counters::add(&self.counters.flows_expired, n as u64);
        if self.index == 0 {
            self.shared.expire(now);
        }
        self.held
            .retain(|_, (at, _)| now.duration_since(*at) < LOOKUP_BACKOFF);
        self.lookups
            .retain(|_, t| now.duration_since(*t) < LOOKUP_BACKOFF);
        if let Some(cache) = &self.cfg.cache {
            let mut due = std::mem::take(&mut self.refresh_buf);
            self.flows.due_for_refresh(now, cache.ttl / 3, &mut due);
            for (client, hop, owner) in due.drain(..) {
                self.cache_request(CacheRequest::Write { client, hop, owner });
            }
            self.refresh_buf = due;
        }
    }
}
