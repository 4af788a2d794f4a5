//! The relay's flow cache against a real Redis (Debian's redis-server): flows are written,
//! forwarding never waits for Redis, and writes lost while Redis was down are replayed.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::{RedisServer, binding_request};
use voice_edge::membership::ClusterMembers;
use voice_edge::relay::flow_cache::flow_key;
use voice_edge::relay::{self, FlowCacheConfig, RelayConfig};
use voice_edge::routing::{RouteKeys, ufrag};

fn get(redis: std::net::SocketAddr, key: &str) -> Option<String> {
    get_from(&format!("redis://{redis}/"), key)
}

fn get_from(url: &str, key: &str) -> Option<String> {
    let client = redis::Client::open(url).ok()?;
    let mut c = client
        .get_connection_with_timeout(Duration::from_millis(300))
        .ok()?;
    redis::cmd("GET")
        .arg(key)
        .query::<Option<String>>(&mut c)
        .ok()
        .flatten()
}

fn wait_for(redis: std::net::SocketAddr, key: &str, within: Duration) -> Option<String> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(v) = get(redis, key) {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn flows_survive_redis_outages_and_are_written_when_it_returns() {
    // A port where Redis is not running yet.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let redis_addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let keys = RouteKeys::from_hex(0, &"42".repeat(32)).unwrap();
    let mut cfg = RelayConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        ClusterMembers::new(2).with(5, sink.local_addr().unwrap()),
        keys.clone(),
    );
    cfg.cache = Some(FlowCacheConfig {
        redis: format!("redis://{redis_addr}"),
        ttl: Duration::from_secs(60),
    });
    let relay = relay::spawn(cfg).unwrap();

    // Redis is down: the call's first packet is still forwarded at once.
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    let u = ufrag::mint(&keys, 2, 5, 0);
    client
        .send_to(&binding_request(&format!("{u}:abcd")), relay.public_addr)
        .unwrap();
    let mut buf = [0u8; 2048];
    sink.recv_from(&mut buf)
        .expect("forwarding waited for Redis");
    std::thread::sleep(Duration::from_millis(200));
    let c = relay.counters();
    assert_eq!(c.cache_write_errors, 1, "{c:?}");
    assert_eq!(c.cache_writes, 0, "{c:?}");

    // Redis comes back: the lost write is replayed without any new traffic.
    let redis = RedisServer::start_on(port);
    let key = flow_key("c2", client.local_addr().unwrap());
    assert_eq!(
        wait_for(redis.addr, &key, Duration::from_secs(5)).as_deref(),
        Some("5/0")
    );
    assert!(relay.counters().cache_writes >= 1);

    // A second flow goes straight in.
    let client2 = UdpSocket::bind("127.0.0.1:0").unwrap();
    client2
        .send_to(
            &binding_request(&format!("{}:efgh", ufrag::mint(&keys, 2, 5, 0))),
            relay.public_addr,
        )
        .unwrap();
    let key2 = flow_key("c2", client2.local_addr().unwrap());
    assert_eq!(
        wait_for(redis.addr, &key2, Duration::from_secs(5)).as_deref(),
        Some("5/0")
    );
    relay.stop();
}

/// Every log line this test binary writes, to check what reaches the logs.
static LOGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, r: &log::Record) {
        LOGS.lock().unwrap().push(r.args().to_string());
    }
    fn flush(&self) {}
}

/// A relay writing flows to `url` with one flow created; returns the relay and the flow's key.
fn relay_with_cache(url: &str) -> (relay::RelayHandle, String, UdpSocket) {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let keys = RouteKeys::from_hex(0, &"42".repeat(32)).unwrap();
    let mut cfg = RelayConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        ClusterMembers::new(2).with(5, sink.local_addr().unwrap()),
        keys.clone(),
    );
    cfg.cache = Some(FlowCacheConfig {
        redis: voice_edge::cache::parse_redis_url(url).unwrap(),
        ttl: Duration::from_secs(60),
    });
    let relay = relay::spawn(cfg).unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .send_to(
            &binding_request(&format!("{}:abcd", ufrag::mint(&keys, 2, 5, 0))),
            relay.public_addr,
        )
        .unwrap();
    (relay, flow_key("c2", client.local_addr().unwrap()), sink)
}

/// A Redis with a password and a database in the URL (both forms, `:password@` and
/// `user:password@`): flows land in that database; without the password nothing is written,
/// the failure is counted and logged with its reason, and the password is never logged.
#[test]
fn the_flow_cache_uses_the_urls_password_and_database() {
    let _ = log::set_logger(&Capture).map(|()| log::set_max_level(log::LevelFilter::Info));
    let redis = RedisServer::start_with(&["--requirepass", "fl0w-s3cret"]);
    let a = redis.addr;
    for (url, db) in [
        (format!("redis://:fl0w-s3cret@{a}/3"), 3),
        (format!("redis://default:fl0w-s3cret@{a}/5"), 5),
    ] {
        let (relay, key, _sink) = relay_with_cache(&url);
        let read = format!("redis://:fl0w-s3cret@{a}/{db}");
        assert_eq!(
            wait_for_in(&read, &key, Duration::from_secs(5)).as_deref(),
            Some("5/0"),
            "{db}"
        );
        assert_eq!(
            get_from(&format!("redis://:fl0w-s3cret@{a}/0"), &key),
            None,
            "db 0"
        );
        relay.stop();
    }

    // No password, or a wrong one: refused, counted, and said so.
    for url in [format!("redis://{a}/3"), format!("redis://:wr0ng@{a}/3")] {
        let (relay, key, _sink) = relay_with_cache(&url);
        let deadline = Instant::now() + Duration::from_secs(5);
        while relay.counters().cache_connect_errors == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let c = relay.counters();
        assert!(c.cache_connect_errors >= 1, "{url}: {c:?}");
        assert_eq!(c.cache_writes, 0, "{url}: {c:?}");
        assert_eq!(get_from(&format!("redis://:fl0w-s3cret@{a}/3"), &key), None);
        relay.stop();
    }
    let logs = LOGS.lock().unwrap().clone();
    assert!(
        logs.iter()
            .any(|l| l.contains("flow cache") && l.to_ascii_uppercase().contains("AUTH")),
        "no log says why: {logs:?}"
    );
    assert!(
        logs.iter()
            .all(|l| !l.contains("fl0w-s3cret") && !l.contains("wr0ng")),
        "a password was logged: {logs:?}"
    );
}

