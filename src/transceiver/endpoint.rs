//! The transceiver's sans-I/O core, one per worker: its calls, their indexes and timer heap, the
//! lifecycle rules, NAT-move and relay-link policy. It owns no socket and reads no clock, so
//! every rule is tested in virtual time (`endpoint/tests.rs`), as str0m's `Rtc` and quinn-proto's
//! `Endpoint` are.
//!
//! # Drive contract
//!
//! - Feed every datagram the socket receives to [`Endpoint::handle_datagram`], with the time it
//!   arrived and its source address.
//! - Call [`Endpoint::handle_timeout`] when [`Endpoint::poll_timeout`] is due (it may be called earlier;
//!   it does only what is due).
//! - After any input, drain [`Endpoint::poll_transmit`] (datagrams to send, in order) and
//!   [`Endpoint::poll_job`] (slow work such as speech synthesis, run off the loop; hand the
//!   result back with [`Endpoint::job_done`]).
//! - `now` must never go backwards.
//!
//! Demultiplexing follows ICE itself: a STUN binding request names its session by the server
//! ufrag in USERNAME (which is how a new client address, or a NAT rebinding, is learned);
//! everything else is matched by the client's address. Timers live in a min-heap keyed by each
//! session's `poll_timeout`, with stale entries skipped on pop, so a turn costs O(log n)
//! however many calls are idle.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use rtc::peer_connection::certificate::RTCCertificate;
use rtc::sansio::Protocol;
use rtc::shared::{TaggedBytesMut, TransportContext, TransportProtocol};

use super::peer::{self, PeerParams};
use super::session::{NewSession, PendingMove, Session, SessionState};
use super::transmit::Transmit;
use super::{
    CallCommand, CallError, CallInfo, CallReply, CreatedCall, EndCounters, TransceiverConfig,
    WorkerStats,
};
use crate::call::event_log::{self, EndedLogs, SharedEndedLogs};
use crate::call::media::{Job, JobDone};
use crate::routing::link::LinkHeader;
use crate::routing::stun::{PacketKind, classify, peek_binding_username};
use crate::routing::ufrag;
use crate::upstream::{UpstreamEvent, UpstreamLink};

/// Lifecycle deadlines are checked this often: their O(calls) scan is not paid per datagram.
pub const HOUSEKEEPING: Duration = Duration::from_millis(500);

/// A call's slot in this endpoint: never reused, so a layer that keeps per-call state (the
/// [`super::faults::FaultLayer`]) can key it without holding the call id.
pub type CallKey = u64;

/// Addresses a call accepts datagrams from besides its current one (a NAT rebinding under way,
/// the address it just left).
const MAX_ALIASES: usize = 4;

/// Slow work a call needs done off the socket loop (espeak-ng is a subprocess).
pub struct CallJob {
    pub call_id: String,
    pub job: Job,
}

/// An upstream WebSocket for the worker to open: `url` has the call's model, `key` is the
/// server's (never the caller's).
pub struct UpstreamOpen {
    pub call_id: String,
    pub url: String,
    pub key: Option<String>,
}

/// Why a session is being removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    Hangup,
    PeerClosed,
    SetupTimeout,
    ConsentExpired,
    IdleTimeout,
    Shutdown,
    /// Its processing panicked (see [`Endpoint::isolate`]).
    Panicked,
    /// It hit its maximum duration (a scripted `session_expired`, or the fault).
    SessionExpired,
}

impl EndReason {
    /// The Live `session.closed` reason for a call that ends this way; `None` when the session
    /// has said it already (expiry) or cannot be trusted to (a panic).
    fn live_reason(self) -> Option<&'static str> {
        match self {
            EndReason::PeerClosed => Some("remote_hangup"),
            EndReason::Hangup => Some("close_requested"),
            EndReason::SetupTimeout
            | EndReason::ConsentExpired
            | EndReason::IdleTimeout
            | EndReason::Shutdown => Some("connection_lost"),
            EndReason::Panicked | EndReason::SessionExpired => None,
        }
    }
}

