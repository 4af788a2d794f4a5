//! The transceiver: terminates ICE, DTLS, SRTP and SCTP for many calls on one UDP socket.
//!
//! Signaling asks it to answer an offer ([`TransceiverHandle::create_call`]); the session is
//! registered in the socket loop *before* the answer is returned, so the client's first STUN
//! check can never arrive ahead of the ufrag it names. Datagrams arrive either wrapped in the
//! relay link header (the normal path) or bare, from a client connecting directly.

pub mod admission;
pub mod call_command;
pub mod call_id;
pub mod drain;
pub mod endpoint;
pub mod faults;
mod mailbox;
mod peer;
mod session;
pub mod transmit;
mod worker;

pub use crate::call::engine::CallSetup;
pub use crate::call::media::VoiceTimings;
pub use call_command::{CallCommand, CallReply};
pub use call_id::CallId;
pub use peer::{AnswerError, add_host_candidate, codec_parameters, opus as opus_codec};
pub use session::{ClientReport, SessionCounters, SessionState};

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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
    /// What answers name as their one candidate.
    pub candidate: AnswerCandidate,
    pub route_keys: RouteKeys,
    pub lifecycle: Lifecycle,
    /// Socket loops (threads) in this transceiver, each with its own socket on `bind`'s port
    /// plus its index, and its own calls.
    pub workers: u8,
    /// How many calls each worker takes (see [`admission`]).
    pub capacity: admission::Capacity,
    /// Where relay link datagrams may come from (see [`crate::routing::link_sources`]).
    pub link_sources: crate::routing::link_sources::LinkSources,
    /// Where calls for a model that is not a stub go (`--upstream`); `None` refuses them.
    pub upstream: Option<crate::upstream::UpstreamConfig>,
}

/// The one candidate in this transceiver's answers: always an address as clients reach it,
/// never a bind address (see [`crate::media_address`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerCandidate {
    /// The relay (or global relay) in front of this transceiver: the normal path.
    Relay(SocketAddr),
    /// Each worker's own socket, at this IP and the worker's port: clients connect directly
    /// (the baseline the relay's cost is measured against).
    OwnSocket(IpAddr),
}

/// When a transceiver gives up on a call. Every ending releases all of the call's state.
#[derive(Debug, Clone, Copy)]
pub struct Lifecycle {
    /// No ICE + DTLS within this long after the answer: the client never arrived.
    pub setup_deadline: Duration,
    /// RFC 7675: a browser sends a consent check every ~5 s; none for this long means the
    /// client is gone (or no longer consents), so the call is closed.
    pub consent_timeout: Duration,
    /// No audio and no `oai-events` message from the client for this long ends the call, even
    /// while consent holds (a tab left open with the microphone track stopped, say).
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
    /// The call's processing panicked: it ended alone, its worker and the other calls went on.
    pub panicked: u64,
    /// The session hit its limit (a scripted `session_expired`, or the fault: see [`faults`]).
    pub session_expired: u64,
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
    /// Link datagrams from a source outside `--link-sources`, dropped unread.
    pub dropped_link_source: u64,
    pub ended: EndCounters,
    /// Answer sent → ICE pair selected, and → DTLS connected, per connected call.
    pub answer_to_ice: crate::ops::Histogram,
    pub answer_to_dtls: crate::ops::Histogram,
    /// Answer sent → first audio packet sent to the client.
    pub answer_to_audio: crate::ops::Histogram,
    /// How late session timers fired.
    pub timer_lag: crate::ops::Histogram,
}

