//! The loopback model: sends every caller frame straight back, with no turn-taking.
//!
//! Frames are passed through still encoded, so it costs no codec work and the caller hears
//! exactly what the network delivered; that makes it the reference for path latency and loss
//! (the transport tests and the load generator use it). Responses the client asks for are
//! planned as the echo model plans them; the media side completes them without audio, since
//! every frame is already going back.

use super::{AudioIn, AudioOut, Model, ModelKind, Plan, ResponseContext};
use std::collections::VecDeque;
use std::time::Instant;

/// One 20 ms Opus frame at 48 kHz, the browser default; used when timestamps give no hint.
const DEFAULT_FRAME_SAMPLES: u32 = 960;
/// Bounded so a stalled sender can never grow memory without limit.
const MAX_QUEUED: usize = 64;

#[derive(Default)]
pub struct Loopback {
    queue: VecDeque<AudioOut>,
    last_ts: Option<u32>,
}

impl Model for Loopback {
    fn kind(&self) -> ModelKind {
        ModelKind::Loopback
    }

    fn respond(&mut self, ctx: &ResponseContext<'_>) -> Plan {
        super::echo::Echo.respond(ctx)
    }

    fn on_audio(&mut self, _now: Instant, frame: AudioIn<'_>) {
        let samples = match self.last_ts {
            Some(prev) => {
                let d = frame.rtp_timestamp.wrapping_sub(prev);
                if d == 0 || d > 48_000 {
                    DEFAULT_FRAME_SAMPLES
                } else {
                    d
                }
            }
            None => DEFAULT_FRAME_SAMPLES,
        };
        self.last_ts = Some(frame.rtp_timestamp);
        if self.queue.len() == MAX_QUEUED {
            self.queue.pop_front();
        }
        self.queue.push_back(AudioOut {
            payload: bytes::Bytes::copy_from_slice(frame.payload),
            samples_48k: samples,
        });
    }

    fn poll_audio(&mut self, _now: Instant) -> Option<AudioOut> {
        self.queue.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_payloads_in_order_with_frame_durations() {
        let mut m = Loopback::default();
        let now = Instant::now();
        for (i, ts) in [1000u32, 1960, 2920].into_iter().enumerate() {
            m.on_audio(
                now,
                AudioIn {
                    payload: &[i as u8; 3],
                    rtp_timestamp: ts,
                    sequence: i as u16,
                },
            );
        }
        let out: Vec<_> = std::iter::from_fn(|| m.poll_audio(now)).collect();
        assert_eq!(out.len(), 3);
        assert_eq!(&out[1].payload[..], &[1, 1, 1]);
        assert!(out.iter().all(|o| o.samples_48k == 960));
    }

    #[test]
    fn queue_is_bounded() {
        let mut m = Loopback::default();
        let now = Instant::now();
        for i in 0..(MAX_QUEUED as u32 + 10) {
            m.on_audio(
                now,
                AudioIn {
                    payload: &[0],
                    rtp_timestamp: i * 960,
                    sequence: i as u16,
                },
            );
        }
        assert_eq!(std::iter::from_fn(|| m.poll_audio(now)).count(), MAX_QUEUED);
    }
}