pub struct Endpoint {
    cfg: TransceiverConfig,
    index: u8,
    /// The candidate put in answers: the relay, or this worker's own socket.
    advertise: SocketAddr,
    certificate: RTCCertificate,
    /// Boxed: a session is several KB, so the map stays small and rehashing moves pointers.
    sessions: HashMap<CallKey, Box<Session>>,
    by_ufrag: HashMap<String, CallKey>,
    by_addr: HashMap<SocketAddr, CallKey>,
    by_call: HashMap<String, CallKey>,
    timers: BinaryHeap<Reverse<(Instant, CallKey)>>,
    next_key: CallKey,
    transmits: VecDeque<Transmit>,
    jobs: VecDeque<CallJob>,
    /// Bridged calls whose upstream link the worker is to open.
    upstream_opens: VecDeque<UpstreamOpen>,
    dropped_unknown: u64,
    dropped_link_source: u64,
    /// Sessions not connected yet (see [`super::admission`]).
    connecting: usize,
    ended: EndCounters,
    answer_to_ice: crate::ops::Histogram,
    answer_to_dtls: crate::ops::Histogram,
    answer_to_audio: crate::ops::Histogram,
    /// How late session timers fire (media pacing is one): the loop's health under load.
    timer_lag: crate::ops::Histogram,
    /// The latest timer since [`Endpoint::take_max_timer_lag`] last asked.
    max_timer_lag: Duration,
    last_housekeeping: Instant,
    /// Where ended calls' event logs go: the transceiver's, shared by its workers.
    ended_logs: SharedEndedLogs,
    recordings: crate::call::recording::SharedRecordings,
}

impl Endpoint {
    pub fn new(
        now: Instant,
        cfg: TransceiverConfig,
        index: u8,
        advertise: SocketAddr,
        certificate: RTCCertificate,
    ) -> Self {
        Endpoint {
            cfg,
            index,
            advertise,
            certificate,
            sessions: HashMap::new(),
            by_ufrag: HashMap::new(),
            by_addr: HashMap::new(),
            by_call: HashMap::new(),
            timers: BinaryHeap::new(),
            next_key: 1,
            transmits: VecDeque::new(),
            jobs: VecDeque::new(),
            upstream_opens: VecDeque::new(),
            dropped_unknown: 0,
            dropped_link_source: 0,
            connecting: 0,
            ended: Default::default(),
            answer_to_ice: Default::default(),
            answer_to_dtls: Default::default(),
            answer_to_audio: Default::default(),
            timer_lag: Default::default(),
            max_timer_lag: Duration::ZERO,
            last_housekeeping: now,
            ended_logs: EndedLogs::shared(),
            recordings: crate::call::recording::Recordings::shared(
                super::admission::Capacity::default().recording_budget_mb << 20,
            ),
        }
    }

    /// Puts ended calls' event logs in `logs` (the transceiver's, which its handle reads)
    /// instead of this endpoint's own.
    pub fn share_ended_logs(&mut self, logs: SharedEndedLogs) {
        self.ended_logs = logs;
    }

    /// Where ended sessions' recordings go (see [`crate::call::recording`]).
    pub fn share_recordings(&mut self, recordings: crate::call::recording::SharedRecordings) {
        self.recordings = recordings;
    }

    /// A live call's event log from `since` as JSON Lines (see [`crate::call::event_log`]); `None`
    /// when the call is not live here (an ended call's log is in the shared store).
    pub fn call_events(&self, call_id: &str, since: u64) -> Option<String> {
        let key = self.by_call.get(call_id)?;
        Some(self.sessions.get(key)?.event_log()?.render(since))
    }

    /// Live calls.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// How late the latest session timer fired since the last call: the loop's lag, for
    /// [`super::admission`].
    pub fn take_max_timer_lag(&mut self) -> Duration {
        std::mem::take(&mut self.max_timer_lag)
    }

    /// Calls answered but not connected yet: what a flood of offers piles up.
    pub fn connecting(&self) -> usize {
        self.connecting
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    pub fn poll_job(&mut self) -> Option<CallJob> {
        self.jobs.pop_front()
    }

    /// A bridged call's upstream to connect, queued when the call was created so the
    /// WebSocket opens while ICE and DTLS run; hand the link back with
    /// [`Endpoint::attach_upstream`].
    pub fn poll_upstream_open(&mut self) -> Option<UpstreamOpen> {
        self.upstream_opens.pop_front()
    }

    pub fn attach_upstream(&mut self, now: Instant, call_id: &str, link: UpstreamLink) {
        self.input_to(now, call_id, |s| s.attach_upstream(now, link));
    }

    /// What a bridged call's upstream link reported.
    pub fn on_upstream(&mut self, now: Instant, call_id: &str, event: UpstreamEvent) {
        self.input_to(now, call_id, |s| s.on_upstream(now, event));
    }

    /// When [`Endpoint::handle_timeout`] is next due: the earliest session timer, or the next
    /// lifecycle check.
    pub fn poll_timeout(&self) -> Instant {
        let housekeeping = self.last_housekeeping + HOUSEKEEPING;
        self.timers
            .peek()
            .map(|Reverse((t, _))| *t)
            .map_or(housekeeping, |t| t.min(housekeeping))
    }

    /// Fires every session timer that is due, then the lifecycle checks if they are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.fire_timers(now);
        self.housekeeping(now);
    }

