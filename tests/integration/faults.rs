//! `/v1/realtime/calls/{id}/faults` with real WebRTC clients through the relay: each fault is
//! observed where an app would see it, in the audio the `loopback` model reflects (every frame
//! comes straight back) and in the events and state of the client's own stack.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common::{Client, http_get, http_post, http_post_with_headers, http_request, start_local};
use serde_json::{Value, json};
use tokio::time::Instant;
use voice_edge::allinone::{AllInOneConfig, Running};
use webrtc::media_stream::track_local::TrackLocal;

const LOOPBACK: &str = "/v1/realtime/calls?model=loopback";

async fn connected(server: &Running) -> Client {
    let mut c = Client::call(server.http_addr, LOOPBACK).await;
    c.wait_connected(Duration::from_secs(10)).await;
    c
}

fn faults_path(c: &Client) -> String {
    format!("/v1/realtime/calls/{}/faults", c.call_id())
}

async fn fault(server: &Running, c: &Client, body: Value) -> Value {
    let r = http_post(
        server.http_addr,
        &faults_path(c),
        "application/json",
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{body} → {}", r.body);
    serde_json::from_str(&r.body).unwrap()
}

/// Tagged frames of this test's own RTP stream: the tag and index come back in the reflected
/// payload, the sequence numbers never repeat (SRTP replay protection drops repeats).
struct Prober {
    seq: u32,
}

impl Prober {
    fn frame(&mut self, c: &Client, tag: u8, index: u16) -> rtc::rtp::Packet {
        self.seq += 1;
        let mut payload = vec![tag, (index >> 8) as u8, index as u8];
        payload.extend_from_slice(&[0x5a; 57]);
        rtc::rtp::Packet {
            header: rtc::rtp::header::Header {
                version: 2,
                payload_type: 111,
                sequence_number: self.seq as u16,
                timestamp: self.seq.wrapping_mul(960),
                ssrc: c.ssrc,
                ..Default::default()
            },
            payload: Bytes::from(payload),
        }
    }

    /// Sends `n` frames 20 ms apart and returns each one's round trip, `None` for those that
    /// did not come back within `wait` after the last was sent.
    async fn round(
        &mut self,
        c: &mut Client,
        tag: u8,
        n: u16,
        wait: Duration,
    ) -> Vec<Option<Duration>> {
        let mut sent = vec![None; n as usize];
        let mut rtt = vec![None; n as usize];
        let mut next = 0u16;
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        let mut last_sent = Instant::now();
        loop {
            let done_sending = next == n;
            if done_sending && (last_sent.elapsed() > wait || rtt.iter().all(Option::is_some)) {
                break;
            }
            tokio::select! {
                _ = tick.tick(), if !done_sending => {
                    let f = self.frame(c, tag, next);
                    sent[next as usize] = Some(Instant::now());
                    last_sent = Instant::now();
                    c.track.write_rtp(f).await.unwrap();
                    next += 1;
                }
                p = c.rtp_rx.recv() => {
                    let Some(p) = p else { break };
                    if p.len() == 60 && p[0] == tag {
                        let i = usize::from(u16::from_be_bytes([p[1], p[2]]));
                        if let (Some(Some(at)), Some(slot)) = (sent.get(i), rtt.get_mut(i)) {
                            slot.get_or_insert(at.elapsed());
                        }
                    }
                }
                _ = tokio::time::sleep(Duration::from_millis(50)), if done_sending => {}
            }
        }
        rtt
    }
}

fn median(rtts: &[Option<Duration>]) -> Duration {
    let mut v: Vec<Duration> = rtts.iter().flatten().copied().collect();
    assert!(!v.is_empty(), "nothing came back");
    v.sort();
    v[v.len() / 2]
}

fn lost_fraction(rtts: &[Option<Duration>]) -> f64 {
    rtts.iter().filter(|r| r.is_none()).count() as f64 / rtts.len() as f64
}

/// Loss shows as missing reflected frames; delay as a longer round trip; DELETE puts the call
/// back as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loss_and_delay_are_what_the_client_measures_and_delete_clears_them() {
    let server = start_local(AllInOneConfig::default()).await;
    let mut c = connected(&server).await;
    let mut p = Prober { seq: 0 };

    let base = p.round(&mut c, 0x01, 50, Duration::from_secs(1)).await;
    assert!(lost_fraction(&base) < 0.1, "lossy before any fault");
    let base_rtt = median(&base);

    // 30 % each way: a frame comes back with probability 0.7² = 0.49.
    let v = fault(&server, &c, json!({"type": "network", "loss": 0.3})).await;
    assert_eq!(v["applied"], "network");
    assert_eq!(v["call_id"], c.call_id());
    assert_eq!(v["network"]["loss"], 0.3);
    let lossy = p.round(&mut c, 0x02, 200, Duration::from_secs(1)).await;
    let lost = lost_fraction(&lossy);
    println!(
        "loss 0.3 both ways: {:.3} of reflected frames missing (expected 0.51)",
        lost
    );
    assert!((0.36..=0.66).contains(&lost), "lost {lost}");

    // Delay both ways: the round trip grows by twice the delay.
    let v = fault(&server, &c, json!({"type": "network", "delay_ms": 150})).await;
    assert_eq!(
        v["network"]["loss"], 0.0,
        "a network fault replaces the last one"
    );
    let delayed = p.round(&mut c, 0x03, 40, Duration::from_secs(2)).await;
    assert!(lost_fraction(&delayed) < 0.1, "delay lost frames");
    let delayed_rtt = median(&delayed);
    println!("delay 150 ms both ways: median RTT {base_rtt:?} → {delayed_rtt:?}");
    assert!(
        delayed_rtt >= base_rtt + Duration::from_millis(240),
        "RTT {base_rtt:?} → {delayed_rtt:?} with 2 × 150 ms of delay"
    );

    // One way only.
    fault(
        &server,
        &c,
        json!({"type": "network", "delay_ms": 200, "jitter_ms": 20, "direction": "to_client"}),
    )
    .await;
    let one_way = median(&p.round(&mut c, 0x04, 40, Duration::from_secs(2)).await);
    println!("delay 200 ± 20 ms to the client: median RTT {one_way:?}");
    assert!(
        one_way >= base_rtt + Duration::from_millis(160),
        "{one_way:?}"
    );

    let r = http_request(
        "DELETE",
        server.http_addr,
        &faults_path(&c),
        "application/json",
        b"",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert!(v["network"].is_null(), "{v}");
    let r = http_get(server.http_addr, &faults_path(&c)).await;
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert!(v["network"].is_null(), "{v}");
    let after = p.round(&mut c, 0x05, 50, Duration::from_secs(1)).await;
    assert!(lost_fraction(&after) < 0.1);
    assert!(
        median(&after) < Duration::from_millis(100),
        "still delayed after DELETE"
    );
    server.shutdown().await;
}

fn spread(rtts: &[Option<Duration>]) -> Duration {
    let mut v: Vec<Duration> = rtts.iter().flatten().copied().collect();
    v.sort();
    v[v.len() * 9 / 10] - v[v.len() / 10]
}

/// Jitter spreads the round trips (the spread between the 10th and 90th percentile grows from
/// about nothing), and a bandwidth cap below the stream's rate queues it (the round trip grows
/// toward the bottleneck's 500 ms buffer) and then drops what does not fit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jitter_and_a_bandwidth_cap_are_what_the_client_measures() {
    let server = start_local(AllInOneConfig::default()).await;
    let mut c = connected(&server).await;
    let mut p = Prober { seq: 0 };
    let base = p.round(&mut c, 0x11, 50, Duration::from_secs(1)).await;
    let base_spread = spread(&base);

    fault(
        &server,
        &c,
        json!({"type": "network", "delay_ms": 100, "jitter_ms": 40}),
    )
    .await;
    let jittery = p.round(&mut c, 0x12, 100, Duration::from_secs(2)).await;
    assert!(lost_fraction(&jittery) < 0.1, "jitter lost frames");
    let jitter_spread = spread(&jittery);
    println!("jitter ±40 ms each way: RTT p10–p90 spread {base_spread:?} → {jitter_spread:?}");
    assert!(
        jitter_spread >= base_spread + Duration::from_millis(20),
        "spread {base_spread:?} → {jitter_spread:?}"
    );

    // The reflected stream is ~50 packets/s of ~100 bytes on the wire (~40 kbit/s): 16 kbit/s
    // toward the client passes well under half of it, after a queue.
    fault(
        &server,
        &c,
        json!({"type": "network", "bandwidth_kbps": 16, "direction": "to_client"}),
    )
    .await;
    let capped = p.round(&mut c, 0x13, 150, Duration::from_secs(2)).await;
    let lost = lost_fraction(&capped);
    let capped_rtt = median(&capped);
    println!("16 kbit/s to the client: {lost:.2} of frames missing, median RTT {capped_rtt:?}");
    assert!(
        lost > 0.3,
        "a 16 kbit/s cap passed {:.2} of a ~40 kbit/s stream",
        1.0 - lost
    );
    assert!(
        capped_rtt >= Duration::from_millis(150),
        "no queueing behind the cap: {capped_rtt:?}"
    );
    server.shutdown().await;
}