fn wait_for_in(url: &str, key: &str, within: Duration) -> Option<String> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(v) = get_from(url, key) {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// The embedded Redis-protocol server has no password, so it listens on loopback only (not on
/// the machine's network address) and refuses to bind anywhere else; its address is not shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_redis_listens_on_loopback_only() {
    let server = voice_edge::allinone::start(voice_edge::allinone::AllInOneConfig {
        http: "127.0.0.1:0".parse().unwrap(),
        relay: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let embedded = server
        .embedded_redis
        .expect("the all-in-one runs it by default");
    assert!(embedded.ip().is_loopback(), "{embedded}");
    assert!(std::net::TcpStream::connect(embedded).is_ok());
    // Not on any of this machine's other addresses, at that port.
    for i in voice_edge::media_address::HostAddrs::read().interfaces {
        let ip = i.ip;
        if !ip.is_loopback() {
            let there = std::net::SocketAddr::new(ip, embedded.port());
            assert!(
                std::net::TcpStream::connect_timeout(&there, Duration::from_millis(500)).is_err(),
                "the embedded Redis answers on {there}"
            );
        }
    }
    let shown = server.flow_cache.clone().unwrap();
    assert!(!shown.contains(&embedded.port().to_string()), "{shown}");
    let stats = common::http_get(server.http_addr, "/admin/stats")
        .await
        .body;
    assert!(!stats.contains(&format!(":{}", embedded.port())), "{stats}");
    for anywhere in ["0.0.0.0:0", "[::]:0"] {
        let e = voice_edge::cache::start_embedded(anywhere.parse().unwrap()).await;
        assert!(e.is_err(), "bound {anywhere}");
    }
    server.shutdown().await;
}

/// After a restart, a call's next datagram is not a STUN check: the new relay asks the cache
/// for its flow, holds that datagram meanwhile and forwards it when the cache answers, so the
/// packet that asked is not lost; a released flow is gone from the cache too.
#[test]
fn a_restarted_relay_forwards_the_datagram_that_asked_the_cache() {
    let redis = RedisServer::start();
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let keys = RouteKeys::from_hex(0, &"42".repeat(32)).unwrap();
    let cfg = || {
        let mut cfg = RelayConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            ClusterMembers::new(2).with(5, sink.local_addr().unwrap()),
            keys.clone(),
        );
        cfg.cache = Some(FlowCacheConfig {
            redis: format!("redis://{}", redis.addr),
            ttl: Duration::from_secs(60),
        });
        // Only the cache can bring the flow back here.
        cfg.learn_outbound = false;
        cfg
    };
    let before = relay::spawn(cfg()).unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .send_to(
            &binding_request(&format!("{}:abcd", ufrag::mint(&keys, 2, 5, 0))),
            before.public_addr,
        )
        .unwrap();
    let mut buf = [0u8; 2048];
    sink.recv_from(&mut buf)
        .expect("the check was not forwarded");
    let key = flow_key("c2", client.local_addr().unwrap());
    assert!(wait_for(redis.addr, &key, Duration::from_secs(5)).is_some());
    before.stop();

    let after = relay::spawn(cfg()).unwrap();
    client
        .send_to(b"\x80media-after-restart", after.public_addr)
        .unwrap();
    let (n, _) = sink
        .recv_from(&mut buf)
        .expect("the datagram that asked the cache was lost");
    assert_eq!(
        &buf[voice_edge::routing::link::LINK_HEADER_LEN..n],
        b"\x80media-after-restart"
    );
    // The counter moves just after the send.
    std::thread::sleep(Duration::from_millis(50));
    let c = after.counters();
    assert_eq!(
        (
            c.cache_lookups,
            c.flows_recovered_cache,
            c.held_then_forwarded
        ),
        (1, 1, 1),
        "{c:?}"
    );

    // The owner releases the client: the cache forgets it as well.
    let mut release = vec![0u8; voice_edge::routing::link::LINK_HEADER_LEN];
    voice_edge::routing::link::LinkHeader {
        ingress: 0,
        client: client.local_addr().unwrap(),
    }
    .write(&mut release);
    sink.send_to(&release, after.link_addr).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while get(redis.addr, &key).is_some() {
        assert!(
            Instant::now() < deadline,
            "the released flow stayed in the cache"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(after.counters().flows_released, 1);
    after.stop();
}