    /// Runs a per-call operation: the one place a [`CallCommand`] meets the method that does
    /// it. `None` when the call is not here. Recordings are read from the shared store, never
    /// from an endpoint (the handle answers them); faults are the fault layer's.
    pub fn command(
        &mut self,
        now: Instant,
        call_id: &str,
        command: CallCommand,
    ) -> Option<Result<CallReply, CallError>> {
        Some(match command {
            CallCommand::Hangup => self.hangup(now, call_id).then_some(Ok(CallReply::Ended))?,
            CallCommand::Renegotiate { offer_sdp } => self
                .renegotiate(now, call_id, offer_sdp)?
                .map(|answer_sdp| CallReply::Answer { answer_sdp })
                .map_err(CallError::from),
            CallCommand::Events { since } => Ok(CallReply::Events {
                jsonl: self.call_events(call_id, since)?,
            }),
            // Answered around the endpoint: faults by the layer in front of it
            // (see [`super::faults::FaultLayer::command`]), recordings by the handle.
            CallCommand::Fault { .. } | CallCommand::Recording => return None,
        })
    }

    /// Ends a call (the client is told: DTLS close_notify); false when it is not here.
    pub fn hangup(&mut self, now: Instant, call_id: &str) -> bool {
        let key = self.by_call.get(call_id).copied();
        if let Some(k) = key {
            self.end_session(now, k, EndReason::Hangup);
        }
        key.is_some()
    }

    /// A new offer on a live call (ICE restart); `None` when the call is not here.
    pub fn renegotiate(
        &mut self,
        now: Instant,
        call_id: &str,
        offer_sdp: String,
    ) -> Option<Result<String, peer::AnswerError>> {
        let r = self.input_to(now, call_id, |s| peer::reanswer(&mut s.pc, now, offer_sdp));
        if let Some(Ok(_)) = &r {
            log::info!("{call_id}: renegotiated (new offer on a live call)");
        }
        r
    }

    /// Ends a call as if it reached its maximum duration: the Realtime `error` event now, the
    /// close `grace` later. `None` when the call is not here.
    pub fn expire(&mut self, now: Instant, call_id: &str, grace: Duration) -> Option<()> {
        self.by_call.get(call_id)?;
        log::info!("{call_id}: session expired, closing in {grace:?}");
        self.input_to(now, call_id, |s| s.expire(now, grace));
        Some(())
    }

    /// A live call's slot, for a layer that keeps state per call.
    pub fn call_key(&self, call_id: &str) -> Option<CallKey> {
        self.by_call.get(call_id).copied()
    }

    /// Whether the call in `key` is still here.
    pub fn is_live(&self, key: CallKey) -> bool {
        self.sessions.contains_key(&key)
    }

    /// The address a call's replies go to, once it has one.
    pub fn client_of(&self, key: CallKey) -> Option<SocketAddr> {
        self.sessions.get(&key)?.client
    }

    /// Whether datagrams from `addr` already belong to a call here.
    pub fn answers_to(&self, addr: SocketAddr) -> bool {
        self.by_addr.contains_key(&addr)
    }

    /// Attaches a sideband to a call (see [`crate::call::sideband`]).
    pub fn attach_sideband(
        &mut self,
        call_id: &str,
        out: crate::call::event_stream::FrameSender,
    ) -> crate::call::sideband::Attach {
        use crate::call::sideband::Attach;
        let Some(s) = self
            .by_call
            .get(call_id)
            .and_then(|k| self.sessions.get_mut(k))
        else {
            return Attach::NoCall;
        };
        match s.attach_sideband(out) {
            Some(id) => Attach::Attached(id),
            None => Attach::Full,
        }
    }

    pub fn detach_sideband(&mut self, call_id: &str, id: crate::call::sideband::SidebandId) {
        if let Some(s) = self
            .by_call
            .get(call_id)
            .and_then(|k| self.sessions.get_mut(k))
        {
            s.detach_sideband(id);
        }
    }

    /// A client event a sideband sent to a call; dropped when the call has ended.
    pub fn sideband_text(&mut self, now: Instant, call_id: &str, text: &str) {
        self.input_to(now, call_id, |s| s.on_sideband_text(now, text));
    }

    /// A job's result for a call's response (see [`Endpoint::poll_job`]).
    pub fn job_done(&mut self, now: Instant, call_id: &str, done: JobDone) {
        self.input_to(now, call_id, |s| s.on_job_done(now, done));
    }

    /// Ends every call, telling each client (shutdown).
    pub fn close_all(&mut self, now: Instant) {
        let keys: Vec<CallKey> = self.sessions.keys().copied().collect();
        for k in keys {
            self.end_session(now, k, EndReason::Shutdown);
        }
    }

