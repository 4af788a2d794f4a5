//! Stopping one synthesis from another thread: the response that asked for speech can end
//! (`response.cancel`, barge-in, the call closing) while a pool worker is still making it, and
//! speech nobody will hear must not keep a worker and an espeak-ng process busy.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::wakeup::EventFd;

/// Shared between whoever owns a response and the worker synthesizing it; clones are the same
/// token. Cancelling is idempotent and cheap (a flag, and at most one eventfd write), so the
/// socket loop may do it.
#[derive(Clone, Default)]
pub struct CancelToken(Arc<Shared>);

#[derive(Default)]
struct Shared {
    cancelled: AtomicBool,
    /// The running worker's eventfd, registered while it synthesizes this job: a worker blocked
    /// in `poll` on espeak-ng's output wakes at the cancel instead of at its next read.
    waker: Mutex<Option<Arc<EventFd>>>,
}

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::SeqCst);
        if let Some(w) = self
            .0
            .waker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            w.notify();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    /// Set by the worker for the time it runs the job. The flag is set before the waker is read
    /// in [`Self::cancel`] and checked after the waker is registered here, so a cancel racing
    /// the start is seen one way or the other.
    pub(super) fn set_waker(&self, waker: Option<Arc<EventFd>>) {
        *self.0.waker.lock().unwrap_or_else(|e| e.into_inner()) = waker;
    }

    /// The registered waker's fd, or -1, which `poll(2)` ignores.
    pub(super) fn waker_fd(&self) -> std::os::fd::RawFd {
        self.0
            .waker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(-1, |w| w.fd())
    }

    /// Clears a wake-up once it has been seen, so the next `poll` waits again.
    pub(super) fn drain_waker(&self) {
        if let Some(w) = self
            .0
            .waker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            w.drain();
        }
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// Cancels its token when dropped. The owner of a response holds one, so however the response
/// ends, including by its whole call being dropped, its synthesis stops.
#[derive(Debug)]
pub struct CancelOnDrop(pub CancelToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wakeup::wait_readable;
    use std::time::Duration;

    #[test]
    fn a_cancel_sets_the_flag_for_every_clone_and_wakes_the_registered_worker() {
        let t = CancelToken::new();
        let held = CancelOnDrop(t.clone());
        assert_eq!(t.waker_fd(), -1);
        let waker = Arc::new(EventFd::new().unwrap());
        t.set_waker(Some(waker.clone()));
        assert_eq!(wait_readable([t.waker_fd()], Some(Duration::ZERO)), [false]);
        drop(held);
        assert!(t.is_cancelled());
        assert_eq!(wait_readable([t.waker_fd()], None), [true]);
        t.drain_waker();
        assert_eq!(wait_readable([t.waker_fd()], Some(Duration::ZERO)), [false]);
        t.cancel(); // idempotent
        assert!(t.is_cancelled());
    }
}
