//! The all-in-one process: signaling, demo page, relays, transceivers and an embedded
//! Redis-protocol flow cache, wired by function calls instead of the network.
//!
//! Everything binds loopback by default so `cargo run` is safe on a laptop; the same pieces
//! run as separate roles in a deployment. With `global_relay`, two clusters sit behind one
//! ingress relay, which is how the two-tier path is exercised on one machine.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

use crate::cache;
use crate::control::TransceiverControl;
use crate::http_server::{HttpLimits, HttpServer};
use crate::https::{self, CertSource, HttpsServer};
use crate::media_address::{self, Advertise, HostAddrs, MediaBind, MediaPlan};
use crate::membership::ClusterMembers;
use crate::relay::{self, FlowCacheConfig, RelayConfig, RelayHandle, RelaySockets};
use crate::routing::RouteKeys;
use crate::routing::link_sources::LinkSources;
use crate::routing::local_link::LocalLinks;
use crate::signaling::{AdminAction, ClusterView, Signaling, StatsFn};
use crate::transceiver::{self, AnswerCandidate, Lifecycle, TransceiverConfig, TransceiverHandle};

/// The all-in-one's settings: the flags of `voice-edge` with no subcommand, declared here so
/// the binary parses straight into what [`start`] takes, plus knobs only tests turn (`skip`).
#[derive(clap::Args, Debug, Clone)]
pub struct AllInOneConfig {
    /// HTTP address for signaling, the demo page and admin endpoints (loopback: this machine only).
    #[arg(long, env = "VOICE_EDGE_HTTP", default_value = "127.0.0.1:8080")]
    pub http: SocketAddr,
    /// Where calls for a model that is not a stub go (the binary's `--upstream`).
    #[arg(skip)]
    pub upstream: Option<crate::upstream::UpstreamConfig>,
    // With a global relay, this is the first cluster's relay; the global one binds `global_relay`.
    /// Where the relay's public UDP socket binds: `auto[:PORT]` is this machine's primary
    /// non-loopback address (which every browser, Firefox included, and LAN devices reach; loopback
    /// if there is none), or IP:PORT (0.0.0.0 binds every interface).
    #[arg(long, env = "VOICE_EDGE_RELAY", default_value = "auto:3478")]
    pub relay: MediaBind,
    /// The media address answers name, HOST[:PORT], when clients reach the relay at another
    /// address than it binds (NAT, containers, clouds). Default: the bound address, or for
    /// 0.0.0.0 the primary interface address.
    #[arg(long, env = "VOICE_EDGE_ADVERTISE")]
    pub advertise: Option<Advertise>,
    /// Put a global (ingress) relay at this address in front of two clusters.
    #[arg(long, env = "VOICE_EDGE_GLOBAL_RELAY", num_args = 0..=1, default_missing_value = "auto:3479")]
    pub global_relay: Option<MediaBind>,
    #[command(flatten)]
    pub lan: LanMode,
    /// Transceivers per cluster.
    #[arg(long, env = "VOICE_EDGE_TRANSCEIVERS", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub transceivers: u16,
    /// Worker threads per transceiver, each with its own socket (consecutive ports) and calls.
    #[arg(long, env = "VOICE_EDGE_TRANSCEIVER_WORKERS", default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=64))]
    pub transceiver_workers: u8,
    /// Worker threads per relay.
    #[arg(long, env = "VOICE_EDGE_RELAY_WORKERS", default_value_t = 1)]
    pub relay_workers: usize,
    #[command(flatten)]
    pub capacity: crate::transceiver::admission::Capacity,
    #[command(flatten)]
    pub call_limits: crate::signaling::call_limits::CallLimits,
    /// Relay ↔ transceiver datagrams over loopback UDP, as between hosts, instead of handed
    /// over in memory (to measure what the in-process link saves).
    #[arg(long, env = "VOICE_EDGE_UDP_LINKS")]
    pub udp_links: bool,
    /// Route secret (hex, ≥ 16 bytes) shared by relays and transceivers; random if not given.
    #[arg(long, env = "VOICE_EDGE_ROUTE_SECRET")]
    pub route_secret: Option<String>,
    /// Use this Redis for the flow cache instead of the embedded one:
    /// redis://[[USER]:PASSWORD@]HOST:PORT[/DB].
    #[arg(long, env = "VOICE_EDGE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// Calls need a server key (--api-key) or an unexpired ek_ key from /v1/realtime/client_secrets.
    #[arg(long, env = "VOICE_EDGE_REQUIRE_KEYS")]
    pub require_keys: bool,
    /// Token /metrics and /admin/* require (Authorization: Bearer); without one they serve
    /// loopback peers only, and never a web page of another origin.
    #[arg(long, env = "VOICE_EDGE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// A server API key (repeatable); it may mint ephemeral keys and place calls.
    #[arg(long = "api-key", env = "VOICE_EDGE_API_KEYS", value_delimiter = ',')]
    pub api_keys: Vec<String>,
    // The baseline that the relay path's connect time and latency are measured against.
    /// Answers name each transceiver's own socket, bypassing the relay (to measure the relay's cost).
    #[arg(long, env = "VOICE_EDGE_DIRECT")]
    pub direct: bool,
    #[command(flatten)]
    pub http_limits: HttpLimits,
    /// Allow the admin actions that disrupt live calls, for development and recovery tests:
    /// POST /admin/actions/restart-relay[:NAME], drain-transceiver:ID, undrain-transceiver:ID.
    /// Without it they answer 403; /admin/stats, /admin/calls and /metrics are always served.
    #[arg(long, env = "VOICE_EDGE_DEV_ADMIN")]
    pub dev_admin: bool,
    /// Where the embedded Redis-protocol server listens when `redis_url` is absent.
    #[arg(skip = SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))]
    pub embedded_redis: SocketAddr,
    /// Record flows in the cache and look them up after a relay restart.
    #[arg(skip = true)]
    pub flow_cache: bool,
    /// Learn flows from transceivers' outbound packets after a relay restart.
    #[arg(skip = true)]
    pub learn_outbound: bool,
    #[arg(skip = Duration::from_secs(120))]
    pub flow_ttl: Duration,
    #[arg(skip)]
    pub lifecycle: Lifecycle,
}

