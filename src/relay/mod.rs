//! The relay: owns the public UDP port and routes every datagram to the transceiver that owns
//! its session, without terminating anything.
//!
//! A datagram from an unknown source is routable only if it is a STUN binding request whose
//! USERNAME starts with a server ufrag carrying a valid route MAC; that creates a flow. Every
//! later datagram of the flow (DTLS, SRTP, SCTP, consent checks) is forwarded by address alone.
//! Anything else is dropped and counted. The relay never imports transceiver code: the ufrag
//! codec and the link header in [`crate::routing`] are the whole contract between them.

pub mod counters;
pub mod flows;

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use counters::{CounterSnapshot, Counters};
use flows::{FlowTable, Insert};

use crate::membership::ClusterMembers;
use crate::routing::link::{LINK_HEADER_LEN, LinkHeader};
use crate::routing::stun::{PacketKind, classify, peek_binding_username};
use crate::routing::{RouteKeys, ufrag};

const MAX_DATAGRAM: usize = 2048;
/// How often blocked receives wake to notice a stop request and sweep idle flows.
const TICK: Duration = Duration::from_millis(200);

#[derive(Clone)]
pub struct RelayConfig {
    /// The public address clients send to (and the candidate in every answer).
    pub listen: SocketAddr,
    /// Where the internal link socket binds (transceivers answer to it).
    pub internal: SocketAddr,
    pub members: ClusterMembers,
    pub route_keys: RouteKeys,
    /// Identifies this relay in link headers, so a transceiver can tell ingresses apart.
    pub ingress_id: u32,
    pub flow_idle: Duration,
    pub max_flows: usize,
}

impl RelayConfig {
    pub fn new(listen: SocketAddr, members: ClusterMembers, route_keys: RouteKeys) -> Self {
        RelayConfig {
            listen,
            internal: SocketAddr::new(listen.ip(), 0),
            members,
            route_keys,
            ingress_id: 0,
            flow_idle: Duration::from_secs(30),
            max_flows: 100_000,
        }
    }
}

/// A flow the relay learned, handed to the cache writer off the hot path.
#[derive(Debug, Clone, Copy)]
pub struct FlowRecord {
    pub client: SocketAddr,
    pub cluster: u16,
    pub transceiver: u16,
}

pub struct RelayHandle {
    pub public_addr: SocketAddr,
    pub internal_addr: SocketAddr,
    pub counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl RelayHandle {
    pub fn counters(&self) -> CounterSnapshot {
        self.counters.snapshot()
    }

    /// Stops both loops and waits for them (at most one tick).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Binds the public and internal sockets and starts the two forwarding threads.
///
/// `flow_sink` receives every new flow (for the Redis flow cache); it is `try_send`, so a slow
/// cache can never stall forwarding.
pub fn spawn(
    cfg: RelayConfig,
    flow_sink: Option<tokio::sync::mpsc::Sender<FlowRecord>>,
) -> anyhow::Result<RelayHandle> {
    let public = UdpSocket::bind(cfg.listen)?;
    spawn_on(public, cfg, flow_sink)
}

/// Like [`spawn`] on an already bound public socket: the all-in-one process binds it first so
/// transceivers can advertise its real address when the port is chosen by the OS.
pub fn spawn_on(
    public: UdpSocket,
    cfg: RelayConfig,
    flow_sink: Option<tokio::sync::mpsc::Sender<FlowRecord>>,
) -> anyhow::Result<RelayHandle> {
    let internal = UdpSocket::bind(cfg.internal)?;
    public.set_read_timeout(Some(TICK))?;
    internal.set_read_timeout(Some(TICK))?;
    let public_addr = public.local_addr()?;
    let internal_addr = internal.local_addr()?;
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));

    let ingress = Ingress {
        public: public.try_clone()?,
        internal: internal.try_clone()?,
        flows: FlowTable::new(cfg.max_flows, cfg.flow_idle),
        cfg: cfg.clone(),
        counters: counters.clone(),
        stop: stop.clone(),
        flow_sink,
    };
    let egress = Egress {
        public,
        internal,
        members: cfg.members.clone(),
        counters: counters.clone(),
        stop: stop.clone(),
    };
    let t1 = std::thread::Builder::new()
        .name("relay-ingress".into())
        .spawn(move || ingress.run())?;
    let t2 = std::thread::Builder::new()
        .name("relay-egress".into())
        .spawn(move || egress.run())?;
    log::info!("relay listening on udp {public_addr} (link {internal_addr})");
    Ok(RelayHandle {
        public_addr,
        internal_addr,
        counters,
        stop,
        threads: vec![t1, t2],
    })
}