/// A blackout: nothing comes back while it lasts, and the flow resumes by itself after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackout_stops_everything_then_the_flow_resumes() {
    let server = start_local(AllInOneConfig::default()).await;
    let mut c = connected(&server).await;
    let stop = Arc::new(AtomicBool::new(false));
    let streaming = c.stream(0x20, stop.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;

    let t0 = Instant::now();
    let v = fault(
        &server,
        &c,
        json!({"type": "blackout", "duration_ms": 1500}),
    )
    .await;
    assert_eq!(v["applied"], "blackout");
    assert!(v["blackout_remaining_ms"].as_u64().unwrap() > 1000, "{v}");
    let arrivals = c.arrivals(0x20, t0 + Duration::from_millis(3500)).await;
    stop.store(true, Ordering::Relaxed);
    streaming.await.unwrap();

    // Allow what was already on its way when the request was answered.
    let during = arrivals
        .iter()
        .filter(|t| **t > t0 + Duration::from_millis(100) && **t < t0 + Duration::from_millis(1400))
        .count();
    let after = arrivals
        .iter()
        .filter(|t| **t > t0 + Duration::from_millis(1500))
        .count();
    println!("blackout 1.5 s: {during} frames back during it, {after} in the 2 s after");
    assert_eq!(during, 0, "frames came back during the blackout");
    assert!(
        after >= 50,
        "the flow did not resume: {after} frames in 2 s"
    );
    let r = http_get(server.http_addr, &faults_path(&c)).await;
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert!(v["dropped_blackout"].as_u64().unwrap() > 50, "{v}");
    assert!(v["blackout_remaining_ms"].is_null(), "{v}");
    server.shutdown().await;
}

