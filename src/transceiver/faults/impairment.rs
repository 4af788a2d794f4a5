//! A bad network for one direction of one call, as a queue of held datagrams released by time:
//! random loss, a fixed delay with jitter, and a bandwidth cap with a bounded bottleneck buffer.
//!
//! Sans-I/O like the endpoint around it: [`Impairment::push`] takes a datagram and the time it
//! was sent, [`Impairment::poll_timeout`] says when the next one is due, [`Impairment::pop_due`]
//! hands back what is due. It reads no clock and owns its random generator (seeded), so tests
//! replay the same losses and jitter in virtual time.
//!
//! The model, in packet order, is what a datagram meets on a real path:
//!
//! 1. **Loss**: dropped with probability `loss`, before anything else (a radio losing a frame).
//! 2. **Bottleneck** (`bandwidth_kbps` > 0): one link of that rate with a FIFO in front. A
//!    datagram leaves the link when the previous one has finished and its own bits have been
//!    clocked out; one that would wait more than [`MAX_BACKLOG`] behind the link is dropped at
//!    the tail, as a router's finite buffer does (an unbounded buffer at 8 kbps would turn one
//!    second of audio into minutes of queue).
//! 3. **Propagation**: `delay_ms` plus a uniform jitter in ±`jitter_ms` (clamped at zero).
//!
//! **No reordering.** A datagram is never released before the one pushed ahead of it: its
//! release time is at least the previous one's. Jitter on real paths comes mostly from queues,
//! and queues are FIFO; reordering needs parallel paths, which a voice call over one access
//! link rarely sees, and SRTP/Opus tolerate it anyway. The price is that the delay distribution
//! is skewed upwards when jitter approaches the packet interval, but every datagram still
//! arrives within `delay ± jitter` (plus its bottleneck wait) of when it was pushed, because
//! the one ahead of it was pushed earlier and met the same bound.
//!
//! **Bounded**: at most [`MAX_HELD`] datagrams and [`MAX_HELD_BYTES`] bytes are held; beyond
//! either, the new datagram is dropped (drop-tail) and counted.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Held datagrams per call and direction. 5 s of delay at 50 packets a second is 250; this
/// leaves room for a data channel burst, and bounds a call's memory whatever is configured.
pub const MAX_HELD: usize = 1024;
/// Held bytes per call and direction (1,024 full-size datagrams would be ~1.2 MB).
pub const MAX_HELD_BYTES: usize = 256 * 1024;
/// The longest a datagram may wait for the bottleneck link before the buffer is full.
pub const MAX_BACKLOG: Duration = Duration::from_millis(500);

/// One direction's impairment, as configured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Params {
    /// Probability in 0..=1 that a datagram is lost.
    pub loss: f64,
    pub delay: Duration,
    pub jitter: Duration,
    /// Bits per second; 0 means unlimited.
    pub rate_bps: u64,
}

/// What the queue dropped and held, for the fault state a test or the demo page reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImpairmentStats {
    pub passed: u64,
    pub lost: u64,
    /// Dropped because the queue (count, bytes or bottleneck backlog) was full.
    pub overflow: u64,
    pub held: usize,
}

struct Held<T> {
    due: Instant,
    size: usize,
    item: T,
}

pub struct Impairment<T> {
    params: Params,
    rng: SplitMix64,
    queue: VecDeque<Held<T>>,
    bytes: usize,
    /// When the bottleneck link finishes sending what it has accepted.
    link_free: Option<Instant>,
    stats: ImpairmentStats,
}

impl<T> Impairment<T> {
    pub fn new(params: Params, seed: u64) -> Self {
        Impairment {
            params,
            rng: SplitMix64(seed),
            queue: VecDeque::new(),
            bytes: 0,
            link_free: None,
            stats: ImpairmentStats::default(),
        }
    }

