//! The socket loop: one shared UDP socket, many sessions, one timer heap.
//!
//! Demultiplexing follows ICE itself: a STUN binding request names its session by the server
//! ufrag in USERNAME (which is how a new client address, or a NAT rebinding, is learned);
//! everything else is matched by the client's address. Timers live in a min-heap keyed by each
//! session's `poll_timeout`, with stale entries skipped on pop, so a loop turn costs
//! O(log n) however many calls are idle.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_io::{Async, Timer};
use bytes::BytesMut;
use futures_lite::future;
use rtc::peer_connection::certificate::RTCCertificate;
use rtc::sansio::Protocol;
use rtc::shared::{TaggedBytesMut, TransportContext, TransportProtocol};

use super::peer::{self, PeerParams};
use super::session::{NewSession, Session, SessionState};
use super::{CallInfo, Command, CreatedCall, TransceiverConfig};
use crate::routing::link::{LINK_HEADER_LEN, LinkHeader};
use crate::routing::stun::{PacketKind, classify, peek_binding_username};
use crate::routing::ufrag;

/// Wake at least this often to enforce deadlines and notice a stop request.
const HOUSEKEEPING: Duration = Duration::from_millis(500);
const MAX_DATAGRAM: usize = 2048;

type Key = u64;

/// What a worker is started with.
pub(super) struct WorkerParts {
    pub cfg: TransceiverConfig,
    pub index: u8,
    /// The candidate put in answers: the relay, or this worker's own socket.
    pub advertise: SocketAddr,
    pub certificate: RTCCertificate,
    pub live: Arc<AtomicUsize>,
    pub stop: Arc<AtomicBool>,
    /// This worker's own command queue, where TTS threads hand speech back.
    pub commands: async_channel::Sender<Command>,
}

pub(super) struct Worker {
    cfg: TransceiverConfig,
    index: u8,
    advertise: SocketAddr,
    certificate: RTCCertificate,
    live: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    /// Boxed: a session is several KB, so the map stays small and rehashing moves pointers.
    sessions: HashMap<Key, Box<Session>>,
    by_ufrag: HashMap<String, Key>,
    by_addr: HashMap<SocketAddr, Key>,
    by_call: HashMap<String, Key>,
    timers: BinaryHeap<Reverse<(Instant, Key)>>,
    next_key: Key,
    send_buf: Vec<u8>,
    dropped_unknown: u64,
    ended: super::EndCounters,
    answer_to_ice: crate::ops::Histogram,
    answer_to_dtls: crate::ops::Histogram,
    /// How late session timers fire (media pacing is one): the loop's health under load.
    timer_lag: crate::ops::Histogram,
    answer_to_audio: crate::ops::Histogram,
    last_housekeeping: Instant,
    /// Where TTS threads hand synthesized speech back.
    commands: async_channel::Sender<Command>,
}

/// Why a session is being removed.
#[derive(Debug, Clone, Copy)]
enum EndReason {
    Hangup,
    PeerClosed,
    SetupTimeout,
    ConsentExpired,
    IdleTimeout,
    Shutdown,
}

enum Wake {
    Datagram(usize, SocketAddr),
    Command(Command),
    CommandsClosed,
    Timer,
}

impl Worker {
    pub(super) fn new(p: WorkerParts) -> Self {
        Worker {
            cfg: p.cfg,
            index: p.index,
            advertise: p.advertise,
            certificate: p.certificate,
            live: p.live,
            stop: p.stop,
            sessions: HashMap::new(),
            by_ufrag: HashMap::new(),
            by_addr: HashMap::new(),
            by_call: HashMap::new(),
            timers: BinaryHeap::new(),
            next_key: 1,
            send_buf: Vec::with_capacity(MAX_DATAGRAM + LINK_HEADER_LEN),
            dropped_unknown: 0,
            ended: Default::default(),
            answer_to_ice: Default::default(),
            answer_to_dtls: Default::default(),
            timer_lag: Default::default(),
            answer_to_audio: Default::default(),
            last_housekeeping: Instant::now(),
            commands: p.commands,
        }
    }