/// A NAT rebinding: the transceiver sees the client at a new port, drops its media until the
/// client's next consent check from there (an authenticated binding request) moves the call,
/// and media flows again to the new mapping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nat_rebinding_recovers_through_the_next_authenticated_check() {
    let server = start_local(AllInOneConfig::default()).await;
    let mut c = connected(&server).await;
    let stop = Arc::new(AtomicBool::new(false));
    let streaming = c.stream(0x30, stop.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = client_address(&server, &c).await;

    let t0 = Instant::now();
    let v = fault(&server, &c, json!({"type": "nat_rebind"})).await;
    assert_eq!(v["applied"], "nat_rebind");
    assert_eq!(v["nat_rebinds"], 1);
    let seen: std::net::SocketAddr = v["client_seen_as"].as_str().unwrap().parse().unwrap();
    assert_eq!(seen.ip(), before.ip());
    assert_ne!(seen.port(), before.port());

    let arrivals = c.arrivals(0x30, t0 + Duration::from_secs(6)).await;
    stop.store(true, Ordering::Relaxed);
    streaming.await.unwrap();
    // The client's consent checks go out every 2 s: media is back within one interval.
    let resumed = arrivals
        .iter()
        .find(|t| **t > t0 + Duration::from_millis(100))
        .map(|t| *t - t0);
    let gap = common::max_gap(
        &arrivals,
        t0 + Duration::from_millis(100),
        t0 + Duration::from_secs(6),
    );
    println!("NAT rebinding: media back after {resumed:?}, longest gap {gap:?}");
    let resumed = resumed.expect("media never resumed after the NAT rebinding");
    assert!(
        resumed < Duration::from_millis(3500),
        "resumed after {resumed:?}"
    );
    assert!(
        arrivals
            .iter()
            .filter(|t| **t > t0 + Duration::from_secs(4))
            .count()
            >= 50,
        "media did not keep flowing"
    );
    // The call moved by its own path: the transceiver now sends to the new mapping.
    assert_eq!(client_address(&server, &c).await, seen);
    let r = http_get(server.http_addr, &faults_path(&c)).await;
    let v: Value = serde_json::from_str(&r.body).unwrap();
    println!("state after the rebinding: {v}");
    server.shutdown().await;
}

