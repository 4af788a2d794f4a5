//! One WebRTC call on a transceiver: the peer connection and the [`Call`] it carries, whose
//! events ride the `oai-events` channel and whose audio rides the RTP track.
//!
//! A session owns no thread and no task. The worker's socket loop feeds it datagrams and timer
//! ticks, then calls [`Session::drive`] to move whatever that produced (decrypted audio to VAD
//! and the model, model audio and Realtime events back into the peer connection); the worker
//! flushes the resulting datagrams itself, because only it knows whether they go through a
//! relay.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rtc::data_channel::RTCDataChannelId;
use rtc::peer_connection::RTCPeerConnection;
use rtc::peer_connection::event::{RTCDataChannelEvent, RTCPeerConnectionEvent};
use rtc::peer_connection::message::RTCMessage;
use rtc::peer_connection::state::{RTCIceConnectionState, RTCPeerConnectionState};
use rtc::rtp_transceiver::RTCRtpSenderId;
use rtc::sansio::Protocol;
use serde::Serialize;

use crate::audio::Codec;
use crate::call::engine::{CallSetup, Engine};
use crate::call::event_log::EventLog;
use crate::call::media::{Job, JobDone, VoiceTimings};
use crate::call::sideband::SidebandId;
use crate::call::{Call, CallOutput};
use crate::live::EventSource;
use crate::realtime::AudioFormat;
use crate::upstream::{Bridge, UpstreamEvent, UpstreamLink};

/// The label the OpenAI Realtime clients give the channel they create before the offer.
pub const EVENTS_CHANNEL: &str = "oai-events";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Answer sent, waiting for ICE and DTLS.
    Connecting,
    Connected,
    /// Ended; the worker removes it on its next pass.
    Closed,
}

/// What the client's RTCP reports say about the audio we send it: the far end's view of loss and
/// jitter, which no server-side counter can see. Read from the `rtc` core's remote-inbound-rtp
/// stats, which vendor/rtc's patch feeds from incoming reports.
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct ClientReport {
    /// Reports received (receiver reports, or sender reports' blocks, about our audio).
    pub reports: u64,
    /// Packets the client counts as lost, over the call.
    pub packets_lost: i64,
    /// Of the packets expected in the last report interval, the share lost (0–1).
    pub fraction_lost: f64,
    /// Interarrival jitter at the client, ms.
    pub jitter_ms: f64,
}

/// How long an expired session stays open for its last events to arrive, with no faults on
/// the path (the stack does not report what SCTP has acknowledged).
const DEFAULT_END_GRACE: Duration = Duration::from_secs(1);
/// After the server closes `oai-events`, how long the client has to close its side (it sees a
/// clean close, and usually hangs up itself) before the call is closed regardless.
const CHANNEL_CLOSE_GRACE: Duration = Duration::from_secs(2);
/// Once both sides have closed `oai-events`, the call goes this much later: the client's stack
/// may still be delivering the channel's close to the page, and an association abort arriving
/// first would show there as a transport error.
const AFTER_CHANNEL_CLOSE: Duration = Duration::from_millis(500);

/// Where replies go next: a client address and the relay that carried it, from a binding request
/// the stack has not answered yet. The stack answers only a check carrying the ICE password
/// (MESSAGE-INTEGRITY), so taking the path when the answer goes out means no one without the
/// password can redirect a call, whatever addresses or link headers they forge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingMove {
    pub client: SocketAddr,
    pub via: Option<(SocketAddr, u32)>,
    pub txid: [u8; 12],
}

#[derive(Debug, Default, Clone, Copy, Serialize, serde::Deserialize)]
pub struct SessionCounters {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub audio_frames_in: u64,
    pub audio_frames_out: u64,
}

