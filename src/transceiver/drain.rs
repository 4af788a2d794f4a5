//! Draining: stop taking calls, let live ones end by themselves until a deadline, then report
//! how many are left for the caller to close. One rule for the all-in-one process and the
//! transceiver role, written against a count and tokio's clock, so it is tested in virtual time.

use std::future::Future;
use std::time::Duration;

/// How often the live count is read while waiting.
const POLL: Duration = Duration::from_millis(100);

/// Waits until `live()` is 0, `deadline` has passed or `stop_early` resolves, logging each new
/// count; returns the calls still live then. The caller has already taken its transceivers
/// out of placement.
pub async fn wait(
    live: impl Fn() -> usize,
    deadline: Duration,
    stop_early: impl Future<Output = ()>,
) -> usize {
    log::info!(
        "draining: no new calls; waiting up to {deadline:?} for {} live call(s)",
        live()
    );
    let until = tokio::time::Instant::now() + deadline;
    let calls_end = async {
        let mut last = usize::MAX;
        loop {
            let n = live();
            if n == 0 || tokio::time::Instant::now() >= until {
                return;
            }
            if n != last {
                log::info!("draining: {n} live call(s)");
                last = n;
            }
            tokio::time::sleep(POLL.min(until - tokio::time::Instant::now())).await;
        }
    };
    tokio::select! {
        _ = calls_end => {}
        _ = stop_early => log::info!("draining cut short"),
    }
    live()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Three calls that end one by one, at 2 s, 5 s and 9 s after the drain began.
    fn calls_ending_at(ends_s: &'static [u64]) -> impl Fn() -> usize {
        let start = tokio::time::Instant::now();
        move || {
            let t = start.elapsed();
            ends_s
                .iter()
                .filter(|&&e| t < Duration::from_secs(e))
                .count()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn returns_when_the_last_call_ends_well_before_the_deadline() {
        let start = tokio::time::Instant::now();
        let left = wait(
            calls_ending_at(&[2, 5, 9]),
            Duration::from_secs(30),
            std::future::pending(),
        )
        .await;
        assert_eq!(left, 0);
        let took = start.elapsed();
        assert!(
            took >= Duration::from_secs(9) && took <= Duration::from_secs(9) + POLL,
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stops_waiting_at_the_deadline_and_says_how_many_are_left() {
        let start = tokio::time::Instant::now();
        let left = wait(
            calls_ending_at(&[2, 50, 90]),
            Duration::from_secs(30),
            std::future::pending(),
        )
        .await;
        assert_eq!(left, 2);
        assert_eq!(start.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_live_returns_at_once() {
        let start = tokio::time::Instant::now();
        assert_eq!(
            wait(|| 0, Duration::from_secs(30), std::future::pending()).await,
            0
        );
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_signal_cuts_the_drain_short() {
        let start = tokio::time::Instant::now();
        let reads = Arc::new(AtomicUsize::new(0));
        let r = reads.clone();
        let left = wait(
            move || {
                r.fetch_add(1, Ordering::Relaxed);
                4
            },
            Duration::from_secs(30),
            tokio::time::sleep(Duration::from_secs(3)),
        )
        .await;
        assert_eq!(left, 4);
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        // Polled every 100 ms meanwhile, not spinning.
        let n = reads.load(Ordering::Relaxed);
        assert!((30..=33).contains(&n), "{n} reads");
    }
}