impl Default for AllInOneConfig {
    fn default() -> Self {
        crate::flags::defaults()
    }
}

/// LAN mode's flags: phones need a secure context for the microphone, which plain HTTP is only
/// on loopback, so `--lan` adds an HTTPS listener (without `/admin`) for the same API.
#[derive(clap::Args, Debug, Clone)]
pub struct LanMode {
    /// LAN mode, for phones and other machines: also serve the demo and the API over HTTPS
    /// (--https, every interface) with a self-signed certificate, and print the URL as a QR code.
    #[arg(long = "lan", env = "VOICE_EDGE_LAN")]
    pub enabled: bool,
    /// LAN mode with the API open to every device on the network, as before pairing: anyone
    /// there can create calls and act on any call whose id they learn. Without it, only a
    /// device that opened the printed URL (or scanned its QR code) may use the API.
    #[arg(long = "lan-open", env = "VOICE_EDGE_LAN_OPEN", requires = "enabled")]
    pub open: bool,
    /// The HTTPS listener of LAN mode (admin endpoints are not served on it).
    #[arg(long, env = "VOICE_EDGE_HTTPS", default_value = "0.0.0.0:8443")]
    pub https: SocketAddr,
    /// A PEM certificate (chain) for LAN mode's HTTPS instead of the self-signed one.
    #[arg(long, env = "VOICE_EDGE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "VOICE_EDGE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Where the self-signed LAN certificate is kept, so a phone that accepted it once keeps
    /// trusting it (default: $XDG_CACHE_HOME/voice-edge or ~/.cache/voice-edge).
    #[arg(long, env = "VOICE_EDGE_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// A relay that can be restarted in place (same addresses, all memory dropped), as a crashed
/// and rescheduled relay pod would be.
pub struct RelaySlot {
    pub name: String,
    cfg: RelayConfig,
    handle: Mutex<Option<RelayHandle>>,
}

impl RelaySlot {
    fn start(name: String, cfg: RelayConfig, sockets: RelaySockets) -> anyhow::Result<Arc<Self>> {
        let h = relay::spawn_bound(cfg.clone(), sockets)?;
        let cfg = RelayConfig {
            listen: h.public_addr,
            link: h.link_addr,
            ..cfg
        };
        Ok(Arc::new(RelaySlot {
            name,
            cfg,
            handle: Mutex::new(Some(h)),
        }))
    }

