//! Redis membership against a real redis-server: id leases, heartbeats, expiry, draining and load
//! as signaling and relays read them.

use crate::common;

use std::time::Duration;

use common::RedisServer;
use voice_edge::membership::registry::{self, Beat, MemberRecord};
use voice_edge::membership::{RedisDirectory, Registration};
use voice_edge::signaling::Directory;

fn record(instance: &str) -> MemberRecord {
    MemberRecord {
        cluster: 0,
        id: 0,
        instance: instance.into(),
        control: "10.0.0.5:7000".parse().unwrap(),
        link: "10.0.0.5:4000".parse().unwrap(),
        workers: 2,
        media: "192.0.2.9:3478".parse().unwrap(),
        load: 0,
        draining: false,
        at_ms: 0,
    }
}

const TTL: Duration = Duration::from_millis(600);

#[test]
fn ids_are_leased_once_and_expire_without_heartbeats() {
    let redis = RedisServer::start();
    let mut c = registry::connect(&format!("redis://{}", redis.addr)).unwrap();
    let a = registry::claim(&mut c, &record("a"), None, TTL).unwrap();
    let b = registry::claim(&mut c, &record("b"), None, TTL).unwrap();
    assert_eq!((a, b), (1, 2), "lowest free ids, one each");
    // A wanted id held by someone else is refused with a clear error; its holder may re-claim.
    let err = registry::claim(&mut c, &record("c"), Some(1), TTL).unwrap_err();
    assert!(err.to_string().contains("held by another"), "{err}");
    assert_eq!(
        registry::claim(&mut c, &record("a"), Some(1), TTL).unwrap(),
        1
    );
    // Another cluster has its own ids.
    let other = MemberRecord {
        cluster: 7,
        ..record("x")
    };
    assert_eq!(registry::claim(&mut c, &other, None, TTL).unwrap(), 1);

    // Heartbeats keep a and carry its load and draining; b goes silent and expires.
    let mut rec_a = MemberRecord {
        id: 1,
        ..record("a")
    };
    for _ in 0..4 {
        std::thread::sleep(TTL / 3);
        rec_a.load = 5;
        rec_a.draining = true;
        assert_eq!(
            registry::heartbeat(&mut c, &rec_a, TTL).unwrap(),
            Beat::Held
        );
    }
    let live = registry::list(&mut c, Some(0)).unwrap();
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!((live[0].id, live[0].load, live[0].draining), (1, 5, true));
    assert!(
        registry::list(&mut c, Some(7)).unwrap().is_empty(),
        "cluster 7's silent member expired too"
    );

    // The expired id is free again for a newcomer; a's id stays a's.
    assert_eq!(registry::claim(&mut c, &record("d"), None, TTL).unwrap(), 2);
    assert_eq!(
        registry::heartbeat(
            &mut c,
            &MemberRecord {
                id: 2,
                ..record("b")
            },
            TTL
        )
        .unwrap(),
        Beat::Stolen,
        "b coming back finds its id taken and says so"
    );
    // Leaving removes the record at once, and only the holder can.
    registry::leave(
        &mut c,
        &MemberRecord {
            id: 1,
            ..record("zz")
        },
    )
    .unwrap();
    assert_eq!(registry::list(&mut c, Some(0)).unwrap().len(), 2);
    registry::leave(&mut c, &rec_a).unwrap();
    assert_eq!(registry::list(&mut c, Some(0)).unwrap().len(), 1);
}

