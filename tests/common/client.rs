//! A real WebRTC client (the `webrtc` crate, its own UDP socket) that calls as the Realtime SDK
//! does, so tests exercise the same HTTP + ICE + DTLS + SRTP path a browser does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rtc::media_stream::MediaStreamTrack;
use rtc::peer_connection::configuration::media_engine::MediaEngine;
use rtc::peer_connection::sdp::RTCSessionDescription;
use rtc::rtp_transceiver::rtp_sender::{
    RTCRtpCodecParameters, RTCRtpCodingParameters, RTCRtpEncodingParameters, RtpCodecKind,
};
use tokio::sync::{Mutex, mpsc};
use webrtc::data_channel::{DataChannel, DataChannelEvent};
use webrtc::media_stream::track_local::TrackLocal;
use webrtc::media_stream::track_local::static_rtp::TrackLocalStaticRTP;
use webrtc::media_stream::track_remote::{TrackRemote, TrackRemoteEvent};
use webrtc::peer_connection::{
    PeerConnection, PeerConnectionBuilder, PeerConnectionEventHandler, RTCIceGatheringState,
    RTCPeerConnectionState,
};

use super::http::{HttpResponse, http_patch, http_post, http_post_auth};
use voice_edge::audio::{Codec, Encoder, FRAME_SAMPLES};
use voice_edge::transceiver::codec_parameters;

#[derive(Clone)]
struct Handler {
    state_tx: mpsc::UnboundedSender<RTCPeerConnectionState>,
    gathered_tx: mpsc::UnboundedSender<()>,
    rtp_tx: mpsc::UnboundedSender<Bytes>,
    packet_tx: mpsc::UnboundedSender<rtc::rtp::Packet>,
}

#[async_trait::async_trait]
impl PeerConnectionEventHandler for Handler {
    async fn on_ice_gathering_state_change(&self, state: RTCIceGatheringState) {
        if state == RTCIceGatheringState::Complete {
            let _ = self.gathered_tx.send(());
        }
    }
    async fn on_connection_state_change(&self, state: RTCPeerConnectionState) {
        let _ = self.state_tx.send(state);
    }
    async fn on_track(&self, track: Arc<dyn TrackRemote>) {
        let tx = self.rtp_tx.clone();
        let packet_tx = self.packet_tx.clone();
        tokio::spawn(async move {
            while let Some(ev) = track.poll().await {
                if let TrackRemoteEvent::OnRtpPacket(p) = ev {
                    let _ = tx.send(p.payload.clone());
                    let _ = packet_tx.send(p);
                }
            }
        });
    }
}

/// Where a client's UDP socket binds unless told: any free loopback port.
const LOCAL: &str = "127.0.0.1:0";

/// How the offer is posted.
enum Post {
    /// `application/sdp`, as the Realtime WebRTC guide does.
    Sdp,
    /// Multipart `sdp` + `session` with this key, as openai-node's `realtime.calls.create`.
    Multipart(String),
    /// Live's JSON body with this session config.
    Live(serde_json::Value),
}

/// A connected client call: what the Realtime SDK does, minus the browser.
pub struct Client {
    pub pc: Box<dyn PeerConnection>,
    pub track: Arc<TrackLocalStaticRTP>,
    pub ssrc: u32,
    pub response: HttpResponse,
    pub events: Arc<Mutex<Vec<String>>>,
    pub dc: Arc<dyn DataChannel>,
    /// Becomes true when `oai-events` closes: the server's SCTP ABORT / DTLS close_notify
    /// reached us (the webrtc crate's connection state only follows ICE, seconds later).
    channel_closed: tokio::sync::watch::Receiver<bool>,
    state_rx: mpsc::UnboundedReceiver<RTCPeerConnectionState>,
    pub rtp_rx: mpsc::UnboundedReceiver<Bytes>,
    /// The same packets as `rtp_rx`, whole (payload type, timestamps).
    pub packet_rx: mpsc::UnboundedReceiver<rtc::rtp::Packet>,
    /// The one codec this client offered.
    pub codec: Codec,
    /// RTP sequence continues across rounds: SRTP replay protection drops repeats.
    next_seq: u32,
}

impl Client {
    /// Creates the offer (audio track + `oai-events` channel), posts it, applies the answer.
    /// Returns once the HTTP exchange is done; use [`Client::wait_connected`] next.
    pub async fn call(http: SocketAddr, path: &str) -> Client {
        Self::call_with(http, path, |sdp| sdp.to_owned()).await
    }