    /// The bookkeeping sizes and counters, so tests and operators can see ended calls leave
    /// nothing behind.
    pub fn stats(&self) -> WorkerStats {
        WorkerStats {
            sessions: self.sessions.len(),
            ufrag_index: self.by_ufrag.len(),
            addr_index: self.by_addr.len(),
            call_index: self.by_call.len(),
            timers: self.timers.len(),
            dropped_unknown: self.dropped_unknown,
            dropped_link_source: self.dropped_link_source,
            ended: self.ended,
            answer_to_ice: self.answer_to_ice,
            answer_to_dtls: self.answer_to_dtls,
            timer_lag: self.timer_lag,
            answer_to_audio: self.answer_to_audio,
        }
    }

    /// Every live call, as the admin endpoint lists it.
    pub fn list(&mut self, now: Instant) -> Vec<CallInfo> {
        let (cluster, transceiver, worker) = (self.cfg.cluster, self.cfg.id, self.index);
        self.sessions
            .values_mut()
            .map(|s| CallInfo {
                client_report: s.client_report(now),
                call_id: s.call_id.clone(),
                cluster,
                transceiver,
                worker,
                client: s.client,
                via_relay: s.via.map(|(a, _)| a),
                state: s.state,
                age_ms: now.duration_since(s.created).as_millis() as u64,
                voice: s.timings(),
                ice_ms: s
                    .ice_connected_at
                    .map(|c| c.duration_since(s.created).as_millis() as u64),
                connect_ms: s
                    .connected_at
                    .map(|c| c.duration_since(s.created).as_millis() as u64),
                counters: s.counters,
            })
            .collect()
    }