#[test]
fn a_lapsed_lease_is_reclaimed_with_the_same_id() {
    let redis = RedisServer::start();
    let mut c = registry::connect(&format!("redis://{}", redis.addr)).unwrap();
    let rec = MemberRecord {
        id: 4,
        ..record("a")
    };
    assert_eq!(registry::claim(&mut c, &rec, Some(4), TTL).unwrap(), 4);
    std::thread::sleep(TTL * 2); // a long pause: the lease lapsed
    assert!(registry::list(&mut c, Some(0)).unwrap().is_empty());
    assert_eq!(registry::heartbeat(&mut c, &rec, TTL).unwrap(), Beat::Held);
    assert_eq!(registry::list(&mut c, Some(0)).unwrap()[0].id, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_directory_follows_registrations_and_expiry() {
    let redis = RedisServer::start();
    let url = format!("redis://{}", redis.addr);
    let load = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(3));
    let (u, l) = (url.clone(), load.clone());
    let reg = tokio::task::spawn_blocking(move || {
        Registration::start(&u, record("a"), None, TTL, TTL / 4, move || {
            (l.load(std::sync::atomic::Ordering::Relaxed), false)
        })
    })
    .await
    .unwrap()
    .unwrap();
    let dir = directory(&url).await;
    let view = dir.clusters();
    assert_eq!(view.len(), 1);
    assert_eq!(view[0].media_addr.to_string(), "192.0.2.9:3478");
    assert_eq!(view[0].transceivers[0].id(), 1);
    // The reported load arrives with the next heartbeat and refresh.
    tokio::time::sleep(TTL).await;
    assert_eq!(dir.clusters()[0].transceivers[0].load(), 3);

    // Silent: gone from the directory within TTL + a refresh or two.
    let t0 = std::time::Instant::now();
    tokio::task::spawn_blocking(move || reg.abandon())
        .await
        .unwrap();
    while !dir.clusters().is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "still listed after {:?}",
            t0.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(t0.elapsed() >= TTL / 2, "left before its TTL could run out");
    dir.stop();
}

#[test]
fn redis_urls_with_a_password_and_a_database_are_honoured() {
    let redis = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let addr = redis.addr;
    // Without the password: refused. With it and db 3: the record lands in db 3, not db 0.
    let url = voice_edge::cache::parse_redis_url(&format!("redis://:s3cret@{addr}/3")).unwrap();
    let no_pw = format!("redis://{addr}/3");
    let refused = registry::connect(&no_pw).and_then(|mut c| registry::list(&mut c, None));
    assert!(refused.is_err(), "Redis without the password answered");
    let mut c = registry::connect(&url).unwrap();
    assert_eq!(registry::claim(&mut c, &record("a"), None, TTL).unwrap(), 1);
    assert_eq!(registry::list(&mut c, None).unwrap().len(), 1);
    let mut db0 = registry::connect(&format!("redis://:s3cret@{addr}/0")).unwrap();
    assert!(
        registry::list(&mut db0, None).unwrap().is_empty(),
        "written to db 0"
    );
    // The ACL form, user and password: the default user, db 2.
    let acl =
        voice_edge::cache::parse_redis_url(&format!("redis://default:s3cret@{addr}/2")).unwrap();
    let mut c = registry::connect(&acl).unwrap();
    assert_eq!(registry::claim(&mut c, &record("b"), None, TTL).unwrap(), 1);
    assert_eq!(registry::list(&mut db0, None).unwrap().len(), 0);
    // A wrong password is a clear error that does not repeat it.
    let Err(e) = registry::connect(&format!("redis://:wr0ng-pw@{addr}/3")) else {
        panic!("a wrong password was accepted");
    };
    let e = format!("{e:#}");
    assert!(!e.contains("wr0ng-pw"), "{e}");
    assert!(
        e.contains("***") && e.to_ascii_uppercase().contains("PASS"),
        "{e}"
    );
}

/// Signaling's view of `url`'s membership, refreshed every 50 ms.
async fn directory(url: &str) -> std::sync::Arc<RedisDirectory> {
    let u = url.to_owned();
    tokio::task::spawn_blocking(move || RedisDirectory::start(&u, "s", Duration::from_millis(50)))
        .await
        .unwrap()
        .unwrap()
}

/// Polls the directory until cluster 0's relay reads `saturated`; how long that took.
async fn until_relay(dir: &RedisDirectory, saturated: bool, within: Duration) -> Duration {
    let t0 = std::time::Instant::now();
    while dir.clusters()[0].relay_saturated() != saturated {
        assert!(
            t0.elapsed() < within,
            "relay still {}saturated after {:?}",
            if saturated { "not " } else { "" },
            t0.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    t0.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_relay_takes_its_cluster_out_until_it_recovers_or_dies() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use voice_edge::saturation::Headroom;

    let redis = RedisServer::start();
    let url = format!("redis://{}", redis.addr);
    let u = url.clone();
    let reg = tokio::task::spawn_blocking(move || {
        Registration::start(&u, record("a"), None, TTL, TTL / 4, || (0, false))
    })
    .await
    .unwrap()
    .unwrap();
    let dir = directory(&url).await;
    assert!(!dir.clusters()[0].relay_saturated());

    // A relay of cluster 0 as `voice-edge relay` runs it: following membership, and saying
    // whether it keeps up.
    let headroom = Arc::new(Headroom::default());
    let stop = Arc::new(AtomicBool::new(false));
    let follower = registry::follow(
        url.clone(),
        0,
        Arc::new(voice_edge::relay::LiveHops::default()),
        headroom.clone(),
        Duration::from_millis(50),
        stop.clone(),
    )
    .unwrap();
    headroom.changed(false, true);
    until_relay(&dir, true, Duration::from_secs(2)).await;
    headroom.changed(true, false);
    until_relay(&dir, false, Duration::from_secs(2)).await;
    // A relay that stops while saturated takes its word back.
    headroom.changed(false, true);
    until_relay(&dir, true, Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    tokio::task::spawn_blocking(move || follower.join())
        .await
        .unwrap()
        .unwrap();
    until_relay(&dir, false, Duration::from_secs(2)).await;

    // One that dies saturated cannot: its word lapses on its own.
    let u = url.clone();
    tokio::task::spawn_blocking(move || {
        let mut c = registry::connect(&u).unwrap();
        registry::report_relay(&mut c, 0, "crashed", true).unwrap();
    })
    .await
    .unwrap();
    until_relay(&dir, true, Duration::from_secs(2)).await;
    let lapsed = until_relay(
        &dir,
        false,
        registry::RELAY_SATURATION_TTL + Duration::from_secs(2),
    )
    .await;
    assert!(
        lapsed >= registry::RELAY_SATURATION_TTL / 2,
        "lapsed after {lapsed:?}"
    );
    dir.stop();
    tokio::task::spawn_blocking(move || reg.leave())
        .await
        .unwrap();
}
