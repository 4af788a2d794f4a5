//! Transceivers in Redis: each registers a record under a key that expires unless refreshed.
//!
//! The key is also the lease on the transceiver id: a new transceiver claims the lowest free id
//! of its cluster with `SET … NX`, so replicas started from one template (`docker compose
//! --scale`, a Kubernetes Deployment) get distinct ids without configuration. Ids go into ufrags
//! and call ids, so a transceiver keeps its id for its whole life and re-claims the same one if
//! its lease ever lapsed (Redis restarted, a long pause). A member that stops heartbeating
//! disappears when its TTL runs out, which is what takes a crashed transceiver out of placement
//! and out of the relays' tables.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// Every key this module writes starts with this.
const PREFIX: &str = "voice-edge";
/// Ids a cluster hands out (the ufrag has room for more; a cluster this big wants a second
/// cluster, not more ids).
pub const MAX_ID: u16 = 1024;

/// What a transceiver tells the cluster about itself, refreshed every heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    pub cluster: u16,
    pub id: u16,
    /// Random per process: who holds the id's lease.
    pub instance: String,
    /// The control API listener (signaling calls it).
    pub control: SocketAddr,
    /// Worker 0's shared socket; worker `w` is on the next port up (relays forward here).
    pub link: SocketAddr,
    pub workers: u8,
    /// The candidate this transceiver's answers name (the relay as clients reach it).
    pub media: SocketAddr,
    /// Live calls plus calls being set up.
    pub load: usize,
    pub draining: bool,
    /// When the transceiver wrote this (its clock, Unix ms): a reader keeps the newest of this
    /// and the load the transceiver reports with each answered call.
    #[serde(default)]
    pub at_ms: u64,
}

use crate::unix_time::now_ms;

pub fn member_key(cluster: u16, id: u16) -> String {
    format!("{PREFIX}:{cluster}:member:{id}")
}

fn member_pattern(cluster: Option<u16>) -> String {
    match cluster {
        Some(c) => format!("{PREFIX}:{c}:member:*"),
        None => format!("{PREFIX}:*:member:*"),
    }
}

pub fn connect(url: &str) -> anyhow::Result<redis::Connection> {
    let client = redis::Client::open(url)
        .with_context(|| format!("bad Redis URL {}", crate::cache::redact_redis_url(url)))?;
    client
        .get_connection_with_timeout(Duration::from_secs(2))
        .with_context(|| {
            format!(
                "connecting to Redis at {}",
                crate::cache::redact_redis_url(url)
            )
        })
}

/// Claims an id for `record` (its `id` field is ignored unless `wanted` is set) and writes the
/// record under it, expiring after `ttl`. Returns the id.
pub fn claim(
    conn: &mut redis::Connection,
    record: &MemberRecord,
    wanted: Option<u16>,
    ttl: Duration,
) -> anyhow::Result<u16> {
    let ids: Box<dyn Iterator<Item = u16>> = match wanted {
        Some(id) => Box::new(std::iter::once(id)),
        None => Box::new(1..=MAX_ID),
    };
    for id in ids {
        let rec = MemberRecord {
            id,
            ..record.clone()
        };
        let set: Option<String> = redis::cmd("SET")
            .arg(member_key(rec.cluster, id))
            .arg(serde_json::to_string(&rec)?)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis() as u64)
            .query(conn)?;
        if set.is_some() {
            return Ok(id);
        }
        // Ours already (a re-claim after a lapse is handled by heartbeat, but a restart with the
        // same instance id would land here too).
        if let Some(cur) = read(conn, rec.cluster, id)?
            && cur.instance == rec.instance
        {
            return Ok(id);
        }
    }
    match wanted {
        Some(id) => anyhow::bail!(
            "transceiver id {id} of cluster {} is held by another live transceiver",
            record.cluster
        ),
        None => anyhow::bail!("cluster {} has no free transceiver id", record.cluster),
    }
}

fn read(
    conn: &mut redis::Connection,
    cluster: u16,
    id: u16,
) -> anyhow::Result<Option<MemberRecord>> {
    let v: Option<String> = redis::cmd("GET").arg(member_key(cluster, id)).query(conn)?;
    Ok(v.and_then(|v| serde_json::from_str(&v).ok()))
}

