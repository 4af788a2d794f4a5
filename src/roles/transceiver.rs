//! `voice-edge transceiver`: one transceiver as its own process. It answers offers that
//! signaling relays through the control API, registers in Redis so signaling places calls on it
//! and relays forward to it, and drains on SIGTERM.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;

use crate::control::{self, TransceiverControl};
use crate::membership::{MemberRecord, Registration};
use crate::routing::RouteKeys;
use crate::transceiver::{self, AnswerCandidate, Lifecycle, TransceiverConfig, TransceiverHandle};

#[derive(Debug, Clone)]
pub struct TransceiverRoleConfig {
    /// Where calls for a model that is not a stub go (see [`crate::upstream`]).
    pub upstream: Option<crate::upstream::UpstreamConfig>,
    pub cluster: u16,
    /// `None`: claim the lowest free id of the cluster in Redis.
    pub id: Option<u16>,
    /// Worker 0's socket; worker `w` binds the next port up. Relays forward here.
    pub bind: SocketAddr,
    pub workers: u8,
    /// The candidate answers name: the relay as clients reach it.
    pub media: SocketAddr,
    /// The control API listener.
    pub control: SocketAddr,
    /// The address relays and signaling reach this process at (registered in Redis).
    pub host: IpAddr,
    pub redis_url: String,
    pub cluster_secret: String,
    pub route_keys: RouteKeys,
    pub lifecycle: Lifecycle,
    pub capacity: crate::transceiver::admission::Capacity,
    /// Where relays' link datagrams may come from.
    pub link_sources: crate::routing::link_sources::LinkSources,
    pub heartbeat: Duration,
    pub ttl: Duration,
}

pub struct RunningTransceiver {
    pub handle: TransceiverHandle,
    pub record: MemberRecord,
    pub control_addr: SocketAddr,
    registration: Option<Registration>,
    threads: Vec<JoinHandle<()>>,
    control: crate::http_server::HttpServer,
}

/// Claims an id, starts the workers and the control listener, and starts heartbeating. Must run
/// inside a tokio runtime.
pub async fn start(cfg: TransceiverRoleConfig) -> anyhow::Result<RunningTransceiver> {
    anyhow::ensure!(
        !cfg.media.ip().is_unspecified(),
        "the media address answers name must be one clients reach, not {}",
        cfg.media
    );
    anyhow::ensure!(
        !cfg.host.is_unspecified(),
        "--host must be an address relays and signaling reach, not {}",
        cfg.host
    );
    anyhow::ensure!(
        cfg.bind.port() != 0 && cfg.control.port() != 0,
        "the transceiver's ports are registered in Redis, so they must be given (not 0)"
    );
    let control_listener = tokio::net::TcpListener::bind(cfg.control)
        .await
        .with_context(|| format!("binding the control API on {}", cfg.control))?;
    let control_addr = SocketAddr::new(cfg.host, control_listener.local_addr()?.port());
    let record = MemberRecord {
        cluster: cfg.cluster,
        id: cfg.id.unwrap_or(0),
        instance: hex::encode(rand::random::<[u8; 8]>()),
        control: control_addr,
        link: SocketAddr::new(cfg.host, cfg.bind.port()),
        workers: cfg.workers,
        media: cfg.media,
        load: 0,
        draining: false,
        at_ms: 0,
    };
    // Registering claims the id, which goes into every ufrag and call id this transceiver
    // makes, so it comes first; the heartbeat reports the transceiver's load once it runs.
    let running: Arc<OnceLock<TransceiverHandle>> = Arc::default();
    let registration = {
        let (url, rec, wanted, ttl, every) = (
            cfg.redis_url.clone(),
            record,
            cfg.id,
            cfg.ttl,
            cfg.heartbeat,
        );
        let h = running.clone();
        tokio::task::spawn_blocking(move || {
            Registration::start(&url, rec, wanted, ttl, every, move || {
                h.get().map_or((0, false), |h| (h.load(), h.is_draining()))
            })
        })
        .await??
    };
    let id = registration.record.id;
    let spawned = transceiver::spawn(TransceiverConfig {
        cluster: cfg.cluster,
        id,
        bind: cfg.bind,
        candidate: AnswerCandidate::Relay(cfg.media),
        route_keys: cfg.route_keys.clone(),
        lifecycle: cfg.lifecycle,
        workers: cfg.workers,
        capacity: cfg.capacity,
        link_sources: cfg.link_sources.clone(),
        upstream: cfg.upstream.clone(),
    });
    let (handle, threads) = match spawned {
        Ok(s) => s,
        Err(e) => {
            // Give the id back rather than heartbeat for a transceiver that never ran.
            let _ = tokio::task::spawn_blocking(move || registration.leave()).await;
            return Err(e);
        }
    };
    let _ = running.set(handle.clone());
    let router = control::server::router(
        Arc::new(handle.clone()) as Arc<dyn TransceiverControl>,
        &cfg.cluster_secret,
    );
    let control = crate::http_server::HttpServer::spawn(
        control_listener,
        router,
        crate::http_server::HttpLimits::default(),
        None,
    )?;
    log::info!(
        "transceiver {}.{id}: link {} (workers {}), control {control_addr}, answers name {}",
        cfg.cluster,
        registration.record.link,
        cfg.workers,
        cfg.media
    );
    Ok(RunningTransceiver {
        handle,
        record: registration.record.clone(),
        control_addr,
        registration: Some(registration),
        threads,
        control,
    })
}

