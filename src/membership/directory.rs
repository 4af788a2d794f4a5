//! Signaling's view of Redis membership: the live transceivers of every cluster, refreshed in
//! the background so placing a call never waits on Redis.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use super::registry::{self, MemberRecord};
use crate::control::client::Reported;
use crate::control::{RemoteTransceiver, TransceiverControl};
use crate::saturation::Headroom;
use crate::signaling::{ClusterView, Directory};

pub struct RedisDirectory {
    current: RwLock<Arc<Vec<ClusterView>>>,
    stop: AtomicBool,
}

impl RedisDirectory {
    /// Starts a thread that reads membership every `interval`. Transceivers are kept across
    /// refreshes (same instance, same connection pool and pending count); one whose record
    /// expired is dropped from placement at the next refresh. Returns once the first read is in,
    /// so signaling starts with a full view.
    pub fn start(url: &str, secret: &str, interval: Duration) -> anyhow::Result<Arc<Self>> {
        let mut conn = registry::connect(url)?;
        let dir = Arc::new(RedisDirectory {
            current: RwLock::new(Arc::new(vec![])),
            stop: AtomicBool::new(false),
        });
        let mut known: HashMap<(u16, u16, String), Arc<RemoteTransceiver>> = HashMap::new();
        let (members, saturated) = read(&mut conn)?;
        dir.refresh(members, &saturated, &mut known, secret);
        let (weak, url, secret) = (Arc::downgrade(&dir), url.to_owned(), secret.to_owned());
        std::thread::Builder::new()
            .name("directory".into())
            .spawn(move || {
                let mut conn = Some(conn);
                loop {
                    std::thread::sleep(interval);
                    let Some(dir) = weak.upgrade() else { return };
                    if dir.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    if conn.is_none() {
                        conn = registry::connect(&url).ok();
                    }
                    let Some(c) = conn.as_mut() else { continue };
                    match read(c) {
                        Ok((members, saturated)) => {
                            dir.refresh(members, &saturated, &mut known, &secret)
                        }
                        Err(e) => {
                            // Keep the last view: calls in flight and live calls' hang-ups still
                            // work while Redis is away; new members wait for it to return.
                            log::warn!("membership read failed (keeping the last view): {e}");
                            conn = None;
                        }
                    }
                }
            })?;
        Ok(dir)
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn refresh(
        &self,
        members: Vec<MemberRecord>,
        saturated_relays: &HashMap<u16, usize>,
        known: &mut HashMap<(u16, u16, String), Arc<RemoteTransceiver>>,
        secret: &str,
    ) {
        let mut clusters: BTreeMap<u16, ClusterView> = BTreeMap::new();
        let mut still = HashMap::new();
        for m in members {
            let key = (m.cluster, m.id, m.instance.clone());
            let t = known.remove(&key).unwrap_or_else(|| {
                log::info!(
                    "transceiver {}.{} joined (control {}, link {}, media {})",
                    m.cluster,
                    m.id,
                    m.control,
                    m.link,
                    m.media
                );
                Arc::new(RemoteTransceiver::new(m.cluster, m.id, m.control, secret))
            });
            t.update(Reported {
                load: m.load,
                draining: m.draining,
                at_ms: m.at_ms,
            });
            clusters
                .entry(m.cluster)
                .or_insert_with(|| {
                    let relay = Arc::new(Headroom::default());
                    relay.set_saturated(saturated_relays.get(&m.cluster).copied().unwrap_or(0));
                    ClusterView {
                        id: m.cluster,
                        media_addr: m.media,
                        transceivers: vec![],
                        relays: vec![relay],
                    }
                })
                .transceivers
                .push(t.clone() as Arc<dyn TransceiverControl>);
            still.insert(key, t);
        }
        for (cluster, id, _) in known.keys() {
            log::info!("transceiver {cluster}.{id} left placement");
        }
        *known = still;
        *self.current.write().unwrap() = Arc::new(clusters.into_values().collect());
    }
}

/// Every live member, and how many relays of each cluster that has members say they are
/// saturated.
fn read(conn: &mut redis::Connection) -> anyhow::Result<(Vec<MemberRecord>, HashMap<u16, usize>)> {
    let members = registry::list(conn, None)?;
    let clusters: std::collections::BTreeSet<u16> = members.iter().map(|m| m.cluster).collect();
    let saturated = clusters
        .into_iter()
        .map(|c| Ok((c, registry::saturated_relays(conn, c)?)))
        .collect::<anyhow::Result<_>>()?;
    Ok((members, saturated))
}

impl Directory for RedisDirectory {
    fn clusters(&self) -> Arc<Vec<ClusterView>> {
        self.current.read().unwrap().clone()
    }
}