pub struct Session {
    pub call_id: String,
    pub ufrag: String,
    pub pc: RTCPeerConnection,
    /// The address in our answer's candidate; every datagram is presented to ICE as arriving
    /// there, whichever relay carried it, because that is what the client sent to.
    pub candidate: SocketAddr,
    /// Where the client is now (replies go here).
    pub client: Option<SocketAddr>,
    /// Where the client first came from: the address the stack knows it by.
    pub canonical: Option<SocketAddr>,
    /// A new return path that sent a binding request, taken once the stack answers it.
    pub pending_move: Option<PendingMove>,
    /// The relay link (and its ingress id) replies go back through; `None` means the client
    /// talks to this socket directly. Like `client`, it changes only through a [`PendingMove`].
    pub via: Option<(SocketAddr, u32)>,
    /// Addresses besides `client` that this call accepts datagrams from (a NAT rebinding in
    /// progress), oldest first; bounded so forged checks cannot grow the address index.
    pub aliases: Vec<SocketAddr>,
    pub state: SessionState,
    pub created: Instant,
    pub connected_at: Option<Instant>,
    /// The ICE agent gave up: no valid checks for its failure timeout. Before the call connected
    /// that is a client that never arrived; after, a client that stopped consenting.
    pub ice_failed: bool,
    /// The setup timeline went into the worker's histograms (once per call).
    setup_reported: bool,
    /// The first audio packet we sent, and whether the worker has counted it.
    first_audio_at: Option<Instant>,
    first_audio_reported: bool,
    /// When ICE selected its pair: with ICE-lite that is the client's first valid check, not
    /// its later nomination (see vendor/rtc-ice/PATCHED.md).
    pub ice_connected_at: Option<Instant>,
    /// Last STUN binding request from the client (RFC 7675 consent).
    pub last_consent: Instant,
    /// Last audio packet or `oai-events` message from the client (decrypted, so it cannot be
    /// forged): what the idle timeout measures. Consent checks and SCTP heartbeats keep a call
    /// that nobody uses alive, so they do not count.
    pub last_heard: Instant,
    pub counters: SessionCounters,
    /// The instant this session is queued under in the worker's timer heap.
    pub next_timeout: Option<Instant>,
    /// The endpoint has stopped counting this call as connecting (see `Endpoint::connecting`).
    pub left_connecting: bool,
    /// The session hit its maximum duration: the `error` event is out, and the call closes at
    /// `close_at`.
    pub expired: bool,
    close_at: Option<Instant>,
    /// Tests set it to make the call's next turn panic (see `Endpoint::isolate`).
    #[cfg(test)]
    pub inject_panic: bool,
    audio_sender: RTCRtpSenderId,
    audio_ssrc: u32,
    audio_pt: Option<u8>,
    out_seq: u16,
    out_ts: u32,
    /// The call itself: engine, media, jobs, event log, sidebands, recording.
    call: Call,
    events_channel: Option<RTCDataChannelId>,
    /// `oai-events` as the server closes it (see [`Session::handle_timeout`]).
    closing_channel: Option<RTCDataChannelId>,
    /// How long after the conversation asks to end the call it is closed (see [`Session::expire`]).
    end_grace: Duration,
}

pub struct NewSession {
    pub call_id: String,
    pub ufrag: String,
    pub pc: RTCPeerConnection,
    pub candidate: SocketAddr,
    pub audio_sender: RTCRtpSenderId,
    pub audio_ssrc: u32,
    /// The audio codec the answer chose.
    pub codec: Codec,
    pub setup: CallSetup,
    /// Room for the recording of a session started with `store: true`.
    pub recording: Option<crate::call::recording::RecordingRoom>,
    /// Appends' length for a call bridged upstream (see [`crate::upstream::UpstreamConfig`]).
    pub upstream_append_ms: u32,
}

impl Session {
    pub fn new(now: Instant, n: NewSession) -> Self {
        let mut call = match &n.setup.upstream {
            Some(up) => {
                let bridge = match (&n.setup.live, up.session.first()) {
                    (Some(_), Some(start)) => Bridge::live_rtp(
                        now,
                        &n.call_id,
                        n.codec,
                        n.upstream_append_ms,
                        start.clone(),
                    ),
                    _ => Bridge::rtp(now, n.codec, n.upstream_append_ms, &up.session),
                };
                Call::rtp_bridged(n.call_id.clone(), now, bridge)
            }
            None => {
                let expires_at = crate::realtime::session_limits::expires_at_unix();
                let mut engine = Engine::new(&n.call_id, n.setup, expires_at);
                if let (Engine::Realtime(conv), false) = (&mut engine, n.codec == Codec::Opus) {
                    // The session reports the call's audio as what it is on the wire.
                    if let Some(format) = AudioFormat::from_name(n.codec.realtime_format()) {
                        conv.set_audio_format(format);
                    }
                }
                Call::rtp(n.call_id.clone(), now, engine, n.codec)
            }
        };
        if let Some(room) = n.recording {
            call.start_recording(room);
        }
        Session {
            call_id: n.call_id,
            ufrag: n.ufrag,
            pc: n.pc,
            candidate: n.candidate,
            client: None,
            canonical: None,
            pending_move: None,
            aliases: Vec::new(),
            via: None,
            state: SessionState::Connecting,
            created: now,
            connected_at: None,
            ice_failed: false,
            setup_reported: false,
            left_connecting: false,
            expired: false,
            close_at: None,
            #[cfg(test)]
            inject_panic: false,
            first_audio_at: None,
            first_audio_reported: false,
            ice_connected_at: None,
            last_consent: now,
            last_heard: now,
            counters: SessionCounters::default(),
            next_timeout: None,
            audio_sender: n.audio_sender,
            audio_ssrc: n.audio_ssrc,
            audio_pt: None,
            out_seq: rand::random(),
            out_ts: rand::random(),
            call,
            events_channel: None,
            closing_channel: None,
            end_grace: DEFAULT_END_GRACE,
        }
    }

