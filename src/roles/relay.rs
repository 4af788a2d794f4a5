//! `voice-edge relay`: one relay as its own process. Its members are a static table
//! (`--transceiver ID=ADDR`) or the cluster's leases in Redis, which it follows; with Redis it
//! also keeps its flow cache there, so a restarted relay resumes live calls.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::relay::{self, FlowCacheConfig, LiveHops, RelayConfig, RelayHandle, Tier};

/// How long a relay following Redis membership waits for its first read before it binds.
const MEMBERSHIP_WAIT: Duration = Duration::from_secs(3);

pub struct RelayRoleConfig {
    /// The relay as the flags describe it; its flow cache and membership follower are added
    /// here from `redis_url`.
    pub relay: RelayConfig,
    /// Flow cache and, for a cluster relay without static next hops, membership.
    pub redis_url: Option<String>,
    /// Where `/metrics` and `/health` listen; none for no listener.
    pub metrics: Option<SocketAddr>,
}

pub struct RunningRelay {
    pub handle: Arc<RelayHandle>,
    pub metrics_addr: Option<SocketAddr>,
    stop_following: Arc<AtomicBool>,
    /// The metrics listener's runtime: the relay's own threads own none.
    _metrics: Option<Arc<tokio::runtime::Runtime>>,
}

/// Starts the workers, the membership follower and the metrics listener. Needs no runtime.
pub fn start(cfg: RelayRoleConfig) -> anyhow::Result<RunningRelay> {
    let mut relay_cfg = cfg.relay;
    // A cluster relay without static members follows the cluster's members in Redis.
    let follow = match relay_cfg.tier {
        Tier::Cluster { cluster } if relay_cfg.next_hops.is_empty() => {
            cfg.redis_url.clone().map(|url| (cluster, url))
        }
        _ => None,
    };
    let live_hops = follow.as_ref().map(|_| Arc::new(LiveHops::default()));
    relay_cfg.live_hops = live_hops.clone();
    relay_cfg.cache = cfg.redis_url.map(|redis| FlowCacheConfig {
        redis,
        ttl: relay_cfg.flow_idle * 4,
    });
    let stop_following = Arc::new(AtomicBool::new(false));
    if let (Some(hops), Some((cluster, url))) = (live_hops, follow) {
        crate::membership::registry::follow(
            url,
            cluster,
            hops.clone(),
            relay_cfg.headroom.clone(),
            Duration::from_millis(500),
            stop_following.clone(),
        )?;
        // Bind only once the members are known. A relay whose sockets join a running one's
        // (SO_REUSEPORT: a rolling restart of a pair, see compose.yaml) takes over some clients
        // and transceivers the moment it binds; before its first membership read it would drop
        // their replies and fail their cache lookups (each then retried only after a second).
        // Bounded: with Redis down the relay still starts, and follows once Redis answers.
        if !hops.wait_loaded(MEMBERSHIP_WAIT) {
            log::warn!(
                "relay: no membership from Redis within {MEMBERSHIP_WAIT:?}; starting without"
            );
        }
    }
    let handle = Arc::new(relay::spawn(relay_cfg)?);
    let (metrics, metrics_addr) = match cfg.metrics {
        Some(addr) => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            // Weak: the handle must be unwrapped to stop the relay.
            let h = Arc::downgrade(&handle);
            let bound = rt.block_on(crate::ops::serve(
                addr,
                Arc::new(move || {
                    let text = h.upgrade().map(|h| metrics(&h)).unwrap_or_default();
                    Box::pin(async move { text })
                }),
            ))?;
            let rt = Arc::new(rt);
            let r = rt.clone();
            std::thread::spawn(move || r.block_on(std::future::pending::<()>()));
            (Some(rt), Some(bound))
        }
        None => (None, None),
    };
    Ok(RunningRelay {
        handle,
        metrics_addr,
        stop_following,
        _metrics: metrics,
    })
}

impl RunningRelay {
    /// Stops following membership and the workers; returns the final counters.
    pub fn stop(self) -> crate::relay::counters::CounterSnapshot {
        self.stop_following.store(true, Ordering::Relaxed);
        let counters = self.handle.counters();
        if let Ok(h) = Arc::try_unwrap(self.handle) {
            h.stop();
        }
        counters
    }
}

/// The relay role's `/metrics`: every per-reason counter.
pub fn metrics(h: &RelayHandle) -> String {
    let mut out = String::new();
    let named = h.counters().named();
    let samples: Vec<[(&str, &str); 1]> = named.iter().map(|(n, _)| [("event", *n)]).collect();
    let rows: Vec<(&[(&str, &str)], f64)> = samples
        .iter()
        .zip(&named)
        .map(|(l, (_, v))| (&l[..], *v as f64))
        .collect();
    crate::ops::family(
        &mut out,
        "voice_edge_relay_events_total",
        "counter",
        "Relay datagrams and flows by outcome (forwarded, dropped per reason, flow cache).",
        &rows,
    );
    out
}