impl RunningTransceiver {
    /// SIGTERM: stop taking calls (the next heartbeat tells signaling), let live ones finish
    /// until `deadline`, then leave. Returns the calls still live at the deadline.
    pub async fn drain(&self, deadline: Duration) -> usize {
        self.handle.drain();
        let live = || self.handle.live_calls();
        transceiver::drain::wait(live, deadline, std::future::pending()).await
    }

    /// Stops heartbeating without leaving, as a crash would (the record expires after its TTL).
    pub fn stop_heartbeat(&mut self) {
        if let Some(r) = self.registration.take() {
            r.abandon();
        }
    }

    /// Leaves membership, ends every call and stops.
    pub async fn stop(mut self) {
        if let Some(r) = self.registration.take() {
            let _ = tokio::task::spawn_blocking(move || r.leave()).await;
        }
        self.control.stop().await;
        self.handle.stop();
        let threads = std::mem::take(&mut self.threads);
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
    }
}

/// The transceiver role's `/metrics`: calls, endings, setup timeline and loop lag.
pub async fn metrics(h: &TransceiverHandle) -> String {
    let st = h.stats().await;
    let mut out = String::new();
    let f = crate::ops::family;
    f(
        &mut out,
        "voice_edge_transceiver_calls",
        "gauge",
        "Live calls.",
        &[(&[], h.live_calls() as f64)],
    );
    f(
        &mut out,
        "voice_edge_transceiver_draining",
        "gauge",
        "1 when this transceiver takes no new calls.",
        &[(&[], h.is_draining() as u8 as f64)],
    );
    let e = st.ended;
    f(
        &mut out,
        "voice_edge_transceiver_calls_ended_total",
        "counter",
        "Calls ended, by why.",
        &[
            (&[("reason", "hangup")], e.hangup as f64),
            (&[("reason", "peer_closed")], e.peer_closed as f64),
            (&[("reason", "setup_timeout")], e.setup_timeout as f64),
            (&[("reason", "consent_expired")], e.consent_expired as f64),
            (&[("reason", "idle_timeout")], e.idle_timeout as f64),
            (&[("reason", "shutdown")], e.shutdown as f64),
        ],
    );
    crate::ops::histogram_family(
        &mut out,
        "voice_edge_transceiver_setup_seconds",
        "Call setup from the answer: to the ICE pair selected (step=ice), to DTLS connected (step=dtls), to the first audio sent (step=first_audio; with echo and tts it includes the model's turn).",
        &[
            ("step=\"ice\"", &st.answer_to_ice),
            ("step=\"dtls\"", &st.answer_to_dtls),
            ("step=\"first_audio\"", &st.answer_to_audio),
        ],
    );
    crate::ops::histogram_family(
        &mut out,
        "voice_edge_transceiver_timer_lag_seconds",
        "How late session timers fire (20 ms media pacing among them): the socket loops' lag.",
        &[("", &st.timer_lag)],
    );
    f(
        &mut out,
        "voice_edge_transceiver_dropped_unknown_total",
        "counter",
        "Datagrams for no known call.",
        &[(&[], st.dropped_unknown as f64)],
    );
    out
}
