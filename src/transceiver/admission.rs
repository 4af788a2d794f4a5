//! Admission: whether a worker takes one more call.
//!
//! Two guards, because overload has two shapes. A flood of offers that never connect costs
//! memory (each pending peer connection holds its DTLS, SCTP and jitter buffers, ~250 KB), so
//! the number of calls a worker holds, and of those still setting up, is capped outright
//! ([`Capacity`]). Live media that outgrows the CPU costs every call on the worker at once (late
//! timers, then socket drops, then loss and ICE disconnects on all of them), and no fixed count
//! says when that starts on a given machine, so the worker watches its own loop
//! ([`Saturation`]) and leaves placement while it has no headroom. Either way the offer is
//! refused up front, with `503` and `Retry-After`, and the calls already admitted keep their
//! quality.
//!
//! [`Saturation`] is fed measurements and keeps no clock, so its rules are tested with made-up
//! windows; the worker loop does the measuring.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// What a refused client is told to wait (`Retry-After`): about one measurement window, after
/// which a saturated worker may have recovered and a full one may have lost a call.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Fixed per-worker ceilings.
#[derive(clap::Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    // Twice what the load benchmark runs per worker with no loss on two cores (1,000 calls on
    // 4 workers): it binds only where the saturation guard has not already.
    /// Calls one transceiver worker holds, setting up or live; more are refused with 503.
    #[arg(
        id = "max_calls_per_worker",
        long = "max-calls-per-worker",
        env = "VOICE_EDGE_MAX_CALLS_PER_WORKER",
        default_value_t = 500
    )]
    pub max_calls: usize,
    // A pending call costs ~250 KB until its setup deadline, so this bounds a flood of offers
    // that never connect at ~32 MB per worker.
    /// Calls one transceiver worker holds that have not connected yet (a flood of offers).
    #[arg(
        id = "max_connecting_per_worker",
        long = "max-connecting-per-worker",
        env = "VOICE_EDGE_MAX_CONNECTING_PER_WORKER",
        default_value_t = 128
    )]
    pub max_connecting: usize,
    /// Keep placing calls on workers that have no headroom left (only to measure what the
    /// saturation guard saves: bench/admission).
    #[arg(
        id = "admit_when_saturated",
        long = "admit-when-saturated",
        env = "VOICE_EDGE_ADMIT_WHEN_SATURATED"
    )]
    pub admit_when_saturated: bool,
    // Bytes, beside the counts: what a call holds that grows (see `call::byte_budget`).
    /// MiB that Live recordings (`store: true`), running and kept for download, may hold on one
    /// transceiver; one client address may hold a quarter. Past it, a stored session is refused
    /// (or its recording stops) with `recording_budget_exceeded`.
    #[arg(
        long = "recording-budget-mb",
        env = "VOICE_EDGE_RECORDING_BUDGET_MB",
        default_value_t = 512,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_048_576)
    )]
    pub recording_budget_mb: usize,
    /// MiB that WebSocket client messages waiting for their sessions may hold on one
    /// transceiver (each session's queue holds 4 MiB, or one larger message); past it, sockets
    /// are read no further until their sessions catch up.
    #[arg(
        long = "ws-queue-budget-mb",
        env = "VOICE_EDGE_WS_QUEUE_BUDGET_MB",
        default_value_t = 256,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(16..=1_048_576)
    )]
    pub ws_queue_budget_mb: usize,
    /// Seconds a WebSocket session may go without a client event before it is closed (an
    /// `error` with code `session_idle_timeout`; Live: `session.closed`), freeing its slot.
    #[arg(
        long = "ws-idle-timeout",
        env = "VOICE_EDGE_WS_IDLE_TIMEOUT",
        default_value_t = 600,
        value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=3600)
    )]
    pub ws_idle_timeout_secs: u64,
}

impl Default for Capacity {
    fn default() -> Self {
        crate::flags::defaults()
    }
}

/// What the worker publishes for placement, written by its loop and read by signaling.
#[derive(Debug, Default)]
pub struct WorkerLoad {
    /// Calls on the worker (setting up or live).
    pub calls: AtomicUsize,
    /// Of those, calls not connected yet.
    pub connecting: AtomicUsize,
    /// Placed here and not answered yet (counted by the handle).
    pub pending: AtomicUsize,
    /// The loop has no headroom (see [`Saturation`]).
    pub saturated: AtomicBool,
    /// Measurement windows spent saturated, for `/admin/stats` and the benchmark.
    pub saturated_windows: AtomicU64,
}

/// Why a worker will not take a call now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Full,
    TooManyConnecting,
    Saturated,
}