    pub(super) fn run(mut self, socket: UdpSocket, commands: async_channel::Receiver<Command>) {
        let socket = match Async::new(socket) {
            Ok(s) => s,
            Err(e) => {
                log::error!(
                    "transceiver {}.{}: cannot register socket: {e}",
                    self.cfg.id,
                    self.index
                );
                return;
            }
        };
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut commands_open = true;
        smol::block_on(async {
            while !self.stop.load(Ordering::Relaxed) {
                self.fire_timers(socket.get_ref());
                let now = Instant::now();
                let deadline = self
                    .timers
                    .peek()
                    .map(|Reverse((t, _))| *t)
                    .unwrap_or(now + HOUSEKEEPING)
                    .min(now + HOUSEKEEPING);
                let recv = async {
                    match socket.recv_from(&mut buf).await {
                        Ok((n, from)) => Wake::Datagram(n, from),
                        Err(e) => {
                            log::debug!("recv: {e}");
                            Wake::Timer
                        }
                    }
                };
                let cmd = async {
                    if !commands_open {
                        return future::pending().await;
                    }
                    match commands.recv().await {
                        Ok(c) => Wake::Command(c),
                        Err(_) => Wake::CommandsClosed,
                    }
                };
                let timer = async {
                    Timer::at(deadline).await;
                    Wake::Timer
                };
                match future::or(recv, future::or(cmd, timer)).await {
                    Wake::Datagram(n, from) => self.on_datagram(socket.get_ref(), &buf[..n], from),
                    Wake::Command(c) => self.on_command(socket.get_ref(), c),
                    Wake::CommandsClosed => commands_open = false,
                    Wake::Timer => {}
                }
                self.housekeeping(socket.get_ref());
            }
            // Tell every client we are going, so they need not wait for consent to expire.
            let keys: Vec<Key> = self.sessions.keys().copied().collect();
            for k in keys {
                self.end_session(socket.get_ref(), k, EndReason::Shutdown);
            }
        });
    }

    fn on_datagram(&mut self, socket: &UdpSocket, pkt: &[u8], from: SocketAddr) {
        let (via, client, payload) = if crate::routing::link::is_link_packet(pkt) {
            match LinkHeader::parse(pkt) {
                Ok((h, inner)) => (Some((from, h.ingress)), h.client, inner),
                Err(_) => return,
            }
        } else {
            (None, from, pkt)
        };
        if payload.is_empty() {
            return;
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
        let Some(key) = key else {
            self.dropped_unknown += 1;
            return;
        };
        let now = Instant::now();
        let Some(s) = self.sessions.get_mut(&key) else {
            return;
        };
        // The stack always sees the client at the address it first came from, so ICE consent
        // and the DTLS association (keyed by peer address) survive a NAT rebinding. Where we
        // *send* moves only once the stack has accepted an authenticated binding request from
        // the new address (see `flush`), so a forged packet cannot redirect the call.
        let canonical = *s.canonical.get_or_insert(client);
        match s.client {
            None => {
                self.by_addr.insert(client, key);
                s.client = Some(client);
            }
            Some(current) if current != client => {
                self.by_addr.insert(client, key);
                if consent && payload.len() >= 20 {
                    let mut txid = [0u8; 12];
                    txid.copy_from_slice(&payload[8..20]);
                    s.pending_move = Some((client, txid));
                }
            }
            Some(_) => {}
        }
        s.via = via;
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
        if let Err(e) = s.pc.handle_read(msg) {
            log::debug!("{}: handle_read: {e}", s.call_id);
        }
        self.after_input(socket, key, now);
    }

    fn lookup_ufrag(&self, ufrag: &[u8]) -> Option<Key> {
        std::str::from_utf8(ufrag)
            .ok()
            .and_then(|u| self.by_ufrag.get(u).copied())
    }

    /// Runs a session after it was given input: drive, flush, reschedule.
    fn after_input(&mut self, socket: &UdpSocket, key: Key, now: Instant) {
        let Some(s) = self.sessions.get_mut(&key) else {
            return;
        };
        s.drive(now);
        flush(socket, s, &mut self.send_buf);
        if let Some(d) = s.take_first_audio() {
            self.answer_to_audio.record(d);
        }
        if let Some((ice, dtls)) = s.take_setup_timeline() {
            self.answer_to_ice.record(ice);
            self.answer_to_dtls.record(dtls);
        }
        for req in s.take_tts_requests() {
            spawn_tts(req, s.call_id.clone(), self.commands.clone());
        }
        // A deadline that is already due is retried a millisecond later: a component that keeps
        // asking for "now" must not spin the loop (every other session would starve).
        let next = s
            .poll_timeout()
            .map(|t| t.max(now + Duration::from_millis(1)));
        if next != s.next_timeout {
            s.next_timeout = next;
            if let Some(t) = next {
                self.timers.push(Reverse((t, key)));
            }
        }
        if s.state == SessionState::Closed {
            self.end_session(socket, key, EndReason::PeerClosed);
        }
    }

    fn fire_timers(&mut self, socket: &UdpSocket) {
        let now = Instant::now();
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
            s.handle_timeout(now);
            self.after_input(socket, key, now);
        }
    }