impl WorkerStats {
    /// Two workers' (or transceivers') bookkeeping added up.
    pub fn merge(self, o: &WorkerStats) -> WorkerStats {
        let (a, b) = (self.ended, o.ended);
        WorkerStats {
            sessions: self.sessions + o.sessions,
            ufrag_index: self.ufrag_index + o.ufrag_index,
            addr_index: self.addr_index + o.addr_index,
            call_index: self.call_index + o.call_index,
            timers: self.timers + o.timers,
            dropped_unknown: self.dropped_unknown + o.dropped_unknown,
            dropped_link_source: self.dropped_link_source + o.dropped_link_source,
            answer_to_ice: self.answer_to_ice.merge(&o.answer_to_ice),
            answer_to_dtls: self.answer_to_dtls.merge(&o.answer_to_dtls),
            timer_lag: self.timer_lag.merge(&o.timer_lag),
            answer_to_audio: self.answer_to_audio.merge(&o.answer_to_audio),
            ended: EndCounters {
                hangup: a.hangup + b.hangup,
                peer_closed: a.peer_closed + b.peer_closed,
                setup_timeout: a.setup_timeout + b.setup_timeout,
                consent_expired: a.consent_expired + b.consent_expired,
                idle_timeout: a.idle_timeout + b.idle_timeout,
                shutdown: a.shutdown + b.shutdown,
                panicked: a.panicked + b.panicked,
                session_expired: a.session_expired + b.session_expired,
            },
        }
    }
}

/// What a created call tells signaling.
#[derive(Debug, Clone, Serialize)]
pub struct CreatedCall {
    pub call_id: String,
    #[serde(skip)]
    pub answer_sdp: String,
    pub cluster: u16,
    pub transceiver: u16,
    pub worker: u8,
    pub candidate: SocketAddr,
}

/// A live call as the admin endpoint lists it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CallInfo {
    pub call_id: String,
    pub cluster: u16,
    pub transceiver: u16,
    pub worker: u8,
    pub client: Option<SocketAddr>,
    pub via_relay: Option<SocketAddr>,
    pub state: SessionState,
    pub age_ms: u64,
    /// Answer → ICE pair selected.
    pub ice_ms: Option<u64>,
    /// Answer → DTLS connected.
    pub connect_ms: Option<u64>,
    pub counters: SessionCounters,
    pub voice: VoiceTimings,
    /// The client's RTCP view of our audio (loss, jitter); none before its first report.
    #[serde(default)]
    pub client_report: Option<ClientReport>,
}

/// What a worker's mailbox carries: new calls, per-call operations ([`CallCommand`]), the
/// results of jobs run off its thread, sideband traffic and bookkeeping requests.
pub(crate) enum WorkerMessage {
    Create {
        offer_sdp: String,
        /// Boxed: the setup carries the call's whole typed config, and every other message
        /// (one per media job) would otherwise be as large as it.
        setup: Box<CallSetup>,
        reply: tokio::sync::oneshot::Sender<Result<CreatedCall, AnswerError>>,
    },
    /// A per-call operation (see [`call_command`]); `None` when the call is not here.
    Call {
        call_id: String,
        command: CallCommand,
        reply: tokio::sync::oneshot::Sender<Option<Result<CallReply, CallError>>>,
    },
    List {
        reply: tokio::sync::oneshot::Sender<Vec<CallInfo>>,
    },
    Stats {
        reply: tokio::sync::oneshot::Sender<WorkerStats>,
    },
    /// A job run off the socket thread for a call's response (see [`media::Job`]).
    JobDone {
        call_id: String,
        done: crate::call::media::JobDone,
    },
    /// What a bridged call's upstream link reported (see [`crate::upstream::link`]).
    Upstream {
        call_id: String,
        event: crate::upstream::UpstreamEvent,
    },
    /// Attaches a sideband's outgoing queue to a call.
    AttachSideband {
        call_id: String,
        out: crate::call::event_stream::FrameSender,
        reply: tokio::sync::oneshot::Sender<crate::call::sideband::Attach>,
    },
    /// A client event from a sideband.
    SidebandText {
        call_id: String,
        text: crate::call::event_stream::Frame,
    },
    DetachSideband {
        call_id: String,
        id: crate::call::sideband::SidebandId,
    },
}

