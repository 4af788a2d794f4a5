//! A worker's command queue plus the waker of its socket loop.
//!
//! The worker sleeps on its own poller (see [`crate::wakeup`]), not in an async reactor, so a
//! queued command must also wake that poller.

use super::WorkerMessage;
use crate::wakeup::Waker;

/// The sending side, cheap to clone: signaling's handle and the synthesis pool's callbacks
/// hold one.
#[derive(Clone)]
pub(super) struct Mailbox {
    tx: async_channel::Sender<WorkerMessage>,
    wake: Waker,
}

/// The worker's side.
pub(super) struct Inbox {
    rx: async_channel::Receiver<WorkerMessage>,
}

/// The worker has stopped; the command was not delivered.
#[derive(Debug)]
pub(super) struct Closed;

/// Commands waiting beyond this make senders wait (placement backs off) rather than queue
/// without bound behind a busy worker.
const CAPACITY: usize = 1024;

/// A queue whose sends wake `wake`, the receiving worker's sleeper.
pub(super) fn mailbox(wake: Waker) -> (Mailbox, Inbox) {
    let (tx, rx) = async_channel::bounded(CAPACITY);
    (Mailbox { tx, wake }, Inbox { rx })
}

impl Mailbox {
    pub async fn send(&self, c: WorkerMessage) -> Result<(), Closed> {
        self.tx.send(c).await.map_err(|_| Closed)?;
        self.wake.wake();
        Ok(())
    }

    /// For plain threads (the synthesis pool); blocks while the queue is full.
    pub fn send_blocking(&self, c: WorkerMessage) -> Result<(), Closed> {
        self.tx.send_blocking(c).map_err(|_| Closed)?;
        self.wake.wake();
        Ok(())
    }

    /// No more commands; wakes the worker so it sees its stop flag at once.
    pub fn close(&self) {
        self.tx.close();
        self.wake.wake();
    }
}

impl Inbox {
    /// Everything queued now. A command queued after the sleeper woke wakes it again, so none
    /// waits for the next timer.
    pub fn take_all(&self) -> impl Iterator<Item = WorkerMessage> + '_ {
        std::iter::from_fn(|| self.rx.try_recv().ok())
    }
}
