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
//! The saturation rule itself ([`crate::saturation`]) is shared with the relay, whose loops
//! refuse nothing themselves but take their cluster out of placement the same way.

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
    /// The loop has no headroom (see [`crate::saturation::Saturation`]).
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

#[cfg(test)]
mod tests {
    use super::*;

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