async fn client_address(server: &Running, c: &Client) -> std::net::SocketAddr {
    let r = http_get(server.http_addr, "/admin/calls").await;
    let v: Value = serde_json::from_str(&r.body).unwrap();
    let call = v["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["call_id"] == c.call_id().as_str())
        .expect("the call is listed")
        .clone();
    call["client"].as_str().unwrap().parse().unwrap()
}

/// The session's time limit: the Realtime `error` event, then the server ends the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expired_sends_the_error_event_then_ends_the_call() {
    let server = start_local(AllInOneConfig::default()).await;
    let mut c = connected(&server).await;
    // The events channel is open once session.created arrived.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !c
        .event_types()
        .await
        .contains(&"session.created".to_owned())
    {
        assert!(Instant::now() < deadline, "no session.created");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let v = fault(&server, &c, json!({"type": "session_expired"})).await;
    assert_eq!(v["applied"], "session_expired");
    c.wait_told_closed(Duration::from_secs(5)).await;
    let events = c.events.lock().await.clone();
    let error: Value = events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .find(|e| e["type"] == "error")
        .expect("no error event before the call closed");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert_eq!(error["error"]["code"], "session_expired");
    assert_eq!(
        error["error"]["message"],
        "Your session hit the maximum duration of 60 minutes."
    );
    // The call is gone, moments after its channel (closed first, cleanly).
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let r = http_get(server.http_addr, &faults_path(&c)).await;
        if r.status == 404 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the call outlived its channel: {}",
            r.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = c.hangup(server.http_addr).await;
    assert_eq!(r.status, 404, "{}", r.body);
    let ended = server.transceivers[0].stats().await.ended.session_expired
        + server.transceivers[1].stats().await.ended.session_expired;
    assert_eq!(ended, 1);
    server.shutdown().await;
}

/// Refusals: bad bodies name the parameter (400), unknown calls are 404, and the relay restart
/// needs `--dev-admin` (403 as the admin action gives); with it the call survives the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_the_relay_restart() {
    let server = start_local(AllInOneConfig::default()).await;
    let mut c = connected(&server).await;
    let h = server.http_addr;
    let path = faults_path(&c);
    for (body, param) in [
        (json!({"type": "network", "loss": 1.5}), "loss"),
        (json!({"type": "network", "delay_ms": 9000}), "delay_ms"),
        (json!({"type": "network", "jitter_ms": -3}), "jitter_ms"),
        (
            json!({"type": "network", "bandwidth_kbps": 4}),
            "bandwidth_kbps",
        ),
        (
            json!({"type": "network", "direction": "sideways"}),
            "direction",
        ),
        (json!({"type": "network", "lose": 0.1}), "lose"),
        (json!({"type": "blackout", "duration_ms": 0}), "duration_ms"),
        (json!({"type": "blackout"}), "duration_ms"),
        (json!({"type": "earthquake"}), "type"),
    ] {
        let r = http_post(h, &path, "application/json", body.to_string().as_bytes()).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(v["error"]["type"], "invalid_request_error", "{}", r.body);
        assert_eq!(v["error"]["param"], param, "{}", r.body);
        assert!(v["error"]["message"].as_str().unwrap().contains(param));
    }
    let r = http_post(h, &path, "application/json", b"{not json").await;
    assert_eq!(r.status, 400);

    let r = http_post(
        h,
        "/v1/realtime/calls/rtc_nosuchcall/faults",
        "application/json",
        br#"{"type":"nat_rebind"}"#,
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["error"]["code"], "call_not_found");

    let r = http_post(h, &path, "application/json", br#"{"type":"relay_restart"}"#).await;
    assert_eq!(r.status, 403, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["error"]["code"], "dev_admin_disabled");
    server.shutdown().await;
    drop(c);

    let server = start_local(AllInOneConfig {
        dev_admin: true,
        ..Default::default()
    })
    .await;
    c = connected(&server).await;
    // Owning a call does not make a web page an admin: from another origin the restart is
    // refused as /admin/actions refuses it.
    let r = http_post_with_headers(
        server.http_addr,
        &faults_path(&c),
        "application/json",
        br#"{"type":"relay_restart"}"#,
        &[("Origin", "http://evil.example")],
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["error"]["code"], "admin_forbidden");
    let mut p = Prober { seq: 0 };
    let v = fault(&server, &c, json!({"type": "relay_restart"})).await;
    assert_eq!(v["applied"], "relay_restart");
    assert!(v["relay"]["restarted"].is_string(), "{v}");
    let after = p.round(&mut c, 0x40, 50, Duration::from_secs(1)).await;
    assert!(
        lost_fraction(&after) < 0.2,
        "the call did not survive the relay restart"
    );
    server.shutdown().await;
}
