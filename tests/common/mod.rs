//! Shared test helpers: a real WebRTC client (the `webrtc` crate, its own UDP socket) and a
//! minimal HTTP/1.1 POST, so tests exercise the same HTTP + ICE + DTLS + SRTP path a browser does.

#![allow(dead_code)]

use std::collections::HashMap;
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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Mutex, mpsc};
use webrtc::data_channel::{DataChannel, DataChannelEvent};
use webrtc::media_stream::track_local::TrackLocal;
use webrtc::media_stream::track_local::static_rtp::TrackLocalStaticRTP;
use webrtc::media_stream::track_remote::{TrackRemote, TrackRemoteEvent};
use webrtc::peer_connection::{
    PeerConnection, PeerConnectionBuilder, PeerConnectionEventHandler, RTCIceGatheringState,
    RTCPeerConnectionState,
};

pub struct HttpResponse {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

pub async fn http_post(
    addr: SocketAddr,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> HttpResponse {
    http_request("POST", addr, path, content_type, body, None).await
}

pub async fn http_get(addr: SocketAddr, path: &str) -> HttpResponse {
    http_request("GET", addr, path, "text/plain", b"", None).await
}

pub async fn http_patch(
    addr: SocketAddr,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> HttpResponse {
    http_request("PATCH", addr, path, content_type, body, None).await
}

pub async fn http_post_auth(
    addr: SocketAddr,
    path: &str,
    content_type: &str,
    body: &[u8],
    key: &str,
) -> HttpResponse {
    http_request("POST", addr, path, content_type, body, Some(key)).await
}

async fn http_request(
    method: &str,
    addr: SocketAddr,
    path: &str,
    content_type: &str,
    body: &[u8],
    key: Option<&str>,
) -> HttpResponse {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect http");
    let auth = key
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    HttpResponse {
        status,
        headers,
        body: body.to_owned(),
    }
}

#[derive(Clone)]
struct Handler {
    state_tx: mpsc::UnboundedSender<RTCPeerConnectionState>,
    gathered_tx: mpsc::UnboundedSender<()>,
    rtp_tx: mpsc::UnboundedSender<Bytes>,
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
        tokio::spawn(async move {
            while let Some(ev) = track.poll().await {
                if let TrackRemoteEvent::OnRtpPacket(p) = ev {
                    let _ = tx.send(p.payload);
                }
            }
        });
    }
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
    /// RTP sequence continues across rounds: SRTP replay protection drops repeats.
    next_seq: u32,
}

fn opus() -> RTCRtpCodecParameters {
    voice_edge::transceiver::opus_codec()
}

impl Client {
    /// Creates the offer (audio track + `oai-events` channel), posts it, applies the answer.
    /// Returns once the HTTP exchange is done; use [`Client::wait_connected`] next.
    pub async fn call(http: SocketAddr, path: &str) -> Client {
        Self::call_with(http, path, |sdp| sdp.to_owned()).await
    }

    /// Like [`Client::call`], with the answer passed through `rewrite` before it is applied.
    /// Like [`Client::call`], posting the offer as multipart (`sdp` + `session`) with a key, as
    /// openai-node's `realtime.calls.create` does.
    pub async fn call_multipart(http: SocketAddr, path: &str, key: &str) -> Client {
        Self::call_inner(http, path, |sdp| sdp.to_owned(), Some(key.to_owned())).await
    }

    /// Like [`Client::call`], with the answer passed through `rewrite` before it is applied.
    pub async fn call_with(
        http: SocketAddr,
        path: &str,
        rewrite: impl Fn(&str) -> String,
    ) -> Client {
        Self::call_inner(http, path, rewrite, None).await
    }

    async fn call_inner(
        http: SocketAddr,
        path: &str,
        rewrite: impl Fn(&str) -> String,
        multipart_key: Option<String>,
    ) -> Client {
        let mut me = MediaEngine::default();
        me.register_codec(opus(), RtpCodecKind::Audio).unwrap();
        let (state_tx, state_rx) = mpsc::unbounded_channel();
        let (gathered_tx, mut gathered_rx) = mpsc::unbounded_channel();
        let (rtp_tx, rtp_rx) = mpsc::unbounded_channel();
        let pc = PeerConnectionBuilder::new()
            .with_media_engine(me)
            .with_handler(Arc::new(Handler {
                state_tx,
                gathered_tx,
                rtp_tx,
            }))
            .with_udp_addrs(vec!["127.0.0.1:0".to_owned()])
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
                codec: opus().rtp_codec,
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
        let response = match &multipart_key {
            None => http_post(http, path, "application/sdp", offer.sdp.as_bytes()).await,
            Some(key) => {
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
            let mut payload = vec![tag, (i >> 8) as u8, i as u8];
            payload.extend_from_slice(&[0x5a; 57]);
            let seq = self.next_seq;
            self.next_seq += 1;
            let pkt = rtc::rtp::Packet {
                header: rtc::rtp::header::Header {
                    version: 2,
                    payload_type: 111,
                    sequence_number: seq as u16,
                    timestamp: seq.wrapping_mul(960),
                    ssrc: self.ssrc,
                    ..Default::default()
                },
                payload: Bytes::from(payload),
            };
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
    /// Streams 20 ms tagged frames until `stop` is set; returns the number sent.
    pub fn stream(
        &self,
        tag: u8,
        stop: Arc<std::sync::atomic::AtomicBool>,
    ) -> tokio::task::JoinHandle<u32> {
        let track = self.track.clone();
        let ssrc = self.ssrc;
        tokio::spawn(async move {
            let mut i: u32 = 0;
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                tick.tick().await;
                let mut payload = vec![tag, (i >> 8) as u8, i as u8];
                payload.extend_from_slice(&[0x5a; 57]);
                let pkt = rtc::rtp::Packet {
                    header: rtc::rtp::header::Header {
                        version: 2,
                        payload_type: 111,
                        sequence_number: i as u16,
                        timestamp: i.wrapping_mul(960),
                        ssrc,
                        ..Default::default()
                    },
                    payload: Bytes::from(payload),
                };
                let _ = track.write_rtp(pkt).await;
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

/// A real Redis (Debian's redis-server) on a free loopback port, killed on drop.
pub struct RedisServer {
    pub addr: SocketAddr,
    child: std::process::Child,
}

impl RedisServer {
    /// On a free port. Picking a free port and binding it are two steps, so two tests can pick
    /// the same one; the loser's redis-server exits, and it must not go on with the winner's
    /// Redis (which disappears when that test ends): retry on a fresh port instead.
    pub fn start() -> RedisServer {
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            if let Some(r) = Self::try_start_on(port) {
                return r;
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    pub fn start_on(port: u16) -> RedisServer {
        Self::try_start_on(port).unwrap_or_else(|| panic!("redis-server did not start on {port}"))
    }

    fn try_start_on(port: u16) -> Option<RedisServer> {
        let mut child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server is needed for this test (scripts/test.sh installs Debian's redis-server)");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        for _ in 0..100 {
            // Ours only while our process lives: a server that exited lost the port to another.
            if child.try_wait().ok().flatten().is_some() {
                return None;
            }
            if std::net::TcpStream::connect(addr).is_ok() {
                std::thread::sleep(Duration::from_millis(20));
                if child.try_wait().ok().flatten().is_none() {
                    return Some(RedisServer { addr, child });
                }
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A userspace NAT between a test client and the media address: the client is told (by a
/// rewritten answer) to send here, and the NAT forwards from a socket of its own. `rebind`
/// moves to a new source port mid-call (NAT rebinding); `blackhole` drops everything (a client
/// that vanished without saying goodbye).
pub struct Nat {
    pub addr: SocketAddr,
    back: Arc<std::sync::Mutex<Arc<tokio::net::UdpSocket>>>,
    front: Arc<tokio::net::UdpSocket>,
    client: Arc<std::sync::Mutex<Option<SocketAddr>>>,
    dropping: Arc<std::sync::atomic::AtomicBool>,
    target: SocketAddr,
}

impl Nat {
    pub async fn start(target: SocketAddr) -> Nat {
        let front = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let back = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let nat = Nat {
            addr: front.local_addr().unwrap(),
            back: Arc::new(std::sync::Mutex::new(back.clone())),
            front: front.clone(),
            client: Arc::new(std::sync::Mutex::new(None)),
            dropping: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            target,
        };
        let (b, c, d) = (nat.back.clone(), nat.client.clone(), nat.dropping.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            while let Ok((n, from)) = front.recv_from(&mut buf).await {
                *c.lock().unwrap() = Some(from);
                if d.load(std::sync::atomic::Ordering::Relaxed) {
                    continue;
                }
                let sock = b.lock().unwrap().clone();
                let _ = sock.send_to(&buf[..n], target).await;
            }
        });
        nat.spawn_reader(back);
        nat
    }

    fn spawn_reader(&self, back: Arc<tokio::net::UdpSocket>) {
        let (front, c, d, current) = (
            self.front.clone(),
            self.client.clone(),
            self.dropping.clone(),
            self.back.clone(),
        );
        tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            loop {
                let Ok(Ok((n, _))) =
                    tokio::time::timeout(Duration::from_millis(200), back.recv_from(&mut buf))
                        .await
                else {
                    // Stop once this socket is no longer the NAT's current binding.
                    if !Arc::ptr_eq(&current.lock().unwrap(), &back) {
                        return;
                    }
                    continue;
                };
                let to = *c.lock().unwrap();
                if let Some(to) = to
                    && !d.load(std::sync::atomic::Ordering::Relaxed)
                {
                    let _ = front.send_to(&buf[..n], to).await;
                }
            }
        });
    }

    /// Continues from a new source port, as a NAT that lost its binding does.
    pub async fn rebind(&self) -> SocketAddr {
        let back = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let addr = back.local_addr().unwrap();
        *self.back.lock().unwrap() = back.clone();
        self.spawn_reader(back);
        addr
    }

    pub fn blackhole(&self, on: bool) {
        self.dropping
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// Points an answer's candidate at the NAT instead of the media address.
    pub fn rewrite_answer(&self, sdp: &str) -> String {
        sdp.replace(
            &format!("{} {} typ host", self.target.ip(), self.target.port()),
            &format!("{} {} typ host", self.addr.ip(), self.addr.port()),
        )
    }
}

/// A minimal STUN Binding request with just USERNAME: all a relay reads from a new source.
pub fn binding_request(username: &str) -> Vec<u8> {
    let mut attr = vec![0x00, 0x06];
    attr.extend_from_slice(&(username.len() as u16).to_be_bytes());
    attr.extend_from_slice(username.as_bytes());
    while attr.len() % 4 != 0 {
        attr.push(0);
    }
    let mut m = vec![0x00, 0x01];
    m.extend_from_slice(&(attr.len() as u16).to_be_bytes());
    m.extend_from_slice(&0x2112A442u32.to_be_bytes());
    m.extend_from_slice(&rand::random::<[u8; 12]>());
    m.extend_from_slice(&attr);
    m
}