    pub fn public_addr(&self) -> SocketAddr {
        self.cfg.listen
    }

    /// Whether this relay keeps up; its workers report here, and placement reads it.
    pub fn headroom(&self) -> &Arc<crate::saturation::Headroom> {
        &self.cfg.headroom
    }

    pub fn counters(&self) -> relay::counters::CounterSnapshot {
        self.handle
            .lock()
            .unwrap()
            .as_ref()
            .map(|h| h.counters())
            .unwrap_or_default()
    }

    /// A new relay, with no memory of the old one's flows, takes over the addresses: its
    /// sockets join the old ones' (SO_REUSEPORT), it starts, and only then does the old relay
    /// stop. So no one can take the ports in between, a bind that fails leaves the old relay
    /// serving, and media keeps moving through the switch: the old relay forwards what still
    /// reaches its sockets while the new one recovers each flow (cache, held datagram, the
    /// transceivers' replies), and the transceivers' replies go to the new relay's in-memory
    /// queues from the moment it registers them. Stopping first lost every reply sent in
    /// between, and every client datagram until the new relay ran.
    pub fn restart(&self) -> anyhow::Result<()> {
        let mut slot = self.handle.lock().unwrap();
        let sockets = relay::RelaySockets::bind(self.cfg.listen, self.cfg.link, self.cfg.workers)
            .map_err(|e| e.context("restart-relay: the old relay keeps serving"))?;
        let new = relay::spawn_bound(self.cfg.clone(), sockets)
            .map_err(|e| e.context("restart-relay: the old relay keeps serving"))?;
        if let Some(old) = slot.replace(new) {
            old.stop();
        }
        Ok(())
    }

    fn stop(&self) {
        if let Some(h) = self.handle.lock().unwrap().take() {
            h.stop();
        }
    }

    fn stats(&self) -> Value {
        let per_worker = self
            .handle
            .lock()
            .unwrap()
            .as_ref()
            .map(|h| h.worker_counters())
            .unwrap_or_default();
        json!({"name": self.name, "public_addr": self.cfg.listen, "link_addr": self.cfg.link,
               "workers": self.cfg.workers, "saturated": self.cfg.headroom.is_saturated(),
               "counters": self.counters(), "per_worker": per_worker})
    }
}

pub struct Running {
    pub http_addr: SocketAddr,
    /// The demo page as a user on this machine opens it.
    pub http_url: String,
    /// LAN mode: the demo page as a phone on the LAN opens it, and what signs it.
    pub https_url: Option<String>,
    pub https_cert: Option<String>,
    /// The address clients send media to, as answers name it (the global relay when there is
    /// one): never a bind address.
    pub media_addr: SocketAddr,
    /// Where the entry relay's public socket is bound.
    pub media_bind: SocketAddr,
    /// The flow cache as the banner shows it (a password never appears), if there is one.
    pub flow_cache: Option<String>,
    /// The embedded Redis-protocol server's address (loopback), for this process only.
    pub embedded_redis: Option<SocketAddr>,
    pub relays: Vec<Arc<RelaySlot>>,
    pub transceivers: Vec<TransceiverHandle>,
    threads: Vec<JoinHandle<()>>,
    http: HttpServer,
    https: Option<HttpsServer>,
}

impl Running {
    /// The first cluster relay (the only relay without `global_relay`).
    pub fn relay(&self) -> &Arc<RelaySlot> {
        self.relays
            .iter()
            .find(|r| r.name != "global")
            .unwrap_or(&self.relays[0])
    }