    /// Takes a datagram of `size` bytes sent at `now`; false when it was dropped (lost, or the
    /// queue is full).
    pub fn push(&mut self, now: Instant, size: usize, item: T) -> bool {
        if self.params.loss > 0.0 && self.rng.unit() < self.params.loss {
            self.stats.lost += 1;
            return false;
        }
        if self.queue.len() >= MAX_HELD || self.bytes + size > MAX_HELD_BYTES {
            self.stats.overflow += 1;
            return false;
        }
        let mut sent = now;
        // 0 b/s is unlimited: no bottleneck.
        if let Some(airtime_ns) = (size as u64 * 8)
            .saturating_mul(1_000_000_000)
            .checked_div(self.params.rate_bps)
        {
            let start = self.link_free.map_or(now, |f| f.max(now));
            if start - now > MAX_BACKLOG {
                self.stats.overflow += 1;
                return false;
            }
            sent = start + Duration::from_nanos(airtime_ns);
            self.link_free = Some(sent);
        }
        let mut due = sent + self.params.delay;
        if !self.params.jitter.is_zero() {
            let j = self.params.jitter.as_nanos() as i128;
            let offset = (self.rng.unit() * (2 * j + 1) as f64) as i128 - j;
            due = if offset >= 0 {
                due + Duration::from_nanos(offset as u64)
            } else {
                due.checked_sub(Duration::from_nanos((-offset) as u64))
                    .unwrap_or(sent)
                    .max(sent)
            };
        }
        // FIFO: never ahead of the datagram in front (see the module doc).
        if let Some(last) = self.queue.back() {
            due = due.max(last.due);
        }
        self.bytes += size;
        self.queue.push_back(Held { due, size, item });
        true
    }

    /// When the next held datagram is due; `None` when nothing is held.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.queue.front().map(|h| h.due)
    }

    /// The next datagram due at `now`, oldest first.
    pub fn pop_due(&mut self, now: Instant) -> Option<T> {
        if self.queue.front()?.due > now {
            return None;
        }
        let h = self.queue.pop_front()?;
        self.bytes -= h.size;
        self.stats.passed += 1;
        Some(h.item)
    }

    /// Everything held, at once (the impairment is being removed: what is in flight arrives).
    pub fn drain_all(&mut self) -> impl Iterator<Item = T> + '_ {
        self.bytes = 0;
        self.stats.passed += self.queue.len() as u64;
        self.queue.drain(..).map(|h| h.item)
    }

    pub fn stats(&self) -> ImpairmentStats {
        ImpairmentStats {
            held: self.queue.len(),
            ..self.stats
        }
    }
}