    /// A datagram from the socket: from a relay (link header in front) or a direct client.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, pkt: &[u8]) {
        match self.demux(from, pkt) {
            Demux::Call(a) => self.deliver(now, a),
            Demux::Unknown { via, client } => {
                self.dropped_unknown += 1;
                // A relay still routes this client here, so its flow outlived the call it
                // was made for (a new call from the same address is then lost): tell the relay
                // to forget it. Its next datagram is routed afresh by its own ufrag.
                if let Some((relay, ingress)) = via {
                    self.transmits
                        .push_back(release(NO_CALL, relay, ingress, client));
                }
            }
            Demux::OutsideLinkSources => self.dropped_link_source += 1,
            Demux::Malformed => {}
        }
    }

    /// The call a datagram from the socket belongs to, without handing it over: what a layer
    /// in front of the endpoint needs to treat each call's datagrams apart.
    pub fn call_of(&self, from: SocketAddr, pkt: &[u8]) -> Option<CallKey> {
        match self.demux(from, pkt) {
            Demux::Call(a) => Some(a.key),
            _ => None,
        }
    }

    /// Reads where a datagram goes. Demultiplexing follows ICE: a binding request names its
    /// call by the ufrag in USERNAME; everything else is matched by the client's address.
    fn demux<'a>(&self, from: SocketAddr, pkt: &'a [u8]) -> Demux<'a> {
        let (via, client, payload) = if crate::routing::link::is_link_packet(pkt) {
            if !self.cfg.link_sources.allows(from.ip()) {
                return Demux::OutsideLinkSources;
            }
            match LinkHeader::parse(pkt) {
                Ok((h, inner)) => (Some((from, h.ingress)), h.client, inner),
                Err(_) => return Demux::Malformed,
            }
        } else {
            (None, from, pkt)
        };
        if payload.is_empty() {
            return Demux::Malformed;
        }
        let mut consent = false;
        let key = match classify(payload[0]) {
            PacketKind::Stun => match peek_binding_username(payload) {
                Ok(u) => {
                    let k = self.lookup_ufrag(u);
                    consent = k.is_some();
                    k.or_else(|| self.by_addr.get(&client).copied())
                }
                // Binding responses and indications belong to whoever owns the address.
                Err(_) => self.by_addr.get(&client).copied(),
            },
            _ => self.by_addr.get(&client).copied(),
        };
        match key {
            Some(key) => Demux::Call(Arrival {
                key,
                via,
                client,
                consent,
                payload,
            }),
            None => Demux::Unknown { via, client },
        }
    }

    /// Hands a client's datagram to its call's stack, moving the call's address if it is an
    /// authenticated check from a new one.
    fn deliver(&mut self, now: Instant, a: Arrival<'_>) {
        let Arrival {
            key,
            via,
            client,
            consent,
            payload,
        } = a;
        let Some(s) = self.sessions.get_mut(&key) else {
            return;
        };
        // The stack always sees the client at the address it first came from, so ICE consent
        // and the DTLS association (keyed by peer address) survive a NAT rebinding. Where we
        // *send* moves only once the stack has accepted an authenticated binding request from
        // the new address (see `flush`), so a forged packet cannot redirect the call.
        let canonical = *s.canonical.get_or_insert(client);
        if (s.client != Some(client) || s.via != via) && consent && payload.len() >= 20 {
            let mut txid = [0u8; 12];
            txid.copy_from_slice(&payload[8..20]);
            s.pending_move = Some(PendingMove { client, via, txid });
            if s.client != Some(client) && !s.aliases.contains(&client) {
                // Accept the new address's datagrams (the stack authenticates them), but keep
                // only a few: checks with a known ufrag are cheap to forge.
                while s.aliases.len() >= MAX_ALIASES {
                    let old = s.aliases.remove(0);
                    if self.by_addr.get(&old) == Some(&key) {
                        self.by_addr.remove(&old);
                    }
                }
                s.aliases.push(client);
                self.by_addr.insert(client, key);
            }
        }
        if consent {
            s.last_consent = now;
        }
        s.counters.packets_in += 1;
        s.counters.bytes_in += payload.len() as u64;
        let msg = TaggedBytesMut {
            now,
            transport: TransportContext {
                local_addr: s.candidate,
                peer_addr: canonical,
                ecn: None,
                transport_protocol: TransportProtocol::UDP,
            },
            message: BytesMut::from(payload),
        };
        // RTP or RTCP on a connected call: the stack takes it through its media handlers only
        // (see `Session::drive_media`).
        let media = payload.first().map(|&b| classify(b)) == Some(PacketKind::Rtp)
            && s.state == SessionState::Connected;
        if let Some(Err(e)) = self.isolate(now, key, |s| s.pc.handle_read(msg)) {
            log::debug!("{key}: handle_read: {e}");
        }
        self.after_input(key, now, media);
    }

    fn lookup_ufrag(&self, ufrag: &[u8]) -> Option<CallKey> {
        std::str::from_utf8(ufrag)
            .ok()
            .and_then(|u| self.by_ufrag.get(u).copied())
    }

    /// Runs a session after it was given input: drive, flush, reschedule. `media`: the input
    /// was a media datagram on a connected call, which takes the session's media round and
    /// the stack's one sweep (`Session::drive_media`, `drain_media`) unless the call put out
    /// more than audio.
    fn after_input(&mut self, key: CallKey, now: Instant, media: bool) {
        // Taken out for the closure; a panicking call queues nothing (see `end_session`).
        let mut transmits = std::mem::take(&mut self.transmits);
        let driven = self.isolate(now, key, |s| {
            if media && s.drive_media(now) {
                drain_media(key, s, &mut transmits);
            } else {
                s.drive(now);
                drain_session(key, s, &mut transmits);
            }
        });
        self.transmits = transmits;
        if driven.is_some() {
            self.after_drive(key, now);
        }
    }

    /// What follows a session's round: its timings recorded, its jobs queued, and it ended or
    /// rescheduled.
    fn after_drive(&mut self, key: CallKey, now: Instant) {
        let Some(s) = self.sessions.get_mut(&key) else {
            return;
        };
        if s.connected_at.is_some() && !s.left_connecting {
            s.left_connecting = true;
            self.connecting -= 1;
        }
        if let Some(d) = s.take_first_audio() {
            self.answer_to_audio.record(d);
        }
        if let Some((ice, dtls)) = s.take_setup_timeline() {
            self.answer_to_ice.record(ice);
            self.answer_to_dtls.record(dtls);
        }
        for job in s.take_jobs() {
            self.jobs.push_back(CallJob {
                call_id: s.call_id.clone(),
                job,
            });
        }
        if s.state == SessionState::Closed {
            let reason = closed_reason(s);
            self.end_session(now, key, reason);
            return;
        }
        self.reschedule(key, now);
    }

    /// Queues the session in the timer heap at its next deadline (the stack's or the media's)
    /// if that changed.
    fn reschedule(&mut self, key: CallKey, now: Instant) {
        let Some(s) = self.sessions.get_mut(&key) else {
            return;
        };
        let next = s.poll_timeout();
        // A deadline that is already due is retried a millisecond later: a component that keeps
        // asking for "now" must not spin the loop (every other session would starve).
        let next = next.map(|t| t.max(now + Duration::from_millis(1)));
        if next != s.next_timeout {
            s.next_timeout = next;
            if let Some(t) = next {
                self.timers.push(Reverse((t, key)));
            }
        }
    }

    fn fire_timers(&mut self, now: Instant) {
        while let Some(Reverse((t, key))) = self.timers.peek().copied() {
            if t > now {
                break;
            }
            self.timers.pop();
            let Some(s) = self.sessions.get_mut(&key) else {
                continue;
            };
            if s.next_timeout != Some(t) {
                continue; // superseded by a later reschedule
            }
            s.next_timeout = None;
            self.timer_lag.record(now - t);
            self.max_timer_lag = self.max_timer_lag.max(now - t);
            self.isolate(now, key, |s| s.handle_timeout(now));
            self.after_input(key, now, false);
        }
    }

    /// Enforces the lifecycle deadlines; runs at most every [`HOUSEKEEPING`], so its O(calls)
    /// scan is not paid per datagram.
    fn housekeeping(&mut self, now: Instant) {
        if now.duration_since(self.last_housekeeping) < HOUSEKEEPING {
            return;
        }
        self.last_housekeeping = now;
        let l = self.cfg.lifecycle;
        let expired: Vec<(CallKey, EndReason)> = self
            .sessions
            .iter()
            .filter_map(|(k, s)| {
                let reason = if s.state == SessionState::Closed {
                    closed_reason(s)
                } else if s.connected_at.is_none()
                    && now.duration_since(s.created) > l.setup_deadline
                {
                    EndReason::SetupTimeout
                } else if s.connected_at.is_some()
                    && now.duration_since(s.last_consent) > l.consent_timeout
                {
                    EndReason::ConsentExpired
                } else if now.duration_since(s.last_heard) > l.idle_timeout {
                    EndReason::IdleTimeout
                } else {
                    return None;
                };
                Some((*k, reason))
            })
            .collect();
        for (k, reason) in expired {
            self.end_session(now, k, reason);
        }
        // Entries of ended sessions are skipped on pop; drop them in bulk when they pile up.
        if self.timers.len() > 4 * self.sessions.len() + 64 {
            let sessions = &self.sessions;
            self.timers.retain(|Reverse((t, k))| {
                sessions.get(k).is_some_and(|s| s.next_timeout == Some(*t))
            });
        }
    }

    /// Answers an offer with a new call, registered before the answer is returned so the
    /// client's first check can never arrive ahead of the ufrag it names.
    pub fn create_call(
        &mut self,
        now: Instant,
        offer_sdp: String,
        setup: super::CallSetup,
    ) -> Result<CreatedCall, peer::AnswerError> {
        let ufrag = ufrag::mint(
            &self.cfg.route_keys,
            self.cfg.cluster,
            self.cfg.id,
            self.index,
        );
        let place = super::call_id::CallPlace {
            cluster: self.cfg.cluster,
            transceiver: self.cfg.id,
            worker: self.index,
        };
        // A Live session's id is its call id, with Live's prefix.
        let call_id = match setup.live {
            Some(_) => super::call_id::mint_with(crate::live::ID_PREFIX, place),
            None => super::call_id::mint(place),
        };
        let params = PeerParams {
            offer_sdp,
            ufrag: ufrag.clone(),
            pwd: ufrag::random_ice_pwd(),
            candidate: self.advertise,
            certificate: &self.certificate,
            stream_id: &call_id,
        };
        // An offer that makes the stack panic is refused like any offer it cannot answer,
        // instead of unwinding through the loop that holds every other call.
        let answered =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| peer::answer(now, params)))
                .map_err(|_| {
                self.ended.panicked += 1;
                peer::AnswerError::Negotiation("the offer made the answerer fail".into())
            })??;
        let upstream = match (&setup.upstream, &self.cfg.upstream) {
            (None, _) => None,
            (Some(call), Some(cfg)) => Some(UpstreamOpen {
                call_id: call_id.clone(),
                // A Live session names its model in its `session.start`.
                url: match &setup.live {
                    None => cfg.url_for(&call.model),
                    Some(_) => cfg.live_url().ok_or_else(|| {
                        peer::AnswerError::Negotiation(
                            "this transceiver's --upstream has no Live WebSocket beside it".into(),
                        )
                    })?,
                },
                key: cfg.key.clone(),
            }),
            (Some(_), None) => {
                return Err(peer::AnswerError::Negotiation(
                    "this transceiver has no --upstream for a model that is not a stub".into(),
                ));
            }
        };
        // Taken before the call exists, so a full budget refuses the offer, not the recording.
        let recording = match &setup.live {
            Some(live) if live.store => {
                Some(self.recordings.room(setup.client).map_err(|e| {
                    peer::AnswerError::OverBudget(crate::call::recording::no_room(e))
                })?)
            }
            _ => None,
        };
        let key = self.next_key;
        self.next_key += 1;
        let session = Session::new(
            now,
            NewSession {
                call_id: call_id.clone(),
                ufrag: ufrag.clone(),
                pc: answered.pc,
                candidate: self.advertise,
                audio_sender: answered.audio_sender,
                audio_ssrc: answered.audio_ssrc,
                codec: answered.codec,
                setup,
                recording,
                upstream_append_ms: self
                    .cfg
                    .upstream
                    .as_ref()
                    .map_or(crate::upstream::DEFAULT_APPEND_MS, |u| u.append_ms),
            },
        );
        self.upstream_opens.extend(upstream);
        self.sessions.insert(key, Box::new(session));
        self.connecting += 1;
        self.by_ufrag.insert(ufrag, key);
        self.by_call.insert(call_id.clone(), key);
        self.after_input(key, now, false);
        log::info!(
            "call {call_id} on cluster {} transceiver {}.{} (candidate {})",
            self.cfg.cluster,
            self.cfg.id,
            self.index,
            self.advertise
        );
        Ok(CreatedCall {
            call_id,
            answer_sdp: answered.answer_sdp,
            cluster: self.cfg.cluster,
            transceiver: self.cfg.id,
            worker: self.index,
            candidate: self.advertise,
        })
    }

    /// One input to call `call_id`, by name (an API command, a job's result, a sideband's or
    /// the upstream's event), handled as a datagram is: isolated, then the call's output
    /// drained. `None` when the call is not here or panicked.
    fn input_to<R>(
        &mut self,
        now: Instant,
        call_id: &str,
        f: impl FnOnce(&mut Session) -> R,
    ) -> Option<R> {
        let key = *self.by_call.get(call_id)?;
        let r = self.isolate(now, key, f);
        self.after_input(key, now, false);
        r
    }

    /// Runs one call's processing so that a panic in it (a bug in the stack, the model or our
    /// own session code, hit by one client's input) ends that call alone: without this it
    /// would unwind through the socket loop and take every call on the worker with it. The
    /// call is dropped without a goodbye, since its state is whatever the panic left; the
    /// client sees consent fail. `None` when the call is not here or panicked.
    fn isolate<R>(
        &mut self,
        now: Instant,
        key: CallKey,
        f: impl FnOnce(&mut Session) -> R,
    ) -> Option<R> {
        let s = self.sessions.get_mut(&key)?;
        // AssertUnwindSafe: after a panic the session is only dropped, never read again.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(s))) {
            Ok(r) => Some(r),
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|m| m.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                log::error!("call {} panicked and was ended alone: {what}", s.call_id);
                self.end_session(now, key, EndReason::Panicked);
                None
            }
        }
    }

    /// Closes the peer connection (sending DTLS close_notify / SCTP ABORT to the client) and
    /// drops every index entry that points at the session.
    fn end_session(&mut self, now: Instant, key: CallKey, reason: EndReason) {
        let Some(mut s) = self.sessions.remove(&key) else {
            return;
        };
        if !s.left_connecting {
            self.connecting -= 1;
        }
        let e = &mut self.ended;
        match reason {
            EndReason::Hangup => e.hangup += 1,
            EndReason::PeerClosed => e.peer_closed += 1,
            EndReason::SetupTimeout => e.setup_timeout += 1,
            EndReason::ConsentExpired => e.consent_expired += 1,
            EndReason::IdleTimeout => e.idle_timeout += 1,
            EndReason::Shutdown => e.shutdown += 1,
            EndReason::Panicked => e.panicked += 1,
            EndReason::SessionExpired => e.session_expired += 1,
        }
        // A Live session says why it ended to whoever still listens (its sidebands). Not after
        // a panic: that call's state is not to be trusted.
        if let Some(why) = reason.live_reason() {
            s.end(now, why);
        }
        if reason != EndReason::Panicked {
            let _ = s.pc.close();
            drain_session(key, &mut s, &mut self.transmits);
        }
        // After the goodbye: the relay forgets the flow, so the client's address is free for
        // its next call, wherever that call lives.
        if let (Some((relay, ingress)), Some(client)) = (s.via, s.client) {
            self.transmits
                .push_back(release(key, relay, ingress, client));
        }
        self.by_ufrag.remove(&s.ufrag);
        self.by_call.remove(&s.call_id);
        self.by_addr.retain(|_, k| *k != key);
        // Kept even for a call that panicked: that log is the bug report.
        if let Some(log) = s.take_event_log() {
            event_log::lock(&self.ended_logs).insert(now, s.call_id.clone(), log);
        }
        if let Some(recording) = s.take_recording() {
            self.recordings.keep(now, s.call_id.clone(), recording);
        }
        log::info!(
            "call {} ended ({reason:?}) after {:?} ({} packets in, {} out)",
            s.call_id,
            now.duration_since(s.created),
            s.counters.packets_in,
            s.counters.packets_out
        );
    }
}