/// One worker thread as the handle sees it: where to send its commands and how busy it is.
#[derive(Clone)]
struct WorkerLink {
    mailbox: mailbox::Mailbox,
    load: admission::SharedLoad,
}

/// Cheap to clone; what signaling and the all-in-one process hold.
#[derive(Clone)]
pub struct TransceiverHandle {
    pub cluster: u16,
    pub id: u16,
    /// Worker 0's socket; worker `w` listens on the next port up, `port + w`, which is how the
    /// relay addresses it from the worker byte in the route.
    pub addr: SocketAddr,
    workers: Arc<[WorkerLink]>,
    capacity: admission::Capacity,
    /// Offers refused because no worker admitted them.
    refused: Arc<AtomicU64>,
    /// Calls placed on this transceiver whose worker is not chosen yet (see [`Self::reserve`]).
    pending: Arc<AtomicUsize>,
    draining: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    /// Ended calls' event logs, which the workers put here and signaling reads.
    ended_logs: crate::call::event_log::SharedEndedLogs,
    recordings: crate::call::recording::SharedRecordings,
    /// WebSocket sessions running here (see [`websocket`]).
    ws_sessions: Arc<AtomicUsize>,
    /// Bytes of client messages queued for this transceiver's sessions and sidebands.
    ws_bytes: Arc<crate::call::event_stream::QueueBytes>,
    /// Where bridged WebSocket sessions go (see [`crate::upstream`]).
    upstream: Option<crate::upstream::UpstreamConfig>,
}

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Answer(#[from] AnswerError),
    #[error("transceiver {0} is not running")]
    Unavailable(u16),
    /// Every worker is at its capacity or saturated: try again shortly (see [`admission`]).
    #[error("transceiver {0} is at capacity: {1}")]
    Full(u16, admission::Refusal),
    /// The control API failed on the way (network, a bad reply): the split roles only.
    #[error("control API: {0}")]
    Control(String),
    /// A fault the call cannot take in its state (a NAT rebinding before the client arrived).
    #[error("{0}")]
    FaultRefused(String),
    /// The call cannot take this now (a sideband beyond the call's limit).
    #[error("{0}")]
    Refused(String),
}

/// Decrements a pending count however the call setup ends.
struct Release<'a>(&'a AtomicUsize);
impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Sends a worker a command carrying a reply channel and waits for the reply; `None` when the
/// worker has stopped.
async fn ask<T>(
    w: &WorkerLink,
    command: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> WorkerMessage,
) -> Option<T> {
    let (reply, rx) = tokio::sync::oneshot::channel();
    w.mailbox.send(command(reply)).await.ok()?;
    rx.await.ok()
}

impl TransceiverHandle {
    /// Creates a call on the least-loaded worker that admits one (see [`admission`]), or
    /// refuses with [`CallError::Full`]. Placement must have called
    /// [`TransceiverHandle::reserve`] first.
    pub async fn create_call(
        &self,
        offer_sdp: String,
        setup: CallSetup,
    ) -> Result<CreatedCall, CallError> {
        let _release = Release(&self.pending);
        let mut refusal = None;
        let w = self
            .workers
            .iter()
            .filter(|w| match w.load.admits(&self.capacity) {
                Ok(()) => true,
                Err(r) => {
                    refusal.get_or_insert(r);
                    false
                }
            })
            .min_by_key(|w| w.load.load());
        let Some(w) = w else {
            self.refused.fetch_add(1, Ordering::Relaxed);
            let why = refusal.unwrap_or(admission::Refusal::Full);
            return Err(CallError::Full(self.id, why));
        };
        w.load.pending.fetch_add(1, Ordering::Relaxed);
        let _release_worker = Release(&w.load.pending);
        let created = ask(w, |reply| WorkerMessage::Create {
            offer_sdp,
            setup: Box::new(setup),
            reply,
        })
        .await
        .ok_or(CallError::Unavailable(self.id))?;
        Ok(created?)
    }