    /// The client's RTCP view of our audio; `None` until its first report.
    pub fn client_report(&mut self, now: Instant) -> Option<ClientReport> {
        use rtc::statistics::StatsSelector;
        use rtc::statistics::report::RTCStatsReportEntry;
        let report = self
            .pc
            .get_stats(now, StatsSelector::Sender(self.audio_sender));
        report.iter().find_map(|e| match e {
            RTCStatsReportEntry::RemoteInboundRtp(r) if r.round_trip_time_measurements > 0 => {
                Some(ClientReport {
                    reports: r.round_trip_time_measurements,
                    packets_lost: r.received_rtp_stream_stats.packets_lost,
                    fraction_lost: r.fraction_lost,
                    // rtc passes the report's value through in RTP clock ticks, though the
                    // stats field is documented in seconds.
                    jitter_ms: r.received_rtp_stream_stats.jitter
                        / f64::from(self.call.codec().clock_hz())
                        * 1000.0,
                })
            }
            _ => None,
        })
    }

    /// Answer → first audio sent to the client, once. With `loopback` that is the network path;
    /// with `echo` and `tts` it includes the model's turn.
    pub fn take_first_audio(&mut self) -> Option<Duration> {
        if self.first_audio_reported {
            return None;
        }
        let at = self.first_audio_at?;
        self.first_audio_reported = true;
        Some(at - self.created)
    }

    /// Answer → ICE selected and answer → DTLS connected, the first time both are known.
    pub fn take_setup_timeline(&mut self) -> Option<(Duration, Duration)> {
        if self.setup_reported {
            return None;
        }
        let (ice, dtls) = (self.ice_connected_at?, self.connected_at?);
        self.setup_reported = true;
        Some((ice - self.created, dtls - self.created))
    }

    /// When the stack or the media side next needs time to pass.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        [
            self.pc.poll_timeout(),
            self.call.poll_timeout(),
            self.close_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The session hit its maximum duration, as the real service's does at 60 minutes: the
    /// client gets the Realtime `error` event (`session_expired`), and the call closes `grace`
    /// later. There is no signal here for "the client has it" (the stack does not report what
    /// SCTP has acknowledged), so the grace covers the path's delay instead.
    pub fn expire(&mut self, now: Instant, grace: Duration) {
        if self.expired {
            return;
        }
        self.end_grace = grace;
        self.call.expire(now);
        self.drive(now);
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.close_at.is_some_and(|t| t <= now) {
            match self.events_channel.take() {
                // The server ends the session (expiry, Live's session.close): the channel is
                // closed first, with an SCTP stream reset that the client sees as a clean close
                // of `oai-events`, rather than as the error an aborted association raises;
                // the call goes shortly after.
                Some(id) => {
                    if let Some(mut dc) = self.pc.data_channel(id) {
                        let _ = dc.close();
                    }
                    // The call ends once the client has closed its side too, or after the grace.
                    self.closing_channel = Some(id);
                    self.close_at = Some(now + CHANNEL_CLOSE_GRACE);
                }
                None => self.state = SessionState::Closed,
            }
        }
        if let Err(e) = self.pc.handle_timeout(now) {
            log::debug!("{}: handle_timeout: {e}", self.call_id);
        }
        self.call.on_timeout(now);
    }

    pub fn take_jobs(&mut self) -> Vec<Job> {
        self.call.take_jobs()
    }

    pub fn on_job_done(&mut self, now: Instant, done: JobDone) {
        self.call.on_job_done(now, done);
        self.drive(now);
    }

    /// What the call's upstream link reported.
    pub fn on_upstream(&mut self, now: Instant, event: UpstreamEvent) {
        self.call.on_upstream(now, event);
        self.drive(now);
    }

    /// The call's upstream link, opened by the worker.
    pub fn attach_upstream(&mut self, now: Instant, link: UpstreamLink) {
        self.call.attach_upstream(link);
        self.drive(now);
    }

    /// This call's event log, read while the call is live.
    pub fn event_log(&self) -> Option<&EventLog> {
        self.call.event_log()
    }

    /// The event log, taken when the call ends so it outlives the session.
    pub fn take_event_log(&mut self) -> Option<EventLog> {
        self.call.take_event_log()
    }

