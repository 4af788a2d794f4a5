//! How a loop thread sleeps and is woken: each loop owns a [`Sleeper`], a `polling::Poller` (an
//! epoll set: the poller async-io's reactor runs on) with the loop's sockets in it, and hands
//! [`Waker`]s to the threads that queue work for it.
//!
//! The relay and transceiver workers each sleep on their own poller, so a datagram wakes exactly
//! the thread that will read it. Under async-io's reactor, shared by every loop in the process,
//! one thread waits in epoll and hands each readiness to the others through a futex: a
//! cross-thread wake-up and a context switch per event, which at 1,000 calls was a visible share
//! of the transceiver's time. A poller per loop keeps the one wake-up and uses the same crate.

use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use polling::{Event, Events, PollMode, Poller};

/// The shortest time between two turns of a busy server loop (the relay's and each transceiver
/// worker's): interrupt moderation, as a network card does it. A loop woken for every datagram
/// pays a sleep and a wake-up (epoll, the eventfd, a context switch) for each: at 500 calls the
/// relay switched 8,100 times a second and each worker 2,500, and sleeping and waking was a
/// fifth of the server's samples. Paced, a busy loop woken sooner than this after its last wake
/// first lets the rest of the interval pass, then takes everything that arrived meanwhile in
/// one turn. At 500 calls (`loadgen`, all-in-one) 500 µs cut the server's CPU by 7–17 %
/// (pairs: 88 / 97 % → 77 / 87 %, 96 / 96 → 90 / 89, 92 / 93 → 85 / 77) for 0.6–1.3 ms more
/// echo RTT at the median; 1 ms saved little more and cost 1.8 ms.
pub const SERVER_LOOP_PACE: Duration = Duration::from_micros(500);

/// How many items (datagrams, commands) a turn must have handled for the loop to count as busy
/// and its next wait to be paced. A sleep saves wake-ups only when several items arrive within
/// one pace: at 20 calls, pacing every loop woken within twice the pace added 0.6 ms to the
/// echo RTT (0.15 → 0.70 ms) and saved no CPU (10 → 11 %), since each paced turn still found
/// about one datagram. Four within a pace is 8,000 a second: the relay from ~100 calls on.
pub const BUSY_TURN: usize = 4;

/// Wakes one [`Sleeper`]'s current or next wait; cheap to clone and to call often (a wake-up
/// already pending costs one atomic operation, no system call).
#[derive(Clone)]
pub struct Waker(Arc<Poller>);

impl Waker {
    pub fn wake(&self) {
        // Fails only if the eventfd write fails, which a pending wake-up makes moot.
        let _ = self.0.notify();
    }

    /// Whether two wakers wake the same sleeper.
    pub fn same(&self, other: &Waker) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// One loop thread's poller: the file descriptors it waits on (each under a key the loop
/// chooses), and the readiness the last wait found.
pub struct Sleeper {
    poller: Arc<Poller>,
    events: Events,
    /// Registered descriptors, removed before they close (polling's contract for `add`).
    watched: Vec<RawFd>,
    /// The shortest time between the starts of two turns under load (see [`Sleeper::paced`]).
    pace: Duration,
    last_woke: Instant,
    /// Whether the last turn handled at least [`BUSY_TURN`] items (see [`Sleeper::turn_handled`]).
    busy: bool,
}

impl Sleeper {
    pub fn new() -> io::Result<Sleeper> {
        Self::with_capacity(8)
    }

    /// Room for `n` readiness events per wait; a loop over many sockets (the load generator)
    /// takes more per system call.
    pub fn with_capacity(n: usize) -> io::Result<Sleeper> {
        Ok(Sleeper {
            poller: Arc::new(Poller::new()?),
            events: Events::with_capacity(NonZeroUsize::new(n.max(1)).expect("at least one")),
            watched: Vec::new(),
            pace: Duration::ZERO,
            last_woke: Instant::now(),
            busy: false,
        })
    }

    /// A sleeper whose waits, while its loop is busy, end no sooner than `pace` after the
    /// previous one did (see [`SERVER_LOOP_PACE`]); a wait's timeout still counts from when it
    /// was called.
    pub fn paced(mut self, pace: Duration) -> Sleeper {
        self.pace = pace;
        self
    }

    /// The loop tells how many items its turn handled, before it waits again: a paced sleeper
    /// paces only after a turn of at least [`BUSY_TURN`].
    pub fn turn_handled(&mut self, items: usize) {
        self.busy = items >= BUSY_TURN;
    }

    pub fn waker(&self) -> Waker {
        Waker(self.poller.clone())
    }

    /// Waits on `fd` for reading under `key`, level-triggered: a loop that reads only part of
    /// what is queued (to give its timers a turn) is woken again at once for the rest.
    pub fn watch(&mut self, fd: BorrowedFd<'_>, key: usize) -> io::Result<()> {
        // SAFETY: polling requires a registered descriptor to be removed before it is closed.
        // Every owner calls `unwatch` before dropping the socket or pipe, and `Drop` below removes
        // whatever is left while the poller lives; on Linux epoll a descriptor closed without it
        // only leaves the set (no dangling handle), so a missed `unwatch` cannot be unsound.
        unsafe {
            self.poller
                .add_with_mode(fd.as_raw_fd(), Event::readable(key), PollMode::Level)?;
        }
        self.watched.push(fd.as_raw_fd());
        Ok(())
    }

    /// Stops waiting on `fd` (before it closes).
    pub fn unwatch(&mut self, fd: BorrowedFd<'_>) {
        let raw = fd.as_raw_fd();
        if let Some(i) = self.watched.iter().position(|&w| w == raw) {
            self.watched.swap_remove(i);
            let _ = self.poller.delete(fd);
        }
    }

