//! The embedded Redis-protocol server (mini-redis) that the all-in-one process runs for the
//! relays' flow cache, so `cargo run` needs no Redis. Deployments pass `--redis-url` instead.

use std::net::SocketAddr;

use tokio::net::TcpListener;

/// Starts mini-redis on `listen` inside the current tokio runtime; returns its bound address.
///
/// mini-redis has no AUTH (nor SELECT, nor a memory limit), so anyone who reaches it can read
/// and write the flow cache and grow this process. It therefore binds loopback only, refusing
/// anything else, and its address is used by this process's relays and shown to no one: other
/// users of this machine could still find it by scanning loopback, which is why a shared host
/// or a deployment passes `--redis-url` to a Redis with a password instead.
pub async fn start_embedded(listen: SocketAddr) -> anyhow::Result<SocketAddr> {
    anyhow::ensure!(
        listen.ip().is_loopback(),
        "the embedded Redis-protocol server has no password, so it binds loopback only, not {listen}"
    );
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = mini_redis::server::run(listener, std::future::pending::<()>()).await {
            log::error!("embedded redis stopped: {e}");
        }
    });
    Ok(addr)
}

/// Accepts `redis://[user:pass@]host:port[/db]` (or `rediss://`) or a bare `host:port`, and
/// returns it as a `redis://` URL with password and database kept: a deployment's Redis is
/// usually shared and protected, so dropping either would talk to the wrong data or be refused.
pub fn parse_redis_url(url: &str) -> Result<String, String> {
    let url = url.trim();
    let full = if url.contains("://") {
        url.to_owned()
    } else {
        format!("redis://{url}")
    };
    let after_scheme = full.split_once("://").map(|x| x.1).unwrap_or("");
    let hostport = after_scheme.split('/').next().unwrap_or("");
    let hostport = hostport.rsplit('@').next().unwrap_or(hostport);
    if hostport.is_empty() || !hostport.contains(':') {
        return Err(format!(
            "expected redis://[[USER]:PASSWORD@]HOST:PORT[/DB], got {:?}",
            redact_redis_url(&full)
        ));
    }
    // Errors quote the URL with its password replaced: they end up in logs and on terminals.
    redis::Client::open(full.as_str())
        .map_err(|e| format!("bad Redis URL {:?}: {e}", redact_redis_url(&full)))?;
    Ok(full)
}

/// The URL for logs and status pages: the password replaced by `***`.
pub fn redact_redis_url(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, rest)), Some(at)) if at > scheme.len() => {
            let userinfo = &rest[..at - scheme.len() - 3];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{}", &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_urls_keep_password_and_db() {
        assert_eq!(
            parse_redis_url("redis://127.0.0.1:6379").unwrap(),
            "redis://127.0.0.1:6379"
        );
        assert_eq!(
            parse_redis_url("redis://:pw@10.0.0.1:6380/3").unwrap(),
            "redis://:pw@10.0.0.1:6380/3"
        );
        assert_eq!(
            parse_redis_url("localhost:6379").unwrap(),
            "redis://localhost:6379"
        );
        assert!(parse_redis_url("redis://").is_err());
        assert!(parse_redis_url("redis://host").is_err());
        assert_eq!(
            parse_redis_url("redis://app:pw@10.0.0.1:6380/2").unwrap(),
            "redis://app:pw@10.0.0.1:6380/2"
        );
        // A refused URL is quoted back without its password.
        let e = parse_redis_url("redis://:s3cret@host-without-port/1").unwrap_err();
        assert!(!e.contains("s3cret") && e.contains(":***@"), "{e}");
        assert_eq!(
            redact_redis_url("redis://:pw@10.0.0.1:6380/3"),
            "redis://:***@10.0.0.1:6380/3"
        );
        assert_eq!(
            redact_redis_url("redis://10.0.0.1:6380"),
            "redis://10.0.0.1:6380"
        );
    }
}