    pub fn timings(&self) -> VoiceTimings {
        self.call.timings()
    }

    /// Processes everything the last input made ready. Errors from the stack are logged, not
    /// fatal: one malformed packet must not end a call.
    pub fn drive(&mut self, now: Instant) {
        #[cfg(test)]
        if self.inject_panic {
            panic!("injected fault in call {}", self.call_id);
        }
        loop {
            let mut progressed = false;
            // Only media moved this round: RTP and RTCP read from the stack, audio written to
            // it. Neither raises a stack event nor queues a read, and the call's output was
            // drained, so another round would sweep every handler to find nothing; at 50
            // packets a second per call that sweep was a measurable share of the CPU.
            let mut media_only = true;
            while let Some(ev) = self.pc.poll_event() {
                progressed = true;
                media_only = false;
                self.on_event(now, ev);
            }
            while let Some(msg) = self.pc.poll_read() {
                progressed = true;
                media_only &= matches!(
                    msg.message,
                    RTCMessage::RtpPacket(..) | RTCMessage::RtcpPacket(..)
                );
                self.on_message(now, msg.message);
            }
            while let Some(output) = self.call.poll_output(now) {
                progressed = true;
                media_only &= matches!(output, CallOutput::Audio { .. });
                self.on_output(now, output);
            }
            if !progressed || media_only {
                break;
            }
        }
    }

    /// The round after a media datagram on a connected call: its RTP or RTCP taken from the
    /// stack without sweeping the stack's handlers, and the call's audio written back. Returns
    /// false, having done nothing else, when the call put out more than audio: then a full
    /// [`drive`](Self::drive) is needed.
    ///
    /// Why: the stack takes such a datagram through its media handlers only (SRTP, interceptors,
    /// endpoint), which raise no connection event and queue nothing for other handlers, so the
    /// sweeps `drive` makes to collect events and reads found nothing: three sweeps of eight
    /// handlers per datagram, 50 times a second per call. What the stack does raise on a
    /// stream's first packet (its track opening) waits for the next full round, a timer's at
    /// the latest; this server does nothing with it.
    pub fn drive_media(&mut self, now: Instant) -> bool {
        #[cfg(test)]
        if self.inject_panic {
            panic!("injected fault in call {}", self.call_id);
        }
        while let Some(msg) = self.pc.poll_media_read() {
            self.on_message(now, msg.message);
        }
        while let Some(output) = self.call.poll_output(now) {
            let audio = matches!(output, CallOutput::Audio { .. });
            self.on_output(now, output);
            if !audio {
                return false;
            }
        }
        true
    }

    fn on_output(&mut self, now: Instant, output: CallOutput) {
        match output {
            CallOutput::Audio { payload, ticks } => self.send_audio(now, payload, ticks),
            CallOutput::Event(frame) => self.send_event(now, frame),
            CallOutput::End => {
                // The session expired (the fault, or a script's step): closed once the
                // events before it have had time to arrive.
                self.expired = true;
                self.close_at.get_or_insert(now + self.end_grace);
            }
        }
    }

    fn on_event(&mut self, now: Instant, ev: RTCPeerConnectionEvent) {
        match ev {
            RTCPeerConnectionEvent::OnConnectionStateChangeEvent(state) => {
                log::debug!("{}: peer connection {state}", self.call_id);
                match state {
                    RTCPeerConnectionState::Connected => {
                        self.state = SessionState::Connected;
                        self.connected_at.get_or_insert(now);
                    }
                    RTCPeerConnectionState::Failed | RTCPeerConnectionState::Closed => {
                        self.state = SessionState::Closed;
                    }
                    _ => {}
                }
            }
            RTCPeerConnectionEvent::OnIceConnectionStateChangeEvent(
                RTCIceConnectionState::Connected,
            ) => {
                self.ice_connected_at.get_or_insert(now);
            }
            RTCPeerConnectionEvent::OnIceConnectionStateChangeEvent(
                RTCIceConnectionState::Failed,
            ) => {
                self.ice_failed = true;
            }
            RTCPeerConnectionEvent::OnDataChannel(RTCDataChannelEvent::OnOpen(id)) => {
                let label = self.pc.data_channel(id).map(|dc| dc.label().to_owned());
                if label.as_deref() == Some(EVENTS_CHANNEL) {
                    self.events_channel = Some(id);
                    self.call.on_channel_open();
                } else {
                    log::debug!("{}: ignoring data channel {label:?}", self.call_id);
                }
            }
            RTCPeerConnectionEvent::OnDataChannel(RTCDataChannelEvent::OnClose(id))
                if self.closing_channel == Some(id) =>
            {
                // The server's close completed: the call ends shortly (see above).
                self.closing_channel = None;
                self.close_at = Some(now + AFTER_CHANNEL_CLOSE);
            }
            RTCPeerConnectionEvent::OnDataChannel(RTCDataChannelEvent::OnClose(id))
                if self.events_channel == Some(id) =>
            {
                // Realtime clients close `oai-events` only when they hang up (the SDK's
                // close() closes it, then the peer connection), and some stacks never send
                // DTLS close_notify; treat it as the end of the call rather than wait for
                // consent to expire.
                self.events_channel = None;
                self.state = SessionState::Closed;
            }
            _ => {}
        }
    }

