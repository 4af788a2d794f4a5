//! One load-generator call: a sans-I/O `rtc` peer connection as the offerer (full ICE,
//! controlling, DTLS client), an Opus track and the `oai-events` channel, like the Realtime
//! clients; plus what it measures.
//!
//! The call owns nothing but its own UDP socket and state; the worker's epoll loop feeds it
//! datagrams and timer ticks.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use rtc::data_channel::RTCDataChannelId;
use rtc::interceptor::Registry;
use rtc::media_stream::MediaStreamTrack;
use rtc::peer_connection::certificate::RTCCertificate;
use rtc::peer_connection::configuration::RTCConfigurationBuilder;
use rtc::peer_connection::configuration::media_engine::MediaEngine;
use rtc::peer_connection::configuration::setting_engine::SettingEngineBuilder;
use rtc::peer_connection::event::{RTCDataChannelEvent, RTCPeerConnectionEvent};
use rtc::peer_connection::message::RTCMessage;
use rtc::peer_connection::sdp::RTCSessionDescription;
use rtc::peer_connection::state::{RTCIceConnectionState, RTCPeerConnectionState};
use rtc::peer_connection::{RTCPeerConnection, RTCPeerConnectionBuilder};
use rtc::rtp_transceiver::RTCRtpSenderId;
use rtc::rtp_transceiver::rtp_sender::{
    RTCRtpCodecParameters, RTCRtpCodingParameters, RTCRtpEncodingParameters, RtpCodecKind,
};
use rtc::sansio::Protocol;
use rtc::shared::{TaggedBytesMut, TransportContext, TransportProtocol};

use super::stats::Histogram;

pub const EVENTS_CHANNEL: &str = "oai-events";
pub const FRAME: Duration = Duration::from_millis(20);
const SAMPLES_PER_FRAME: u32 = 960;
const OPUS_PT: u8 = 111;
/// What the Realtime SDK sends first on the channel (docs/realtime-protocol.md §2), trimmed to the
/// fields a server must accept.
const SESSION_UPDATE: &str = r#"{"type":"session.update","session":{"type":"realtime","instructions":"voice-edge loadgen","model":"gpt-realtime","output_modalities":["audio"],"audio":{"input":{"format":{"type":"audio/pcm","rate":24000},"turn_detection":{"type":"semantic_vad"}},"output":{"format":{"type":"audio/pcm","rate":24000}}}}}"#;

/// Payload layout (60–120 bytes, like 20 ms of Opus speech): an Opus TOC byte (config 15,
/// hybrid fullband 20 ms, one frame, as Chromium sends) so the packet parses as Opus, a 2-byte
/// tag, the call index, the payload sequence number and the send time (µs since the run
/// started), then filler.
const TOC: u8 = 0x78;
const TAG: [u8; 2] = *b"VE";
const HEADER: usize = 19;

/// Noise-like filler (xorshift), so payloads do not compress or look like silence.
const FILLER: [u8; 128] = {
    let mut out = [0u8; 128];
    let mut x: u32 = 0x9E37_79B9;
    let mut i = 0;
    while i < out.len() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out[i] = x as u8;
        i += 1;
    }
    out
};

pub fn encode_payload(call: u32, seq: u32, sent_us: u64) -> Bytes {
    let len = 60 + (seq.wrapping_mul(37).wrapping_add(call) % 61) as usize;
    let mut b = BytesMut::with_capacity(len);
    b.extend_from_slice(&[TOC, TAG[0], TAG[1]]);
    b.extend_from_slice(&call.to_be_bytes());
    b.extend_from_slice(&seq.to_be_bytes());
    b.extend_from_slice(&sent_us.to_be_bytes());
    let skip = (seq % 8) as usize;
    b.extend_from_slice(&FILLER[skip..skip + len - HEADER]);
    b.freeze()
}

/// (call, seq, sent_us) of a payload this load generator wrote.
pub fn decode_payload(p: &[u8]) -> Option<(u32, u32, u64)> {
    if p.len() < HEADER || p[0] != TOC || p[1..3] != TAG {
        return None;
    }
    let call = u32::from_be_bytes(p[3..7].try_into().ok()?);
    let seq = u32::from_be_bytes(p[7..11].try_into().ok()?);
    let sent = u64::from_be_bytes(p[11..19].try_into().ok()?);
    Some((call, seq, sent))
}

fn opus() -> RTCRtpCodecParameters {
    let mut c = crate::transceiver::opus_codec();
    c.payload_type = OPUS_PT;
    c
}

