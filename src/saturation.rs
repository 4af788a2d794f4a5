//! Saturation: whether a loop that carries media still keeps up, judged from its own measurements.
//!
//! Live media that outgrows the CPU costs everything on the loop at once (late timers, then
//! socket drops, then loss on every call), and no fixed count says when that starts on a given
//! machine, so each loop watches itself: how much of each window it was awake, what its sockets
//! dropped, how late its timers fired. A transceiver worker that is saturated leaves placement
//! ([`crate::transceiver::admission`]); a relay worker that is saturated takes its whole cluster
//! out of placement ([`Headroom`]), since every call of the cluster crosses it.
//!
//! [`Saturation`] and [`LoadMeter`] are fed instants and counts and keep no clock, so their
//! rules are tested with made-up windows; the loops do the measuring.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How often a loop judges its own headroom: long enough to average over a few hundred turns,
/// short enough that a saturated loop leaves placement before many more offers land on it.
pub const WINDOW: Duration = Duration::from_secs(1);

/// One measurement window of a loop.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    /// Wall time the window covered.
    pub wall: Duration,
    /// Of it, time the loop was not asleep in `poll`: handling input, timers and commands, or
    /// runnable but waiting for a core (which is just as much a loop that cannot keep up).
    pub busy: Duration,
    /// Datagrams dropped in the window before the loop read them (socket receive buffer full,
    /// in-memory link queue full).
    pub dropped: u64,
    /// The latest any session timer fired in the window (media pacing rides on them).
    pub max_timer_lag: Duration,
    /// What the loop carried at the end of the window: a transceiver worker's calls, a relay
    /// worker's flows.
    pub calls: usize,
}

impl Window {
    /// The share of the window the loop was awake, 0 to 1.
    pub fn busy_share(&self) -> f64 {
        if self.wall.is_zero() {
            0.0
        } else {
            self.busy.as_secs_f64() / self.wall.as_secs_f64()
        }
    }
}

/// Thresholds and hysteresis for [`Saturation`].
#[derive(Debug, Clone, Copy)]
pub struct SaturationRules {
    /// Busy share of a window above which the loop is saturated. Below 1.0 on purpose: at 90 %
    /// a burst of setups (each a DTLS handshake's worth of crypto) already delays media.
    pub max_busy: f64,
    /// Timer lateness above which media pacing is visibly off (a 20 ms frame is late by a
    /// frame).
    pub max_timer_lag: Duration,
    /// Clean windows in a row before the worker takes calls again, so it does not flap in and
    /// out of placement on every other window.
    pub recover_after: u32,
    /// Below this many calls a late loop is the machine's doing (another process, a noisy
    /// neighbour), not this worker's load, and refusing calls would not help: never saturated.
    pub min_calls: usize,
    /// Below this busy share, one late window is a stall, and only a second one in a row makes
    /// the loop saturated; at or above it, lateness counts at once. Measured: the stalls that
    /// refused offers in the hour's soak (a load generator on the same cores starting and ending
    /// runs) were late at 7-17 % busy; an overload through compose was late at 26-85 % busy
    /// from its first late window, and waiting a window there let ~80 more calls in at a 50/s
    /// ramp, and the relay dropped their audio.
    pub stall_busy: f64,
}

impl Default for SaturationRules {
    fn default() -> Self {
        SaturationRules {
            max_busy: 0.85,
            max_timer_lag: Duration::from_millis(20),
            recover_after: 3,
            min_calls: 32,
            stall_busy: 0.2,
        }
    }
}

/// The saturation rule: any window with drops or too little idle time, or with late timers while
/// busy (or a second window in a row with late timers), makes the loop saturated;
/// `recover_after` clean windows in a row clear it.
#[derive(Debug, Clone, Default)]
pub struct Saturation {
    rules: SaturationRules,
    saturated: bool,
    clean: u32,
    /// The last window's timers were late.
    was_late: bool,
}

impl Saturation {
    pub fn is_saturated(&self) -> bool {
        self.saturated
    }