    pub fn relay_named(&self, name: &str) -> Option<&Arc<RelaySlot>> {
        self.relays.iter().find(|r| r.name == name)
    }

    /// Graceful stop (SIGTERM): every transceiver leaves placement, so new calls get 503 while
    /// live calls carry on (hang-ups, ICE restarts and admin still work). Returns once no call
    /// is left or `deadline` has passed, with the number of calls still live; the caller then
    /// runs [`Running::shutdown`], which ends those with DTLS close_notify.
    pub async fn drain(&self, deadline: Duration, stop_early: impl Future<Output = ()>) -> usize {
        for t in &self.transceivers {
            t.drain();
        }
        let live = || {
            self.transceivers
                .iter()
                .map(|t| t.live_calls())
                .sum::<usize>()
        };
        crate::transceiver::drain::wait(live, deadline, stop_early).await
    }

    /// Stops accepting HTTP, ends every call (clients get DTLS close_notify) and stops relays.
    pub async fn shutdown(self) {
        self.http.stop().await;
        if let Some(h) = self.https {
            h.stop().await;
        }
        for t in &self.transceivers {
            t.stop();
        }
        let threads = self.threads;
        let relays = self.relays;
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
            for r in relays {
                r.stop();
            }
        })
        .await;
    }
}

/// Starts every component; must run inside a tokio runtime. Each step is a function below, in
/// the order they run: the relays' sockets configure the transceivers, the transceivers the
/// relays' member tables, and all of them the signaling that is started last.
pub async fn start(cfg: AllInOneConfig) -> anyhow::Result<Running> {
    let keys = route_keys(cfg.route_secret.as_deref())?;
    let redis = start_flow_cache(&cfg).await?;
    let flow_cache = redis.as_ref().map(|r| FlowCacheConfig {
        redis: r.url.clone(),
        ttl: cfg.flow_ttl,
    });
    let host = HostAddrs::read();
    let plans = MediaPlans::new(&cfg, &host);
    let media = start_media(&cfg, &plans, &keys, flow_cache)?;
    let flow_cache = redis.as_ref().map(FlowCacheRedis::describe);
    // LAN mode's pairing key (see `signaling::pairing`) is a server key too, so the phone flow
    // also works with --require-keys.
    let pairing =
        (cfg.lan.enabled && !cfg.lan.open).then(crate::signaling::pairing::Pairing::random);
    let mut api_keys = cfg.api_keys.clone();
    api_keys.extend(pairing.as_ref().map(|p| p.key().to_owned()));
    let signaling = Signaling::new(media.views, stats(&media.relays, flow_cache.clone()))
        .with_admin(
            admin_actions(&media.relays, &media.transceivers),
            cfg.dev_admin,
        )
        .with_admin_token(cfg.admin_token.clone())
        .with_keys(crate::signaling::keys::Keys::new(
            cfg.require_keys,
            api_keys,
        ))
        .with_call_limits(cfg.call_limits)
        .with_upstream(cfg.upstream.clone());
    let lan = if cfg.lan.enabled {
        Some(
            start_https(
                &cfg.lan,
                pairing,
                &host,
                media.media_addr,
                &signaling,
                cfg.http_limits,
            )
            .await?,
        )
    } else {
        None
    };
    let http = serve_http(cfg.http, signaling, cfg.http_limits).await?;
    let (https, https_url, https_cert) = match lan {
        Some(l) => (Some(l.server), Some(l.url), Some(l.cert)),
        None => (None, None, None),
    };
    Ok(Running {
        http_addr: http.addr,
        http_url: http.url,
        https_url,
        https_cert,
        https,
        media_addr: media.media_addr,
        media_bind: media.media_bind,
        flow_cache,
        embedded_redis: redis.and_then(|r| r.embedded),
        relays: media.relays,
        transceivers: media.transceivers,
        threads: media.threads,
        http: http.server,
    })
}