/// SplitMix64: tiny, seedable and good enough for loss and jitter draws; not cryptographic,
/// and does not need to be.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn drain_at(q: &mut Impairment<u32>, now: Instant) -> Vec<u32> {
        std::iter::from_fn(|| q.pop_due(now)).collect()
    }

    #[test]
    fn loss_rate_is_close_to_the_configured_one() {
        let t0 = Instant::now();
        for (seed, loss) in [(1, 0.1), (2, 0.3), (3, 0.5), (4, 0.9)] {
            let mut q = Impairment::new(
                Params {
                    loss,
                    ..Default::default()
                },
                seed,
            );
            let n = 20_000;
            let mut lost = 0;
            for i in 0..n {
                let now = t0 + 20 * MS * i;
                if !q.push(now, 100, i) {
                    lost += 1;
                }
                while q.pop_due(now).is_some() {}
            }
            let rate = lost as f64 / n as f64;
            assert!((rate - loss).abs() < 0.015, "loss {loss}: measured {rate}");
            assert_eq!(q.stats().lost, lost as u64);
        }
        // No loss configured: nothing is lost, and with nothing else every datagram is due at once.
        let mut q = Impairment::new(Params::default(), 5);
        for i in 0..1000 {
            assert!(q.push(t0, 10, i));
        }
        assert_eq!(drain_at(&mut q, t0).len(), 1000);
    }

    #[test]
    fn delay_is_exact_without_jitter() {
        let t0 = Instant::now();
        let mut q = Impairment::new(
            Params {
                delay: 150 * MS,
                ..Default::default()
            },
            7,
        );
        for i in 0..10u32 {
            q.push(t0 + 20 * MS * i, 100, i);
        }
        assert_eq!(q.poll_timeout(), Some(t0 + 150 * MS));
        assert!(drain_at(&mut q, t0 + 149 * MS).is_empty());
        for i in 0..10u32 {
            let due = t0 + 20 * MS * i + 150 * MS;
            assert_eq!(q.poll_timeout(), Some(due));
            assert!(q.pop_due(due - Duration::from_nanos(1)).is_none());
            assert_eq!(q.pop_due(due), Some(i));
        }
        assert_eq!(q.poll_timeout(), None);
    }

    #[test]
    fn jitter_stays_within_its_bounds_and_never_reorders() {
        let t0 = Instant::now();
        let mut q = Impairment::new(
            Params {
                delay: 100 * MS,
                jitter: 30 * MS,
                ..Default::default()
            },
            11,
        );
        let mut sent = vec![];
        let mut delays = vec![];
        let mut now = t0;
        let mut order = vec![];
        for i in 0..5000u32 {
            now = t0 + 20 * MS * i;
            sent.push(now);
            assert!(q.push(now, 100, i));
            while let Some(t) = q.poll_timeout() {
                if t > now {
                    break;
                }
                let j = q.pop_due(t).unwrap();
                delays.push(t - sent[j as usize]);
                order.push(j);
            }
        }
        while let Some(t) = q.poll_timeout() {
            let j = q.pop_due(t.max(now)).unwrap();
            delays.push(t - sent[j as usize]);
            order.push(j);
        }
        assert!(order.windows(2).all(|w| w[0] < w[1]), "reordered");
        let (min, max) = (*delays.iter().min().unwrap(), *delays.iter().max().unwrap());
        assert!(min >= 70 * MS && max <= 130 * MS, "delays {min:?}..{max:?}");
        // The jitter is really there: the delays spread over most of the range.
        assert!(max - min >= 40 * MS, "delays {min:?}..{max:?}");
    }

    #[test]
    fn bandwidth_cap_is_honoured() {
        let t0 = Instant::now();
        // 64 kbps = 8,000 bytes a second; offer 200-byte datagrams at 100/s (160 kbps).
        let mut q = Impairment::new(
            Params {
                rate_bps: 64_000,
                ..Default::default()
            },
            3,
        );
        let mut released = 0usize;
        let mut offered = 0usize;
        for ms in 0..10_000u32 {
            let now = t0 + MS * ms;
            if ms % 10 == 0 {
                q.push(now, 200, ms);
                offered += 200;
            }
            while q.pop_due(now).is_some() {
                released += 200;
            }
        }
        let per_second = released as f64 / 10.0;
        assert!(
            (7_600.0..=8_000.0).contains(&per_second),
            "{per_second} bytes/s through a 8,000 bytes/s link"
        );
        // What did not fit waited at most MAX_BACKLOG, then the buffer dropped the tail.
        let s = q.stats();
        assert!(s.overflow > 0, "{s:?}");
        assert_eq!(offered, released + (s.overflow as usize + s.held) * 200);
        assert!(s.held * 200 <= (8_000.0 * MAX_BACKLOG.as_secs_f64()) as usize + 200);
    }

    #[test]
    fn the_queue_is_bounded() {
        let t0 = Instant::now();
        let mut q = Impairment::new(
            Params {
                delay: 5000 * MS,
                ..Default::default()
            },
            9,
        );
        for i in 0..(MAX_HELD as u32 + 100) {
            q.push(t0, 10, i);
        }
        assert_eq!(q.stats().held, MAX_HELD);
        assert_eq!(q.stats().overflow, 100);
        // Bytes bound too: large datagrams hit it before the count.
        let mut q = Impairment::new(
            Params {
                delay: 5000 * MS,
                ..Default::default()
            },
            9,
        );
        let mut held = 0;
        for i in 0..1000 {
            if q.push(t0, 1200, i) {
                held += 1;
            }
        }
        assert_eq!(held, MAX_HELD_BYTES / 1200);
        assert_eq!(drain_at(&mut q, t0 + 5000 * MS).len(), held);
        assert_eq!(q.stats().held, 0);
        // Room again once released.
        assert!(q.push(t0 + 5000 * MS, 1200, 0));
    }
}