    /// Takes one window's measurements and returns whether the worker is saturated now.
    pub fn observe(&mut self, w: Window) -> bool {
        let busy = w.busy_share();
        let late = w.max_timer_lag > self.rules.max_timer_lag;
        // A loop that cannot keep up is late window after window, or late while it works; one
        // late window with time to spare and no drops is a stall the clients' jitter buffers
        // absorb, and taking every worker out of placement for it refused a whole burst of
        // offers in the hour's soak (see `stall_busy`).
        let late_now = late && (busy >= self.rules.stall_busy || self.was_late);
        let hot = w.calls >= self.rules.min_calls
            && (w.dropped > 0 || busy > self.rules.max_busy || late_now);
        self.was_late = late;
        if hot {
            self.saturated = true;
            self.clean = 0;
        } else if self.saturated {
            self.clean += 1;
            if self.clean >= self.rules.recover_after {
                self.saturated = false;
                self.clean = 0;
            }
        }
        self.saturated
    }
}

/// Measures one loop for [`Saturation`]: the share of wall time it spent awake, and the drop
/// count between windows. Fed the loop's own instants, so it keeps no clock either.
pub struct LoadMeter {
    saturation: Saturation,
    window_start: Instant,
    busy: Duration,
    /// When the loop last woke.
    woke: Instant,
    /// The drop count at the last window's end; `None` before the first, whose drops (from
    /// before this worker ran) are not its own.
    drops_seen: Option<u64>,
}

impl LoadMeter {
    pub fn new(now: Instant) -> Self {
        LoadMeter {
            saturation: Saturation::default(),
            window_start: now,
            busy: Duration::ZERO,
            woke: now,
            drops_seen: None,
        }
    }

    /// The loop is about to sleep: it has been busy since it last woke.
    pub fn turn_done(&mut self, now: Instant) {
        self.busy += now.saturating_duration_since(self.woke);
    }

    /// The loop woke at `woke`: whether a window is over and due to be closed.
    pub fn window_over(&mut self, woke: Instant) -> bool {
        self.woke = woke;
        woke.duration_since(self.window_start) >= WINDOW
    }

    pub fn is_saturated(&self) -> bool {
        self.saturation.is_saturated()
    }

    /// Ends the window at `now` and judges it; `drops` is the loop's running total of dropped
    /// datagrams.
    pub fn judge(
        &mut self,
        now: Instant,
        drops: u64,
        max_timer_lag: Duration,
        calls: usize,
    ) -> Verdict {
        let window = self.close(now, drops, max_timer_lag, calls);
        let was = self.saturation.is_saturated();
        let saturated = self.saturation.observe(window);
        Verdict {
            window,
            saturated,
            changed: saturated != was,
        }
    }

    fn close(&mut self, now: Instant, drops: u64, max_timer_lag: Duration, calls: usize) -> Window {
        let dropped = self.drops_seen.map_or(0, |seen| drops.saturating_sub(seen));
        self.drops_seen = Some(drops);
        let w = Window {
            wall: now.duration_since(self.window_start),
            busy: self.busy,
            dropped,
            max_timer_lag,
            calls,
        };
        self.window_start = now;
        self.busy = Duration::ZERO;
        w
    }
}

/// What closing a window decided.
#[derive(Debug, Clone, Copy)]
pub struct Verdict {
    pub window: Window,
    pub saturated: bool,
    /// The loop went into or out of saturation with this window.
    pub changed: bool,
}

/// A relay's headroom as placement reads it: how many of its loops (in this process) or of the
/// cluster's relays (read from Redis by signaling) are saturated now. Every call of a cluster
/// crosses its relay, and a relay that drops datagrams for a full socket buffer takes audio from
/// all of them; the transceivers' own guard cannot see that, so signaling asks this too.
#[derive(Debug, Default)]
pub struct Headroom {
    saturated: AtomicUsize,
}

impl Headroom {
    pub fn is_saturated(&self) -> bool {
        self.saturated.load(Ordering::Relaxed) > 0
    }