impl Refusal {
    /// Its name on the control API's wire.
    pub fn code(self) -> &'static str {
        match self {
            Refusal::Full => "full",
            Refusal::TooManyConnecting => "too_many_connecting",
            Refusal::Saturated => "saturated",
        }
    }

    pub fn from_code(code: &str) -> Option<Refusal> {
        [
            Refusal::Full,
            Refusal::TooManyConnecting,
            Refusal::Saturated,
        ]
        .into_iter()
        .find(|r| r.code() == code)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Full => "every worker holds as many calls as it may",
            Refusal::TooManyConnecting => "too many calls are still setting up",
            Refusal::Saturated => "every worker is saturated",
        })
    }
}

impl WorkerLoad {
    /// Calls plus calls being placed: what placement balances on.
    pub fn load(&self) -> usize {
        self.calls.load(Ordering::Relaxed) + self.pending.load(Ordering::Relaxed)
    }

    /// Whether one more call fits. Pending placements count, so concurrent offers cannot all
    /// squeeze through the last slot.
    pub fn admits(&self, cap: &Capacity) -> Result<(), Refusal> {
        let pending = self.pending.load(Ordering::Relaxed);
        if self.saturated.load(Ordering::Relaxed) && !cap.admit_when_saturated {
            Err(Refusal::Saturated)
        } else if self.calls.load(Ordering::Relaxed) + pending >= cap.max_calls {
            Err(Refusal::Full)
        } else if self.connecting.load(Ordering::Relaxed) + pending >= cap.max_connecting {
            Err(Refusal::TooManyConnecting)
        } else {
            Ok(())
        }
    }
}

/// A handle's view of its workers' loads, shared with them.
pub type SharedLoad = Arc<WorkerLoad>;

/// One measurement window of a worker loop.
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
    /// Calls the worker held at the end of the window.
    pub calls: usize,
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
}

impl Default for SaturationRules {
    fn default() -> Self {
        SaturationRules {
            max_busy: 0.85,
            max_timer_lag: Duration::from_millis(20),
            recover_after: 3,
            min_calls: 32,
        }
    }
}

/// The saturation rule: any window with drops or too little idle time, or a second window in a
/// row with late timers, makes the worker saturated; `recover_after` clean windows in a row
/// clear it.
#[derive(Debug, Clone, Default)]
pub struct Saturation {
    rules: SaturationRules,
    saturated: bool,
    clean: u32,
    /// The last window's timers were late (with no other sign of overload).
    was_late: bool,
}

impl Saturation {
    pub fn new(rules: SaturationRules) -> Self {
        Saturation {
            rules,
            saturated: false,
            clean: 0,
            was_late: false,
        }
    }

    pub fn is_saturated(&self) -> bool {
        self.saturated
    }

    /// Takes one window's measurements and returns whether the worker is saturated now.
    pub fn observe(&mut self, w: Window) -> bool {
        let busy = if w.wall.is_zero() {
            0.0
        } else {
            w.busy.as_secs_f64() / w.wall.as_secs_f64()
        };
        let late = w.max_timer_lag > self.rules.max_timer_lag;
        // Late timers alone count from the second window in a row. A loop that cannot keep up
        // is late window after window; one late window with headroom and no drops is a stall
        // the clients' jitter buffers absorb (the hour's soak saw every worker 31-36 ms late at
        // once, 7 % busy, as a load generator on the same cores hung up 50 calls), and taking
        // every worker out of placement for it refused a whole burst of offers.
        let hot = w.calls >= self.rules.min_calls
            && (w.dropped > 0 || busy > self.rules.max_busy || (late && self.was_late));
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
        assert!(!s.observe(window(100, 0, 40)));
        assert!(s.observe(window(100, 0, 40)), "late twice in a row");
    }

    #[test]
    fn one_late_window_with_headroom_is_a_stall_not_saturation() {
        let mut s = Saturation::default();
        for _ in 0..5 {
            assert!(!s.observe(window(70, 0, 36)));
            assert!(!s.observe(window(70, 0, 3)));
        }
        // Late and busy, or late and dropping, still counts at once.
        assert!(s.observe(window(900, 0, 36)));
        let mut s = Saturation::default();
        assert!(s.observe(window(70, 2, 36)));
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
    fn admission_counts_pending_placements() {
        let cap = Capacity {
            max_calls: 3,
            max_connecting: 2,
            ..Capacity::default()
        };
        let load = WorkerLoad::default();
        assert_eq!(load.admits(&cap), Ok(()));
        load.pending.store(2, Ordering::Relaxed);
        assert_eq!(load.admits(&cap), Err(Refusal::TooManyConnecting));
        load.pending.store(0, Ordering::Relaxed);
        load.calls.store(3, Ordering::Relaxed);
        assert_eq!(load.admits(&cap), Err(Refusal::Full));
        load.calls.store(0, Ordering::Relaxed);
        load.saturated.store(true, Ordering::Relaxed);
        assert_eq!(load.admits(&cap), Err(Refusal::Saturated));
    }
}
