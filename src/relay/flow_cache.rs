//! The relay's flow cache in Redis: writes new flows, answers lookups after a restart.
//!
//! Runs on its own thread with a small tokio runtime, fed by the workers through bounded
//! queues (`try_send`: a slow or dead Redis costs counters, never forwarding). Writes that fail
//! while Redis is down are kept (deduplicated, capped) and replayed when it returns.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::counters::Counters;
use super::flows::SharedFlows;

#[derive(Debug, Clone)]
pub struct FlowCacheConfig {
    /// `host:port` of a Redis-protocol server.
    pub redis: String,
    pub ttl: Duration,
}

#[derive(Debug, Clone, Copy)]
pub enum CacheRequest {
    Write { client: SocketAddr, hop: u16 },
    Lookup { client: SocketAddr },
}

/// Failed writes kept for replay; beyond this the oldest information is simply lost, and those
/// flows fall back to STUN re-creation.
const MAX_BACKLOG: usize = 100_000;
const RETRY: Duration = Duration::from_millis(500);
const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);

/// The key scope keeps tiers apart: a global relay stores cluster ids, a cluster relay stores
/// transceiver ids, for the same client address.
pub fn flow_key(scope: &str, client: SocketAddr) -> String {
    format!("voice-edge:flow:{scope}:{client}")
}

pub struct CacheThread {
    pub cfg: FlowCacheConfig,
    pub scope: String,
    pub next_hops: HashMap<u16, SocketAddr>,
    pub shared: Arc<SharedFlows>,
    pub counters: Arc<Counters>,
}

impl CacheThread {
    pub fn spawn(
        self,
    ) -> anyhow::Result<(mpsc::Sender<CacheRequest>, std::thread::JoinHandle<()>)> {
        let (tx, rx) = mpsc::channel(8192);
        let t = std::thread::Builder::new()
            .name("relay-cache".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        log::error!("relay cache runtime: {e}");
                        return;
                    }
                };
                rt.block_on(self.run(rx));
            })?;
        Ok((tx, t))
    }

    async fn run(self, mut rx: mpsc::Receiver<CacheRequest>) {
        let mut conn: Option<mini_redis::client::Client> = None;
        let mut backlog: HashMap<SocketAddr, u16> = HashMap::new();
        let mut last_attempt = Instant::now() - RETRY;
        loop {
            let req = if backlog.is_empty() {
                match rx.recv().await {
                    Some(r) => Some(r),
                    None => return, // relay stopped
                }
            } else {
                match tokio::time::timeout(RETRY, rx.recv()).await {
                    Ok(Some(r)) => Some(r),
                    Ok(None) => return,
                    Err(_) => None,
                }
            };
            if conn.is_none() && last_attempt.elapsed() >= RETRY {
                last_attempt = Instant::now();
                conn = connect(&self.cfg.redis).await;
            }
            if let Some(c) = conn.as_mut()
                && !backlog.is_empty()
            {
                let pending: Vec<(SocketAddr, u16)> = backlog.drain().collect();
                for (client, hop) in pending {
                    if self.write(c, client, hop).await {
                        Counters::inc(&self.counters.cache_writes);
                    } else {
                        backlog.insert(client, hop);
                    }
                }
                if !backlog.is_empty() {
                    conn = None;
                }
            }
            match req {
                Some(CacheRequest::Write { client, hop }) => {
                    let ok = match conn.as_mut() {
                        Some(c) => self.write(c, client, hop).await,
                        None => false,
                    };
                    if ok {
                        Counters::inc(&self.counters.cache_writes);
                    } else {
                        conn = None;
                        Counters::inc(&self.counters.cache_write_errors);
                        if backlog.len() < MAX_BACKLOG {
                            backlog.insert(client, hop);
                        }
                    }
                }
                Some(CacheRequest::Lookup { client }) => {
                    let Some(c) = conn.as_mut() else { continue };
                    match c.get(&flow_key(&self.scope, client)).await {
                        Ok(Some(v)) => {
                            let hop = std::str::from_utf8(&v)
                                .ok()
                                .and_then(|s| s.parse::<u16>().ok());
                            if let Some((hop, owner)) =
                                hop.and_then(|h| self.next_hops.get(&h).map(|o| (h, *o)))
                            {
                                self.shared.insert(client, owner, hop, Instant::now());
                                Counters::inc(&self.counters.flows_recovered_cache);
                            }
                        }
                        Ok(None) => {}
                        Err(_) => conn = None,
                    }
                }
                None => {}
            }
        }
    }

    async fn write(
        &self,
        c: &mut mini_redis::client::Client,
        client: SocketAddr,
        hop: u16,
    ) -> bool {
        let key = flow_key(&self.scope, client);
        let fut = c.set_expires(&key, Bytes::from(hop.to_string()), self.cfg.ttl);
        matches!(
            tokio::time::timeout(Duration::from_secs(1), fut).await,
            Ok(Ok(()))
        )
    }
}

async fn connect(addr: &str) -> Option<mini_redis::client::Client> {
    match tokio::time::timeout(CONNECT_TIMEOUT, mini_redis::client::connect(addr)).await {
        Ok(Ok(c)) => Some(c),
        _ => None,
    }
}