/// Why a session whose peer connection closed ended: its ICE agent's failure timeout fires
/// before our own deadlines, so a client that never arrived or stopped consenting shows up as a
/// closed connection, and is counted as what it is.
fn closed_reason(s: &Session) -> EndReason {
    if s.expired {
        return EndReason::SessionExpired;
    }
    match (s.ice_failed, s.connected_at.is_some()) {
        (true, false) => EndReason::SetupTimeout,
        (true, true) => EndReason::ConsentExpired,
        (false, _) => EndReason::PeerClosed,
    }
}

/// Where a datagram from the socket goes (see [`Endpoint::demux`]).
enum Demux<'a> {
    Call(Arrival<'a>),
    /// No call here answers to its ufrag or address; `via` is the relay it came through.
    Unknown {
        via: Option<(SocketAddr, u32)>,
        client: SocketAddr,
    },
    /// A link datagram from an address that is no relay of ours: not read further.
    OutsideLinkSources,
    /// Empty, or a link header that does not parse.
    Malformed,
}

/// A datagram matched to its call, with what was read of it on the way.
struct Arrival<'a> {
    key: CallKey,
    /// The relay it came through and its ingress, when it came over the link.
    via: Option<(SocketAddr, u32)>,
    client: SocketAddr,
    /// A binding request naming the call's ufrag: proof of consent, and a client that may move.
    consent: bool,
    payload: &'a [u8],
}

