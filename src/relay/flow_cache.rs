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
    /// A Redis-protocol server's URL (`redis://[[USER]:PASSWORD@]HOST:PORT[/DB]`).
    pub redis: String,
    pub ttl: Duration,
}

#[derive(Debug, Clone, Copy)]
pub enum CacheRequest {
    /// `owner` is the worker address the flow goes to; its worker index is stored with `hop`.
    Write {
        client: SocketAddr,
        hop: u16,
        owner: SocketAddr,
    },
    Lookup {
        client: SocketAddr,
    },
    /// `owner` gave the client up: its stored flow goes, unless it names another owner by now.
    Forget {
        client: SocketAddr,
        owner: SocketAddr,
    },
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
    /// Resolves stored routes back to addresses, as the workers do.
    pub relay: super::RelayConfig,
    pub shared: Arc<SharedFlows>,
    pub counters: Arc<Counters>,
    /// The workers', woken when lookups found flows: each forwards the datagram it held for
    /// them at once, instead of at its client's next datagram.
    pub wakers: Vec<crate::wakeup::Waker>,
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

    fn run(mut self, rx: mpsc::Receiver<CacheRequest>) {
        let mut hops_seen = 0;
        let client = match redis::Client::open(self.cfg.redis.as_str()) {
            Ok(c) => c,
            Err(e) => {
                log::error!(
                    "flow cache: bad Redis URL {}: {e}",
                    crate::cache::redact_redis_url(&self.cfg.redis)
                );
                return;
            }
        };
        // Connect before the first request: right after a restart the first lookup is on the
        // media path's clock.
        let mut last_error = None;
        let mut conn: Option<redis::Connection> = self.connect(&client, &mut last_error);
        let mut backlog: HashMap<SocketAddr, String> = HashMap::new();
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
            // After the wait, not before it: right after a restart the first lookups arrive
            // while membership is still being read, and a hop table copied before the wait
            // would not know the hop a stored flow names (the flow was then learned only from
            // the transceivers' traffic, seconds later).
            if let Some(live) = self.relay.live_hops.clone() {
                live.refresh(&mut hops_seen, &mut self.relay);
            }
            if conn.is_none() && last_attempt.elapsed() >= RETRY {
                last_attempt = Instant::now();
                conn = self.connect(&client, &mut last_error);
            }
            if let Some(c) = conn.as_mut()
                && !backlog.is_empty()
            {
                let pending: Vec<(SocketAddr, String)> = backlog.drain().collect();
                for (client_addr, value) in pending {
                    match self.write(c, client_addr, &value) {
                        Ok(()) => Counters::inc(&self.counters.cache_writes),
                        Err(e) => {
                            self.log_failure(&e, &mut last_error);
                            backlog.insert(client_addr, value);
                        }
                    }
                }
                if !backlog.is_empty() {
                    conn = None;
                }
            }
            let Some(req) = req else { continue };
            match req {
                CacheRequest::Write {
                    client: addr,
                    hop,
                    owner,
                } => {
                    let value = self.encode(hop, owner);
                    let written = conn.as_mut().map(|c| self.write(c, addr, &value));
                    if let Some(Err(e)) = &written {
                        self.log_failure(e, &mut last_error);
                    }
                    if matches!(written, Some(Ok(()))) {
                        Counters::inc(&self.counters.cache_writes);
                    } else {
                        conn = None;
                        Counters::inc(&self.counters.cache_write_errors);
                        if backlog.len() < MAX_BACKLOG {
                            backlog.insert(addr, value);
                        }
                    }
                }
                CacheRequest::Lookup { client: addr } => {
                    if let Some(c) = conn.as_mut()
                        && self.lookup(c, addr).is_err()
                    {
                        conn = None;
                    }
                }
                CacheRequest::Forget {
                    client: addr,
                    owner,
                } => {
                    if backlog
                        .get(&addr)
                        .and_then(|v| self.decode(v))
                        .is_some_and(|(_, o)| o == owner)
                    {
                        backlog.remove(&addr);
                    }
                    let Some(c) = conn.as_mut() else { continue };
                    let key = flow_key(&self.scope, addr);
                    let r: redis::RedisResult<Option<String>> =
                        redis::cmd("GET").arg(&key).query(c);
                    match r {
                        Ok(Some(v)) if self.decode(&v).is_some_and(|(_, o)| o == owner) => {
                            let r: redis::RedisResult<()> = redis::cmd("DEL").arg(&key).query(c);
                            if r.is_err() {
                                conn = None;
                            }
                        }
                        Ok(_) => {}
                        Err(_) => conn = None,
                    }
                }
            }
        }
    }

    /// Looks `client` up; a flow found goes to the shared table, and the workers are woken to
    /// forward the datagram they held for it.
    ///
    /// One GET per lookup, answered as it comes. Taking every queued lookup into one pipelined
    /// round trip (tried) made recovery slower, not faster: through 3 restarts, 300 calls'
    /// median call heard a 110 ms gap, against 29 ms one lookup at a time.
    fn lookup(&self, c: &mut redis::Connection, client: SocketAddr) -> redis::RedisResult<()> {
        let v: Option<String> = redis::cmd("GET")
            .arg(flow_key(&self.scope, client))
            .query(c)?;
        if let Some((hop, owner)) = v.as_deref().and_then(|v| self.decode(v)) {
            self.shared.insert(client, owner, hop, Instant::now());
            Counters::inc(&self.counters.flows_recovered_cache);
            self.shared.mark_recovered();
            for w in &self.wakers {
                w.wake();
            }
        }
        Ok(())
    }

    /// `hop/worker`: the worker is stored as an index, not an address, so a stale or forged
    /// entry can only ever name a configured member.
    fn encode(&self, hop: u16, owner: SocketAddr) -> String {
        let worker = self
            .relay
            .next_hops
            .get(&hop)
            .map(|base| owner.port().saturating_sub(base.port()))
            .unwrap_or(0);
        format!("{hop}/{worker}")
    }

    fn decode(&self, v: &str) -> Option<(u16, SocketAddr)> {
        let (hop, worker) = v.split_once('/').unwrap_or((v, "0"));
        let hop = hop.parse::<u16>().ok()?;
        let worker = worker.parse::<u8>().ok()?;
        Some((hop, self.relay.next_hop(hop, worker)?))
    }

    fn write(
        &self,
        c: &mut redis::Connection,
        client: SocketAddr,
        value: &str,
    ) -> redis::RedisResult<()> {
        redis::cmd("SET")
            .arg(flow_key(&self.scope, client))
            .arg(value)
            .arg("PX")
            .arg(self.cfg.ttl.as_millis() as u64)
            .query::<()>(c)
    }
}

