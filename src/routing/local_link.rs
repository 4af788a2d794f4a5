//! The relay ↔ transceiver link within one process: the same link datagrams (header + client
//! datagram), handed over in memory instead of through the kernel.
//!
//! When the relay and its transceivers share a process (the all-in-one), every echoed packet
//! crossed loopback UDP four times, two of them only between the relay and a transceiver; that
//! kernel path (IP output, loopback softirq, socket queue, wake-up) was the largest cost centre
//! at 1,000 calls. Here a datagram is one copy into a bounded queue and a wake-up per batch.
//! What travels is byte-for-byte what the UDP link carries, so the relay and the transceiver
//! keep one code path for what a datagram means and differ only in how it arrives.
//!
//! Addresses still name the ends: a queue is registered under the link address it stands in for
//! (a transceiver worker's socket, the relay's link socket), and every datagram carries the
//! sender's link address, as `recvfrom` would report it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

use crate::wakeup::Waker;

/// Datagrams a link queues before it drops, as a full socket buffer would (≈ 1 s of 50 calls'
/// audio in the unlikely case a worker stalls that long).
const CAPACITY: usize = 4096;

/// One queued datagram: who sent it (its link address) and the bytes.
pub type LinkDatagram = (SocketAddr, Vec<u8>);

/// The sending end, cheap to clone.
#[derive(Clone)]
pub struct LocalLink {
    tx: SyncSender<LinkDatagram>,
    wake: Waker,
    dropped: Arc<AtomicU64>,
}

/// The receiving end, owned by one worker thread.
pub struct LocalInbox {
    rx: Receiver<LinkDatagram>,
    wake: Waker,
    dropped: Arc<AtomicU64>,
}

/// A queue for the worker that sleeps on `wake`'s sleeper.
pub fn local_link(wake: Waker) -> (LocalLink, LocalInbox) {
    let (tx, rx) = sync_channel(CAPACITY);
    let dropped = Arc::new(AtomicU64::new(0));
    (
        LocalLink {
            tx,
            wake: wake.clone(),
            dropped: dropped.clone(),
        },
        LocalInbox { rx, wake, dropped },
    )
}

impl LocalLink {
    /// Queues a copy of `parts` (concatenated: one datagram) from `from`; false when the queue is full or its worker gone
    /// (the datagram is lost, as UDP would lose it). The receiver is not woken: call
    /// [`LocalLink::wake`] once after a batch.
    pub fn deliver(&self, from: SocketAddr, parts: &[&[u8]]) -> bool {
        let mut bytes = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
        for p in parts {
            bytes.extend_from_slice(p);
        }
        match self.tx.try_send((from, bytes)) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }

    pub fn wake(&self) {
        self.wake.wake();
    }

    /// Whether two handles reach the same queue.
    pub fn same(&self, other: &LocalLink) -> bool {
        Arc::ptr_eq(&self.dropped, &other.dropped)
    }
}

impl LocalInbox {
    /// Up to `max` queued datagrams. A sender that queues after the worker woke wakes it
    /// again; a caller that took `max` calls [`LocalInbox::again`] so it does not sleep on the
    /// rest.
    pub fn take(&self, max: usize) -> impl Iterator<Item = LinkDatagram> + '_ {
        std::iter::from_fn(|| self.rx.try_recv().ok()).take(max)
    }

    /// Makes the next wait return at once (more may be queued than one turn took).
    pub fn again(&self) {
        self.wake.wake();
    }

    /// Datagrams lost because this queue was full: the in-memory twin of a socket's drop
    /// count, which the worker's saturation check reads.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Which link addresses this process serves in memory, shared by the relay and the transceivers
/// it starts. Workers copy the table when its version moves (one atomic load per loop turn), so
/// a relay restart that registers new queues is seen at once and the hot path takes no lock.
#[derive(Default)]
pub struct LocalLinks {
    version: AtomicU64,
    table: Mutex<HashMap<SocketAddr, Vec<LocalLink>>>,
}

impl LocalLinks {
    /// Serves `addr` by these queues (several: the relay's workers share one link address; a
    /// sender spreads over them by client). Replaces what `addr` had.
    pub fn register(&self, addr: SocketAddr, links: Vec<LocalLink>) {
        self.table.lock().unwrap().insert(addr, links);
        self.version.fetch_add(1, Ordering::Release);
    }

