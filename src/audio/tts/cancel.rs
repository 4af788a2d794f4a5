//! Stopping one synthesis from another thread: the response that asked for speech can end
//! (`response.cancel`, barge-in, the call closing) while a pool worker is still making it, and
//! speech nobody will hear must not keep a worker and an espeak-ng process busy.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::wakeup::Waker;

/// Shared between whoever owns a response and the worker synthesizing it; clones are the same
/// token. Cancelling is idempotent and cheap (a flag, and at most one wake-up), so the socket
/// loop may do it.
#[derive(Clone, Default)]
pub struct CancelToken(Arc<Shared>);

#[derive(Default)]
struct Shared {
    cancelled: AtomicBool,
    /// The waker of the synthesis running this job, registered while it runs: a run waiting on
    /// espeak-ng's output wakes at the cancel instead of at its next read.
    waker: Mutex<Option<Waker>>,
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
            w.wake();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    /// Set by the synthesis for the time it runs the job. The flag is set before the waker is
    /// read in [`Self::cancel`] and checked after the waker is registered here, so a cancel
    /// racing the start is seen one way or the other.
    pub(super) fn set_waker(&self, waker: Option<Waker>) {
        *self.0.waker.lock().unwrap_or_else(|e| e.into_inner()) = waker;
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
    use crate::wakeup::{Sleeper, woken_within};
    use std::time::Duration;

    #[test]
    fn a_cancel_sets_the_flag_for_every_clone_and_wakes_the_registered_run() {
        let t = CancelToken::new();
        let held = CancelOnDrop(t.clone());
        let mut sleeper = Sleeper::new().unwrap();
        t.set_waker(Some(sleeper.waker()));
        assert!(!woken_within(&mut sleeper, Duration::from_millis(5)));
        drop(held);
        assert!(t.is_cancelled());
        assert!(woken_within(&mut sleeper, Duration::from_secs(5)));
        t.cancel(); // idempotent
        assert!(t.is_cancelled());
    }
}
