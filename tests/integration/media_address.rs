//! The address in every answer is one clients can reach: the machine's primary address by
//! default (Firefox pairs nothing with loopback), never the wildcard a relay is bound to, and
//! exactly `--advertise` when given. The rules themselves are unit tests in
//! `src/media_address.rs`; these check that the process follows them end to end.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::Client;
use voice_edge::allinone::{self, AllInOneConfig, Running};
use voice_edge::media_address::HostAddrs;

async fn start(cfg: AllInOneConfig) -> Running {
    let _ = env_logger::builder().is_test(true).try_init();
    allinone::start(AllInOneConfig {
        http: "127.0.0.1:0".parse().unwrap(),
        ..cfg
    })
    .await
    .expect("start all-in-one")
}

fn answer_candidates(sdp: &str) -> Vec<SocketAddr> {
    sdp.lines()
        .filter_map(|l| l.strip_prefix("a=candidate:"))
        .map(|c| {
            let f: Vec<&str> = c.split_whitespace().collect();
            format!("{}:{}", f[4], f[5])
                .parse()
                .or_else(|_| format!("[{}]:{}", f[4], f[5]).parse())
                .unwrap_or_else(|_| panic!("unparsable candidate {c}"))
        })
        .collect()
}

/// The address `auto` picks here: the primary non-loopback one, or loopback on a host without.
fn primary() -> std::net::IpAddr {
    HostAddrs::read()
        .primary()
        .unwrap_or_else(|| "127.0.0.1".parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_relay_advertises_the_primary_address_and_echoes_through_it() {
    let server = start(AllInOneConfig {
        relay: "0.0.0.0:0".parse().unwrap(),
        ..Default::default()
    })
    .await;
    assert!(server.media_bind.ip().is_unspecified());
    assert!(!server.media_addr.ip().is_unspecified());
    let mut c = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    let cands = answer_candidates(&c.response.body);
    assert_eq!(cands.len(), 1, "{}", c.response.body);
    if primary().is_ipv4() {
        assert_eq!(cands[0].ip(), primary(), "{}", c.response.body);
    }
    assert_eq!(cands[0], server.media_addr);
    assert_eq!(
        c.response.headers["x-voice-edge-media"],
        server.media_addr.to_string()
    );
    c.wait_connected(Duration::from_secs(10)).await;
    let back = c.echo_round(0xC1, 30).await;
    assert!(back >= 27, "only {back} of 30 audio frames came back");
    c.pc.close().await.unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_binds_and_advertises_the_primary_address() {
    // auto on port 0: the default's address choice, on a port no other test holds.
    let server = start(AllInOneConfig {
        relay: "auto:0".parse().unwrap(),
        ..Default::default()
    })
    .await;
    assert_eq!(server.media_bind.ip(), primary());
    assert_eq!(server.media_addr, server.media_bind);
    let mut c = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    assert_eq!(answer_candidates(&c.response.body), vec![server.media_addr]);
    c.wait_connected(Duration::from_secs(10)).await;
    assert!(c.echo_round(0xC2, 30).await >= 27);
    c.pc.close().await.unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advertise_is_what_every_answer_names() {
    // An address that is not this machine's (a NAT's public side): the relay binds the wildcard
    // and answers name the NAT's mapping, port included.
    let server = start(AllInOneConfig {
        relay: "auto:0".parse().unwrap(),
        advertise: Some("203.0.113.7:40000".parse().unwrap()),
        ..Default::default()
    })
    .await;
    assert!(server.media_bind.ip().is_unspecified());
    let nat: SocketAddr = "203.0.113.7:40000".parse().unwrap();
    assert_eq!(server.media_addr, nat);
    for _ in 0..2 {
        let c = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
        assert_eq!(answer_candidates(&c.response.body), vec![nat]);
        assert_eq!(c.response.headers["x-voice-edge-media"], nat.to_string());
        assert_eq!(c.response.headers["x-voice-edge-relay"], nat.to_string());
        c.pc.close().await.unwrap();
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_mode_names_each_transceiver_socket_at_a_reachable_address() {
    let server = start(AllInOneConfig {
        relay: "0.0.0.0:0".parse().unwrap(),
        direct: true,
        ..Default::default()
    })
    .await;
    let mut c = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    let cands = answer_candidates(&c.response.body);
    assert_eq!(cands.len(), 1);
    assert!(!cands[0].ip().is_unspecified(), "{}", c.response.body);
    assert_ne!(cands[0], server.media_addr, "direct: not the relay");
    c.wait_connected(Duration::from_secs(10)).await;
    assert!(c.echo_round(0xC3, 30).await >= 27);
    c.pc.close().await.unwrap();
    server.shutdown().await;
}
