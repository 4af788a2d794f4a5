//! A relay restart in the middle of a real call: the relay loses all its memory, and media must
//! resume before the client's next consent check would have rebuilt the flow. The gap is
//! measured at the client, as the silence between echoed audio frames.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Client, RedisServer, http_post, max_gap};
use voice_edge::allinone::{self, AllInOneConfig};

struct Outcome {
    gap: Duration,
    sent: u32,
    received: usize,
    counters: voice_edge::relay::counters::CounterSnapshot,
}

/// The gap is a latency figure: measure one restart at a time, not three competing for 2 cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn restart_mid_call(cfg: AllInOneConfig) -> Outcome {
    let _serial = ONE_AT_A_TIME.lock().await;
    let _ = env_logger::builder().is_test(true).try_init();
    let server = allinone::start(AllInOneConfig {
        http: "127.0.0.1:0".parse().unwrap(),
        relay: "127.0.0.1:0".parse().unwrap(),
        // The relay restart is a dev-only admin action.
        dev_admin: true,
        ..cfg
    })
    .await
    .unwrap();
    let mut c = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    c.wait_connected(Duration::from_secs(10)).await;

    let stop = Arc::new(AtomicBool::new(false));
    let sender = c.stream(0xC1, stop.clone());
    let t0 = tokio::time::Instant::now();
    let restart_at = t0 + Duration::from_millis(1500);
    let end = t0 + Duration::from_millis(8000);
    let http = server.http_addr;
    let restarter = tokio::spawn(async move {
        tokio::time::sleep_until(restart_at).await;
        let r = http_post(
            http,
            "/admin/actions/restart-relay",
            "application/json",
            b"",
        )
        .await;
        assert_eq!(r.status, 200, "restart failed: {}", r.body);
    });
    let arrivals = c.arrivals(0xC1, end).await;
    stop.store(true, Ordering::Relaxed);
    restarter.await.unwrap();
    let sent = sender.await.unwrap();
    let counters = server.relay().counters();
    // Media was flowing before the restart…
    assert!(
        arrivals.iter().filter(|t| **t < restart_at).count() > 50,
        "no echo before the restart"
    );
    let gap = max_gap(
        &arrivals,
        restart_at - Duration::from_millis(100),
        end - Duration::from_millis(500),
    );
    let _ = c.pc.close().await;
    server.shutdown().await;
    Outcome {
        gap,
        sent,
        received: arrivals.len(),
        counters,
    }
}

fn report(name: &str, o: &Outcome) {
    println!(
        "relay restart [{name}]: media gap {} ms (sent {}, echoed {}); counters after restart: {:?}",
        o.gap.as_millis(),
        o.sent,
        o.received,
        o.counters
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_resumes_within_100ms_after_a_relay_restart_embedded_cache() {
    let o = restart_mid_call(AllInOneConfig::default()).await;
    report("embedded mini-redis + outbound learning", &o);
    assert!(
        o.counters.flows_recovered_cache + o.counters.flows_learned_outbound >= 1,
        "{:?}",
        o.counters
    );
    assert!(
        o.gap < Duration::from_millis(100),
        "media gap {:?} after restart",
        o.gap
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_resumes_within_100ms_after_a_relay_restart_real_redis() {
    let redis = RedisServer::start();
    let o = restart_mid_call(AllInOneConfig {
        redis_url: Some(format!("redis://{}", redis.addr)),
        ..Default::default()
    })
    .await;
    report("redis-server + outbound learning", &o);
    assert!(
        o.counters.flows_recovered_cache >= 1,
        "the flow was not recovered from Redis: {:?}",
        o.counters
    );
    assert!(
        o.gap < Duration::from_millis(100),
        "media gap {:?} after restart",
        o.gap
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cache_or_learning_media_waits_for_the_next_consent_check() {
    let o = restart_mid_call(AllInOneConfig {
        flow_cache: false,
        learn_outbound: false,
        ..Default::default()
    })
    .await;
    report("no cache, no outbound learning", &o);
    // Recovered only by the client's next STUN check re-creating the flow.
    assert!(
        o.counters.flows_created >= 1,
        "flow never re-created: {:?}",
        o.counters
    );
    assert_eq!(
        o.counters.flows_recovered_cache + o.counters.flows_learned_outbound,
        0
    );
    assert!(
        o.gap < Duration::from_secs(6),
        "media did not come back: gap {:?}",
        o.gap
    );
}

/// Restarting used to close the relay's sockets before binding new ones: anything that bound
/// the port in between (another process, a squatter) left the cluster with no relay at all. Now
/// the new sockets are bound first, so the port is never free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_never_leaves_the_relay_port_free() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let server = allinone::start(AllInOneConfig {
        http: "127.0.0.1:0".parse().unwrap(),
        relay: "127.0.0.1:0".parse().unwrap(),
        dev_admin: true,
        ..Default::default()
    })
    .await
    .unwrap();
    let port = server.media_bind;
    // A squatter that binds the port (without SO_REUSEPORT) the moment it is free.
    let stop = Arc::new(AtomicBool::new(false));
    let squatter = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < deadline {
                if let Ok(s) = std::net::UdpSocket::bind(port) {
                    return Some(s);
                }
                std::thread::yield_now();
            }
            None
        })
    };
    for i in 0..10 {
        let r = http_post(
            server.http_addr,
            "/admin/actions/restart-relay",
            "application/json",
            b"",
        )
        .await;
        assert_eq!(r.status, 200, "restart {i}: {}", r.body);
    }
    stop.store(true, Ordering::Relaxed);
    let squatted = squatter.join().unwrap();
    assert!(squatted.is_none(), "the port was free during a restart");
    let mut c = Client::call(server.http_addr, "/v1/realtime/calls?model=loopback").await;
    c.wait_connected(Duration::from_secs(10)).await;
    assert!(
        c.echo_round(7, 10).await >= 8,
        "the restarted relay carries calls"
    );
    server.shutdown().await;
}