/// Client → transceiver.
struct Ingress {
    public: UdpSocket,
    internal: UdpSocket,
    flows: FlowTable,
    cfg: RelayConfig,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    flow_sink: Option<tokio::sync::mpsc::Sender<FlowRecord>>,
}

impl Ingress {
    fn run(mut self) {
        // Receive straight after the header's room, so forwarding writes the header in front
        // and sends without copying the payload.
        let mut buf = vec![0u8; LINK_HEADER_LEN + MAX_DATAGRAM];
        let mut last_sweep = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            let r = self.public.recv_from(&mut buf[LINK_HEADER_LEN..]);
            let now = Instant::now();
            if now.duration_since(last_sweep) >= Duration::from_secs(1) {
                let n = self.flows.expire(now);
                self.counters
                    .flows_expired
                    .fetch_add(n as u64, Ordering::Relaxed);
                last_sweep = now;
            }
            let (n, client) = match r {
                Ok(x) => x,
                Err(_) => continue, // timeout tick, or a transient ICMP error
            };
            let Some(owner) = self.route(client, &buf[LINK_HEADER_LEN..LINK_HEADER_LEN + n], now)
            else {
                continue;
            };
            LinkHeader {
                ingress: self.cfg.ingress_id,
                client,
            }
            .write(&mut buf[..LINK_HEADER_LEN]);
            match self.internal.send_to(&buf[..LINK_HEADER_LEN + n], owner) {
                Ok(_) => Counters::inc(&self.counters.forwarded_in),
                Err(_) => Counters::inc(&self.counters.send_errors),
            }
        }
    }

    /// Decides where a datagram goes, creating a flow from a routable binding request.
    fn route(&mut self, client: SocketAddr, pkt: &[u8], now: Instant) -> Option<SocketAddr> {
        if let Some(flow) = self.flows.touch(&client, now) {
            return Some(flow.owner);
        }
        let c = &self.counters;
        if pkt.is_empty() || classify(pkt[0]) != PacketKind::Stun {
            Counters::inc(&c.dropped_not_stun);
            return None;
        }
        let Ok(server_ufrag) = peek_binding_username(pkt) else {
            Counters::inc(&c.dropped_bad_stun);
            return None;
        };
        let Ok(hint) = ufrag::decode(server_ufrag, &self.cfg.route_keys) else {
            Counters::inc(&c.dropped_bad_route);
            return None;
        };
        if hint.cluster != self.cfg.members.cluster {
            Counters::inc(&c.dropped_wrong_cluster);
            return None;
        }
        let Some(owner) = self.cfg.members.get(hint.transceiver) else {
            Counters::inc(&c.dropped_unknown_transceiver);
            return None;
        };
        match self.flows.insert(client, owner, hint.transceiver, now) {
            Insert::Full => {
                Counters::inc(&c.dropped_table_full);
                return None;
            }
            Insert::New => {
                Counters::inc(&c.flows_created);
                if let Some(sink) = &self.flow_sink {
                    let rec = FlowRecord {
                        client,
                        cluster: hint.cluster,
                        transceiver: hint.transceiver,
                    };
                    if sink.try_send(rec).is_err() {
                        Counters::inc(&c.cache_queue_full);
                    }
                }
            }
            Insert::Updated => {}
        }
        Some(owner)
    }
}

/// Transceiver → client.
struct Egress {
    public: UdpSocket,
    internal: UdpSocket,
    members: ClusterMembers,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
}

impl Egress {
    fn run(self) {
        let mut buf = vec![0u8; LINK_HEADER_LEN + MAX_DATAGRAM];
        while !self.stop.load(Ordering::Relaxed) {
            let Ok((n, from)) = self.internal.recv_from(&mut buf) else {
                continue;
            };
            // Only members may make the relay speak from its public address.
            if !self.members.is_member_addr(from) {
                Counters::inc(&self.counters.dropped_bad_link);
                continue;
            }
            let Ok((h, payload)) = LinkHeader::parse(&buf[..n]) else {
                Counters::inc(&self.counters.dropped_bad_link);
                continue;
            };
            match self.public.send_to(payload, h.client) {
                Ok(_) => Counters::inc(&self.counters.forwarded_out),
                Err(_) => Counters::inc(&self.counters.send_errors),
            }
        }
    }
}
