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

/// Frames per second at 20 ms, the browser default; a frame's length when timestamps give no
/// hint.
const DEFAULT_FRAMES_PER_SECOND: u32 = 50;
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
        // In ticks of the call's RTP clock (960 per 20 ms for Opus, 160 for G.711); a jump of
        // over a second is a discontinuity, not a frame's length.
        let default = frame.clock_hz / DEFAULT_FRAMES_PER_SECOND;
        let samples = match self.last_ts {
            Some(prev) => {
                let d = frame.rtp_timestamp.wrapping_sub(prev);
                if d == 0 || d > frame.clock_hz {
                    default
                } else {
                    d
                }
            }
            None => default,
        };
        self.last_ts = Some(frame.rtp_timestamp);
        if self.queue.len() == MAX_QUEUED {
            self.queue.pop_front();
        }
        self.queue.push_back(AudioOut {
            payload: bytes::Bytes::copy_from_slice(frame.payload),
            samples,
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
                    clock_hz: 48_000,
                },
            );
        }
        let out: Vec<_> = std::iter::from_fn(|| m.poll_audio(now)).collect();
        assert_eq!(out.len(), 3);
        assert_eq!(&out[1].payload[..], &[1, 1, 1]);
        assert!(out.iter().all(|o| o.samples == 960));
    }

    #[test]
    fn g711_frames_keep_their_8_khz_durations() {
        // The first frame has no previous timestamp: its length is 20 ms of the 8 kHz clock,
        // not of Opus's 48 kHz; a lost frame makes the next one's step 40 ms.
        let mut m = Loopback::default();
        let now = Instant::now();
        for (i, ts) in [5u32, 165, 325, 645].into_iter().enumerate() {
            m.on_audio(
                now,
                AudioIn {
                    payload: &[0xff; 160],
                    rtp_timestamp: ts,
                    sequence: i as u16,
                    clock_hz: 8_000,
                },
            );
        }
        let steps: Vec<u32> = std::iter::from_fn(|| m.poll_audio(now))
            .map(|o| o.samples)
            .collect();
        assert_eq!(steps, vec![160, 160, 160, 320]);
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
                    clock_hz: 48_000,
                },
            );
        }
        assert_eq!(std::iter::from_fn(|| m.poll_audio(now)).count(), MAX_QUEUED);
    }
}