/// Every internal socket (relay links, transceivers, cluster relays behind a global one) binds
/// here, where nothing outside this machine can reach it.
const INTERNAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn internal_socket() -> SocketAddr {
    SocketAddr::new(INTERNAL, 0)
}

/// The configured route secret, or a random one: nothing outside this process mints routes.
fn route_keys(secret: Option<&str>) -> anyhow::Result<RouteKeys> {
    Ok(match secret {
        Some(hex) => RouteKeys::from_hex(0, hex)?,
        None => RouteKeys::from_hex(0, &hex::encode(rand::random::<[u8; 32]>()))?,
    })
}

/// The flow cache's Redis: the configured one, or the embedded server started here.
struct FlowCacheRedis {
    url: String,
    /// The embedded server's address; `None` for a configured Redis.
    embedded: Option<SocketAddr>,
}

impl FlowCacheRedis {
    /// What the banner and `/admin/stats` show. The embedded server has no password (mini-redis
    /// has no AUTH), so its address stays inside this process: only the relays here use it.
    fn describe(&self) -> String {
        match self.embedded {
            Some(_) => "embedded (loopback, this process only)".to_owned(),
            None => cache::redact_redis_url(&self.url),
        }
    }
}

async fn start_flow_cache(cfg: &AllInOneConfig) -> anyhow::Result<Option<FlowCacheRedis>> {
    if !cfg.flow_cache {
        return Ok(None);
    }
    Ok(Some(match &cfg.redis_url {
        Some(url) => FlowCacheRedis {
            url: cache::parse_redis_url(url).map_err(anyhow::Error::msg)?,
            embedded: None,
        },
        None => {
            let addr = cache::start_embedded(cfg.embedded_redis).await?;
            FlowCacheRedis {
                url: format!("redis://{addr}"),
                embedded: Some(addr),
            }
        }
    }))
}

/// Where the relays bind and what answers name. Clients reach the entry relay (the global one,
/// if any) at the advertised address; a cluster relay behind a global relay is internal.
struct MediaPlans {
    cluster0: MediaPlan,
    global: Option<MediaPlan>,
}

impl MediaPlans {
    fn new(cfg: &AllInOneConfig, host: &HostAddrs) -> MediaPlans {
        let entry_plan = |bind: MediaBind, advertise: Option<Advertise>| -> MediaPlan {
            let p = media_address::plan(bind, advertise, host);
            if let Some(w) = p.warning {
                log::warn!("{w}");
            }
            p
        };
        match cfg.global_relay {
            Some(g) => MediaPlans {
                cluster0: media_address::plan(cfg.relay, None, host),
                global: Some(entry_plan(g, cfg.advertise)),
            },
            None => MediaPlans {
                cluster0: entry_plan(cfg.relay, cfg.advertise),
                global: None,
            },
        }
    }
}

/// The media path as started: relays and transceivers, and what signaling and `Running` need
/// of them.
struct MediaPath {
    views: Vec<ClusterView>,
    relays: Vec<Arc<RelaySlot>>,
    transceivers: Vec<TransceiverHandle>,
    threads: Vec<JoinHandle<()>>,
    /// What answers name, and where the entry relay is bound.
    media_addr: SocketAddr,
    media_bind: SocketAddr,
}

