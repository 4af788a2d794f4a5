//! The embedded Redis-protocol server (mini-redis) that the all-in-one process runs for the
//! relays' flow cache, so `cargo run` needs no Redis. Deployments pass `--redis-url` instead.

use std::net::SocketAddr;

use tokio::net::TcpListener;

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

/// Accepts `redis://[user:pass@]host:port[/db]` or a bare `host:port`.
pub fn parse_redis_url(url: &str) -> Result<String, String> {
    let rest = url.strip_prefix("redis://").unwrap_or(url);
    let hostport = rest.split('/').next().unwrap_or(rest);
    let hostport = hostport.rsplit('@').next().unwrap_or(hostport);
    if hostport.is_empty() || !hostport.contains(':') {
        return Err(format!("expected redis://HOST:PORT, got {url:?}"));
    }
    Ok(hostport.to_owned())
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
}