/// A STUN Binding success response for transaction `txid`: the stack's proof that it verified
/// the request (MESSAGE-INTEGRITY with our ICE password).
fn is_binding_success(pkt: &[u8], txid: &[u8; 12]) -> bool {
    pkt.len() >= 20 && pkt[0] == 0x01 && pkt[1] == 0x01 && &pkt[8..20] == txid
}

/// Queues what the session wrote: wrapped in the link header back to the relay it came
/// through, or bare to a direct client. The return path (client address and relay) moves only
/// when the stack answers the authenticated binding request that proposed it.
/// The key of no call: what a datagram sent for no call of ours (a flow release for an unknown
/// client) names. Keys start at 1.
const NO_CALL: CallKey = 0;

/// A link datagram with no payload: "this client is no longer mine". The relay honours it only
/// from the flow's owner (see [`crate::relay`]), and never sends it on to the client.
fn release(call: CallKey, relay: SocketAddr, ingress: u32, client: SocketAddr) -> Transmit {
    via_relay(call, relay, ingress, client, BytesMut::new())
}

/// `payload` for `client`, through the relay (link address and ingress) it came in by.
fn via_relay(
    call: CallKey,
    relay: SocketAddr,
    ingress: u32,
    client: SocketAddr,
    payload: BytesMut,
) -> Transmit {
    Transmit {
        call,
        to: relay,
        link: Some(LinkHeader { ingress, client }),
        payload,
    }
}