impl CacheThread {
    /// Connects (AUTH and SELECT come from the URL). A failure is counted each time and logged
    /// when its reason changes, so a wrong password says so once instead of every retry; the
    /// URL is logged with its password redacted.
    fn connect(
        &self,
        client: &redis::Client,
        last_error: &mut Option<String>,
    ) -> Option<redis::Connection> {
        let attempt = client
            .get_connection_with_timeout(CONNECT_TIMEOUT)
            .and_then(|c| {
                c.set_read_timeout(Some(IO_TIMEOUT))?;
                c.set_write_timeout(Some(IO_TIMEOUT))?;
                Ok(c)
            });
        match attempt {
            Ok(c) => Some(c),
            Err(e) => {
                Counters::inc(&self.counters.cache_connect_errors);
                self.log_failure(&e, last_error);
                None
            }
        }
    }

    /// Logs why Redis refused (unreachable, `NOAUTH`, `WRONGPASS`, …) when the reason differs
    /// from the last one logged; the URL's password is redacted.
    fn log_failure(&self, e: &redis::RedisError, last_error: &mut Option<String>) {
        let reason = e.to_string();
        if last_error.as_deref() != Some(reason.as_str()) {
            log::warn!(
                "flow cache: Redis at {} failed: {reason}",
                crate::cache::redact_redis_url(&self.cfg.redis)
            );
            *last_error = Some(reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::RelayConfig;
    use crate::routing::RouteKeys;
    use crate::routing::members::ClusterMembers;

    fn thread(workers: u8) -> CacheThread {
        let base: SocketAddr = "10.0.0.5:4000".parse().unwrap();
        let members = ClusterMembers::new(0).with(3, base).with_workers(workers);
        let keys = RouteKeys::from_hex(0, &"ab".repeat(32)).unwrap();
        CacheThread {
            cfg: FlowCacheConfig {
                redis: "redis://127.0.0.1:1".into(),
                ttl: Duration::from_secs(1),
            },
            scope: "c0".into(),
            relay: RelayConfig::new("127.0.0.1:0".parse().unwrap(), members, keys),
            shared: Arc::new(SharedFlows::new(4, Duration::from_secs(1))),
            counters: Arc::default(),
            wakers: vec![],
        }
    }

    #[test]
    fn a_stored_flow_names_its_worker_and_resolves_back_to_its_socket() {
        let t = thread(2);
        let w1: SocketAddr = "10.0.0.5:4001".parse().unwrap();
        assert_eq!(t.encode(3, w1), "3/1");
        assert_eq!(t.decode("3/1"), Some((3, w1)));
        assert_eq!(t.decode("3"), Some((3, "10.0.0.5:4000".parse().unwrap())));
        // Entries naming a worker or transceiver that is not configured resolve to nothing.
        assert_eq!(t.decode("3/2"), None);
        assert_eq!(t.decode("4/0"), None);
        assert_eq!(t.decode("3/x"), None);
    }
}
