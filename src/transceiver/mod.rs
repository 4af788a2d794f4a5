//! The transceiver: terminates ICE, DTLS, SRTP and SCTP for many calls on one UDP socket.
//!
//! Signaling asks it to answer an offer ([`TransceiverHandle::create_call`]); the session is
//! registered in the socket loop *before* the answer is returned, so the client's first STUN
//! check can never arrive ahead of the ufrag it names. Datagrams arrive either wrapped in the
//! relay link header (the normal path) or bare, from a client connecting directly.

pub mod call_id;
mod media;
mod peer;
mod session;
mod worker;

pub use media::VoiceTimings;
pub use peer::{AnswerError, opus as opus_codec};
pub use session::{SessionCounters, SessionState};

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rtc::peer_connection::certificate::{CertificateParams, RTCCertificate};
use serde::Serialize;

use crate::routing::RouteKeys;

#[derive(Clone)]
pub struct TransceiverConfig {
    pub cluster: u16,
    pub id: u16,
    /// Where the shared socket binds (the relay forwards here).
    pub bind: SocketAddr,
    /// The candidate put in answers; `None` advertises the socket itself (direct clients).
    pub advertise: Option<SocketAddr>,
    pub route_keys: RouteKeys,
    pub lifecycle: Lifecycle,
}

/// When a transceiver gives up on a call. Every ending releases all of the call's state.
#[derive(Debug, Clone, Copy)]
pub struct Lifecycle {
    /// No ICE + DTLS within this long after the answer: the client never arrived.
    pub setup_deadline: Duration,
    /// RFC 7675: a browser sends a consent check every ~5 s; none for this long means the
    /// client is gone (or no longer consents), so the call is closed.
    pub consent_timeout: Duration,
    /// No media or data from the client for this long ends the call even if consent holds.
    pub idle_timeout: Duration,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            setup_deadline: Duration::from_secs(30),
            consent_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// Why calls ended, counted per transceiver.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct EndCounters {
    pub hangup: u64,
    pub peer_closed: u64,
    pub setup_timeout: u64,
    pub consent_expired: u64,
    pub idle_timeout: u64,
    pub shutdown: u64,
}

/// The worker's bookkeeping sizes, so a test (or an operator) can see that ended calls leave
/// nothing behind.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct WorkerStats {
    pub sessions: usize,
    pub ufrag_index: usize,
    pub addr_index: usize,
    pub call_index: usize,
    pub timers: usize,
    pub dropped_unknown: u64,
    pub ended: EndCounters,
}

/// What a created call tells signaling.
#[derive(Debug, Clone, Serialize)]
pub struct CreatedCall {
    pub call_id: String,
    #[serde(skip)]
    pub answer_sdp: String,
    pub cluster: u16,
    pub transceiver: u16,
    pub candidate: SocketAddr,
}

/// A live call as the admin endpoint lists it.
#[derive(Debug, Clone, Serialize)]
pub struct CallInfo {
    pub call_id: String,
    pub cluster: u16,
    pub transceiver: u16,
    pub client: Option<SocketAddr>,
    pub via_relay: Option<SocketAddr>,
    pub state: SessionState,
    pub age_ms: u64,
    pub connect_ms: Option<u64>,
    pub counters: SessionCounters,
    pub voice: VoiceTimings,
}

pub(crate) enum Command {
    Create {
        offer_sdp: String,
        model: String,
        reply: tokio::sync::oneshot::Sender<Result<CreatedCall, AnswerError>>,
    },
    Hangup {
        call_id: String,
        reply: tokio::sync::oneshot::Sender<bool>,
    },
    List {
        reply: tokio::sync::oneshot::Sender<Vec<CallInfo>>,
    },
    Stats {
        reply: tokio::sync::oneshot::Sender<WorkerStats>,
    },
    /// Speech synthesized off the socket thread for a call's response.
    TtsReady {
        call_id: String,
        response_id: String,
        speech: crate::audio::tts::Speech,
    },
}