/// Starts one cluster (two behind a global relay), each a relay and its transceivers, then the
/// global relay in front of them.
fn start_media(
    cfg: &AllInOneConfig,
    plans: &MediaPlans,
    keys: &RouteKeys,
    flow_cache: Option<FlowCacheConfig>,
) -> anyhow::Result<MediaPath> {
    // Relay sockets are bound up front (and kept): their addresses configure everything else.
    let global = match &plans.global {
        Some(p) => Some(RelaySockets::bind(
            p.bind,
            internal_socket(),
            cfg.relay_workers,
        )?),
        None => None,
    };
    let global_addrs = global
        .as_ref()
        .zip(plans.global.as_ref())
        .map(|(g, p)| (p.advertised(g.public_addr), g.link_addr));
    let clusters: &[u16] = if global.is_some() { &[0, 1] } else { &[0] };

    let mut views = vec![];
    let mut relays = vec![];
    let mut handles = vec![];
    let mut threads = vec![];
    // The cluster relays and their transceivers share this process: their link datagrams go
    // through memory, not loopback UDP (see routing::local_link).
    let local_links = (!cfg.udp_links).then(|| Arc::new(LocalLinks::default()));
    let mut cluster_links = HashMap::new();
    let mut entry = None;
    // Every call crosses the global relay too, so its headroom counts for each cluster.
    let global_headroom = Arc::new(crate::saturation::Headroom::default());
    for &cluster in clusters {
        let listen = if cluster == 0 {
            plans.cluster0.bind
        } else {
            internal_socket()
        };
        let sockets = RelaySockets::bind(listen, internal_socket(), cfg.relay_workers)?;
        let public = sockets.public_addr;
        let media_addr = match global_addrs {
            Some((g, _)) => g,
            None => plans.cluster0.advertised(public),
        };
        if cluster == 0 && global_addrs.is_none() {
            entry = Some((media_addr, public));
        }
        let (members, ts) = start_transceivers(
            cfg,
            cluster,
            media_addr,
            &plans.cluster0,
            keys,
            local_links.clone(),
            &mut threads,
        )?;
        let mut rc = RelayConfig::new(public, members, keys.clone());
        rc.local_links = local_links.clone();
        rc.learn_outbound = cfg.learn_outbound;
        rc.cache = flow_cache.clone();
        if let Some((_, glink)) = global_addrs {
            rc.upstreams = vec![glink];
        }
        let mut relay_headroom = vec![rc.headroom.clone()];
        if global.is_some() {
            relay_headroom.push(global_headroom.clone());
        }
        let slot = RelaySlot::start(format!("cluster-{cluster}"), rc, sockets)?;
        cluster_links.insert(cluster, slot.cfg.link);
        relays.push(slot);
        handles.extend(ts.iter().cloned());
        views.push(ClusterView {
            id: cluster,
            media_addr,
            transceivers: ts
                .into_iter()
                .map(|t| Arc::new(t) as Arc<dyn TransceiverControl>)
                .collect(),
            relays: relay_headroom,
        });
    }
    if let Some(sockets) = global {
        let public = sockets.public_addr;
        let mut rc = RelayConfig::global(public, cluster_links, keys.clone());
        rc.headroom = global_headroom;
        rc.learn_outbound = cfg.learn_outbound;
        rc.cache = flow_cache;
        relays.insert(0, RelaySlot::start("global".into(), rc, sockets)?);
        entry = global_addrs.map(|(advertised, _)| (advertised, public));
    }
    let (media_addr, media_bind) = entry.expect("an entry relay was started");
    Ok(MediaPath {
        views,
        relays,
        transceivers: handles,
        threads,
        media_addr,
        media_bind,
    })
}