/// The shortest silence between two echoes that [`Record::long_gaps`] keeps: two and a half
/// packet times, more than a lost packet or the jitter of a busy machine's scheduler.
pub const LONG_GAP: Duration = Duration::from_millis(50);
/// Long gaps kept per call (a call that stalls over and over needs no more to show it).
const MAX_LONG_GAPS: usize = 256;

/// What a call reports when it is over; small, kept for every call.
#[derive(Debug, Default, Clone)]
pub struct Record {
    pub started: Option<Instant>,
    pub posted: Option<Instant>,
    pub answered: Option<Instant>,
    pub ice_connected: Option<Instant>,
    pub dtls_connected: Option<Instant>,
    pub first_echo: Option<Instant>,
    pub last_echo: Option<Instant>,
    /// The longest silence between two echoes this call heard: a relay restart or a stall shows
    /// here per call, where loss and RTT averages hide it.
    pub max_echo_gap: Option<std::time::Duration>,
    /// Every silence of at least [`LONG_GAP`] (when it ended, how long), so a bench can tell
    /// the gaps an event caused (a relay restart) from the ones the machine gives anyway.
    pub long_gaps: Vec<(Instant, Duration)>,
    pub channel_open: Option<Instant>,
    pub session_updated: bool,
    pub events_in: u32,
    pub error_events: u32,
    pub error: Option<String>,
    pub sent: u64,
    /// Sent early enough (more than the grace before the end) that a missing echo is loss.
    pub counted: u64,
    pub received: u64,
    pub counted_received: u64,
    pub duplicates: u64,
    /// Echoes carrying another call's tag: media crossed between calls.
    pub misrouted: u64,
    pub disconnects: u32,
    pub hangup_status: Option<Result<u16, String>>,
    /// The offer was refused for load (429 or 503) with this status.
    pub refused: Option<u16>,
}