    /// Enforces the lifecycle deadlines; runs at most every [`HOUSEKEEPING`], so its O(calls)
    /// scan is not paid per datagram.
    fn housekeeping(&mut self, socket: &UdpSocket) {
        let now = Instant::now();
        if now.duration_since(self.last_housekeeping) < HOUSEKEEPING {
            return;
        }
        self.last_housekeeping = now;
        let l = self.cfg.lifecycle;
        let expired: Vec<(Key, EndReason)> = self
            .sessions
            .iter()
            .filter_map(|(k, s)| {
                let reason = if s.state == SessionState::Closed {
                    EndReason::PeerClosed
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
            self.end_session(socket, k, reason);
        }
        // Entries of ended sessions are skipped on pop; drop them in bulk when they pile up.
        if self.timers.len() > 4 * self.sessions.len() + 64 {
            let sessions = &self.sessions;
            self.timers.retain(|Reverse((t, k))| {
                sessions.get(k).is_some_and(|s| s.next_timeout == Some(*t))
            });
        }
    }

    fn on_command(&mut self, socket: &UdpSocket, cmd: Command) {
        match cmd {
            Command::Create {
                offer_sdp,
                model,
                reply,
            } => {
                let r = self.create(socket, offer_sdp, model);
                let _ = reply.send(r);
            }
            Command::Hangup { call_id, reply } => {
                let key = self.by_call.get(&call_id).copied();
                if let Some(k) = key {
                    self.end_session(socket, k, EndReason::Hangup);
                }
                let _ = reply.send(key.is_some());
            }
            Command::Renegotiate {
                call_id,
                offer_sdp,
                reply,
            } => {
                let Some(&key) = self.by_call.get(&call_id) else {
                    let _ = reply.send(None);
                    return;
                };
                let now = Instant::now();
                let r = self
                    .sessions
                    .get_mut(&key)
                    .map(|s| peer::reanswer(&mut s.pc, now, offer_sdp));
                if let Some(Ok(_)) = &r {
                    log::info!("{call_id}: renegotiated (new offer on a live call)");
                }
                let _ = reply.send(r);
                self.after_input(socket, key, now);
            }
            Command::TtsReady {
                call_id,
                response_id,
                speech,
            } => {
                if let Some(&key) = self.by_call.get(&call_id) {
                    let now = Instant::now();
                    if let Some(s) = self.sessions.get_mut(&key) {
                        s.on_tts_ready(now, &response_id, speech);
                    }
                    self.after_input(socket, key, now);
                }
            }
            Command::Stats { reply } => {
                let _ = reply.send(super::WorkerStats {
                    sessions: self.sessions.len(),
                    ufrag_index: self.by_ufrag.len(),
                    addr_index: self.by_addr.len(),
                    call_index: self.by_call.len(),
                    timers: self.timers.len(),
                    dropped_unknown: self.dropped_unknown,
                    ended: self.ended,
                    answer_to_ice: self.answer_to_ice,
                    answer_to_dtls: self.answer_to_dtls,
                    timer_lag: self.timer_lag,
                    answer_to_audio: self.answer_to_audio,
                });
            }
            Command::List { reply } => {
                let now = Instant::now();
                let list = self
                    .sessions
                    .values_mut()
                    .map(|s| CallInfo {
                        client_report: s.client_report(now),
                        call_id: s.call_id.clone(),
                        cluster: self.cfg.cluster,
                        transceiver: self.cfg.id,
                        worker: self.index,
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
                    .collect();
                let _ = reply.send(list);
            }
        }
    }

    fn create(
        &mut self,
        socket: &UdpSocket,
        offer_sdp: String,
        model: String,
    ) -> Result<CreatedCall, peer::AnswerError> {
        let now = Instant::now();
        let ufrag = ufrag::mint(
            &self.cfg.route_keys,
            self.cfg.cluster,
            self.cfg.id,
            self.index,
        );
        let call_id = super::call_id::mint(super::call_id::CallPlace {
            cluster: self.cfg.cluster,
            transceiver: self.cfg.id,
            worker: self.index,
        });
        let answered = peer::answer(
            now,
            PeerParams {
                offer_sdp,
                ufrag: ufrag.clone(),
                pwd: ufrag::random_ice_pwd(),
                candidate: self.advertise,
                certificate: &self.certificate,
                stream_id: &call_id,
            },
        )?;
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
                model,
            },
        );
        self.sessions.insert(key, Box::new(session));
        self.by_ufrag.insert(ufrag, key);
        self.by_call.insert(call_id.clone(), key);
        self.live.store(self.sessions.len(), Ordering::Relaxed);
        self.after_input(socket, key, now);
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

    /// Closes the peer connection (sending DTLS close_notify / SCTP ABORT to the client) and
    /// drops every index entry that points at the session.
    fn end_session(&mut self, socket: &UdpSocket, key: Key, reason: EndReason) {
        let Some(mut s) = self.sessions.remove(&key) else {
            return;
        };
        let e = &mut self.ended;
        match reason {
            EndReason::Hangup => e.hangup += 1,
            EndReason::PeerClosed => e.peer_closed += 1,
            EndReason::SetupTimeout => e.setup_timeout += 1,
            EndReason::ConsentExpired => e.consent_expired += 1,
            EndReason::IdleTimeout => e.idle_timeout += 1,
            EndReason::Shutdown => e.shutdown += 1,
        }
        let _ = s.pc.close();
        flush(socket, &mut s, &mut self.send_buf);
        self.by_ufrag.remove(&s.ufrag);
        self.by_call.remove(&s.call_id);
        self.by_addr.retain(|_, k| *k != key);
        self.live.store(self.sessions.len(), Ordering::Relaxed);
        log::info!(
            "call {} ended ({reason:?}) after {:?} ({} packets in, {} out)",
            s.call_id,
            s.created.elapsed(),
            s.counters.packets_in,
            s.counters.packets_out
        );
    }
}

/// Runs the synthesizer (espeak-ng is a subprocess) on its own short-lived thread so the socket
/// loop never waits for it; the speech comes back as a command.
fn spawn_tts(
    req: super::media::TtsRequest,
    call_id: String,
    commands: async_channel::Sender<Command>,
) {
    let spawned = std::thread::Builder::new()
        .name("tts".into())
        .spawn(move || {
            let speech = crate::audio::tts::synthesize(&req.text, &req.voice);
            let _ = commands.send_blocking(Command::TtsReady {
                call_id,
                response_id: req.response_id,
                speech,
            });
        });
    if let Err(e) = spawned {
        log::warn!("could not start a TTS thread: {e}");
    }
}

/// A STUN Binding success response for transaction `txid`: the stack's proof that it verified
/// the request (MESSAGE-INTEGRITY with our ICE password).
fn is_binding_success(pkt: &[u8], txid: &[u8; 12]) -> bool {
    pkt.len() >= 20 && pkt[0] == 0x01 && pkt[1] == 0x01 && &pkt[8..20] == txid
}

/// Sends what the session queued: wrapped in the link header back to the relay it came
/// through, or bare to a direct client. Send errors are dropped like any UDP loss.
fn flush(socket: &UdpSocket, s: &mut Session, buf: &mut Vec<u8>) {
    while let Some(out) = s.pc.poll_write() {
        if let Some((addr, txid)) = s.pending_move
            && is_binding_success(&out.message, &txid)
        {
            log::info!("{}: client moved {:?} -> {addr}", s.call_id, s.client);
            s.client = Some(addr);
            s.pending_move = None;
        }
        let peer = s.client.unwrap_or(out.transport.peer_addr);
        s.counters.packets_out += 1;
        s.counters.bytes_out += out.message.len() as u64;
        let r = match s.via {
            Some((relay, ingress)) => {
                buf.clear();
                buf.resize(LINK_HEADER_LEN, 0);
                LinkHeader {
                    ingress,
                    client: peer,
                }
                .write(&mut buf[..LINK_HEADER_LEN]);
                buf.extend_from_slice(&out.message);
                socket.send_to(buf, relay)
            }
            None => socket.send_to(&out.message, peer),
        };
        if let Err(e) = r {
            log::debug!("{}: send to {peer}: {e}", s.call_id);
        }
    }
}
