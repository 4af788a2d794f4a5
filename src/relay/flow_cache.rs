//! The relay's flow cache in Redis: writes new flows, answers lookups after a restart.
//!
//! Runs on its own thread with a blocking Redis connection, fed by the workers through bounded
//! queues (`try_send`: a slow or dead Redis costs counters, never forwarding). Writes that fail
//! while Redis is down are kept (deduplicated, capped) and replayed when it returns.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::sync::mpsc;

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
const IO_TIMEOUT: Duration = Duration::from_secs(1);

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

/// The workers' side of the queue; `try_send` never blocks the hot path.
pub type CacheSender = mpsc::SyncSender<CacheRequest>;

impl CacheThread {
    pub fn spawn(self) -> anyhow::Result<(CacheSender, std::thread::JoinHandle<()>)> {
        let (tx, rx) = mpsc::sync_channel(8192);
        let t = std::thread::Builder::new()
            .name("relay-cache".into())
            .spawn(move || self.run(rx))?;
        Ok((tx, t))
    }

    fn run(self, rx: mpsc::Receiver<CacheRequest>) {
        let url = format!("redis://{}/", self.cfg.redis);
        let client = match redis::Client::open(url.as_str()) {
            Ok(c) => c,
            Err(e) => {
                log::error!("flow cache: bad redis address {}: {e}", self.cfg.redis);
                return;
            }
        };
        // Connect before the first request: right after a restart the first lookup is on the
        // media path's clock.
        let mut conn: Option<redis::Connection> = connect(&client);
        let mut backlog: HashMap<SocketAddr, u16> = HashMap::new();
        let mut last_attempt = Instant::now();
        loop {
            let req = if backlog.is_empty() {
                match rx.recv() {
                    Ok(r) => Some(r),
                    Err(_) => return, // relay stopped
                }
            } else {
                match rx.recv_timeout(RETRY) {
                    Ok(r) => Some(r),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            };
            if conn.is_none() && last_attempt.elapsed() >= RETRY {
                last_attempt = Instant::now();
                conn = connect(&client);
            }
            if let Some(c) = conn.as_mut()
                && !backlog.is_empty()
            {
                let pending: Vec<(SocketAddr, u16)> = backlog.drain().collect();
                for (client_addr, hop) in pending {
                    if self.write(c, client_addr, hop) {
                        Counters::inc(&self.counters.cache_writes);
                    } else {
                        backlog.insert(client_addr, hop);
                    }
                }
                if !backlog.is_empty() {
                    conn = None;
                }
            }
            match req {
                Some(CacheRequest::Write { client: addr, hop }) => {
                    let ok = conn.as_mut().is_some_and(|c| self.write(c, addr, hop));
                    if ok {
                        Counters::inc(&self.counters.cache_writes);
                    } else {
                        conn = None;
                        Counters::inc(&self.counters.cache_write_errors);
                        if backlog.len() < MAX_BACKLOG {
                            backlog.insert(addr, hop);
                        }
                    }
                }
                Some(CacheRequest::Lookup { client: addr }) => {
                    let Some(c) = conn.as_mut() else { continue };
                    let r: redis::RedisResult<Option<String>> =
                        redis::cmd("GET").arg(flow_key(&self.scope, addr)).query(c);
                    match r {
                        Ok(Some(v)) => {
                            let found = v
                                .parse::<u16>()
                                .ok()
                                .and_then(|h| self.next_hops.get(&h).map(|o| (h, *o)));
                            if let Some((hop, owner)) = found {
                                self.shared.insert(addr, owner, hop, Instant::now());
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

    fn write(&self, c: &mut redis::Connection, client: SocketAddr, hop: u16) -> bool {
        redis::cmd("SET")
            .arg(flow_key(&self.scope, client))
            .arg(hop)
            .arg("PX")
            .arg(self.cfg.ttl.as_millis() as u64)
            .query::<()>(c)
            .is_ok()
    }
}

fn connect(client: &redis::Client) -> Option<redis::Connection> {
    let c = client.get_connection_with_timeout(CONNECT_TIMEOUT).ok()?;
    c.set_read_timeout(Some(IO_TIMEOUT)).ok()?;
    c.set_write_timeout(Some(IO_TIMEOUT)).ok()?;
    Some(c)
}
