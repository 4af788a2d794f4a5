//! A worker's command queue plus the eventfd that wakes its socket loop when something is queued.
//!
//! The worker sleeps in `poll(2)` on its own socket (see [`crate::wakeup`]), not in an async
//! reactor, so a queued command must also make something it polls readable.

use std::sync::Arc;

use super::WorkerMessage;
use crate::wakeup::EventFd;

/// The sending side, cheap to clone: signaling's handle and the synthesis pool's callbacks
/// hold one.
#[derive(Clone)]
pub(super) struct Mailbox {
    tx: async_channel::Sender<WorkerMessage>,
    wake: Arc<EventFd>,
}

/// The worker's side.
pub(super) struct Inbox {
    rx: async_channel::Receiver<WorkerMessage>,
    wake: Arc<EventFd>,
}

/// The worker has stopped; the command was not delivered.
#[derive(Debug)]
pub(super) struct Closed;

/// Commands waiting beyond this make senders wait (placement backs off) rather than queue
/// without bound behind a busy worker.
const CAPACITY: usize = 1024;

pub(super) fn mailbox() -> std::io::Result<(Mailbox, Inbox)> {
    let (tx, rx) = async_channel::bounded(CAPACITY);
    let wake = Arc::new(EventFd::new()?);
    Ok((
        Mailbox {
            tx,
            wake: wake.clone(),
        },
        Inbox { rx, wake },
    ))
}

impl Mailbox {
    pub async fn send(&self, c: WorkerMessage) -> Result<(), Closed> {
        self.tx.send(c).await.map_err(|_| Closed)?;
        self.wake.notify();
        Ok(())
    }

    /// For plain threads (the synthesis pool); blocks while the queue is full.
    pub fn send_blocking(&self, c: WorkerMessage) -> Result<(), Closed> {
        self.tx.send_blocking(c).map_err(|_| Closed)?;
        self.wake.notify();
        Ok(())
    }

    /// No more commands; wakes the worker so it sees its stop flag at once.
    pub fn close(&self) {
        self.tx.close();
        self.wake.notify();
    }
}

impl Inbox {
    /// What the worker's `poll` waits on besides its socket.
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.wake.fd()
    }

    /// Everything queued now. The eventfd is reset before the queue is read, so a command
    /// queued meanwhile leaves it readable for the next wait.
    pub fn take_all(&self) -> impl Iterator<Item = WorkerMessage> + '_ {
        self.wake.drain();
        std::iter::from_fn(|| self.rx.try_recv().ok())
    }
}
