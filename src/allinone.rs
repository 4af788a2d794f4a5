//! The all-in-one process: signaling, demo page, one relay, several transceivers and an
//! embedded Redis-protocol flow cache, wired by function calls instead of the network.
//!
//! Everything binds loopback by default so `cargo run` is safe on a laptop; the same pieces
//! run as separate roles in a deployment.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::json;

use crate::cache::{self, CacheCounters};
use crate::membership::ClusterMembers;
use crate::relay::{self, RelayConfig, RelayHandle};
use crate::routing::RouteKeys;
use crate::signaling::{ClusterView, Signaling};
use crate::transceiver::{self, TransceiverConfig, TransceiverHandle};

#[derive(Debug, Clone)]
pub struct AllInOneConfig {
    pub http: SocketAddr,
    pub relay: SocketAddr,
    pub transceivers: u16,
    pub cluster: u16,
    /// Hex route secret shared by relay and transceivers; random per process when absent.
    pub route_secret: Option<String>,
    /// A real Redis for the flow cache; the embedded one is started when absent.
    pub redis_url: Option<String>,
    pub embedded_redis: SocketAddr,
    pub flow_ttl: Duration,
}

impl Default for AllInOneConfig {
    fn default() -> Self {
        AllInOneConfig {
            http: "127.0.0.1:8080".parse().unwrap(),
            relay: "127.0.0.1:3478".parse().unwrap(),
            transceivers: 2,
            cluster: 0,
            route_secret: None,
            redis_url: None,
            embedded_redis: "127.0.0.1:0".parse().unwrap(),
            flow_ttl: Duration::from_secs(120),
        }
    }
}

pub struct Running {
    pub http_addr: SocketAddr,
    pub relay_addr: SocketAddr,
    pub redis_addr: String,
    pub relay: RelayHandle,
    pub transceivers: Vec<TransceiverHandle>,
    threads: Vec<JoinHandle<()>>,
    server: tokio::task::JoinHandle<()>,
    shutdown: tokio::sync::watch::Sender<bool>,
}

impl Running {
    /// Stops accepting HTTP, ends every call (clients get DTLS close_notify) and stops the relay.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.server.await;
        for t in &self.transceivers {
            t.stop();
        }
        let threads = self.threads;
        let relay = self.relay;
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
            relay.stop();
        })
        .await;
    }
}

/// Starts every component; must run inside a tokio runtime.
pub async fn start(cfg: AllInOneConfig) -> anyhow::Result<Running> {
    let keys = match &cfg.route_secret {
        Some(hex) => RouteKeys::from_hex(0, hex)?,
        None => RouteKeys::from_hex(0, &hex::encode(rand::random::<[u8; 32]>()))?,
    };

    // The relay's public socket first: its address is the candidate every answer carries.
    let public = UdpSocket::bind(cfg.relay)?;
    let relay_addr = public.local_addr()?;

    let mut handles = vec![];
    let mut threads = vec![];
    let mut members = ClusterMembers::new(cfg.cluster);
    for id in 1..=cfg.transceivers {
        let (h, t) = transceiver::spawn(TransceiverConfig {
            cluster: cfg.cluster,
            id,
            bind: SocketAddr::new(relay_addr.ip(), 0),
            advertise: Some(relay_addr),
            route_keys: keys.clone(),
        })?;
        members = members.with(id, h.addr);
        handles.push(h);
        threads.push(t);
    }

    let redis_addr = match &cfg.redis_url {
        Some(url) => cache::parse_redis_url(url).map_err(anyhow::Error::msg)?,
        None => cache::start_embedded(cfg.embedded_redis).await?.to_string(),
    };
    let cache_counters = Arc::new(CacheCounters::default());
    let sink = cache::spawn_flow_writer(redis_addr.clone(), cfg.flow_ttl, cache_counters.clone());

    let relay = relay::spawn_on(
        public,
        RelayConfig::new(relay_addr, members, keys.clone()),
        Some(sink),
    )?;

    let relay_counters = relay.counters.clone();
    let redis_for_stats = redis_addr.clone();
    let stats = Arc::new(move || {
        json!({
            "relay": {"public_addr": relay_addr, "counters": relay_counters.snapshot()},
            "flow_cache": {
                "redis": redis_for_stats,
                "writes": cache_counters.writes.load(Ordering::Relaxed),
                "write_errors": cache_counters.write_errors.load(Ordering::Relaxed),
            },
        })
    });
    let signaling = Signaling::new(
        vec![ClusterView {
            id: cfg.cluster,
            media_addr: relay_addr,
            transceivers: handles.clone(),
        }],
        stats,
    );
    let listener = tokio::net::TcpListener::bind(cfg.http).await?;
    let http_addr = listener.local_addr()?;
    let (shutdown, mut shutdown_rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(async move {
        let r = axum::serve(listener, signaling.router())
            .with_graceful_shutdown(async move {
                let _ = shutdown_rx.wait_for(|v| *v).await;
            })
            .await;
        if let Err(e) = r {
            log::error!("http server: {e}");
        }
    });

    Ok(Running {
        http_addr,
        relay_addr,
        redis_addr,
        relay,
        transceivers: handles,
        threads,
        server,
        shutdown,
    })
}
