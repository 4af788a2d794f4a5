//! Session lifecycle smoke tests with real peers on real UDP, through HTTP: a hang-up, a client
//! closing, a NAT rebinding through a real port-rewriting proxy, a draining transceiver and an
//! ICE restart over `PATCH`. The timing rules (setup deadline, consent expiry, idle timeout) and
//! index cleanup are tested in virtual time in `src/transceiver/endpoint/tests.rs`, where a 2 min
//! timeout takes milliseconds.

use crate::common;

use std::time::Duration;

use common::{Client, Nat, http_post};
use voice_edge::allinone::{self, AllInOneConfig, Running};
use voice_edge::transceiver::{Lifecycle, WorkerStats};

async fn start(lifecycle: Lifecycle) -> Running {
    let _ = env_logger::builder().is_test(true).try_init();
    allinone::start(AllInOneConfig {
        http: "127.0.0.1:0".parse().unwrap(),
        relay: "127.0.0.1:0".parse().unwrap(),
        lifecycle,
        // Draining a transceiver by hand is a dev-only admin action.
        dev_admin: true,
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn totals(server: &Running) -> WorkerStats {
    let mut t = WorkerStats::default();
    for h in &server.transceivers {
        t = t.merge(&h.stats().await);
    }
    t
}

/// Polls until no session, index entry or live-call count remains, or fails.
async fn assert_nothing_left(server: &Running, within: Duration) -> WorkerStats {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let t = totals(server).await;
        let live: usize = server.transceivers.iter().map(|h| h.live_calls()).sum();
        if t.sessions + t.ufrag_index + t.addr_index + t.call_index + live == 0 {
            return t;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "state left behind: {t:?}, live {live}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hangup_by_api_ends_the_call_and_releases_everything() {
    let server = start(Lifecycle::default()).await;
    let mut c = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    c.wait_connected(Duration::from_secs(10)).await;
    assert!(c.echo_round(0x11, 10).await >= 9);
    let r = c.hangup(server.http_addr).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // The client is told (DTLS close_notify / SCTP abort), not left to time out.
    c.wait_told_closed(Duration::from_secs(2)).await;
    let t = assert_nothing_left(&server, Duration::from_secs(2)).await;
    assert_eq!(t.ended.hangup, 1);
    // A second hangup of the same call is a clear 404.
    let r = c.hangup(server.http_addr).await;
    assert_eq!(r.status, 404);
    assert!(r.body.contains("call_not_found"), "{}", r.body);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_closing_its_peer_connection_ends_the_call() {
    let server = start(Lifecycle::default()).await;
    let mut c = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    c.wait_connected(Duration::from_secs(10)).await;
    assert!(c.echo_round(0x12, 10).await >= 9);
    // What the Realtime SDK's close() does: the events channel, then the peer connection.
    c.dc.close().await.unwrap();
    c.pc.close().await.unwrap();
    let t = assert_nothing_left(&server, Duration::from_secs(5)).await;
    assert_eq!(t.ended.peer_closed, 1, "{t:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nat_rebinding_moves_the_call_to_the_new_address() {
    let server = start(Lifecycle::default()).await;
    let nat = Nat::start(server.media_addr).await;
    let mut c = Client::call_with(
        server.http_addr,
        "/v1/realtime/calls?model=loopback",
        |sdp| nat.rewrite_answer(sdp),
    )
    .await;
    c.wait_connected(Duration::from_secs(10)).await;
    assert!(c.echo_round(0x14, 10).await >= 9);
    let before = server.relay().counters().flows_created;
    let new_addr = nat.rebind().await;
    // Media from the new port is unknown to the relay until the client's next STUN check
    // (same ufrag) re-routes it; the transceiver then moves the session.
    let mut got = 0;
    for round in 0..20 {
        got = c.echo_round(0x20 + round, 10).await;
        if got >= 9 {
            break;
        }
    }
    assert!(
        got >= 9,
        "echo did not resume after rebinding to {new_addr}: relay {:?}, calls {:?}",
        server.relay().counters(),
        server.transceivers[0].list_calls().await
    );
    assert_eq!(server.relay().counters().flows_created, before + 1);
    let calls = server.transceivers[0].list_calls().await;
    let calls = if calls.is_empty() {
        server.transceivers[1].list_calls().await
    } else {
        calls
    };
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].client,
        Some(new_addr),
        "session did not move to the new address"
    );
    c.pc.close().await.unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_transceiver_gets_no_new_calls_and_keeps_live_ones() {
    let server = start(Lifecycle::default()).await;
    let mut a = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    a.wait_connected(Duration::from_secs(10)).await;
    let ta: u16 = a.response.headers["x-voice-edge-transceiver"]
        .parse()
        .unwrap();
    let r = http_post(
        server.http_addr,
        &format!("/admin/actions/drain-transceiver:{ta}"),
        "application/json",
        b"",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    for _ in 0..3 {
        let mut b = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
        assert_ne!(
            b.response.headers["x-voice-edge-transceiver"],
            ta.to_string(),
            "draining transceiver got a call"
        );
        b.wait_connected(Duration::from_secs(10)).await;
        let r = b.hangup(server.http_addr).await;
        assert_eq!(r.status, 200);
    }
    // The live call on the draining transceiver still works.
    assert!(a.echo_round(0x15, 20).await >= 18);
    let r = a.hangup(server.http_addr).await;
    assert_eq!(r.status, 200);
    assert_nothing_left(&server, Duration::from_secs(5)).await;
    server.shutdown().await;
}

fn ice_ufrag(sdp: &str) -> String {
    sdp.lines()
        .find_map(|l| l.strip_prefix("a=ice-ufrag:"))
        .expect("no a=ice-ufrag")
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ice_restart_keeps_the_call_and_moves_it_to_the_new_network() {
    let server = start(Lifecycle::default()).await;
    let nat = Nat::start(server.media_addr).await;
    let mut c = Client::call_with(
        server.http_addr,
        "/v1/realtime/calls?model=loopback",
        |sdp| nat.rewrite_answer(sdp),
    )
    .await;
    c.wait_connected(Duration::from_secs(10)).await;
    assert!(c.echo_round(0x30, 10).await >= 9);
    let id = c.call_id();
    let server_ufrag = ice_ufrag(&c.response.body);
    let old_client_ufrag = ice_ufrag(&c.pc.local_description().await.unwrap().sdp);

    // The client's network changes, and it restarts ICE with new credentials.
    let new_addr = nat.rebind().await;
    let r = c
        .restart_ice(server.http_addr, |sdp| nat.rewrite_answer(sdp))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.headers["content-type"], "application/sdp");
    let new_client_ufrag = ice_ufrag(&c.pc.local_description().await.unwrap().sdp);
    assert_ne!(
        new_client_ufrag, old_client_ufrag,
        "the client did not restart ICE"
    );
    // Our ufrag carries the route, so it stays: the relay keeps finding the call.
    assert_eq!(ice_ufrag(&r.body), server_ufrag);
    assert_eq!(
        r.body
            .lines()
            .filter(|l| l.starts_with("a=candidate"))
            .count(),
        1,
        "{}",
        r.body
    );

    // Media flows again on the restarted ICE: the same call (same id, same session, same
    // DTLS association), now at the client's new address.
    let mut got = 0;
    for round in 0..20 {
        got = c.echo_round(0x40 + round, 10).await;
        if got >= 9 {
            break;
        }
    }
    assert!(got >= 9, "echo did not resume after the ICE restart");
    let calls = server.transceivers[0]
        .list_calls()
        .await
        .into_iter()
        .chain(server.transceivers[1].list_calls().await)
        .collect::<Vec<_>>();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].call_id, id);
    assert_eq!(calls[0].client, Some(new_addr));

    // A new offer for a call that does not exist, or that is not SDP, is refused clearly.
    let offer = c.pc.local_description().await.unwrap().sdp;
    let gone = common::http_patch(
        server.http_addr,
        "/v1/realtime/calls/rtc_0000000100aaaaaaaaaaaaaaaaaa",
        "application/sdp",
        offer.as_bytes(),
    )
    .await;
    assert_eq!(gone.status, 404, "{}", gone.body);
    let bad = common::http_patch(
        server.http_addr,
        &format!("/v1/realtime/calls/{id}"),
        "application/sdp",
        b"hello",
    )
    .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("invalid_sdp"), "{}", bad.body);
    // ...and the call survives the bad request.
    assert!(c.echo_round(0x60, 10).await >= 9);

    c.pc.close().await.unwrap();
    let t = assert_nothing_left(&server, Duration::from_secs(10)).await;
    assert_eq!(t.ended.peer_closed, 1, "{t:?}");
    server.shutdown().await;
}