    /// Whether some worker would take a call now: placement skips a transceiver that would
    /// only refuse.
    pub fn admits_calls(&self) -> bool {
        self.workers
            .iter()
            .any(|w| w.load.admits(&self.capacity).is_ok())
    }

    /// Offers refused, and measurement windows spent saturated, over all workers.
    pub fn admission_counts(&self) -> (u64, u64) {
        let saturated = self
            .workers
            .iter()
            .map(|w| w.load.saturated_windows.load(Ordering::Relaxed))
            .sum();
        (self.refused.load(Ordering::Relaxed), saturated)
    }

    /// The worker that owns `call_id`, from the worker byte in the id.
    fn owner(&self, call_id: &CallId) -> Option<&WorkerLink> {
        let place = call_id.place();
        if place.cluster != self.cluster || place.transceiver != self.id {
            return None;
        }
        self.workers.get(place.worker as usize)
    }

    /// Runs a per-call operation (see [`call_command`]) on the worker that owns the call:
    /// `Ok(None)` when the call is not here. Ended calls' event logs and recordings are kept
    /// off the workers, so those two are answered from the shared stores once the call is gone.
    pub async fn call(
        &self,
        call_id: &CallId,
        command: CallCommand,
    ) -> Result<Option<CallReply>, CallError> {
        let Some(w) = self.owner(call_id) else {
            return Ok(None);
        };
        let call_id = call_id.as_str();
        if command == CallCommand::Recording {
            let wav = self.recordings.get(std::time::Instant::now(), call_id);
            return Ok(wav.map(|wav| CallReply::Recording { wav: wav.to_vec() }));
        }
        let ended_since = match command {
            CallCommand::Events { since } => Some(since),
            _ => None,
        };
        // Asked first: a call that ends meanwhile is in the store before its worker answers.
        // A stopped worker holds no calls, so its silence is "not here" too.
        let live = ask(w, |reply| WorkerMessage::Call {
            call_id: call_id.to_owned(),
            command,
            reply,
        })
        .await
        .flatten();
        match live {
            Some(reply) => reply.map(Some),
            None => Ok(ended_since
                .and_then(|since| {
                    let now = std::time::Instant::now();
                    crate::call::event_log::read_ended(&self.ended_logs, now, call_id, since)
                })
                .map(|jsonl| CallReply::Events { jsonl })),
        }
    }

    /// Starts a Realtime session over a WebSocket here (see [`websocket`]). Placement must
    /// have called [`TransceiverHandle::reserve`] first, as for a call.
    pub fn open_session(
        &self,
        request: crate::websocket::SessionRequest,
    ) -> Result<crate::websocket::EventStream, CallError> {
        let _release = Release(&self.pending);
        if self.is_draining() {
            return Err(CallError::Unavailable(self.id));
        }
        Ok(crate::websocket::spawn(
            request,
            self.ws_sessions.clone(),
            self.recordings.clone(),
            self.upstream.clone(),
            self.ws_bytes.clone(),
            Duration::from_secs(self.capacity.ws_idle_timeout_secs),
        ))
    }

    /// WebSocket sessions running here.
    pub fn ws_sessions(&self) -> usize {
        self.ws_sessions.load(Ordering::Relaxed)
    }