/// Starts one cluster's transceivers, adding their socket threads to `threads`; returns them
/// with the member table their relay routes by.
fn start_transceivers(
    cfg: &AllInOneConfig,
    cluster: u16,
    media_addr: SocketAddr,
    cluster0: &MediaPlan,
    keys: &RouteKeys,
    local_links: Option<Arc<LocalLinks>>,
    threads: &mut Vec<JoinHandle<()>>,
) -> anyhow::Result<(ClusterMembers, Vec<TransceiverHandle>)> {
    let mut members = ClusterMembers::new(cluster).with_workers(cfg.transceiver_workers);
    let mut ts = vec![];
    for id in 1..=cfg.transceivers {
        // With --direct clients reach the transceivers' own sockets, so those bind where the
        // relay would have, and answers name them at the relay's advertised IP.
        let (bind, candidate) = if cfg.direct {
            (
                SocketAddr::new(cluster0.bind.ip(), 0),
                AnswerCandidate::OwnSocket(cluster0.advertise_ip),
            )
        } else {
            (internal_socket(), AnswerCandidate::Relay(media_addr))
        };
        let (h, workers) = transceiver::spawn_in_process(
            TransceiverConfig {
                cluster,
                id,
                bind,
                candidate,
                route_keys: keys.clone(),
                lifecycle: cfg.lifecycle,
                workers: cfg.transceiver_workers,
                capacity: cfg.capacity,
                // Its relays are in this process, on loopback (`INTERNAL`).
                link_sources: LinkSources::loopback(),
                upstream: cfg.upstream.clone(),
            },
            local_links.clone(),
        )?;
        members = members.with(id, h.addr);
        ts.push(h);
        threads.extend(workers);
    }
    Ok((members, ts))
}

/// `/admin/stats` beyond placement: the relays' counters and the flow cache in use.
fn stats(relays: &[Arc<RelaySlot>], redis: Option<String>) -> StatsFn {
    let relays = relays.to_vec();
    Arc::new(move || {
        json!({
            "relays": relays.iter().map(|r| r.stats()).collect::<Vec<_>>(),
            "flow_cache": {"redis": redis},
        })
    })
}

/// The all-in-one's `POST /admin/actions/{name}` (with `--dev-admin`): what a developer or a
/// recovery test does to a relay or a transceiver that in a deployment would be a pod restart
/// or a drain.
fn admin_actions(relays: &[Arc<RelaySlot>], transceivers: &[TransceiverHandle]) -> AdminAction {
    let relays = relays.to_vec();
    let transceivers = transceivers.to_vec();
    Arc::new(move |action: &str| match action {
        // Dev-only: drop a relay's memory as a crash would, to measure recovery.
        a if a.starts_with("restart-relay") => {
            let name = a
                .strip_prefix("restart-relay")
                .unwrap_or("")
                .trim_start_matches(':');
            let name = if name.is_empty() { "cluster-0" } else { name };
            let r = relays
                .iter()
                .find(|r| r.name == name)
                .ok_or_else(|| format!("no relay named {name:?}"))?;
            r.restart().map_err(|e| e.to_string())?;
            Ok(json!({"restarted": name}))
        }
        // Take a transceiver out of placement (what SIGTERM does to all of them), or put it back.
        a if a.starts_with("drain-transceiver:") => {
            set_draining(&transceivers, &a["drain-transceiver:".len()..], true)
        }
        a if a.starts_with("undrain-transceiver:") => {
            set_draining(&transceivers, &a["undrain-transceiver:".len()..], false)
        }
        other => Err(format!("unknown admin action {other:?}")),
    })
}

/// Drains (or undrains) every worker set of transceiver `id` (given as text, from the action).
fn set_draining(
    transceivers: &[TransceiverHandle],
    id: &str,
    draining: bool,
) -> Result<serde_json::Value, String> {
    let id: u16 = id
        .parse()
        .map_err(|_| format!("bad transceiver id {id:?}"))?;
    let mut n = 0;
    for t in transceivers.iter().filter(|t| t.id == id) {
        if draining {
            t.drain()
        } else {
            t.undrain()
        }
        n += 1;
    }
    if n == 0 {
        return Err(format!("no transceiver {id}"));
    }
    let key = if draining { "draining" } else { "undrained" };
    Ok(json!({key: id, "transceivers": n}))
}

