//! How a socket-loop thread sleeps and is woken: `poll(2)` on its sockets plus an eventfd that
//! other threads write to.
//!
//! The relay and transceiver workers each own their sockets and sleep in their own `poll`, so a
//! datagram wakes exactly the thread that will read it. Under an async reactor shared by several
//! loops, one thread waits in epoll and hands every readiness to the others through a futex:
//! a cross-thread wake-up and a context switch per event, which at 1,000 calls was a visible
//! share of the transceiver's time.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// An eventfd: written by any thread, readable until drained. Non-blocking, close-on-exec.
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: a plain syscall with constant flags; it returns a new fd or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Makes the eventfd readable (it stays so until [`EventFd::drain`]).
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an fd this value owns. A full counter
        // (EAGAIN after 2^64-2 notifications) still leaves it readable, which is all we need.
        unsafe { libc::write(self.fd(), (&one as *const u64).cast(), 8) };
    }

    /// Resets the eventfd to not readable.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from an fd this value owns; non-blocking, so an
        // empty counter returns EAGAIN at once.
        unsafe { libc::read(self.fd(), (&mut v as *mut u64).cast(), 8) };
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Waits until one of `fds` is readable or `timeout` passes (`None`: forever); says which are.
/// The timeout is rounded up to whole milliseconds, so a loop never wakes before its deadline
/// and spins.
pub fn wait_readable<const N: usize>(fds: [RawFd; N], timeout: Option<Duration>) -> [bool; N] {
    let mut polled = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let ms = match timeout {
        None => -1,
        Some(t) => t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32,
    };
    // SAFETY: `polled` is a live array of N pollfd structs the kernel may write `revents` into.
    let r = unsafe { libc::poll(polled.as_mut_ptr(), N as libc::nfds_t, ms) };
    if r <= 0 {
        return [false; N];
    }
    polled.map(|p| p.revents != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_notified_eventfd_wakes_a_waiter_until_drained() {
        let e = EventFd::new().unwrap();
        assert_eq!(
            wait_readable([e.fd()], Some(Duration::from_millis(1))),
            [false]
        );
        e.notify();
        e.notify();
        assert_eq!(wait_readable([e.fd()], None), [true]);
        e.drain();
        assert_eq!(wait_readable([e.fd()], Some(Duration::ZERO)), [false]);
    }

    #[test]
    fn the_timeout_is_never_cut_short() {
        let e = EventFd::new().unwrap();
        let t = Instant::now();
        wait_readable([e.fd()], Some(Duration::from_micros(1500)));
        assert!(t.elapsed() >= Duration::from_micros(1500));
    }
}
