//! The roles split as a deployment runs them: signaling, a relay and two transceivers that know
//! each other only through a real Redis (membership) and the control API (HTTP with the cluster
//! secret). Real WebRTC clients call through signaling and the relay and get their audio back;
//! placement spreads calls, follows draining, and drops a transceiver that stops heartbeating.
//! (The same roles as separate processes on separate network hosts: tests/multi_host.rs.)

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::{Client, RedisServer, http_get};
use voice_edge::membership::registry;
use voice_edge::relay::{self, LiveHops, RelayConfig};
use voice_edge::roles::signaling::{self, RunningSignaling, SignalingRoleConfig};
use voice_edge::roles::transceiver::{self, RunningTransceiver, TransceiverRoleConfig};
use voice_edge::routing::RouteKeys;

const SECRET: &str = "cluster-secret-for-tests";
const ROUTE_SECRET: &str = "00112233445566778899aabbccddeeff";

fn free_udp_base(workers: u16) -> u16 {
    // A run of free ports for a transceiver's workers.
    loop {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let base = s.local_addr().unwrap().port();
        if base > 60000 {
            continue;
        }
        if (1..workers).all(|w| std::net::UdpSocket::bind(("127.0.0.1", base + w)).is_ok()) {
            return base;
        }
    }
}

fn free_tcp() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Cluster {
    _redis: RedisServer,
    redis_url: String,
    relay: relay::RelayHandle,
    stop_follow: Arc<AtomicBool>,
    transceivers: Vec<RunningTransceiver>,
    signaling: RunningSignaling,
}

async fn start_transceiver(redis_url: &str, media: SocketAddr) -> RunningTransceiver {
    let base = free_udp_base(2);
    transceiver::start(TransceiverRoleConfig {
        upstream: None,
        cluster: 0,
        id: None,
        bind: format!("127.0.0.1:{base}").parse().unwrap(),
        workers: 2,
        media,
        control: format!("127.0.0.1:{}", free_tcp()).parse().unwrap(),
        host: "127.0.0.1".parse().unwrap(),
        redis_url: redis_url.to_owned(),
        cluster_secret: SECRET.into(),
        route_keys: RouteKeys::from_hex(0, ROUTE_SECRET).unwrap(),
        lifecycle: Default::default(),
        capacity: Default::default(),
        link_sources: Default::default(),
        heartbeat: Duration::from_millis(200),
        ttl: Duration::from_millis(1000),
    })
    .await
    .expect("start transceiver role")
}

async fn start_cluster() -> Cluster {
    let _ = env_logger::builder().is_test(true).try_init();
    let redis = RedisServer::start();
    let redis_url = format!("redis://{}", redis.addr);
    // The relay first: its public address is what transceivers advertise.
    let hops = Arc::new(LiveHops::default());
    let mut rc = RelayConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        voice_edge::membership::ClusterMembers::new(0).with_workers(2),
        RouteKeys::from_hex(0, ROUTE_SECRET).unwrap(),
    );
    rc.link = "127.0.0.1:0".parse().unwrap();
    rc.live_hops = Some(hops.clone());
    let headroom = rc.headroom.clone();
    let relay = relay::spawn(rc).unwrap();
    let stop_follow = Arc::new(AtomicBool::new(false));
    registry::follow(
        redis_url.clone(),
        0,
        hops.clone(),
        headroom,
        Duration::from_millis(100),
        stop_follow.clone(),
    )
    .unwrap();
    let transceivers = vec![
        start_transceiver(&redis_url, relay.public_addr).await,
        start_transceiver(&redis_url, relay.public_addr).await,
    ];
    let signaling = signaling::start(SignalingRoleConfig {
        upstream: None,
        http: "127.0.0.1:0".parse().unwrap(),
        admin: Some("127.0.0.1:0".parse().unwrap()),
        redis_url: redis_url.clone(),
        cluster_secret: SECRET.into(),
        require_keys: false,
        api_keys: vec![],
        admin_token: None,
        call_limits: Default::default(),
        refresh: Duration::from_millis(100),
        http_limits: Default::default(),
    })
    .await
    .expect("start signaling role");
    // Until the relay has read both members, a call could be placed on one it does not know.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while hops.get().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "relay never saw both members"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Cluster {
        _redis: redis,
        redis_url,
        relay,
        stop_follow,
        transceivers,
        signaling,
    }
}

