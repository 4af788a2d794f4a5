//! The relay's flow cache: an embedded Redis-protocol server for the all-in-one process, and
//! the writer that records flows into it (or into a real Redis).
//!
//! The relay keeps flows in memory; the cache exists so a restarted relay can find where an
//! established client belongs before the client's next consent check (seconds away) would
//! rebuild it. Writes are queued by the relay's hot path with `try_send` and performed here,
//! so a slow or absent Redis costs counters, never forwarding.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpListener;

use crate::relay::FlowRecord;

/// Starts mini-redis on `listen` inside the current tokio runtime; returns its bound address.
pub async fn start_embedded(listen: SocketAddr) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = mini_redis::server::run(listener, std::future::pending::<()>()).await {
            log::error!("embedded redis stopped: {e}");
        }
    });
    Ok(addr)
}

/// Accepts `redis://host:port[/db]` or a bare `host:port`.
pub fn parse_redis_url(url: &str) -> Result<String, String> {
    let rest = url.strip_prefix("redis://").unwrap_or(url);
    let hostport = rest.split('/').next().unwrap_or(rest);
    let hostport = hostport.rsplit('@').next().unwrap_or(hostport);
    if hostport.is_empty() || !hostport.contains(':') {
        return Err(format!("expected redis://HOST:PORT, got {url:?}"));
    }
    Ok(hostport.to_owned())
}

pub fn flow_key(client: SocketAddr) -> String {
    format!("voice-edge:flow:{client}")
}

#[derive(Default, Debug)]
pub struct CacheCounters {
    pub writes: AtomicU64,
    pub write_errors: AtomicU64,
}

/// Spawns the writer task; returns the queue the relay pushes new flows into.
pub fn spawn_flow_writer(
    redis_addr: String,
    ttl: Duration,
    counters: Arc<CacheCounters>,
) -> tokio::sync::mpsc::Sender<FlowRecord> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<FlowRecord>(4096);
    tokio::spawn(async move {
        let mut client = None;
        while let Some(rec) = rx.recv().await {
            if client.is_none() {
                client = mini_redis::client::connect(redis_addr.as_str()).await.ok();
            }
            let value = Bytes::from(format!("{}:{}", rec.cluster, rec.transceiver));
            let ok = match client.as_mut() {
                Some(c) => c
                    .set_expires(&flow_key(rec.client), value, ttl)
                    .await
                    .is_ok(),
                None => false,
            };
            if ok {
                counters.writes.fetch_add(1, Ordering::Relaxed);
            } else {
                // Reconnect on the next record; the relay keeps forwarding meanwhile.
                client = None;
                counters.write_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    tx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_urls() {
        assert_eq!(
            parse_redis_url("redis://127.0.0.1:6379").unwrap(),
            "127.0.0.1:6379"
        );
        assert_eq!(
            parse_redis_url("redis://:pw@10.0.0.1:6380/0").unwrap(),
            "10.0.0.1:6380"
        );
        assert_eq!(parse_redis_url("localhost:6379").unwrap(), "localhost:6379");
        assert!(parse_redis_url("redis://").is_err());
    }

    #[tokio::test]
    async fn flows_land_in_embedded_redis() {
        let addr = start_embedded("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let counters = Arc::new(CacheCounters::default());
        let tx = spawn_flow_writer(addr.to_string(), Duration::from_secs(60), counters.clone());
        let client: SocketAddr = "192.0.2.7:5000".parse().unwrap();
        tx.send(FlowRecord {
            client,
            cluster: 0,
            transceiver: 3,
        })
        .await
        .unwrap();
        let mut c = mini_redis::client::connect(addr).await.unwrap();
        let mut got = None;
        for _ in 0..50 {
            got = c.get(&flow_key(client)).await.unwrap();
            if got.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(got.as_deref(), Some(&b"0:3"[..]));
    }
}
