//! End to end in Rust: real WebRTC clients (the `webrtc` crate) call the all-in-one process
//! over HTTP, connect through the relay's one public port, and get their own audio back.

use crate::common;

use std::time::Duration;

use common::Client;
use voice_edge::allinone::{self, AllInOneConfig, Running};

async fn start() -> Running {
    common::start_local(AllInOneConfig::default()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_through_the_relay_gets_its_own_audio_back() {
    let server = start().await;
    let mut c = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;

    // The answer is ICE-lite with exactly one candidate: the relay's public address.
    let sdp = &c.response.body;
    assert!(sdp.contains("a=ice-lite"), "answer is not ICE-lite:\n{sdp}");
    let candidates: Vec<&str> = sdp
        .lines()
        .filter(|l| l.starts_with("a=candidate"))
        .collect();
    assert_eq!(candidates.len(), 1, "want exactly one candidate:\n{sdp}");
    let relay = server.media_addr;
    assert!(
        candidates[0].contains(&format!(" {} {} typ host", relay.ip(), relay.port())),
        "candidate is not the relay address {relay}: {}",
        candidates[0]
    );
    assert!(c.response.headers["location"].starts_with("/v1/realtime/calls/rtc_"));
    assert_eq!(c.response.headers["x-voice-edge-relay"], relay.to_string());

    c.wait_connected(Duration::from_secs(10)).await;
    let back = c.echo_round(0xA1, 50).await;
    assert!(back >= 45, "only {back} of 50 audio frames came back");

    // The oai-events channel got session.created on open.
    let types = c.event_types().await;
    assert!(
        types.contains(&"session.created".to_owned()),
        "events: {types:?}"
    );

    let counters = server.relay().counters();
    assert_eq!(counters.flows_created, 1);
    assert!(
        counters.forwarded_in >= 50 && counters.forwarded_out >= 45,
        "{counters:?}"
    );
    c.pc.close().await.unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_calls_land_on_different_transceivers_and_both_echo() {
    let server = start().await;
    let (mut a, mut b) = tokio::join!(
        Client::call(server.http_addr, "/v1/realtime/calls?model=loopback"),
        Client::call(server.http_addr, "/v1/realtime/calls?model=loopback")
    );
    let ta = a.response.headers["x-voice-edge-transceiver"].clone();
    let tb = b.response.headers["x-voice-edge-transceiver"].clone();
    assert_ne!(ta, tb, "both calls were placed on transceiver {ta}");
    tokio::join!(
        a.wait_connected(Duration::from_secs(10)),
        b.wait_connected(Duration::from_secs(10))
    );
    let (ga, gb) = tokio::join!(a.echo_round(0xB1, 30), b.echo_round(0xB2, 30));
    assert!(ga >= 27 && gb >= 27, "echo a={ga}/30 b={gb}/30");
    // Each call hears only itself: echo_round counts only its own tag.
    assert_eq!(server.relay().counters().flows_created, 2);
    a.pc.close().await.unwrap();
    b.pc.close().await.unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_on_one_transceiver_spread_over_its_workers_and_both_echo() {
    let _ = env_logger::builder().is_test(true).try_init();
    let server = allinone::start(AllInOneConfig {
        http: "127.0.0.1:0".parse().unwrap(),
        relay: "127.0.0.1:0".parse().unwrap(),
        transceivers: 1,
        transceiver_workers: 2,
        ..Default::default()
    })
    .await
    .expect("start all-in-one");
    let (mut a, mut b) = tokio::join!(
        Client::call(server.http_addr, "/v1/realtime/calls?model=loopback"),
        Client::call(server.http_addr, "/v1/realtime/calls?model=loopback")
    );
    let workers = [
        a.response.headers["x-voice-edge-worker"].clone(),
        b.response.headers["x-voice-edge-worker"].clone(),
    ];
    assert_eq!(
        {
            let mut w = workers.clone();
            w.sort();
            w
        },
        ["0", "1"],
        "calls were not spread over the two workers"
    );
    tokio::join!(
        a.wait_connected(Duration::from_secs(10)),
        b.wait_connected(Duration::from_secs(10))
    );
    let (ga, gb) = tokio::join!(a.echo_round(0xC1, 30), b.echo_round(0xC2, 30));
    assert!(ga >= 27 && gb >= 27, "echo a={ga}/30 b={gb}/30");

    // The admin list names each call's worker, and the transceiver reports both workers busy.
    let r = common::http_get(server.http_addr, "/admin/calls").await;
    assert_eq!(r.status, 200);
    let body = r.body;
    let calls: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut listed: Vec<u64> = calls["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["worker"].as_u64().unwrap())
        .collect();
    listed.sort();
    assert_eq!(listed, [0, 1], "{body}");
    let per_worker = server.transceivers[0].worker_stats().await;
    assert_eq!(
        per_worker.iter().map(|s| s.sessions).collect::<Vec<_>>(),
        [1, 1]
    );

    // Hang-up finds the call's worker from its id.
    let id = a.response.headers["location"]
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let r = common::http_post(
        server.http_addr,
        &format!("/v1/realtime/calls/{id}/hangup"),
        "text/plain",
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    a.wait_told_closed(Duration::from_secs(2)).await;
    b.pc.close().await.unwrap();
    a.pc.close().await.unwrap();
    server.shutdown().await;
}

/// Realtime clients put whole prompts and tool lists in one `session.update`; the data channel
/// must carry events far larger than an SCTP packet, both ways (session.updated echoes it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_session_update_crosses_the_data_channel_both_ways() {
    let server = start().await;
    let mut c = Client::call(server.http_addr, "/v1/realtime/calls?model=echo").await;
    c.wait_connected(Duration::from_secs(10)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !c
        .event_types()
        .await
        .contains(&"session.created".to_owned())
    {
        assert!(tokio::time::Instant::now() < deadline, "no session.created");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let instructions = "Be brief. ".repeat(4_000); // 40 KB
    let update = serde_json::json!({
        "type": "session.update",
        "session": {"type": "realtime", "instructions": instructions},
    });
    c.dc.send_text(&update.to_string()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let echoed = c.events.lock().await.iter().any(|e| {
            serde_json::from_str::<serde_json::Value>(e).is_ok_and(|v| {
                v["type"] == "session.updated" && v["session"]["instructions"] == instructions
            })
        });
        if echoed {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no session.updated carrying the 40 KB instructions: {:?}",
            c.event_types().await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.pc.close().await.unwrap();
    server.shutdown().await;
}

/// A client's next call from the port its last call used, placed on the other transceiver: the
/// relay must route it by its new ufrag, not by the flow the ended call left. Before the owner
/// released its flow at the end of a call, the new call's checks went to the old owner, which
/// knew no such ufrag, and the call never connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_call_from_an_ended_call_s_port_is_routed_to_its_own_transceiver() {
    let server = start().await;
    let url = "/v1/realtime/calls?model=loopback";
    let transceiver = |c: &Client| c.response.headers["x-voice-edge-transceiver"].clone();
    // Placement is least loaded, ties to the lowest id: one call elsewhere steers the first
    // call from the port to the second transceiver, one more after it ends steers the next
    // call from the port back to the first.
    let mut held = Client::call(server.http_addr, url).await;
    held.wait_connected(Duration::from_secs(10)).await;
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut first = Client::call_from(server.http_addr, url, port).await;
    first.wait_connected(Duration::from_secs(10)).await;
    assert!(first.echo_round(0xC1, 20).await >= 18);
    first.pc.close().await.unwrap();
    let before = transceiver(&first);
    drop(first);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while common::sessions(&server).await > 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first call did not end"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut other = Client::call(server.http_addr, url).await;
    other.wait_connected(Duration::from_secs(10)).await;

    let mut next = Client::call_from(server.http_addr, url, port).await;
    assert_ne!(
        transceiver(&next),
        before,
        "the test needs the next call elsewhere"
    );
    next.wait_connected(Duration::from_secs(10)).await;
    let back = next.echo_round(0xC2, 20).await;
    assert!(
        back >= 18,
        "only {back} of 20 frames came back on the next call"
    );
    let c = server.relay().counters();
    assert!(c.flows_released >= 1, "{c:?}");
    for c in [held, other, next] {
        c.pc.close().await.unwrap();
    }
    server.shutdown().await;
}