    /// Like [`Client::call`], posting the offer as multipart (`sdp` + `session`) with a key, as
    /// openai-node's `realtime.calls.create` does.
    pub async fn call_multipart(http: SocketAddr, path: &str, key: &str) -> Client {
        Self::call_inner(
            http,
            path,
            |sdp| sdp.to_owned(),
            Post::Multipart(key.to_owned()),
            Codec::Opus,
            LOCAL,
        )
        .await
    }

    /// A Live session: the offer goes to `POST /v1/live/sessions` inside the JSON body with
    /// `session`, as an app's server posts it, and the answer comes back in JSON.
    pub async fn live(http: SocketAddr, session: serde_json::Value) -> Client {
        Self::call_inner(
            http,
            "/v1/live/sessions",
            |sdp| sdp.to_owned(),
            Post::Live(session),
            Codec::Opus,
            LOCAL,
        )
        .await
    }

    /// Like [`Client::call`], offering `codec` alone: G.711 as a telephony client (or a browser
    /// whose `setCodecPreferences` kept only PCMU or PCMA) offers it.
    pub async fn call_codec(http: SocketAddr, path: &str, codec: Codec) -> Client {
        Self::call_inner(http, path, |sdp| sdp.to_owned(), Post::Sdp, codec, LOCAL).await
    }

    /// Like [`Client::call`], with the answer passed through `rewrite` before it is applied.
    pub async fn call_with(
        http: SocketAddr,
        path: &str,
        rewrite: impl Fn(&str) -> String,
    ) -> Client {
        Self::call_inner(http, path, rewrite, Post::Sdp, Codec::Opus, LOCAL).await
    }

    /// Like [`Client::call`], from the UDP address `local`: a client whose next call comes from
    /// the port its last one used (an app that binds one port, or an OS that hands it out again).
    pub async fn call_from(http: SocketAddr, path: &str, local: SocketAddr) -> Client {
        let local = local.to_string();
        Self::call_inner(
            http,
            path,
            |sdp| sdp.to_owned(),
            Post::Sdp,
            Codec::Opus,
            &local,
        )
        .await
    }

