//! Sideband WebSockets on a WebRTC call (`GET /v1/realtime?call_id=…`): an app's server
//! watches and steers a call while the browser holds the media.
//!
//! The rule: every server event of the call goes to the data channel and to every sideband;
//! client events are taken from any of them, in arrival order, as one conversation. At most
//! [`MAX_SIDEBANDS`] attach at once: enough for an app server plus a monitor or a test harness,
//! few enough that fanning out costs the socket thread nothing it would notice. A sideband
//! that stops reading is cut off (its queue filled: see [`super::event_stream`]): the call's
//! socket thread never waits for one. A sideband ends with its call.

use super::event_stream::{FrameSender, TrySendError};

/// Sidebands one call takes at once; one more is refused.
pub const MAX_SIDEBANDS: usize = 4;

pub type SidebandId = u64;

/// What became of an attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    Attached(SidebandId),
    /// No such call here (never was, or it ended).
    NoCall,
    /// It has [`MAX_SIDEBANDS`] already.
    Full,
}

#[derive(Default)]
pub struct Sidebands {
    attached: Vec<(SidebandId, FrameSender)>,
    next_id: SidebandId,
}

impl Sidebands {
    /// Attaches `out` and queues `welcome` as its first frame; `None` when the call is full.
    pub fn attach(&mut self, out: FrameSender, welcome: String) -> Option<SidebandId> {
        self.attached.retain(|(_, tx)| !tx.is_closed());
        if self.attached.len() >= MAX_SIDEBANDS {
            return None;
        }
        out.try_send(welcome).ok()?;
        self.next_id += 1;
        self.attached.push((self.next_id, out));
        Some(self.next_id)
    }

    pub fn detach(&mut self, id: SidebandId) {
        self.attached.retain(|(i, _)| *i != id);
    }

    pub fn is_empty(&self) -> bool {
        self.attached.is_empty()
    }

    /// One server frame to every sideband; one that is gone or full is dropped.
    pub fn send(&mut self, call_id: &str, frame: &str) {
        if self.attached.is_empty() {
            return;
        }
        self.attached
            .retain(|(id, tx)| match tx.try_send(frame.to_owned()) {
                Ok(()) => true,
                Err(TrySendError::Full) => {
                    log::warn!("{call_id}: sideband {id} fell a full queue behind; closing it");
                    false
                }
                Err(TrySendError::Closed) => false,
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::event_stream::{STREAM_CAPACITY, frames};

    #[tokio::test]
    async fn fan_out_bounds_and_slow_readers() {
        let mut s = Sidebands::default();
        let mut rxs = Vec::new();
        for _ in 0..MAX_SIDEBANDS {
            let (tx, rx) = frames();
            assert!(s.attach(tx, "welcome".into()).is_some());
            rxs.push(rx);
        }
        let (tx, _rx) = frames();
        assert_eq!(s.attach(tx, "welcome".into()), None, "one too many");
        s.send("rtc_x", "e1");
        for rx in &mut rxs {
            assert_eq!(&*rx.recv().await.unwrap(), "welcome");
            assert_eq!(&*rx.recv().await.unwrap(), "e1");
        }
        // The first stops reading: one frame past a full queue cuts it off; the others go on.
        for i in 0..=STREAM_CAPACITY {
            s.send("rtc_x", &format!("e{i}"));
            for rx in &mut rxs[1..] {
                rx.recv().await.unwrap();
            }
        }
        assert_eq!(s.attached.len(), MAX_SIDEBANDS - 1);
        // A closed one frees its place.
        drop(rxs.pop());
        let (tx, _rx) = frames();
        assert!(s.attach(tx, "welcome".into()).is_some());
    }
}