/// What a heartbeat found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beat {
    /// Refreshed (or re-claimed after a lapse).
    Held,
    /// Another instance holds our id: two processes were given one id.
    Stolen,
}

/// Refreshes the record and its TTL, re-claiming the id if the lease lapsed.
pub fn heartbeat(
    conn: &mut redis::Connection,
    record: &MemberRecord,
    ttl: Duration,
) -> anyhow::Result<Beat> {
    match read(conn, record.cluster, record.id)? {
        Some(cur) if cur.instance != record.instance => Ok(Beat::Stolen),
        _ => {
            let _: () = redis::cmd("SET")
                .arg(member_key(record.cluster, record.id))
                .arg(serde_json::to_string(record)?)
                .arg("PX")
                .arg(ttl.as_millis() as u64)
                .query(conn)?;
            Ok(Beat::Held)
        }
    }
}

/// Removes the record if it is still ours (a clean shutdown leaves placement at once).
pub fn leave(conn: &mut redis::Connection, record: &MemberRecord) -> anyhow::Result<()> {
    if read(conn, record.cluster, record.id)?.is_some_and(|cur| cur.instance == record.instance) {
        let _: () = redis::cmd("DEL")
            .arg(member_key(record.cluster, record.id))
            .query(conn)?;
    }
    Ok(())
}

/// Every live member (of `cluster`, or of all clusters), ordered by cluster and id.
pub fn list(
    conn: &mut redis::Connection,
    cluster: Option<u16>,
) -> anyhow::Result<Vec<MemberRecord>> {
    let mut keys: Vec<String> = vec![];
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(member_pattern(cluster))
            .arg("COUNT")
            .arg(1000)
            .query(conn)?;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    if keys.is_empty() {
        return Ok(vec![]);
    }
    let values: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(conn)?;
    let mut out: Vec<MemberRecord> = values
        .into_iter()
        .flatten()
        .filter_map(|v| serde_json::from_str(&v).ok())
        .collect();
    out.sort_by_key(|m| (m.cluster, m.id));
    out.dedup_by_key(|m| (m.cluster, m.id));
    Ok(out)
}

/// A transceiver's membership for as long as the process runs: a thread that refreshes the
/// record every `interval` with the load and draining state `status` reports.
pub struct Registration {
    pub record: MemberRecord,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    url: String,
}

impl Registration {
    /// Claims an id (`wanted`, or the lowest free one) and starts heartbeating.
    pub fn start(
        url: &str,
        record: MemberRecord,
        wanted: Option<u16>,
        ttl: Duration,
        interval: Duration,
        status: impl Fn() -> (usize, bool) + Send + 'static,
    ) -> anyhow::Result<Registration> {
        let mut conn = connect(url)?;
        let id = claim(&mut conn, &record, wanted, ttl)?;
        let record = MemberRecord { id, ..record };
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stop, url, mut rec) = (stop.clone(), url.to_owned(), record.clone());
            std::thread::Builder::new()
                .name("membership".into())
                .spawn(move || {
                    let mut conn = Some(conn);
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(interval);
                        (rec.load, rec.draining) = status();
                        rec.at_ms = now_ms();
                        if conn.is_none() {
                            conn = connect(&url).ok();
                        }
                        let Some(c) = conn.as_mut() else { continue };
                        match heartbeat(c, &rec, ttl) {
                            Ok(Beat::Held) => {}
                            Ok(Beat::Stolen) => log::error!(
                                "transceiver id {} of cluster {} is registered by another instance; check that no two transceivers were given the same --id",
                                rec.id,
                                rec.cluster
                            ),
                            Err(e) => {
                                log::warn!("membership heartbeat: {e}");
                                conn = None;
                            }
                        }
                    }
                })?
        };
        Ok(Registration {
            record,
            stop,
            thread: Some(thread),
            url: url.to_owned(),
        })
    }

    /// Stops heartbeating but leaves the record to expire: what a crashed or frozen process
    /// looks like to the cluster (tests use it to check that expiry takes it out of placement).
    pub fn abandon(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Stops heartbeating and removes the record, so placement stops at once rather than
    /// after the TTL.
    pub fn leave(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Err(e) = connect(&self.url).and_then(|mut c| leave(&mut c, &self.record)) {
            log::warn!("leaving membership: {e}");
        }
    }
}