/// LAN mode's listener, and what the banner shows of it.
struct Lan {
    server: HttpsServer,
    url: String,
    /// What signs the certificate (self-signed, or the user's issuer).
    cert: String,
}

async fn start_https(
    lan: &LanMode,
    pairing: Option<crate::signaling::pairing::Pairing>,
    host: &HostAddrs,
    media_addr: SocketAddr,
    signaling: &Signaling,
    limits: HttpLimits,
) -> anyhow::Result<Lan> {
    // What a phone types: the LAN address for a wildcard bind (the address media is
    // advertised at when that is one of ours), else the bound address itself.
    let lan_ip = if lan.https.ip().is_unspecified() {
        Some(media_addr.ip())
            .filter(|ip| !ip.is_loopback() && host.is_local(*ip))
            .or_else(|| host.primary())
            .unwrap_or(media_address::reachable(lan.https).ip())
    } else {
        lan.https.ip()
    };
    let source = match (&lan.tls_cert, &lan.tls_key) {
        (Some(cert), Some(key)) => CertSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        _ => CertSource::SelfSigned {
            cache_dir: lan
                .cache_dir
                .clone()
                .unwrap_or_else(https::default_cache_dir),
            names: https::names_for(&[lan_ip, media_addr.ip()]),
        },
    };
    let pem = source.load()?;
    let cert = pem.origin.clone();
    // The pairing key rides the URL's fragment: the browser keeps it, no server or log sees it.
    let (router, fragment) = match pairing {
        Some(pairing) => {
            let fragment = format!("#key={}", pairing.key());
            (signaling.clone().router_for_lan(pairing), fragment)
        }
        None => {
            log::warn!(
                "LAN mode is OPEN (--lan-open): every device on this network can create calls and act on any call whose id it learns"
            );
            (signaling.clone().router_without_admin(), String::new())
        }
    };
    let server = HttpsServer::start(lan.https, pem, router, limits).await?;
    let url = format!(
        "https://{}:{}/{fragment}",
        media_address::url_host(lan_ip),
        server.addr.port()
    );
    if media_addr.ip().is_loopback() {
        log::warn!(
            "LAN mode, but media is advertised on loopback ({media_addr}): other devices cannot send audio; drop --relay or pass --advertise"
        );
    }
    Ok(Lan { server, url, cert })
}

/// The plain HTTP listener: API, demo page and admin.
struct Http {
    addr: SocketAddr,
    url: String,
    server: HttpServer,
}

async fn serve_http(
    addr: SocketAddr,
    signaling: Signaling,
    limits: HttpLimits,
) -> anyhow::Result<Http> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let server = HttpServer::spawn(listener, signaling.router(), limits, None)?;
    let addr = server.addr;
    let url = format!("http://{}/", media_address::reachable(addr));
    Ok(Http { addr, url, server })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults live in the flags now; these are the values `Default` had when it was
    /// written out by hand, which tests and embedders rely on.
    #[test]
    fn default_is_what_the_flags_default_to() {
        let c = AllInOneConfig::default();
        assert_eq!(c.http, SocketAddr::from((Ipv4Addr::LOCALHOST, 8080)));
        assert_eq!(c.relay, MediaBind::default());
        assert_eq!((c.global_relay, c.advertise), (None, None));
        assert_eq!(
            (c.transceivers, c.transceiver_workers, c.relay_workers),
            (2, 2, 1)
        );
        assert_eq!((&c.route_secret, &c.redis_url), (&None, &None));
        assert!(!c.require_keys && c.api_keys.is_empty() && !c.direct && !c.lan.enabled);
        assert!(!c.dev_admin, "disruptive admin actions are opt-in");
        assert_eq!(c.http_limits, HttpLimits::default());
        assert_eq!(c.embedded_redis, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
        assert!(c.flow_cache && c.learn_outbound);
        assert_eq!(c.flow_ttl, Duration::from_secs(120));
    }
}