fn drain_session(key: CallKey, s: &mut Session, out: &mut VecDeque<Transmit>) {
    while let Some(w) = s.pc.poll_write() {
        transmit(key, s, w, out);
    }
}

/// [`drain_session`] after a media round: one sweep, then what it queued (see
/// `RTCPeerConnection::poll_swept_write`).
fn drain_media(key: CallKey, s: &mut Session, out: &mut VecDeque<Transmit>) {
    let mut next = s.pc.poll_write();
    while let Some(w) = next {
        transmit(key, s, w, out);
        next = s.pc.poll_swept_write();
    }
}

/// One datagram the stack put out, addressed to the client (through its relay, if any).
fn transmit(key: CallKey, s: &mut Session, w: TaggedBytesMut, out: &mut VecDeque<Transmit>) {
    if let Some(m) = s.pending_move
        && is_binding_success(&w.message, &m.txid)
    {
        if s.client.is_some_and(|c| c != m.client) {
            log::info!("{}: client moved {:?} -> {}", s.call_id, s.client, m.client);
        }
        if let Some(old) = s.client.replace(m.client)
            && old != m.client
        {
            s.aliases.push(old);
        }
        s.aliases.retain(|a| *a != m.client);
        s.via = m.via;
        s.pending_move = None;
    }
    let peer = s.client.unwrap_or(w.transport.peer_addr);
    s.counters.packets_out += 1;
    s.counters.bytes_out += w.message.len() as u64;
    let t = match s.via {
        Some((relay, ingress)) => via_relay(key, relay, ingress, peer, w.message),
        None => Transmit {
            call: key,
            to: peer,
            link: None,
            payload: w.message,
        },
    };
    out.push_back(t);
}

#[cfg(test)]
mod tests;