/// How long a relay's word that it is saturated stands unless it says so again: a relay that
/// dies saturated stops holding its cluster out of placement after this.
pub const RELAY_SATURATION_TTL: Duration = Duration::from_secs(3);

/// A sorted set per cluster: the relays that say they are saturated now, each scored with when
/// that lapses (its clock, Unix ms). One `ZCOUNT` per cluster tells signaling, where a key per
/// relay would need a `SCAN` over every flow key besides.
fn saturated_relays_key(cluster: u16) -> String {
    format!("{PREFIX}:{cluster}:saturated-relays")
}

/// A relay of `cluster` says whether it is saturated (see [`crate::saturation::Headroom`]).
pub fn report_relay(
    conn: &mut redis::Connection,
    cluster: u16,
    instance: &str,
    saturated: bool,
) -> anyhow::Result<()> {
    let key = saturated_relays_key(cluster);
    if saturated {
        let now = now_ms();
        let until = now + RELAY_SATURATION_TTL.as_millis() as u64;
        let _: () = redis::pipe()
            .cmd("ZADD")
            .arg(&key)
            .arg(until)
            .arg(instance)
            .ignore()
            // Relays that died saturated, gone for good.
            .cmd("ZREMRANGEBYSCORE")
            .arg(&key)
            .arg("-inf")
            .arg(now)
            .ignore()
            .query(conn)?;
    } else {
        let _: () = redis::cmd("ZREM").arg(&key).arg(instance).query(conn)?;
    }
    Ok(())
}

/// How many of `cluster`'s relays say they are saturated now.
pub fn saturated_relays(conn: &mut redis::Connection, cluster: u16) -> anyhow::Result<usize> {
    Ok(redis::cmd("ZCOUNT")
        .arg(saturated_relays_key(cluster))
        .arg(now_ms())
        .arg("+inf")
        .query(conn)?)
}

/// Keeps a relay's next-hop table equal to the live members of `cluster` (id → link address),
/// read every `interval`, until `stop`, and tells signaling through Redis while `headroom` says
/// the relay is saturated. While Redis is away the last table stays.
pub fn follow(
    url: String,
    cluster: u16,
    hops: Arc<crate::relay::LiveHops>,
    headroom: Arc<crate::saturation::Headroom>,
    interval: Duration,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    let instance = hex::encode(rand::random::<[u8; 8]>());
    std::thread::Builder::new()
        .name("relay-members".into())
        .spawn(move || {
            let mut conn = None;
            // What Redis last heard from this relay; renewed every turn while saturated.
            let mut reported = None;
            while !stop.load(Ordering::Relaxed) {
                if conn.is_none() {
                    conn = connect(&url)
                        .map_err(|e| log::warn!("relay membership: {e:#}"))
                        .ok();
                }
                if let Some(c) = conn.as_mut() {
                    match list(c, Some(cluster)) {
                        Ok(members) => {
                            let workers = members.iter().map(|m| m.workers).max().unwrap_or(1);
                            hops.set(members.iter().map(|m| (m.id, m.link)).collect(), workers);
                        }
                        Err(e) => {
                            log::warn!(
                                "relay membership read failed (keeping the last table): {e}"
                            );
                            conn = None;
                        }
                    }
                }
                let saturated = headroom.is_saturated();
                if let Some(c) = conn.as_mut()
                    && (saturated || reported != Some(false))
                {
                    match report_relay(c, cluster, &instance, saturated) {
                        Ok(()) => reported = Some(saturated),
                        Err(e) => {
                            log::warn!("relay: could not report its headroom to Redis: {e}");
                            conn = None;
                        }
                    }
                }
                std::thread::sleep(interval);
            }
            // A relay that stops is no longer saturated.
            if reported == Some(true)
                && let Ok(mut c) = connect(&url)
            {
                let _ = report_relay(&mut c, cluster, &instance, false);
            }
        })
}
