//! Two tiers: one ingress (global) relay in front of two clusters. The global relay decodes
//! only the cluster from the ufrag and hands the datagram to that cluster's relay, which
//! decodes the transceiver; replies retrace the path. Same relay code at both tiers.

use crate::common;

use std::time::Duration;

use common::Client;
use voice_edge::allinone::{self, AllInOneConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_on_both_clusters_through_one_ingress_address() {
    let _ = env_logger::builder().is_test(true).try_init();
    let server = allinone::start(AllInOneConfig {
        http: "127.0.0.1:0".parse().unwrap(),
        relay: "127.0.0.1:0".parse().unwrap(),
        global_relay: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    })
    .await
    .unwrap();
    let global = server
        .relay_named("global")
        .expect("no global relay")
        .public_addr();
    assert_eq!(server.media_addr, global);

    let (mut a, mut b) = tokio::join!(
        Client::call(
            server.http_addr,
            "/v1/realtime/calls?cluster=0&model=loopback"
        ),
        Client::call(
            server.http_addr,
            "/v1/realtime/calls?cluster=1&model=loopback"
        )
    );
    assert_eq!(a.response.headers["x-voice-edge-cluster"], "0");
    assert_eq!(b.response.headers["x-voice-edge-cluster"], "1");
    for c in [&a, &b] {
        let cands: Vec<&str> = c
            .response
            .body
            .lines()
            .filter(|l| l.starts_with("a=candidate"))
            .collect();
        assert_eq!(cands.len(), 1);
        assert!(
            cands[0].contains(&format!(" {} {} typ host", global.ip(), global.port())),
            "answer does not point at the global relay: {}",
            cands[0]
        );
    }
    tokio::join!(
        a.wait_connected(Duration::from_secs(10)),
        b.wait_connected(Duration::from_secs(10))
    );
    let (ga, gb) = tokio::join!(a.echo_round(0xD0, 30), b.echo_round(0xD1, 30));
    assert!(
        ga >= 27 && gb >= 27,
        "echo cluster0={ga}/30 cluster1={gb}/30"
    );

    let g = server.relay_named("global").unwrap().counters();
    let c0 = server.relay_named("cluster-0").unwrap().counters();
    let c1 = server.relay_named("cluster-1").unwrap().counters();
    assert_eq!(g.flows_created, 2, "global: {g:?}");
    assert_eq!(
        (c0.flows_created, c1.flows_created),
        (1, 1),
        "cluster relays: {c0:?} {c1:?}"
    );
    assert!(c0.forwarded_out >= 27 && c1.forwarded_out >= 27);
    assert!(g.forwarded_out >= c0.forwarded_out + c1.forwarded_out - 2);
    a.pc.close().await.unwrap();
    b.pc.close().await.unwrap();
    server.shutdown().await;
}