impl Cluster {
    async fn stop(self) {
        self.signaling.stop().await;
        for t in self.transceivers {
            t.stop().await;
        }
        self.stop_follow
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.relay.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_cross_the_split_roles_and_spread_over_registered_transceivers() {
    let cluster = start_cluster().await;
    let ids: Vec<u16> = cluster.transceivers.iter().map(|t| t.record.id).collect();
    assert_eq!(ids, vec![1, 2], "replicas claim distinct ids from Redis");

    let http = cluster.signaling.http_addr;
    let (mut a, mut b) = tokio::join!(
        Client::call(http, "/v1/realtime/calls?model=loopback"),
        Client::call(http, "/v1/realtime/calls?model=loopback")
    );
    let ta = a.response.headers["x-voice-edge-transceiver"].clone();
    let tb = b.response.headers["x-voice-edge-transceiver"].clone();
    assert_ne!(ta, tb, "both calls were placed on transceiver {ta}");
    assert_eq!(
        a.response.headers["x-voice-edge-media"],
        cluster.relay.public_addr.to_string(),
        "answers name the relay"
    );
    tokio::join!(
        a.wait_connected(Duration::from_secs(10)),
        b.wait_connected(Duration::from_secs(10))
    );
    let (ga, gb) = tokio::join!(a.echo_round(0xD1, 30), b.echo_round(0xD2, 30));
    assert!(ga >= 27 && gb >= 27, "echo a={ga}/30 b={gb}/30");
    assert_eq!(cluster.relay.counters().flows_created, 2);

    // Faults cross the control API to the call's transceiver, and its state comes back.
    let faults = format!("{}/faults", a.response.headers["location"]);
    let r = common::http_post(
        http,
        &faults,
        "application/json",
        br#"{"type":"network","delay_ms":30,"loss":0.0}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["network"]["delay_ms"], 30, "{v}");
    assert!(
        a.echo_round(0xD3, 10).await >= 9,
        "echo under a 30 ms delay"
    );
    let r = common::http_request("DELETE", http, &faults, "application/json", b"").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert!(v["network"].is_null(), "{v}");

    // One after the other, faster than heartbeats: each answer brings the transceiver's load
    // back, so placement does not wait a heartbeat to see the call it just placed.
    let c = Client::call(http, "/v1/realtime/calls?model=loopback").await;
    let d = Client::call(http, "/v1/realtime/calls?model=loopback").await;
    assert_ne!(
        c.response.headers["x-voice-edge-transceiver"],
        d.response.headers["x-voice-edge-transceiver"],
        "two calls in a row went to one transceiver while the other was as loaded"
    );
    for x in [c, d] {
        let loc = x.response.headers["location"].clone();
        let r = common::http_post(http, &format!("{loc}/hangup"), "application/json", b"").await;
        assert_eq!(r.status, 200, "{}", r.body);
        x.pc.close().await.unwrap();
    }

    // Admin is on its own listener, not the public one; it lists calls across the control API.
    let public = http_get(http, "/admin/calls").await;
    assert_eq!(
        public.status, 404,
        "admin must not be on the public listener"
    );
    let admin = http_get(cluster.signaling.admin_addr.unwrap(), "/admin/calls").await;
    assert_eq!(admin.status, 200);
    let calls: serde_json::Value = serde_json::from_str(&admin.body).unwrap();
    assert_eq!(
        calls["calls"].as_array().unwrap().len(),
        2,
        "{}",
        admin.body
    );

    // Metrics: the relay counted the forwarding, each transceiver its setup timeline, and
    // signaling the offers it placed.
    let relay_text = voice_edge::roles::relay::metrics(&cluster.relay);
    let forwarded = relay_text
        .lines()
        .find_map(|l| l.strip_prefix("voice_edge_relay_events_total{event=\"forwarded_in\"} "))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(forwarded >= 60.0, "relay metrics:\n{relay_text}");
    for t in &cluster.transceivers {
        let text = transceiver::metrics(&t.handle).await;
        assert!(
            text.contains("voice_edge_transceiver_setup_seconds_count{step=\"dtls\"} ")
                && !text.contains("voice_edge_transceiver_setup_seconds_count{step=\"dtls\"} 0\n"),
            "transceiver {} metrics:\n{text}",
            t.record.id
        );
        assert!(text.contains("voice_edge_transceiver_timer_lag_seconds_bucket{le=\"+Inf\"}"));
        assert!(
            !text.contains("voice_edge_transceiver_setup_seconds_count{step=\"first_audio\"} 0\n"),
            "loopback echoed audio, so first audio was sent:\n{text}"
        );
    }
    let m = http_get(cluster.signaling.admin_addr.unwrap(), "/metrics").await;
    assert!(
        m.body
            .contains("voice_edge_signaling_offers_total{outcome=\"created\"} 4"),
        "{}",
        m.body
    );

    // Hang-up crosses the control API to the owning transceiver.
    let location = a.response.headers["location"].clone();
    let r = common::http_post(http, &format!("{location}/hangup"), "application/json", b"").await;
    assert_eq!(r.status, 200, "{}", r.body);
    a.wait_told_closed(Duration::from_secs(3)).await;
    // So does the call's event log, which outlives it.
    let r = http_get(http, &format!("{location}/events")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.headers["content-type"], "application/jsonl");
    let first: serde_json::Value = serde_json::from_str(r.body.lines().next().unwrap()).unwrap();
    assert_eq!(first["event"]["type"], "session.created", "{}", r.body);
    let n = r.body.lines().count();
    let r = http_get(http, &format!("{location}/events?since={n}")).await;
    assert_eq!((r.status, r.body.as_str()), (200, ""));
    // A well-formed id the transceiver does not know: its 404 crosses back as signaling's.
    let unknown = format!(
        "{}{}",
        &location[..location.len() - 1],
        if location.ends_with('0') { '1' } else { '0' }
    );
    let r = http_get(http, &format!("{unknown}/events")).await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.body.contains("call_not_found"), "{}", r.body);
    b.pc.close().await.unwrap();
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_and_silent_transceivers_leave_placement() {
    let mut cluster = start_cluster().await;
    let http = cluster.signaling.http_addr;

    // Draining: the heartbeat carries it to signaling; new calls go to the other one.
    cluster.transceivers[0].handle.drain();
    tokio::time::sleep(Duration::from_millis(600)).await;
    for _ in 0..3 {
        let c = Client::call(http, "/v1/realtime/calls?model=loopback").await;
        assert_eq!(c.response.headers["x-voice-edge-transceiver"], "2");
        c.pc.close().await.unwrap();
    }

    // Silence: transceiver 2 stops heartbeating (a crash); within its TTL plus a refresh it is
    // out of placement, and with 1 draining nothing is left: 503, not a hang.
    cluster.transceivers[1].stop_heartbeat();
    let gone = std::time::Instant::now();
    let deadline = gone + Duration::from_secs(5);
    loop {
        let r = common::http_post(
            http,
            "/v1/realtime/calls",
            "application/sdp",
            OFFER.as_bytes(),
        )
        .await;
        if r.status == 503 {
            assert!(r.body.contains("\"error\""), "{}", r.body);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still placing after 5 s: {} {}",
            r.status,
            r.body
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left_after = gone.elapsed();
    assert!(
        left_after < Duration::from_secs(3),
        "left placement after {left_after:?}"
    );
    let members = {
        let url = cluster.redis_url.clone();
        tokio::task::spawn_blocking(move || {
            registry::list(&mut registry::connect(&url).unwrap(), Some(0)).unwrap()
        })
        .await
        .unwrap()
    };
    assert_eq!(members.len(), 1, "{members:?}");
    assert!(members[0].draining);
    cluster.stop().await;
}

/// A minimal browser-like offer: valid enough for signaling's checks, never connected.
const OFFER: &str = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\na=fingerprint:sha-256 AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\na=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuvwx\r\na=setup:actpass\r\na=rtcp-mux\r\na=sendrecv\r\na=rtpmap:111 opus/48000/2\r\n";

/// A WebSocket session and a sideband in split roles: signaling pipes the client to a
/// transceiver over the control API's WebSocket (with the cluster secret).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_sessions_and_sidebands_cross_the_control_api() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    let cluster = start_cluster().await;
    let http = cluster.signaling.http_addr;
    async fn next_of(
        ws: &mut tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
        kind: &str,
    ) -> serde_json::Value {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
                .await
                .unwrap_or_else(|_| panic!("no {kind}"))
                .expect("open")
                .expect("frame");
            if let Message::Text(t) = msg {
                let v: serde_json::Value = serde_json::from_str(&t).unwrap();
                if v["type"] == kind {
                    return v;
                }
            }
        }
    }
    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("ws://{http}/v1/realtime?model=echo"))
            .await
            .expect("a session through the control API");
    next_of(&mut ws, "session.created").await;
    let text = serde_json::json!({"type": "conversation.item.create", "item": {"type": "message",
        "role": "user", "content": [{"type": "input_text", "text": "hi"}]}});
    ws.send(Message::Text(text.to_string().into()))
        .await
        .unwrap();
    ws.send(Message::Text(r#"{"type":"response.create"}"#.into()))
        .await
        .unwrap();
    next_of(&mut ws, "response.output_audio.delta").await;
    let done = next_of(&mut ws, "response.done").await;
    assert_eq!(done["response"]["status"], "completed");
    let live = || {
        cluster
            .transceivers
            .iter()
            .map(|t| t.handle.ws_sessions())
            .sum::<usize>()
    };
    assert_eq!(live(), 1, "the session runs on a transceiver");
    ws.close(None).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while live() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the session outlived its client's close"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Nothing is left counted: placement would pass over a transceiver whose load is off.
    for t in &cluster.transceivers {
        assert_eq!(t.handle.load(), 0, "transceiver {} load", t.record.id);
    }

    let mut call = Client::call(http, "/v1/realtime/calls?model=echo").await;
    call.wait_connected(Duration::from_secs(10)).await;
    call.wait_for("session.created", 1).await;
    let id = call.call_id();
    let (mut side, _) =
        tokio_tungstenite::connect_async(format!("ws://{http}/v1/realtime?call_id={id}"))
            .await
            .expect("a sideband through the control API");
    next_of(&mut side, "session.created").await;
    let update = serde_json::json!({"type": "session.update",
        "session": {"type": "realtime", "instructions": "from the sideband"}});
    side.send(Message::Text(update.to_string().into()))
        .await
        .unwrap();
    let updated = next_of(&mut side, "session.updated").await;
    assert_eq!(updated["session"]["instructions"], "from the sideband");
    call.wait_for("session.updated", 1).await;
    call.hangup(http).await;
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(m)) = side.next().await {
            if let Message::Close(_) = m {
                return;
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the sideband closes with the call");
    cluster.stop().await;
}

/// Live across the split roles: the startup config crosses the control API with the offer, a
/// Live WebSocket runs on a transceiver, and a stored session's recording comes back through
/// the control API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_sessions_cross_the_control_api() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    let cluster = start_cluster().await;
    let http = cluster.signaling.http_addr;
    let mut c = Client::live(
        http,
        serde_json::json!({"model": "tts", "store": true, "instructions": "split"}),
    )
    .await;
    c.wait_connected(Duration::from_secs(10)).await;
    let started = c.wait_for("session.started", 1).await;
    assert_eq!(started[0]["session"]["instructions"], "split");
    c.send_event(serde_json::json!({"type": "session.commentary.append",
        "content": "Across the roles.", "delegation_id": null}))
        .await;
    c.wait_for("session.usage.updated", 1).await;
    let id = c.call_id();
    c.send_event(serde_json::json!({"type": "session.close"}))
        .await;
    c.wait_told_closed(Duration::from_secs(10)).await;
    let path = format!("/v1/live/sessions/{id}/content");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let wav = loop {
        let (status, body) = common::http_get_bytes(http, &path).await;
        if status == 200 {
            break body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no recording: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(&wav[..4], b"RIFF");
    let right: i64 = wav[44..]
        .chunks_exact(4)
        .map(|f| i64::from(i16::from_le_bytes([f[2], f[3]])).abs())
        .sum();
    assert!(right > 0, "the spoken commentary is in the recording");

    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{http}/v1/live/sessions"))
        .await
        .expect("a Live WebSocket through the control API");
    let start = serde_json::json!({"type": "session.start", "session": {"model": "echo"}});
    ws.send(Message::Text(start.to_string().into()))
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(Ok(Message::Text(t))) = ws.next().await {
                return serde_json::from_str::<serde_json::Value>(&t).unwrap();
            }
        }
    })
    .await
    .expect("session.started");
    assert_eq!(first["type"], "session.started");
    ws.close(None).await.unwrap();
    cluster.stop().await;
}