    /// Attaches a sideband to a live call (see [`sideband`]): `Ok(None)` when the call is not
    /// here. Client frames go to the call's worker in order; dropping the stream's sender
    /// detaches it.
    pub async fn attach_sideband(
        &self,
        call_id: &CallId,
    ) -> Result<Option<crate::websocket::EventStream>, CallError> {
        let Some(w) = self.owner(call_id) else {
            return Ok(None);
        };
        let call_id = call_id.to_string();
        let (out, from_session) = crate::call::event_stream::frames();
        let attach = ask(w, |reply| WorkerMessage::AttachSideband {
            call_id: call_id.clone(),
            out,
            reply,
        })
        .await
        .ok_or(CallError::Unavailable(self.id))?;
        let id = match attach {
            crate::call::sideband::Attach::Attached(id) => id,
            crate::call::sideband::Attach::NoCall => return Ok(None),
            crate::call::sideband::Attach::Full => {
                return Err(CallError::Refused(format!(
                    "call {call_id} has {} sidebands attached already",
                    crate::call::sideband::MAX_SIDEBANDS
                )));
            }
        };
        // A sideband's events wait in the worker's mailbox holding their room in the queue.
        let (to_session, mut from_client) = crate::call::event_stream::frames();
        let to_session = to_session.counted_in(self.ws_bytes.clone());
        let mailbox = w.mailbox.clone();
        tokio::spawn(async move {
            while let Some(text) = from_client.recv().await {
                let call_id = call_id.clone();
                if mailbox
                    .send(WorkerMessage::SidebandText { call_id, text })
                    .await
                    .is_err()
                {
                    return;
                }
            }
            let _ = mailbox
                .send(WorkerMessage::DetachSideband { call_id, id })
                .await;
        });
        Ok(Some(crate::websocket::EventStream {
            to_session,
            from_session,
        }))
    }

    /// Every worker's live calls.
    pub async fn list_calls(&self) -> Vec<CallInfo> {
        let mut all = vec![];
        for w in self.workers.iter() {
            all.extend(
                ask(w, |reply| WorkerMessage::List { reply })
                    .await
                    .unwrap_or_default(),
            );
        }
        all
    }

    /// Each worker's bookkeeping, in worker order.
    pub async fn worker_stats(&self) -> Vec<WorkerStats> {
        let mut all = vec![];
        for w in self.workers.iter() {
            all.push(
                ask(w, |reply| WorkerMessage::Stats { reply })
                    .await
                    .unwrap_or_default(),
            );
        }
        all
    }

    /// All workers' bookkeeping summed.
    pub async fn stats(&self) -> WorkerStats {
        self.worker_stats()
            .await
            .into_iter()
            .fold(WorkerStats::default(), |a, b| a.merge(&b))
    }

    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Takes this transceiver out of placement; live calls continue until they end.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Back into placement after [`Self::drain`] (an operator's undo; a stopping process never
    /// undrains).
    pub fn undrain(&self) {
        self.draining.store(false, Ordering::Relaxed);
    }

    pub fn live_calls(&self) -> usize {
        self.workers
            .iter()
            .map(|w| w.load.calls.load(Ordering::Relaxed))
            .sum()
    }

    /// Live calls plus calls being set up: what placement balances on.
    /// Calls and WebSocket sessions, live or being set up: what placement balances.
    pub fn load(&self) -> usize {
        self.live_calls() + self.pending.load(Ordering::Relaxed) + self.ws_sessions()
    }

    /// Counts a call as placed here until its `create_call` returns.
    pub fn reserve(&self) {
        self.pending.fetch_add(1, Ordering::Relaxed);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// Ends every call (clients get DTLS close_notify) and stops the workers.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        for w in self.workers.iter() {
            w.mailbox.close();
        }
    }
}

/// Binds one socket per worker on consecutive ports and starts the worker threads.
pub fn spawn(cfg: TransceiverConfig) -> anyhow::Result<(TransceiverHandle, Vec<JoinHandle<()>>)> {
    spawn_in_process(cfg, None)
}