impl Record {
    pub fn ms_after_post(&self, t: Option<Instant>) -> Option<f64> {
        Some(t?.duration_since(self.posted?).as_secs_f64() * 1000.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Offer handed to the HTTP pool.
    Offering,
    /// Answer applied; waiting for ICE and DTLS.
    Connecting,
    Live,
    /// Hang-up requested over HTTP; closing when it answers.
    HangingUp,
}

pub struct Live {
    pub socket: UdpSocket,
    pub local: SocketAddr,
    pub pc: RTCPeerConnection,
    pub phase: Phase,
    sender: RTCRtpSenderId,
    ssrc: u32,
    rtp_seq: u16,
    rtp_ts: u32,
    next_payload: u32,
    pub next_audio: Option<Instant>,
    pub rtc_timeout: Option<Instant>,
    /// The instant this call is queued under in the worker's timer heap.
    pub scheduled: Option<Instant>,
    pub location: Option<String>,
    channel: Option<RTCDataChannelId>,
    /// The remote this socket is `connect`ed to, once live.
    connected: Option<SocketAddr>,
    /// One bit per payload sequence number: echoed yet?
    echoed: Vec<u64>,
}

/// The shared, read-only facts every call needs.
pub struct Ctx {
    pub index: u32,
    pub epoch: Instant,
    /// Audio stops here; payloads sent after `count_until` are not counted for loss.
    pub stop_audio: Instant,
    pub count_until: Instant,
}

impl Live {
    /// Builds the offerer and its offer SDP (with our host candidate in it).
    pub fn new(
        now: Instant,
        socket: UdpSocket,
        certificate: &RTCCertificate,
    ) -> anyhow::Result<(Live, String)> {
        let local = socket.local_addr()?;
        let mut media_engine = MediaEngine::default();
        media_engine.register_codec(opus(), RtpCodecKind::Audio)?;
        // rtc's default ICE pacing (a check every 200 ms). A check every 50 ms was tried: it took
        // this client from 5.1 to 3.1 RTT to ICE on a 50 ms network (bench/connect/rtt.sh's
        // loadgen row), but on loopback at 1,000 calls offer → ICE connected went from ~5 ms to
        // 53 ms (p50). Not set until that is understood.
        let setting_engine = SettingEngineBuilder::new()
            .with_include_loopback_candidate(true)
            .build();
        let config = RTCConfigurationBuilder::new()
            .with_certificates(vec![certificate.clone()])
            .build();
        // No interceptors: a client that only needs SRTP in and out stays cheap per packet.
        let mut pc = RTCPeerConnectionBuilder::new()
            .with_configuration(config)
            .with_setting_engine(setting_engine)
            .with_media_engine(media_engine)
            .with_interceptor_registry(Registry::new())
            .build(now)?;
        let ssrc = rand::random::<u32>();
        let track = MediaStreamTrack::new(
            "loadgen".to_owned(),
            format!("mic-{ssrc:08x}"),
            "mic".to_owned(),
            RtpCodecKind::Audio,
            vec![RTCRtpEncodingParameters {
                rtp_coding_parameters: RTCRtpCodingParameters {
                    ssrc: Some(ssrc),
                    ..Default::default()
                },
                codec: opus().rtp_codec,
                ..Default::default()
            }],
        );
        let sender = pc.add_track(track)?;
        pc.create_data_channel(EVENTS_CHANNEL, None)?;
        let offer = pc.create_offer(None)?;
        pc.set_local_description(now, offer)?;
        crate::transceiver::add_host_candidate(&mut pc, local)?;
        let sdp = pc
            .local_description()
            .map(|d| d.sdp)
            .ok_or_else(|| anyhow::anyhow!("no local description after set_local_description"))?;
        let live = Live {
            socket,
            local,
            pc,
            phase: Phase::Offering,
            sender,
            ssrc,
            rtp_seq: rand::random(),
            rtp_ts: rand::random(),
            next_payload: 0,
            next_audio: None,
            rtc_timeout: None,
            scheduled: None,
            location: None,
            channel: None,
            connected: None,
            echoed: Vec::new(),
        };
        Ok((live, sdp))
    }

    pub fn apply_answer(&mut self, now: Instant, sdp: String) -> anyhow::Result<()> {
        let answer = RTCSessionDescription::answer(sdp)?;
        self.pc.set_remote_description(now, answer)?;
        self.phase = Phase::Connecting;
        Ok(())
    }

    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        let msg = TaggedBytesMut {
            now,
            transport: TransportContext {
                local_addr: self.local,
                peer_addr: from,
                ecn: None,
                transport_protocol: TransportProtocol::UDP,
            },
            message: BytesMut::from(data),
        };
        if let Err(e) = self.pc.handle_read(msg) {
            log::debug!("loadgen call {}: handle_read: {e}", self.local);
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if let Err(e) = self.pc.handle_timeout(now) {
            log::debug!("loadgen call {}: handle_timeout: {e}", self.local);
        }
    }

    /// Sends every 20 ms frame that is due (at most a few, if the loop fell behind).
    /// Returns how many frames went out.
    pub fn send_due_audio(&mut self, now: Instant, ctx: &Ctx, rec: &mut Record) -> usize {
        let Some(mut due) = self.next_audio else {
            return 0;
        };
        if self.phase != Phase::Live {
            return 0;
        }
        let mut n = 0;
        while due <= now && n < 3 {
            if now >= ctx.stop_audio {
                self.next_audio = None;
                return n;
            }
            self.send_frame(now, ctx, rec);
            due = if rec.sent == 1 {
                // The first frame goes out as soon as DTLS is up (it times the first echo);
                // the stream then takes a random phase within the frame, since calls started
                // on a fixed ramp would otherwise all send in the same millisecond of every
                // 20 ms, which no real population of callers does.
                now + Duration::from_micros(rand::random::<u64>() % FRAME.as_micros() as u64)
            } else {
                due + FRAME
            };
            n += 1;
        }
        // A loop that stalled for longer does not burst to catch up; a real client would not.
        if due + FRAME * 5 < now {
            due = now + FRAME;
        }
        self.next_audio = Some(due);
        n
    }

    fn send_frame(&mut self, now: Instant, ctx: &Ctx, rec: &mut Record) {
        let seq = self.next_payload;
        let sent_us = now.duration_since(ctx.epoch).as_micros() as u64;
        let packet = rtc::rtp::Packet {
            header: rtc::rtp::header::Header {
                version: 2,
                payload_type: OPUS_PT,
                sequence_number: self.rtp_seq,
                timestamp: self.rtp_ts,
                ssrc: self.ssrc,
                marker: seq == 0,
                ..Default::default()
            },
            payload: encode_payload(ctx.index, seq, sent_us),
        };
        let Some(mut sender) = self.pc.rtp_sender(self.sender) else {
            return;
        };
        match sender.write_rtp(now, packet) {
            Ok(()) => {
                self.next_payload += 1;
                self.rtp_seq = self.rtp_seq.wrapping_add(1);
                self.rtp_ts = self.rtp_ts.wrapping_add(SAMPLES_PER_FRAME);
                rec.sent += 1;
                if now < ctx.count_until {
                    rec.counted += 1;
                }
            }
            Err(e) => log::debug!("loadgen call {}: write_rtp: {e}", self.local),
        }
    }

    /// Moves everything the last input produced: state changes, data-channel messages, echoes.
    ///
    /// Every `poll_*` call that returns `None` sweeps the whole `rtc` handler pipeline, so a
    /// live call (where a datagram is almost always one echo) takes one pass; during setup,
    /// where one input can cascade (ICE → DTLS → SCTP → channel open), it loops until quiet.
    pub fn drive(&mut self, now: Instant, ctx: &Ctx, rec: &mut Record, rtt: &mut Histogram) {
        for _ in 0..8 {
            let mut progressed = false;
            while let Some(ev) = self.pc.poll_event() {
                progressed = true;
                self.on_event(now, ev, rec);
            }
            while let Some(m) = self.pc.poll_read() {
                if self.phase != Phase::Live {
                    progressed = true;
                }
                match m.message {
                    RTCMessage::RtpPacket(_, pkt) => self.on_echo(now, &pkt.payload, ctx, rec, rtt),
                    RTCMessage::DataChannelMessage(_, msg) => self.on_channel_message(&msg, rec),
                    _ => {}
                }
            }
            if !progressed {
                break;
            }
        }
    }

    /// The live-call fast path after `n` media datagrams: take at most `n` messages (each
    /// `poll_read` is a pipeline sweep, so the empty one that would end a drain is skipped).
    pub fn read_media(
        &mut self,
        now: Instant,
        n: usize,
        ctx: &Ctx,
        rec: &mut Record,
        rtt: &mut Histogram,
    ) {
        for _ in 0..n {
            let Some(m) = self.pc.poll_read() else {
                return;
            };
            match m.message {
                RTCMessage::RtpPacket(_, pkt) => self.on_echo(now, &pkt.payload, ctx, rec, rtt),
                RTCMessage::DataChannelMessage(_, msg) => self.on_channel_message(&msg, rec),
                _ => {}
            }
        }
    }

    fn on_channel_message(&self, msg: &rtc::data_channel::RTCDataChannelMessage, rec: &mut Record) {
        rec.events_in += 1;
        if msg.is_string {
            let t = String::from_utf8_lossy(&msg.data);
            if t.contains("\"session.updated\"") {
                rec.session_updated = true;
            } else if t.contains("\"type\":\"error\"") {
                rec.error_events += 1;
                log::debug!("loadgen call {}: {t}", self.local);
            }
        }
    }

    fn on_event(&mut self, now: Instant, ev: RTCPeerConnectionEvent, rec: &mut Record) {
        match ev {
            RTCPeerConnectionEvent::OnIceConnectionStateChangeEvent(s) => match s {
                RTCIceConnectionState::Connected | RTCIceConnectionState::Completed => {
                    rec.ice_connected.get_or_insert(now);
                }
                RTCIceConnectionState::Failed
                    if rec.error.is_none() && self.phase != Phase::HangingUp =>
                {
                    rec.error = Some(if rec.ice_connected.is_some() {
                        "ICE failed after connecting".to_owned()
                    } else {
                        "ICE failed (no connectivity check answered)".to_owned()
                    });
                }
                _ => {}
            },
            RTCPeerConnectionEvent::OnConnectionStateChangeEvent(s) => match s {
                RTCPeerConnectionState::Connected if rec.dtls_connected.is_none() => {
                    rec.dtls_connected = Some(now);
                    self.phase = Phase::Live;
                    self.next_audio = Some(now);
                }
                RTCPeerConnectionState::Disconnected => rec.disconnects += 1,
                RTCPeerConnectionState::Failed | RTCPeerConnectionState::Closed
                    if rec.error.is_none() && self.phase != Phase::HangingUp =>
                {
                    rec.error = Some(match (s, rec.dtls_connected) {
                        (RTCPeerConnectionState::Failed, None) => {
                            "peer connection failed during setup".to_owned()
                        }
                        (RTCPeerConnectionState::Failed, Some(_)) => {
                            "peer connection failed mid-call".to_owned()
                        }
                        _ => "closed by the server before hang-up".to_owned(),
                    });
                }
                _ => {}
            },
            RTCPeerConnectionEvent::OnDataChannel(RTCDataChannelEvent::OnOpen(id)) => {
                let Some(mut dc) = self.pc.data_channel(id) else {
                    return;
                };
                if dc.label() != EVENTS_CHANNEL {
                    return;
                }
                // Like the SDK: the full session.update as soon as the channel opens.
                if let Err(e) = dc.send_text(now, SESSION_UPDATE) {
                    log::debug!("loadgen call {}: session.update: {e}", self.local);
                }
                self.channel = Some(id);
                rec.channel_open.get_or_insert(now);
            }
            RTCPeerConnectionEvent::OnDataChannel(RTCDataChannelEvent::OnClose(id))
                if self.channel == Some(id) =>
            {
                self.channel = None;
            }
            _ => {}
        }
    }

    fn on_echo(
        &mut self,
        now: Instant,
        payload: &[u8],
        ctx: &Ctx,
        rec: &mut Record,
        rtt: &mut Histogram,
    ) {
        let Some((call, seq, sent_us)) = decode_payload(payload) else {
            return; // not ours (e.g. model audio that is not an echo)
        };
        if call != ctx.index {
            rec.misrouted += 1;
            return;
        }
        let (word, bit) = (seq as usize / 64, seq % 64);
        if word >= self.echoed.len() {
            if seq >= self.next_payload {
                return; // never sent: corrupt
            }
            self.echoed.resize(word + 1, 0);
        }
        if self.echoed[word] & (1 << bit) != 0 {
            rec.duplicates += 1;
            return;
        }
        self.echoed[word] |= 1 << bit;
        rec.received += 1;
        if (seq as u64) < rec.counted {
            rec.counted_received += 1;
        }
        rec.first_echo.get_or_insert(now);
        if let Some(last) = rec.last_echo.replace(now) {
            let gap = now.saturating_duration_since(last);
            rec.max_echo_gap = Some(rec.max_echo_gap.map_or(gap, |g| g.max(gap)));
            if gap >= LONG_GAP && rec.long_gaps.len() < MAX_LONG_GAPS {
                rec.long_gaps.push((now, gap));
            }
        }
        let now_us = now.duration_since(ctx.epoch).as_micros() as u64;
        rtt.record_us(now_us.saturating_sub(sent_us));
    }

    /// Sends at most `n` queued datagrams (the ones the caller knows it just queued), without
    /// the pipeline sweep of the empty `poll_write` that ends a full [`Live::flush`].
    pub fn flush_n(&mut self, n: usize) {
        for _ in 0..n {
            let Some(out) = self.pc.poll_write() else {
                return;
            };
            self.send(&out.message, out.transport.peer_addr);
        }
    }

    /// Sends what the peer connection queued. Errors are dropped like any UDP loss.
    ///
    /// Once the call is live its socket is `connect`ed to the selected remote (the relay), so
    /// each packet is a `send` on a cached route instead of a `sendto` with a route lookup.
    pub fn flush(&mut self) {
        while let Some(out) = self.pc.poll_write() {
            self.send(&out.message, out.transport.peer_addr);
        }
    }

    fn send(&mut self, data: &[u8], peer: SocketAddr) {
        if self.connected.is_none()
            && self.phase == Phase::Live
            && self.socket.connect(peer).is_ok()
        {
            self.connected = Some(peer);
        }
        let r = if self.connected == Some(peer) {
            self.socket.send(data)
        } else {
            self.socket.send_to(data, peer)
        };
        if let Err(e) = r
            && e.kind() != std::io::ErrorKind::WouldBlock
        {
            log::debug!("loadgen call {}: send: {e}", self.local);
        }
    }

    /// The next instant this call needs the loop: an `rtc` deadline or its next audio frame.
    /// `refresh` asks `rtc` again (after any input); sending audio alone moves no `rtc` timer,
    /// so the cached deadline stands and a pipeline sweep is saved per frame.
    pub fn wake_at(&mut self, refresh: bool) -> Option<Instant> {
        if refresh {
            self.rtc_timeout = self.pc.poll_timeout();
        }
        match (self.rtc_timeout, self.next_audio) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn close(&mut self) {
        let _ = self.pc.close();
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_look_like_opus() {
        for seq in [0u32, 1, 2, 999, u32::MAX] {
            let p = encode_payload(7, seq, 123_456_789);
            assert!((60..=120).contains(&p.len()), "len {}", p.len());
            assert_eq!(p[0], 0x78);
            assert_eq!(decode_payload(&p), Some((7, seq, 123_456_789)));
        }
        assert_eq!(decode_payload(&[0x78, b'V', b'E']), None);
        assert_eq!(decode_payload(&[0u8; 80]), None);
    }
}