    async fn call_inner(
        http: SocketAddr,
        path: &str,
        rewrite: impl Fn(&str) -> String,
        post: Post,
        codec: Codec,
        local: &str,
    ) -> Client {
        let params = codec_parameters(codec);
        let mut me = MediaEngine::default();
        me.register_codec(params.clone(), RtpCodecKind::Audio)
            .unwrap();
        let (state_tx, state_rx) = mpsc::unbounded_channel();
        let (gathered_tx, mut gathered_rx) = mpsc::unbounded_channel();
        let (rtp_tx, rtp_rx) = mpsc::unbounded_channel();
        let (packet_tx, packet_rx) = mpsc::unbounded_channel();
        let pc = PeerConnectionBuilder::new()
            .with_media_engine(me)
            .with_handler(Arc::new(Handler {
                state_tx,
                gathered_tx,
                rtp_tx,
                packet_tx,
            }))
            .with_udp_addrs(vec![local.to_owned()])
            .build()
            .await
            .expect("build client pc");
        let ssrc = rand::random::<u32>();
        let track = Arc::new(TrackLocalStaticRTP::new(MediaStreamTrack::new(
            "client-stream".into(),
            "client-mic".into(),
            "mic".into(),
            RtpCodecKind::Audio,
            vec![RTCRtpEncodingParameters {
                rtp_coding_parameters: RTCRtpCodingParameters {
                    ssrc: Some(ssrc),
                    ..Default::default()
                },
                codec: params.rtp_codec,
                ..Default::default()
            }],
        )));
        pc.add_track(track.clone() as Arc<dyn TrackLocal>)
            .await
            .unwrap();
        let dc = pc.create_data_channel("oai-events", None).await.unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let (closed_tx, channel_closed) = tokio::sync::watch::channel(false);
        {
            let dc = dc.clone();
            let events = events.clone();
            tokio::spawn(async move {
                while let Some(ev) = dc.poll().await {
                    match ev {
                        DataChannelEvent::OnMessage(m) => events
                            .lock()
                            .await
                            .push(String::from_utf8_lossy(&m.data).to_string()),
                        DataChannelEvent::OnClose => {
                            let _ = closed_tx.send(true);
                        }
                        _ => {}
                    }
                }
                let _ = closed_tx.send(true);
            });
        }
        let offer = pc.create_offer(None).await.unwrap();
        pc.set_local_description(offer).await.unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(2), gathered_rx.recv()).await;
        let offer = pc.local_description().await.unwrap();
        let response = match &post {
            Post::Sdp => http_post(http, path, "application/sdp", offer.sdp.as_bytes()).await,
            Post::Live(session) => {
                let body = serde_json::json!({"session": session,
                                              "transport": {"type": "webrtc", "sdp": offer.sdp}});
                let mut r =
                    http_post(http, path, "application/json", body.to_string().as_bytes()).await;
                if r.status == 201 {
                    let v: serde_json::Value = serde_json::from_str(&r.body).expect("JSON answer");
                    assert!(
                        v["session"]["id"].as_str().unwrap().starts_with("live_"),
                        "{v}"
                    );
                    r.body = v["transport"]["sdp"]
                        .as_str()
                        .expect("transport.sdp")
                        .to_owned();
                }
                r
            }
            Post::Multipart(key) => {
                let boundary = "voiceedgeboundary7";
                let body = format!(
                    "--{boundary}\r\nContent-Disposition: form-data; name=\"sdp\"\r\nContent-Type: application/sdp\r\n\r\n{}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"session\"\r\nContent-Type: application/json\r\n\r\n{{\"type\":\"realtime\",\"model\":\"loopback\"}}\r\n--{boundary}--\r\n",
                    offer.sdp
                );
                http_post_auth(
                    http,
                    path,
                    &format!("multipart/form-data; boundary={boundary}"),
                    body.as_bytes(),
                    key,
                )
                .await
            }
        };
        assert_eq!(response.status, 201, "offer refused: {}", response.body);
        let answer = RTCSessionDescription::answer(rewrite(&response.body)).unwrap();
        pc.set_remote_description(answer).await.unwrap();
        Client {
            pc: Box::new(pc),
            track,
            ssrc,
            response,
            events,
            dc,
            channel_closed,
            state_rx,
            rtp_rx,
            packet_rx,
            codec,
            next_seq: 0,
        }
    }

    /// Restarts ICE as a browser does after a network change (`restartIce()`, a new offer),
    /// sends the offer to the call's `Location` with PATCH and applies the answer (through
    /// `rewrite`). Returns the server's response.
    pub async fn restart_ice(
        &mut self,
        http: SocketAddr,
        rewrite: impl Fn(&str) -> String,
    ) -> HttpResponse {
        self.pc.restart_ice().await.unwrap();
        let offer = self.pc.create_offer(None).await.unwrap();
        self.pc.set_local_description(offer).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let offer = self.pc.local_description().await.unwrap();
        let location = self.response.headers["location"].clone();
        let r = http_patch(http, &location, "application/sdp", offer.sdp.as_bytes()).await;
        if r.status == 200 {
            let answer = RTCSessionDescription::answer(rewrite(&r.body)).unwrap();
            self.pc.set_remote_description(answer).await.unwrap();
        }
        r
    }

    /// The call's id, from the `Location` the server answered with.
    pub fn call_id(&self) -> String {
        self.response.headers["location"]
            .rsplit('/')
            .next()
            .unwrap()
            .to_owned()
    }

    /// `POST /v1/realtime/calls/{id}/hangup` for this call.
    pub async fn hangup(&self, http: SocketAddr) -> HttpResponse {
        let path = format!("/v1/realtime/calls/{}/hangup", self.call_id());
        http_post(http, &path, "application/json", b"").await
    }

    pub async fn wait_connected(&mut self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let st = tokio::time::timeout_at(deadline, self.state_rx.recv())
                .await
                .expect("timed out waiting for the call to connect")
                .expect("state channel closed");
            match st {
                RTCPeerConnectionState::Connected => return,
                RTCPeerConnectionState::Failed | RTCPeerConnectionState::Closed => {
                    panic!("call failed: {st}")
                }
                _ => {}
            }
        }
    }

    /// Waits for the server to end the call *by telling us*: its SCTP ABORT closes the
    /// `oai-events` channel. Consent or ICE timeouts on our side take seconds longer (about
    /// 4.6 s with this client), so a short `within` tells the two apart.
    pub async fn wait_told_closed(&mut self, within: Duration) {
        tokio::time::timeout(within, self.channel_closed.wait_for(|c| *c))
            .await
            .expect("the server did not close the call (no SCTP ABORT / close_notify arrived)")
            .expect("channel watch dropped");
    }

    /// Waits until the client's peer connection leaves the connected state (closed, failed or
    /// disconnected); returns the state it reached.
    pub async fn wait_gone(&mut self, within: Duration) -> RTCPeerConnectionState {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let st = tokio::time::timeout_at(deadline, self.state_rx.recv())
                .await
                .expect("the call did not end on the client side")
                .expect("state channel closed");
            if matches!(
                st,
                RTCPeerConnectionState::Closed
                    | RTCPeerConnectionState::Failed
                    | RTCPeerConnectionState::Disconnected
            ) {
                return st;
            }
        }
    }

    /// Sends `n` 20 ms frames tagged with `tag` and returns how many tagged frames came back.
    pub async fn echo_round(&mut self, tag: u8, n: u16) -> usize {
        for i in 0..n {
            let seq = self.next_seq;
            self.next_seq += 1;
            let pkt = tagged_frame(self.codec, tag, u32::from(i), seq, self.ssrc);
            self.track.write_rtp(pkt).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut got = 0;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while let Ok(Some(p)) = tokio::time::timeout_at(deadline, self.rtp_rx.recv()).await {
            if p.first() == Some(&tag) && p.len() == 60 {
                got += 1;
                if got == n as usize {
                    break;
                }
            }
        }
        got
    }

    /// Sends one client event on `oai-events`.
    pub async fn send_event(&self, event: serde_json::Value) {
        self.dc.send_text(&event.to_string()).await.unwrap();
    }

    /// A user text message, then `response.create`, as an app's "send message" does.
    pub async fn send_message(&self, text: &str) {
        self.send_event(serde_json::json!({"type": "conversation.item.create",
            "item": {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": text}]}}))
            .await;
        self.send_event(serde_json::json!({"type": "response.create"}))
            .await;
    }

    /// Every server event received so far, parsed.
    pub async fn received(&self) -> Vec<serde_json::Value> {
        self.events
            .lock()
            .await
            .iter()
            .filter_map(|e| serde_json::from_str(e).ok())
            .collect()
    }

    /// Waits until `n` events of type `kind` have arrived and returns everything received. The
    /// bound is generous (a minute, however slow the machine): it only decides how long a broken
    /// run takes to fail.
    pub async fn wait_for(&self, kind: &str, n: usize) -> Vec<serde_json::Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let events = self.received().await;
            if events.iter().filter(|e| e["type"] == kind).count() >= n {
                return events;
            }
            let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
            assert!(
                tokio::time::Instant::now() < deadline,
                "fewer than {n} {kind} events arrived: {types:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub async fn event_types(&self) -> Vec<String> {
        self.events
            .lock()
            .await
            .iter()
            .filter_map(|e| serde_json::from_str::<serde_json::Value>(e).ok())
            .filter_map(|v| v["type"].as_str().map(str::to_owned))
            .collect()
    }
}

impl Client {
    /// Speaks 48 kHz PCM into the call in real time, 20 ms frames encoded in the call's codec
    /// (as a microphone would), the last partial frame dropped.
    pub async fn talk(&mut self, pcm48k: &[i16]) {
        let mut enc = Encoder::new(self.codec);
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        for frame in pcm48k.chunks_exact(FRAME_SAMPLES) {
            tick.tick().await;
            self.send_frame(&mut enc, frame).await;
        }
    }

    /// Encodes one 20 ms frame and sends it as the next RTP packet of the call's stream.
    async fn send_frame(&mut self, enc: &mut Encoder, frame: &[i16]) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let pkt = rtc::rtp::Packet {
            header: rtc::rtp::header::Header {
                version: 2,
                payload_type: codec_parameters(self.codec).payload_type,
                sequence_number: seq as u16,
                timestamp: seq.wrapping_mul(self.codec.frame_ticks()),
                ssrc: self.ssrc,
                ..Default::default()
            },
            payload: Bytes::copy_from_slice(enc.encode(frame).unwrap()),
        };
        self.track.write_rtp(pkt).await.unwrap();
    }

    /// Speaks `speech`, then `silence`, in real time, while listening: returns when the speech
    /// ended (its last frame sent) and when the first audio packet after that arrived, the
    /// client's view of a turn's latency.
    pub async fn talk_and_listen(
        &mut self,
        speech: &[i16],
        silence: &[i16],
    ) -> (tokio::time::Instant, Option<tokio::time::Instant>) {
        let mut enc = Encoder::new(self.codec);
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        let n_speech = speech.len() / FRAME_SAMPLES;
        let mut speech_end = tokio::time::Instant::now();
        let mut first = None;
        let frames = speech
            .chunks_exact(FRAME_SAMPLES)
            .chain(silence.chunks_exact(FRAME_SAMPLES));
        for (i, frame) in frames.enumerate() {
            loop {
                tokio::select! {
                    _ = tick.tick() => break,
                    p = self.rtp_rx.recv() => {
                        if p.is_some() && i >= n_speech && first.is_none() {
                            first = Some(tokio::time::Instant::now());
                        }
                    }
                }
            }
            self.send_frame(&mut enc, frame).await;
            if i + 1 == n_speech {
                speech_end = tokio::time::Instant::now();
                while self.rtp_rx.try_recv().is_ok() {}
            }
        }
        (speech_end, first)
    }

    /// Streams 20 ms tagged frames until `stop` is set; returns the number sent.
    pub fn stream(
        &self,
        tag: u8,
        stop: Arc<std::sync::atomic::AtomicBool>,
    ) -> tokio::task::JoinHandle<u32> {
        let track = self.track.clone();
        let ssrc = self.ssrc;
        let codec = self.codec;
        tokio::spawn(async move {
            let mut i: u32 = 0;
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                tick.tick().await;
                let _ = track.write_rtp(tagged_frame(codec, tag, i, i, ssrc)).await;
                i += 1;
            }
            i
        })
    }

    /// Records the arrival time of every echoed frame carrying `tag` until the channel closes
    /// or `until` passes.
    pub async fn arrivals(
        &mut self,
        tag: u8,
        until: tokio::time::Instant,
    ) -> Vec<tokio::time::Instant> {
        let mut out = vec![];
        while let Ok(Some(p)) = tokio::time::timeout_at(until, self.rtp_rx.recv()).await {
            if p.first() == Some(&tag) {
                out.push(tokio::time::Instant::now());
            }
        }
        out
    }
}

/// A 60-byte frame the echo model sends back unchanged: `tag`, then `index` (16 bits) to tell
/// the frames of one round apart; `seq` numbers the RTP stream, which must never repeat. Its
/// timestamp advances 20 ms of `codec`'s clock a frame.
fn tagged_frame(codec: Codec, tag: u8, index: u32, seq: u32, ssrc: u32) -> rtc::rtp::Packet {
    let mut payload = vec![tag, (index >> 8) as u8, index as u8];
    payload.extend_from_slice(&[0x5a; 57]);
    rtc::rtp::Packet {
        header: rtc::rtp::header::Header {
            version: 2,
            payload_type: codec_parameters(codec).payload_type,
            sequence_number: seq as u16,
            timestamp: seq.wrapping_mul(codec.frame_ticks()),
            ssrc,
            ..Default::default()
        },
        payload: Bytes::from(payload),
    }
}

/// The longest silence between consecutive arrivals inside [from, to].
pub fn max_gap(
    arrivals: &[tokio::time::Instant],
    from: tokio::time::Instant,
    to: tokio::time::Instant,
) -> Duration {
    let mut prev = from;
    let mut worst = Duration::ZERO;
    for &t in arrivals.iter().filter(|t| **t >= from && **t <= to) {
        worst = worst.max(t - prev);
        prev = t;
    }
    worst.max(to.saturating_duration_since(prev))
}

/// The event types of the `n`-th response, from its `response.created` to its `response.done`,
/// with runs of one delta type collapsed to one.
pub fn response_types<'a>(
    events: impl IntoIterator<Item = &'a serde_json::Value>,
    n: usize,
) -> Vec<String> {
    let mut responses = 0;
    let mut started = false;
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let t = e["type"].as_str().unwrap_or_default();
        if t == "response.created" {
            started = responses == n;
            responses += 1;
        }
        if !started {
            continue;
        }
        if out.last().map(String::as_str) != Some(t) || !t.ends_with(".delta") {
            out.push(t.to_owned());
        }
        if t == "response.done" {
            return out;
        }
    }
    panic!("no complete response #{n}")
}
