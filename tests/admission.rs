//! Overload is refused up front instead of spread over every call: a flood of offers gets 429
//! (one client's cap) or 503 (the workers' caps) with `Retry-After` in the Realtime error shape,
//! memory stays bounded, and the server takes calls again once the flood's calls are gone.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Client, HttpResponse, chromium_like_offer, http_post, sessions, start_local};
use serde_json::Value;
use tokio::sync::Semaphore;
use voice_edge::allinone::{AllInOneConfig, Running};
use voice_edge::signaling::call_limits::CallLimits;
use voice_edge::transceiver::Lifecycle;
use voice_edge::transceiver::admission::Capacity;

/// Posts `n` copies of a browser's offer, `parallel` at a time, as one client.
async fn flood(server: &Running, n: usize, parallel: usize) -> Vec<HttpResponse> {
    let offer = Arc::new(chromium_like_offer());
    let gate = Arc::new(Semaphore::new(parallel));
    let mut tasks = vec![];
    for _ in 0..n {
        let (offer, gate, http) = (offer.clone(), gate.clone(), server.http_addr);
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire().await.unwrap();
            http_post(
                http,
                "/v1/realtime/calls",
                "application/sdp",
                offer.as_bytes(),
            )
            .await
        }));
    }
    let mut out = vec![];
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

fn count(responses: &[HttpResponse], status: u16) -> usize {
    responses.iter().filter(|r| r.status == status).count()
}

/// Every refusal is the Realtime error shape with a code, and says when to come back.
fn assert_refusals(responses: &[HttpResponse], status: u16, code: &str) {
    for r in responses.iter().filter(|r| r.status == status) {
        let v: Value = serde_json::from_str(&r.body).unwrap_or_else(|_| panic!("{}", r.body));
        assert_eq!(v["error"]["code"], code, "{}", r.body);
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        let retry: u64 = r.headers["retry-after"]
            .parse()
            .expect("Retry-After in seconds");
        assert!((1..=5).contains(&retry), "Retry-After {retry}");
    }
}

fn rss_mb() -> f64 {
    let me = voice_edge::loadgen::procstat::sample(None).expect("/proc/self readable");
    me.rss_kb as f64 / 1024.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_holds_at_most_its_cap_and_gets_429_beyond() {
    let server = start_local(AllInOneConfig {
        call_limits: CallLimits {
            max_calls_per_client: 20,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let r = flood(&server, 60, 8).await;
    assert_eq!(count(&r, 201), 20, "created");
    assert_eq!(count(&r, 429), 40, "refused");
    assert_refusals(&r, 429, "too_many_calls");
    assert_eq!(
        sessions(&server).await,
        20,
        "refused offers created nothing"
    );

    // Hanging one up through the API frees its place at once.
    let id = r.iter().find(|r| r.status == 201).unwrap().headers["location"]
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let hung = http_post(
        server.http_addr,
        &format!("/v1/realtime/calls/{id}/hangup"),
        "text/plain",
        b"",
    )
    .await;
    assert_eq!(hung.status, 200);
    assert_eq!(count(&flood(&server, 2, 1).await, 201), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_offers_that_never_connect_is_refused_and_memory_stays_bounded() {
    let workers = 4; // 2 transceivers × 2 workers, the default
    let cap = Capacity {
        max_connecting: 64,
        ..Default::default()
    };
    let server = start_local(AllInOneConfig {
        capacity: cap,
        call_limits: CallLimits {
            max_calls_per_client: 0,
            ..Default::default()
        },
        lifecycle: Lifecycle {
            setup_deadline: Duration::from_secs(3),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let before = rss_mb();
    let r = flood(&server, 3000, 32).await;
    let grew = rss_mb() - before;
    let created = count(&r, 201);
    assert!(
        created <= workers * cap.max_connecting,
        "{created} calls setting up at once"
    );
    assert!(created >= cap.max_connecting, "only {created} created");
    assert_eq!(
        created + count(&r, 503),
        3000,
        "every offer was answered or refused"
    );
    assert_refusals(&r, 503, "no_capacity");
    // ~250 KB per pending call: 256 of them are ~64 MB; the unbounded 3,000 were ~740 MB.
    eprintln!("3,000 offers: {created} created, RSS +{grew:.0} MB");
    assert!(grew < 300.0, "RSS grew {grew:.0} MB");

    // The flood's calls expire at the setup deadline; then a real client connects and talks.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(sessions(&server).await, 0, "the flood's calls expired");
    let mut c = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    c.wait_connected(Duration::from_secs(10)).await;
    assert!(
        c.echo_round(1, 10).await >= 8,
        "audio came back after the flood"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_at_its_call_cap_refuses_until_a_call_ends() {
    let server = start_local(AllInOneConfig {
        transceivers: 1,
        transceiver_workers: 1,
        capacity: Capacity {
            max_calls: 1,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let mut first = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    first.wait_connected(Duration::from_secs(10)).await;
    let r = flood(&server, 3, 1).await;
    assert_eq!(count(&r, 503), 3);
    assert_refusals(&r, 503, "no_capacity");
    assert!(
        first.echo_round(1, 10).await >= 8,
        "the admitted call is unharmed"
    );
    first.hangup(server.http_addr).await;
    let mut next = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    next.wait_connected(Duration::from_secs(10)).await;
    server.shutdown().await;
}

/// Every call crosses the relay, so a relay that says it is saturated (its workers drop
/// datagrams, or have no idle time left) takes its cluster out of placement: offers get 503 with
/// `Retry-After`, the live call keeps its audio, and calls are taken again once it recovers. The
/// relay's own judgement is tested in `saturation`; here it is set as a worker would set it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_relay_refuses_new_calls_until_it_recovers() {
    let server = start_local(AllInOneConfig::default()).await;
    let mut first = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    first.wait_connected(Duration::from_secs(10)).await;
    let headroom = server.relays[0].headroom().clone();
    headroom.changed(false, true);
    let r = flood(&server, 3, 1).await;
    assert_eq!(
        count(&r, 503),
        3,
        "{:?}",
        r.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert_refusals(&r, 503, "no_capacity");
    assert!(
        r.iter().all(|r| r.body.contains("relay")),
        "the refusal says why: {}",
        r[0].body
    );
    assert!(
        first.echo_round(1, 10).await >= 8,
        "the call already placed keeps its audio"
    );
    let http = server.http_addr;
    let stats: Value =
        serde_json::from_str(&common::http_get(http, "/admin/stats").await.body).expect("stats");
    assert_eq!(stats["relays"][0]["saturated"], true, "{stats}");
    headroom.changed(true, false);
    let mut next = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    next.wait_connected(Duration::from_secs(10)).await;
    server.shutdown().await;
}
