//! `voice-edge signaling`: the Realtime HTTP API and the demo page as their own process,
//! placing calls on whatever transceivers Redis membership lists, through the control API.
//!
//! Admin endpoints get their own listener (loopback by default): the public one is published
//! to the world in a deployment, and `/admin` is for the operator.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;

use crate::http_server::{HttpLimits, HttpServer};
use crate::membership::RedisDirectory;
use crate::signaling::{Signaling, keys::Keys};

#[derive(Debug, Clone)]
pub struct SignalingRoleConfig {
    /// Where calls for a model that is not a stub go (see [`crate::upstream`]).
    pub upstream: Option<crate::upstream::UpstreamConfig>,
    pub http: SocketAddr,
    /// `/admin/*` (and everything else); `None` serves no admin endpoints.
    pub admin: Option<SocketAddr>,
    /// Required when `admin` is not loopback (see `signaling::AdminAccess`).
    pub admin_token: Option<String>,
    pub redis_url: String,
    pub cluster_secret: String,
    pub require_keys: bool,
    pub api_keys: Vec<String>,
    pub call_limits: crate::signaling::call_limits::CallLimits,
    /// How often membership is read.
    pub refresh: Duration,
    /// Both listeners' connection cap and header timeout.
    pub http_limits: HttpLimits,
}

pub struct RunningSignaling {
    pub http_addr: SocketAddr,
    pub admin_addr: Option<SocketAddr>,
    pub directory: Arc<RedisDirectory>,
    servers: Vec<HttpServer>,
}

pub async fn start(cfg: SignalingRoleConfig) -> anyhow::Result<RunningSignaling> {
    let directory = {
        let (url, secret, every) = (
            cfg.redis_url.clone(),
            cfg.cluster_secret.clone(),
            cfg.refresh,
        );
        tokio::task::spawn_blocking(move || RedisDirectory::start(&url, &secret, every)).await??
    };
    let redis = crate::cache::redact_redis_url(&cfg.redis_url);
    let stats = Arc::new(move || json!({"role": "signaling", "membership": {"redis": redis}}));
    if let Some(a) = cfg.admin
        && !a.ip().is_loopback()
        && cfg.admin_token.is_none()
    {
        anyhow::bail!(
            "the admin listener {a} is not loopback: set an admin token (--admin-token / \
             VOICE_EDGE_ADMIN_TOKEN) or bind it to 127.0.0.1"
        );
    }
    let signaling = Signaling::with_directory(directory.clone(), stats)
        .with_admin_token(cfg.admin_token.clone())
        .with_keys(Keys::new(cfg.require_keys, cfg.api_keys.clone()))
        .with_call_limits(cfg.call_limits)
        .with_upstream(cfg.upstream.clone());
    let mut servers = vec![];
    let public = tokio::net::TcpListener::bind(cfg.http)
        .await
        .with_context(|| format!("binding HTTP on {}", cfg.http))?;
    let http_addr = public.local_addr()?;
    servers.push(HttpServer::spawn(
        public,
        signaling.clone().router_without_admin(),
        cfg.http_limits,
        None,
    )?);
    let admin_addr = match cfg.admin {
        Some(a) => {
            let l = tokio::net::TcpListener::bind(a)
                .await
                .with_context(|| format!("binding the admin listener on {a}"))?;
            let addr = l.local_addr()?;
            servers.push(HttpServer::spawn(
                l,
                signaling.router(),
                cfg.http_limits,
                None,
            )?);
            Some(addr)
        }
        None => None,
    };
    Ok(RunningSignaling {
        http_addr,
        admin_addr,
        directory,
        servers,
    })
}

impl RunningSignaling {
    pub async fn stop(self) {
        for s in self.servers {
            s.stop().await;
        }
        self.directory.stop();
    }
}