    /// One loop's verdict changed from `was` to `now` (a loop that stops while saturated calls
    /// this with `now: false`, so a restarted relay does not leave its old loops counted).
    pub fn changed(&self, was: bool, now: bool) {
        match (was, now) {
            (false, true) => {
                self.saturated.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.saturated.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Signaling's view from Redis: `n` relays of the cluster say they are saturated.
    pub fn set_saturated(&self, n: usize) {
        self.saturated.store(n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(busy_ms: u64, dropped: u64, lag_ms: u64) -> Window {
        Window {
            wall: Duration::from_secs(1),
            busy: Duration::from_millis(busy_ms),
            dropped,
            max_timer_lag: Duration::from_millis(lag_ms),
            calls: 100,
        }
    }

    #[test]
    fn a_loop_with_headroom_is_not_saturated() {
        let mut s = Saturation::default();
        for _ in 0..10 {
            assert!(!s.observe(window(600, 0, 3)));
        }
    }

    #[test]
    fn drops_busy_or_late_timers_each_saturate() {
        for w in [window(100, 1, 0), window(900, 0, 0)] {
            let mut s = Saturation::default();
            assert!(s.observe(w), "{w:?}");
        }
        let mut s = Saturation::default();
        assert!(s.observe(window(300, 0, 40)), "late while working");
    }

    #[test]
    fn one_late_window_with_headroom_is_a_stall_not_saturation() {
        let mut s = Saturation::default();
        for _ in 0..5 {
            assert!(!s.observe(window(70, 0, 36)));
            assert!(!s.observe(window(170, 0, 3)));
        }
        // Late while working, late and dropping, or late twice: saturated at once.
        let mut s = Saturation::default();
        assert!(s.observe(window(260, 0, 23)));
        let mut s = Saturation::default();
        assert!(s.observe(window(70, 2, 36)));
        let mut s = Saturation::default();
        assert!(!s.observe(window(70, 0, 36)));
        assert!(s.observe(window(90, 0, 25)));
    }

    #[test]
    fn a_lightly_loaded_worker_is_never_saturated() {
        let mut s = Saturation::default();
        let w = Window {
            calls: 5,
            ..window(990, 10, 200)
        };
        assert!(!s.observe(w), "a late loop with 5 calls is not their fault");
    }

    #[test]
    fn recovery_needs_clean_windows_in_a_row() {
        let mut s = Saturation::default();
        assert!(s.observe(window(950, 0, 0)));
        assert!(s.observe(window(100, 0, 0)));
        assert!(s.observe(window(100, 0, 0)));
        // A relapse restarts the count.
        assert!(s.observe(window(100, 3, 0)));
        assert!(s.observe(window(100, 0, 0)));
        assert!(s.observe(window(100, 0, 0)));
        assert!(!s.observe(window(100, 0, 0)), "third clean window in a row");
    }

    #[test]
    fn a_meter_counts_awake_time_and_new_drops_only() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut m = LoadMeter::new(t0);
        // Awake 0-100 ms, asleep, awake 600-700 ms.
        m.turn_done(ms(100));
        assert!(!m.window_over(ms(600)));
        m.turn_done(ms(700));
        assert!(m.window_over(ms(1000)));
        // Drops before the first window are not this loop's.
        let w = m.close(ms(1000), 50, Duration::ZERO, 40);
        assert_eq!(
            (w.busy, w.dropped, w.wall),
            (Duration::from_millis(200), 0, WINDOW)
        );
        m.turn_done(ms(1100));
        let w = m.close(ms(2000), 53, Duration::ZERO, 40);
        assert_eq!((w.busy, w.dropped), (Duration::from_millis(100), 3));
    }

    #[test]
    fn headroom_counts_each_saturated_loop_once() {
        let h = Headroom::default();
        h.changed(false, true);
        h.changed(true, true);
        h.changed(false, true);
        assert!(h.is_saturated());
        h.changed(true, false);
        assert!(h.is_saturated(), "one loop still saturated");
        h.changed(true, false);
        h.changed(false, false);
        assert!(!h.is_saturated());
    }
}