    /// The table, if it changed since `seen`.
    pub fn refresh(&self, seen: &mut u64) -> Option<HashMap<SocketAddr, Vec<LocalLink>>> {
        let v = self.version.load(Ordering::Acquire);
        if v == *seen {
            return None;
        }
        *seen = v;
        Some(self.table.lock().unwrap().clone())
    }
}

/// A worker's copy of [`LocalLinks`].
#[derive(Default)]
pub struct LocalRoutes {
    seen: u64,
    table: HashMap<SocketAddr, Vec<LocalLink>>,
    /// Links given datagrams since the last [`LocalRoutes::wake_all`].
    woken: Vec<LocalLink>,
}

impl LocalRoutes {
    pub fn refresh(&mut self, links: &LocalLinks) {
        if let Some(t) = links.refresh(&mut self.seen) {
            self.table = t;
        }
    }

    /// Hands the datagram `parts` make to the in-memory link serving `to`, picking among several by `client`.
    /// `None` when `to` is not served in memory (send it by UDP); `Some(false)` when it was
    /// dropped.
    #[inline]
    pub fn deliver(
        &mut self,
        to: SocketAddr,
        client: SocketAddr,
        from: SocketAddr,
        parts: &[&[u8]],
    ) -> Option<bool> {
        if self.table.is_empty() {
            return None;
        }
        let links = self.table.get(&to)?;
        let link = match links.len() {
            0 => return Some(false),
            1 => &links[0],
            n => &links[client.port() as usize % n],
        };
        let ok = link.deliver(from, parts);
        if ok && !self.woken.iter().any(|w| w.same(link)) {
            self.woken.push(link.clone());
        }
        Some(ok)
    }

    /// Wakes every link given datagrams since the last call: one wake-up per batch, not per
    /// datagram.
    pub fn wake_all(&mut self) {
        for l in self.woken.drain(..) {
            l.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wakeup::{Sleeper, woken_within};
    use std::time::Duration;

    fn link() -> (LocalLink, LocalInbox) {
        local_link(Sleeper::new().unwrap().waker())
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_datagram_crosses_with_its_sender_and_one_wake_up_per_batch() {
        let links = LocalLinks::default();
        let mut sleeper = Sleeper::new().unwrap();
        let (link, inbox) = local_link(sleeper.waker());
        links.register(addr("127.0.0.1:4000"), vec![link]);
        let mut routes = LocalRoutes::default();
        routes.refresh(&links);
        let client = addr("192.0.2.1:5000");
        let me = addr("127.0.0.1:3479");
        assert_eq!(
            routes.deliver(addr("127.0.0.1:4001"), client, me, &[b"x"]),
            None
        );
        assert_eq!(
            routes.deliver(addr("127.0.0.1:4000"), client, me, &[b"o", b"ne"]),
            Some(true)
        );
        assert_eq!(
            routes.deliver(addr("127.0.0.1:4000"), client, me, &[b"two"]),
            Some(true)
        );
        let tick = Duration::from_millis(20);
        assert!(!woken_within(&mut sleeper, tick));
        routes.wake_all();
        assert!(woken_within(&mut sleeper, Duration::from_secs(5)));
        let got: Vec<_> = inbox.take(10).collect();
        assert_eq!(got, vec![(me, b"one".to_vec()), (me, b"two".to_vec())]);
        assert!(!woken_within(&mut sleeper, tick));
    }

    #[test]
    fn a_full_or_abandoned_queue_drops_like_udp() {
        let (link, inbox) = link();
        let me = addr("127.0.0.1:3479");
        for _ in 0..CAPACITY {
            assert!(link.deliver(me, &[b"a"]));
        }
        assert!(!link.deliver(me, &[b"a"]));
        drop(inbox);
        assert!(!link.deliver(me, &[b"a"]));
    }

    #[test]
    fn a_re_registered_address_is_seen_by_every_copy() {
        let links = LocalLinks::default();
        let (a, _ia) = link();
        let (b, ib) = link();
        let to = addr("127.0.0.1:3479");
        links.register(to, vec![a]);
        let mut routes = LocalRoutes::default();
        routes.refresh(&links);
        links.register(to, vec![b]);
        routes.refresh(&links);
        let c = addr("192.0.2.1:5000");
        assert_eq!(routes.deliver(to, c, c, &[b"z"]), Some(true));
        assert_eq!(ib.take(10).count(), 1);
    }
}