/// [`spawn`], for a transceiver that shares its process with the relay in front of it: each
/// worker's socket address is also served in memory through `local` (see
/// [`crate::routing::local_link`]), and replies to an in-process relay go the same way.
pub fn spawn_in_process(
    cfg: TransceiverConfig,
    local: Option<Arc<crate::routing::local_link::LocalLinks>>,
) -> anyhow::Result<(TransceiverHandle, Vec<JoinHandle<()>>)> {
    anyhow::ensure!(cfg.workers >= 1, "a transceiver needs at least one worker");
    let sockets = bind_worker_sockets(cfg.bind, cfg.workers)?;
    let addr = sockets[0].local_addr()?;
    let certificate = generate_certificate()?;
    let stop = Arc::new(AtomicBool::new(false));
    let ended_logs = crate::call::event_log::EndedLogs::shared();
    let recordings =
        crate::call::recording::Recordings::shared(cfg.capacity.recording_budget_mb << 20);
    let mut links = vec![];
    let mut threads = vec![];
    for (index, socket) in sockets.into_iter().enumerate() {
        let sleeper = crate::wakeup::Sleeper::new()?.paced(crate::wakeup::SERVER_LOOP_PACE);
        let (mailbox, inbox) = mailbox::mailbox(sleeper.waker());
        let load = admission::SharedLoad::default();
        let own = socket.local_addr()?;
        let local = match &local {
            Some(links) => {
                let (tx, rx) = crate::routing::local_link::local_link(sleeper.waker());
                links.register(own, vec![tx]);
                Some((links.clone(), rx))
            }
            None => None,
        };
        let w = worker::Worker::new(worker::WorkerParts {
            cfg: cfg.clone(),
            index: index as u8,
            own,
            local,
            advertise: match cfg.candidate {
                AnswerCandidate::Relay(addr) => addr,
                AnswerCandidate::OwnSocket(ip) => SocketAddr::new(ip, own.port()),
            },
            certificate: certificate.clone(),
            load: load.clone(),
            stop: stop.clone(),
            mailbox: mailbox.clone(),
            sleeper,
            ended_logs: ended_logs.clone(),
            recordings: recordings.clone(),
        });
        threads.push(
            std::thread::Builder::new()
                .name(format!("transceiver-{}.{index}", cfg.id))
                .spawn(move || w.run(socket, inbox))?,
        );
        links.push(WorkerLink { mailbox, load });
    }
    let handle = TransceiverHandle {
        cluster: cfg.cluster,
        id: cfg.id,
        addr,
        workers: links.into(),
        capacity: cfg.capacity,
        refused: Arc::default(),
        pending: Arc::new(AtomicUsize::new(0)),
        draining: Arc::new(AtomicBool::new(false)),
        stop,
        ended_logs,
        recordings,
        ws_sessions: Arc::default(),
        ws_bytes: crate::call::event_stream::QueueBytes::new(cfg.capacity.ws_queue_budget_mb << 20),
        upstream: cfg.upstream.clone(),
    };
    Ok((handle, threads))
}

/// One socket per worker on consecutive ports from `bind`. With port 0 the first port is the
/// kernel's choice and the run is retried when a port above it is taken.
fn bind_worker_sockets(bind: SocketAddr, workers: u8) -> anyhow::Result<Vec<UdpSocket>> {
    let n = workers as u16;
    let attempts = if bind.port() == 0 { 32 } else { 1 };
    let mut last_err = None;
    for _ in 0..attempts {
        let first = bind_shared_socket(bind)?;
        let base = first.local_addr()?;
        let mut sockets = vec![first];
        for w in 1..n {
            let Some(port) = base.port().checked_add(w) else {
                last_err = Some(anyhow::anyhow!("no port {} + {w}", base.port()));
                break;
            };
            match bind_shared_socket(SocketAddr::new(base.ip(), port)) {
                Ok(s) => sockets.push(s),
                Err(e) => {
                    last_err = Some(anyhow::anyhow!(
                        "worker {w} needs udp port {port} (base {base} + worker): {e}"
                    ));
                    break;
                }
            }
        }
        if sockets.len() == n as usize {
            return Ok(sockets);
        }
    }
    Err(last_err.unwrap_or_else(|| anyhow::anyhow!("could not bind {workers} worker sockets")))
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
pub(crate) fn generate_certificate() -> anyhow::Result<RTCCertificate> {
    let provider = rtc::crypto::default_provider()?;
    Ok(RTCCertificate::generate(
        provider.crypto(),
        rtc::crypto::SignatureScheme::EcdsaP256Sha256,
        CertificateParams::new(vec!["voice-edge".to_owned()])?,
    )?)
}
