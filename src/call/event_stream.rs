//! The event stream between a client's WebSocket and the call it speaks to (a WebSocket
//! session, or a sideband of a WebRTC call): text frames both ways, in bounded queues, so
//! whichever side hosts the call never waits on a slow socket.
//!
//! Queues are bounded in bytes, not only in frames: one client event may be 16 MiB (a 15 MiB
//! append), so 1,024 queued frames could be 16 GiB. Each queued frame holds room for its bytes in
//! its stream's own pool ([`STREAM_BYTES`]) and in any shared pools the stream is counted in
//! (its transceiver's, its client's: see [`QueueBytes`]), and gives the room back when it is
//! taken off the queue. A sender that finds no room waits, which stops the socket being read
//! and pushes back into the client's TCP window; a socket thread, which must never wait,
//! [`FrameSender::try_send`]s and is told the stream is full.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// A client's event stream to a call: text frames both ways. The call's side ends when the
/// client side is dropped; the stream ends (`from_session` yields `None`) when the call ends
/// (it expired, the call a sideband is attached to ended, or the client fell behind).
pub struct EventStream {
    pub to_session: FrameSender,
    pub from_session: FrameReceiver,
}

/// Frames queued each way before the sender waits (client to call) or the stream is cut
/// (a sideband that stopped reading: a call's socket thread never waits for it).
pub const STREAM_CAPACITY: usize = 1024;
/// Bytes queued each way in one stream. A frame larger than this (up to the socket's message
/// limit) is still taken, alone: it waits for the queue to empty and then fills it.
pub const STREAM_BYTES: usize = 4 << 20;

/// Bytes that queued frames may hold, shared by every stream counted in it.
pub struct QueueBytes {
    room: Arc<Semaphore>,
    size: usize,
}

impl QueueBytes {
    pub fn new(size: usize) -> Arc<QueueBytes> {
        let size = size.clamp(1, Semaphore::MAX_PERMITS);
        Arc::new(QueueBytes {
            room: Arc::new(Semaphore::new(size)),
            size,
        })
    }

    /// Bytes free now.
    #[cfg(test)]
    pub fn free(&self) -> usize {
        self.room.available_permits()
    }

    /// Room for a frame of `len` bytes: all of the pool for a frame larger than the pool.
    fn permits(&self, len: usize) -> u32 {
        len.clamp(1, self.size).min(u32::MAX as usize) as u32
    }

    async fn take(&self, len: usize) -> OwnedSemaphorePermit {
        self.room
            .clone()
            .acquire_many_owned(self.permits(len))
            .await
            .expect("the pool is never closed")
    }

    fn try_take(&self, len: usize) -> Option<OwnedSemaphorePermit> {
        self.room
            .clone()
            .try_acquire_many_owned(self.permits(len))
            .ok()
    }
}

/// A queued frame and the room it holds, given back when it is dropped or taken apart.
pub struct Frame {
    text: String,
    _room: Vec<OwnedSemaphorePermit>,
}

impl Frame {
    pub fn into_text(self) -> String {
        self.text
    }
}

impl std::ops::Deref for Frame {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

/// The sending half of one direction of a stream.
#[derive(Clone)]
pub struct FrameSender {
    tx: mpsc::Sender<Frame>,
    /// The stream's own pool first, then the shared pools, always in the order they were
    /// added; every sender takes room in that order, so two never wait on each other.
    pools: Vec<Arc<QueueBytes>>,
}

pub struct FrameReceiver {
    rx: mpsc::Receiver<Frame>,
}

/// The stream's reader is gone.
#[derive(Debug)]
pub struct Closed;

/// Why [`FrameSender::try_send`] did not queue.
#[derive(Debug, PartialEq, Eq)]
pub enum TrySendError {
    Full,
    Closed,
}

/// One direction of a stream: [`STREAM_CAPACITY`] frames and [`STREAM_BYTES`] bytes.
pub fn frames() -> (FrameSender, FrameReceiver) {
    let (tx, rx) = mpsc::channel(STREAM_CAPACITY);
    let own = QueueBytes::new(STREAM_BYTES);
    (
        FrameSender {
            tx,
            pools: vec![own],
        },
        FrameReceiver { rx },
    )
}

impl FrameSender {
    /// The same sender, its frames also counted in `pool`.
    pub fn counted_in(mut self, pool: Arc<QueueBytes>) -> FrameSender {
        self.pools.push(pool);
        self
    }

    /// Queues `text`, waiting for room.
    pub async fn send(&self, text: String) -> Result<(), Closed> {
        let mut room = Vec::with_capacity(self.pools.len());
        for pool in &self.pools {
            room.push(pool.take(text.len()).await);
        }
        self.tx
            .send(Frame { text, _room: room })
            .await
            .map_err(|_| Closed)
    }

    /// Queues `text` if there is room now.
    pub fn try_send(&self, text: String) -> Result<(), TrySendError> {
        if self.tx.is_closed() {
            return Err(TrySendError::Closed);
        }
        let room = self
            .pools
            .iter()
            .map(|p| p.try_take(text.len()))
            .collect::<Option<Vec<_>>>()
            .ok_or(TrySendError::Full)?;
        self.tx
            .try_send(Frame { text, _room: room })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => TrySendError::Full,
                mpsc::error::TrySendError::Closed(_) => TrySendError::Closed,
            })
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

impl FrameReceiver {
    pub async fn recv(&mut self) -> Option<Frame> {
        self.rx.recv().await
    }

    /// The next frame if one is queued now.
    pub fn try_recv(&mut self) -> Option<Frame> {
        self.rx.try_recv().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn queued_bytes_are_bounded_and_given_back_when_taken() {
        let shared = QueueBytes::new(STREAM_BYTES * 2);
        let (a, mut a_rx) = frames();
        let a = a.counted_in(shared.clone());
        let (b, _b_rx) = frames();
        let b = b.counted_in(shared.clone());
        let mib = "x".repeat(1 << 20);
        for _ in 0..4 {
            a.try_send(mib.clone()).unwrap();
        }
        assert_eq!(
            a.try_send("y".into()),
            Err(TrySendError::Full),
            "a's own 4 MiB"
        );
        for _ in 0..4 {
            b.try_send(mib.clone()).unwrap();
        }
        assert_eq!(shared.free(), 0);
        let (c, _c_rx) = frames();
        let c = c.counted_in(shared.clone());
        assert_eq!(
            c.try_send("z".into()),
            Err(TrySendError::Full),
            "the shared pool is full"
        );
        assert_eq!(a_rx.recv().await.unwrap().len(), 1 << 20);
        assert_eq!(shared.free(), 1 << 20, "a taken frame gives its room back");
        c.try_send("z".into()).unwrap();
    }

    #[tokio::test]
    async fn a_frame_larger_than_the_queue_waits_for_it_to_empty() {
        let (tx, mut rx) = frames();
        tx.send("small".into()).await.unwrap();
        let big = "b".repeat(STREAM_BYTES * 3);
        let sending = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(big).await.unwrap() }
        });
        tokio::task::yield_now().await;
        assert!(
            !sending.is_finished(),
            "waits while the small frame is queued"
        );
        assert_eq!(&*rx.recv().await.unwrap(), "small");
        sending.await.unwrap();
        assert_eq!(rx.recv().await.unwrap().len(), STREAM_BYTES * 3);
    }
}