    fn on_message(&mut self, now: Instant, msg: RTCMessage) {
        match msg {
            RTCMessage::RtpPacket(_, pkt) => {
                self.last_heard = now;
                self.counters.audio_frames_in += 1;
                self.call.on_rtp(
                    now,
                    &pkt.payload,
                    pkt.header.timestamp,
                    pkt.header.sequence_number,
                );
            }
            RTCMessage::DataChannelMessage(id, msg) if Some(id) == self.events_channel => {
                self.last_heard = now;
                if !msg.is_string {
                    // Realtime clients parse every frame as JSON text; binary has no meaning.
                    return;
                }
                let text = String::from_utf8_lossy(&msg.data);
                self.call
                    .on_client_text(now, &text, EventSource::DataChannel);
            }
            _ => {}
        }
    }

    /// Attaches a sideband (see [`crate::call::sideband`]); `None` when the call has as many
    /// as it takes. The sideband's first frame is a `session.created` with the session as it is now.
    pub fn attach_sideband(
        &mut self,
        out: crate::call::event_stream::FrameSender,
    ) -> Option<SidebandId> {
        self.call.attach_sideband(out)
    }

    pub fn detach_sideband(&mut self, id: SidebandId) {
        self.call.detach_sideband(id);
    }

    /// A client event from a sideband.
    pub fn on_sideband_text(&mut self, now: Instant, text: &str) {
        self.last_heard = now;
        self.call.on_client_text(now, text, EventSource::Sideband);
    }

    /// The call is ending (see [`crate::call::Call::end`]).
    pub fn end(&mut self, now: Instant, reason: &'static str) {
        self.call.end(now, reason);
    }

    /// The recording as a WAV file, when the session was stored; taken when the call ends.
    pub fn take_recording(&mut self) -> Option<crate::call::recording::Recorder> {
        self.call.take_recording()
    }

    /// A server event for `oai-events` (the call has logged it and sent it to the sidebands).
    fn send_event(&mut self, now: Instant, frame: String) {
        let Some(id) = self.events_channel else {
            return;
        };
        if !self.call.channel_receives(&frame) {
            return;
        }
        let Some(mut dc) = self.pc.data_channel(id) else {
            return;
        };
        if let Err(e) = dc.send_text(now, frame) {
            log::warn!("{}: data channel send failed: {e}", self.call_id);
        }
    }

    /// Sends one frame of the call's codec; `samples` (its duration in RTP clock ticks) advances
    /// the timestamp.
    fn send_audio(&mut self, now: Instant, payload: Bytes, samples: u32) {
        self.first_audio_at.get_or_insert(now);
        if self.state != SessionState::Connected {
            return;
        }
        let mime = self.call.codec().mime_type();
        let Some(mut sender) = self.pc.rtp_sender(self.audio_sender) else {
            return;
        };
        let pt = match self.audio_pt {
            Some(pt) => pt,
            None => {
                let Some(pt) = sender
                    .get_parameters()
                    .rtp_parameters
                    .codecs
                    .iter()
                    .find(|c| c.rtp_codec.mime_type.eq_ignore_ascii_case(mime))
                    .map(|c| c.payload_type)
                else {
                    return;
                };
                self.audio_pt = Some(pt);
                pt
            }
        };
        let packet = rtc::rtp::Packet {
            header: rtc::rtp::header::Header {
                version: 2,
                payload_type: pt,
                sequence_number: self.out_seq,
                timestamp: self.out_ts,
                ssrc: self.audio_ssrc,
                ..Default::default()
            },
            payload,
        };
        self.out_seq = self.out_seq.wrapping_add(1);
        self.out_ts = self.out_ts.wrapping_add(samples);
        match sender.write_rtp(now, packet) {
            Ok(()) => self.counters.audio_frames_out += 1,
            Err(e) => log::debug!("{}: write_rtp: {e}", self.call_id),
        }
    }
}