    /// Sleeps until a watched descriptor is readable, a [`Waker`] fires, or `timeout` passes
    /// (`None`: until one of the others).
    ///
    /// The timeout is rounded up to whole milliseconds. The poller's timer would wake a loop at
    /// each deadline to the nanosecond, and 1,000 calls' 20 ms audio frames are 50,000 distinct
    /// deadlines a second: at 1,000 calls (`bench/load/run.sh`), exact wake-ups took the server 53 %
    /// of a core and the load generator 40 %, against 44 % and 31 % waking once per millisecond for
    /// every timer due by then. Rounding up, never down, also means a loop is never woken before
    /// its deadline and left spinning.
    pub fn wait(&mut self, timeout: Option<Duration>) {
        self.events.clear();
        let timeout =
            timeout.map(|t| Duration::from_millis(t.as_nanos().div_ceil(1_000_000) as u64));
        let since = self.last_woke.elapsed();
        let timeout = if self.busy && since < self.pace {
            let rest = self.pace - since;
            std::thread::sleep(rest);
            timeout.map(|t| t.saturating_sub(rest))
        } else {
            timeout
        };
        if let Err(e) = self.poller.wait(&mut self.events, timeout) {
            // Only EINTR is retried inside polling; anything else means the epoll set itself is
            // broken, and the loop's next turn will tell.
            log::debug!("poll: {e}");
        }
        self.last_woke = Instant::now();
    }

    /// Whether the last wait found `key` readable.
    pub fn is_ready(&self, key: usize) -> bool {
        self.events.iter().any(|e| e.key == key)
    }

    /// The keys the last wait found readable.
    pub fn ready(&self) -> impl Iterator<Item = usize> + '_ {
        self.events.iter().map(|e| e.key)
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        for fd in self.watched.drain(..) {
            // SAFETY: `fd` is still open: owners unwatch before closing, so anything left here is
            // a descriptor whose owner outlives this sleeper.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            let _ = self.poller.delete(fd);
        }
    }
}

/// For tests of what wakes whom: the same loop a worker runs, once.
#[cfg(test)]
pub(crate) fn woken_within(sleeper: &mut Sleeper, timeout: Duration) -> bool {
    let t = std::time::Instant::now();
    sleeper.wait(Some(timeout));
    t.elapsed() < timeout
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;
    use std::time::Instant;

    #[test]
    fn a_waker_wakes_the_current_or_next_wait_once() {
        let mut s = Sleeper::new().unwrap();
        assert!(!woken_within(&mut s, Duration::from_millis(5)));
        let w = s.waker();
        w.wake();
        w.wake();
        assert!(woken_within(&mut s, Duration::from_secs(5)));
        // Both wake-ups were one: the next wait sleeps.
        assert!(!woken_within(&mut s, Duration::from_millis(5)));
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            w.wake();
        });
        assert!(woken_within(&mut s, Duration::from_secs(5)));
        t.join().unwrap();
    }

    #[test]
    fn a_socket_stays_ready_until_read() {
        let mut s = Sleeper::new().unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        s.watch(rx.as_fd(), 7).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"a", rx.local_addr().unwrap()).unwrap();
        tx.send_to(b"b", rx.local_addr().unwrap()).unwrap();
        s.wait(Some(Duration::from_secs(5)));
        assert!(s.is_ready(7));
        let mut buf = [0u8; 8];
        rx.recv(&mut buf).unwrap();
        // Level-triggered: one datagram left, so ready again.
        s.wait(Some(Duration::from_secs(5)));
        assert_eq!(s.ready().collect::<Vec<_>>(), vec![7]);
        rx.recv(&mut buf).unwrap();
        s.wait(Some(Duration::ZERO));
        assert!(!s.is_ready(7));
        s.unwatch(rx.as_fd());
    }

    #[test]
    fn a_paced_sleeper_takes_wake_ups_no_closer_than_its_pace() {
        let pace = Duration::from_millis(30);
        let mut s = Sleeper::new().unwrap().paced(pace);
        let w = s.waker();
        // Turns that handled little: a wake-up soon after the last ends the wait at once.
        for _ in 0..2 {
            s.turn_handled(BUSY_TURN - 1);
            w.wake();
            let t = Instant::now();
            s.wait(Some(Duration::from_secs(5)));
            assert!(t.elapsed() < pace, "a loop that is not busy was held back");
        }
        // A busy turn: woken again at once, the wait lasts out the pace, then ends for the
        // wake-up. The pace counts from the end of the last wait, a moment before `t`.
        let slack = Duration::from_millis(2);
        s.turn_handled(BUSY_TURN);
        let t = Instant::now();
        w.wake();
        s.wait(Some(Duration::from_secs(5)));
        assert!(t.elapsed() + slack >= pace, "{:?}", t.elapsed());
        assert!(t.elapsed() < Duration::from_secs(5));
        // A timeout shorter than the pace is not cut short either: the wait is the pace.
        s.turn_handled(BUSY_TURN);
        let t = Instant::now();
        s.wait(Some(Duration::from_millis(1)));
        assert!(t.elapsed() + slack >= pace, "{:?}", t.elapsed());
    }

    #[test]
    fn the_timeout_is_never_cut_short_and_rounds_up_to_a_millisecond() {
        let mut s = Sleeper::new().unwrap();
        let t = Instant::now();
        s.wait(Some(Duration::from_micros(1500)));
        assert!(t.elapsed() >= Duration::from_millis(2));
        let t = Instant::now();
        s.wait(Some(Duration::from_nanos(1)));
        assert!(t.elapsed() >= Duration::from_millis(1));
    }
}