/// Cheap to clone; what signaling and the all-in-one process hold.
#[derive(Clone)]
pub struct TransceiverHandle {
    pub cluster: u16,
    pub id: u16,
    pub addr: SocketAddr,
    cmd: async_channel::Sender<Command>,
    live: Arc<AtomicUsize>,
    /// Calls placed here whose answer is not back yet; counted as load so that concurrent
    /// placements spread instead of all seeing the same idle transceiver.
    pending: Arc<AtomicUsize>,
    draining: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Answer(#[from] AnswerError),
    #[error("transceiver {0} is not running")]
    Unavailable(u16),
}

impl TransceiverHandle {
    /// Creates a call. Placement must have called [`TransceiverHandle::reserve`] first.
    pub async fn create_call(
        &self,
        offer_sdp: String,
        model: String,
    ) -> Result<CreatedCall, CallError> {
        struct Release<'a>(&'a AtomicUsize);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let _release = Release(&self.pending);
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.cmd
            .send(Command::Create {
                offer_sdp,
                model,
                reply,
            })
            .await
            .map_err(|_| CallError::Unavailable(self.id))?;
        Ok(rx.await.map_err(|_| CallError::Unavailable(self.id))??)
    }

    /// Ends a call; false when this transceiver does not know it.
    pub async fn hangup(&self, call_id: String) -> bool {
        let (reply, rx) = tokio::sync::oneshot::channel();
        if self
            .cmd
            .send(Command::Hangup { call_id, reply })
            .await
            .is_err()
        {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    pub async fn list_calls(&self) -> Vec<CallInfo> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        if self.cmd.send(Command::List { reply }).await.is_err() {
            return vec![];
        }
        rx.await.unwrap_or_default()
    }

    pub async fn stats(&self) -> WorkerStats {
        let (reply, rx) = tokio::sync::oneshot::channel();
        if self.cmd.send(Command::Stats { reply }).await.is_err() {
            return WorkerStats::default();
        }
        rx.await.unwrap_or_default()
    }

    /// Takes this transceiver out of placement; live calls continue until they end.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    pub fn live_calls(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Live calls plus calls being set up: what placement balances on.
    pub fn load(&self) -> usize {
        self.live.load(Ordering::Relaxed) + self.pending.load(Ordering::Relaxed)
    }

    /// Counts a call as placed here until its `create_call` returns.
    pub fn reserve(&self) {
        self.pending.fetch_add(1, Ordering::Relaxed);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.cmd.close();
    }
}

/// Binds the shared socket and starts the worker thread.
pub fn spawn(cfg: TransceiverConfig) -> anyhow::Result<(TransceiverHandle, JoinHandle<()>)> {
    let socket = bind_shared_socket(cfg.bind)?;
    let addr = socket.local_addr()?;
    let certificate = generate_certificate()?;
    let (cmd_tx, cmd_rx) = async_channel::bounded(1024);
    let live = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let handle = TransceiverHandle {
        cluster: cfg.cluster,
        id: cfg.id,
        addr,
        cmd: cmd_tx,
        live: live.clone(),
        pending: Arc::new(AtomicUsize::new(0)),
        draining: Arc::new(AtomicBool::new(false)),
        stop: stop.clone(),
    };
    let advertise = cfg.advertise.unwrap_or(addr);
    let w = worker::Worker::new(cfg, advertise, certificate, live, stop, handle.cmd.clone());
    let thread = std::thread::Builder::new()
        .name(format!("transceiver-{}", handle.id))
        .spawn(move || w.run(socket, cmd_rx))?;
    Ok((handle, thread))
}

/// The one socket all of a transceiver's calls share. Large kernel buffers: at a few hundred
/// calls the default 208 KB receive buffer overflows between loop turns (seen with loadgen).
fn bind_shared_socket(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    let _ = s.set_recv_buffer_size(4 << 20);
    let _ = s.set_send_buffer_size(4 << 20);
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// One DTLS certificate per transceiver, shared by its calls: generating a key per call would
/// cost setup time on every call and buy nothing, since the fingerprint travels in each answer.
fn generate_certificate() -> anyhow::Result<RTCCertificate> {
    let provider = rtc::crypto::default_provider()?;
    Ok(RTCCertificate::generate(
        provider.crypto(),
        rtc::crypto::SignatureScheme::EcdsaP256Sha256,
        CertificateParams::new(vec!["voice-edge".to_owned()])?,
    )?)
}
