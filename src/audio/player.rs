//! Paced output of one response's audio, 20 ms at a time.
//!
//! A [`Player`] releases each frame when its send time has come, measured from the first
//! [`Player::next_frame`] call, with the first [`PRIME_FRAMES`] released at once so the caller's
//! jitter buffer starts primed (the stream then stays that far ahead of real time). It does no I/O
//! and reads no clock: the transceiver passes `now`, and [`Player::next_deadline`] tells its timer
//! heap when to poll again. TTS audio is encoded in the call's codec (Opus or G.711) frame by
//! frame as it is released, so a stopped (barged-in) response costs no encoding for the audio
//! never sent. Frame durations and the schedule are in the codec's RTP clock.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use super::codec::{Codec, Encoder, FRAME_SAMPLES};

/// Frames sent back-to-back at the start of a response.
pub const PRIME_FRAMES: u64 = 3;
/// Encoded TTS packets are cut from blocks of this size.
const ARENA_BYTES: usize = 16 * 1024;
/// If the caller polls this late, the schedule slips instead of bursting to catch up.
const MAX_LATENESS: Duration = Duration::from_millis(100);

/// One frame to send: an encoded packet and the media time it covers in RTP clock ticks (the
/// RTP timestamp step).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutFrame {
    pub payload: Bytes,
    pub samples: u32,
}

enum Source {
    /// PCM encoded as it is released; `pos` is the next sample.
    Pcm {
        pcm: Vec<i16>,
        pos: usize,
        encoder: Box<Encoder>,
        arena: BytesMut,
        scratch: Vec<i16>,
    },
    /// Already-encoded frames (echo: the caller's own packets).
    Encoded {
        frames: std::vec::IntoIter<(Bytes, u32)>,
    },
}

pub struct Player {
    response_id: String,
    codec: Codec,
    source: Source,
    total_samples: u64,
    /// Samples released so far.
    sent_samples: u64,
    /// Time of the first release; frame k is due at `t0 + media_time(k) - lead`.
    t0: Option<Instant>,
    /// How far ahead of real time the stream runs (the priming frames).
    lead: Duration,
    /// Media seconds released per second: 1 plays in real time; more sends audio as fast as a
    /// model makes it, for a client that plays it itself (see [`Player::set_pace`]).
    pace: f64,
    stopped: bool,
    /// More PCM may still come ([`Player::streaming`]): running dry is a gap, not the end.
    open: bool,
}

impl std::fmt::Debug for Player {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Player")
            .field("response_id", &self.response_id)
            .field("sent_ms", &self.played_ms())
            .field("total_ms", &self.total_ms())
            .field("stopped", &self.stopped)
            .finish()
    }
}

impl Player {
    /// Plays 48 kHz mono PCM (TTS), encoded in `codec`; the last partial frame is padded with
    /// silence.
    pub fn from_pcm(response_id: impl Into<String>, pcm48k: Vec<i16>, codec: Codec) -> Self {
        let frames = pcm48k.len().div_ceil(FRAME_SAMPLES) as u64;
        let frame = u64::from(codec.frame_ticks());
        Self::new(
            response_id.into(),
            codec,
            Source::Pcm {
                pcm: pcm48k,
                pos: 0,
                encoder: Box::new(Encoder::new(codec)),
                arena: BytesMut::with_capacity(ARENA_BYTES),
                scratch: vec![0; FRAME_SAMPLES],
            },
            frames * frame,
            PRIME_FRAMES.saturating_sub(1) * frame,
        )
    }

    /// Plays already-encoded frames of `codec` as they are, each with its duration in the
    /// codec's RTP clock ticks.
    pub fn from_frames(
        response_id: impl Into<String>,
        frames: Vec<(Bytes, u32)>,
        codec: Codec,
    ) -> Self {
        let total = frames.iter().map(|(_, n)| u64::from(*n)).sum();
        let lead = frames
            .iter()
            .take(PRIME_FRAMES.saturating_sub(1) as usize)
            .map(|(_, n)| u64::from(*n))
            .sum();
        Self::new(
            response_id.into(),
            codec,
            Source::Encoded {
                frames: frames.into_iter(),
            },
            total,
            lead,
        )
    }

    /// Plays 48 kHz PCM that arrives while it plays (an upstream model's audio deltas):
    /// [`push_pcm`](Self::push_pcm) adds to it and [`finish`](Self::finish) says no more
    /// comes. Only whole frames are released while it is open, so a delta's last few samples
    /// wait for the next one instead of being padded with silence mid-word.
    pub fn streaming(response_id: impl Into<String>, codec: Codec) -> Self {
        let mut p = Self::from_pcm(response_id, Vec::new(), codec);
        p.open = true;
        p
    }

    /// More audio for a [`streaming`](Self::streaming) player; ignored once finished.
    pub fn push_pcm(&mut self, pcm48k: &[i16]) {
        if !self.open {
            return;
        }
        if let Source::Pcm { pcm, pos, .. } = &mut self.source {
            // What was sent is dropped now and then, so a long reply holds only what is ahead.
            if *pos >= 48_000 {
                pcm.drain(..*pos);
                *pos = 0;
            }
            pcm.extend_from_slice(pcm48k);
        }
        self.total_samples = self.sent_samples + self.pending_frames(false);
    }

    /// No more audio comes: the last partial frame is padded and released.
    pub fn finish(&mut self) {
        if self.open {
            self.open = false;
            self.total_samples = self.sent_samples + self.pending_frames(true);
        }
    }

    /// Whether more audio may still come (a [`streaming`](Self::streaming) player before
    /// [`finish`](Self::finish)).
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Frames of PCM not yet released, in RTP ticks; a partial last frame counts when `pad`.
    fn pending_frames(&self, pad: bool) -> u64 {
        let Source::Pcm { pcm, pos, .. } = &self.source else {
            return 0;
        };
        let left = pcm.len() - *pos;
        let frames = if pad {
            left.div_ceil(FRAME_SAMPLES)
        } else {
            left / FRAME_SAMPLES
        };
        frames as u64 * u64::from(self.codec.frame_ticks())
    }

    fn new(
        response_id: String,
        codec: Codec,
        source: Source,
        total_samples: u64,
        lead_samples: u64,
    ) -> Self {
        let mut p = Self {
            response_id,
            codec,
            source,
            total_samples,
            sent_samples: 0,
            t0: None,
            lead: Duration::ZERO,
            pace: 1.0,
            stopped: false,
            open: false,
        };
        p.lead = p.ticks_to_duration(lead_samples);
        p
    }

    fn ticks_to_duration(&self, ticks: u64) -> Duration {
        Duration::from_micros(ticks * 1_000_000 / u64::from(self.codec.clock_hz()))
    }

    pub fn response_id(&self) -> &str {
        &self.response_id
    }

    /// Releases `pace` seconds of audio per second (at least real time): a WebSocket client
    /// plays the audio itself, so it is sent as fast as the model makes it.
    pub fn set_pace(&mut self, pace: f64) {
        self.pace = pace.max(1.0);
    }

    /// When the next frame is due; `None` when nothing is left, and before the first
    /// [`next_frame`](Self::next_frame) call (the first frame is due at once: poll right away).
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.is_done() || self.is_dry() {
            return None;
        }
        let t0 = self.t0?;
        Some(
            (t0 + self.ticks_to_duration(self.sent_samples).div_f64(self.pace))
                .checked_sub(self.lead)
                .unwrap_or(t0)
                .max(t0),
        )
    }

    /// The next frame if its time has come. Call it until it returns `None`, then sleep until
    /// [`next_deadline`](Self::next_deadline).
    pub fn next_frame(&mut self, now: Instant) -> Option<OutFrame> {
        if self.is_done() || self.is_dry() {
            return None;
        }
        let t0 = *self.t0.get_or_insert(now);
        let due = self.next_deadline().unwrap_or(t0);
        if now < due {
            return None;
        }
        if now - due > MAX_LATENESS {
            // The loop stalled: start the rest of the schedule from now rather than burst.
            self.t0 = Some(t0 + (now - due));
        }
        let codec = self.codec;
        let frame = match &mut self.source {
            Source::Pcm {
                pcm,
                pos,
                encoder,
                arena,
                scratch,
            } => {
                let end = (*pos + FRAME_SAMPLES).min(pcm.len());
                let n = end - *pos;
                scratch[..n].copy_from_slice(&pcm[*pos..end]);
                scratch[n..].fill(0);
                *pos = end;
                // An encoder failure costs one frame of silence, not the response.
                let silence;
                let packet = match encoder.encode(scratch) {
                    Ok(p) => p,
                    Err(_) => {
                        silence = codec.silence_frame();
                        &silence[..]
                    }
                };
                // Packets are cut from a 16 KB arena (a new one when it is used up), so most
                // frames allocate nothing.
                if arena.capacity() < packet.len() {
                    *arena = BytesMut::with_capacity(ARENA_BYTES);
                }
                arena.extend_from_slice(packet);
                OutFrame {
                    payload: arena.split().freeze(),
                    samples: codec.frame_ticks(),
                }
            }
            Source::Encoded { frames } => {
                let (payload, samples) = frames.next()?;
                OutFrame { payload, samples }
            }
        };
        self.sent_samples += u64::from(frame.samples);
        Some(frame)
    }

    /// Milliseconds of audio released so far.
    pub fn played_ms(&self) -> u64 {
        self.sent_samples / self.codec.ticks_per_ms()
    }

    /// Milliseconds the caller can have heard by `now`: what was released, less what is still
    /// ahead of real time in their jitter buffer. Use it to truncate an interrupted item.
    pub fn heard_ms(&self, now: Instant) -> u64 {
        let elapsed = self
            .t0
            .map_or(0, |t0| now.saturating_duration_since(t0).as_millis() as u64);
        elapsed.min(self.played_ms())
    }

    pub fn total_ms(&self) -> u64 {
        self.total_samples / self.codec.ticks_per_ms()
    }

    /// All frames released (and no more to come), or stopped.
    pub fn is_done(&self) -> bool {
        self.stopped || (!self.open && self.sent_samples >= self.total_samples)
    }

    /// A streaming player that has released everything it was given so far.
    fn is_dry(&self) -> bool {
        self.open && self.sent_samples >= self.total_samples
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Stops at once: no frame is released after this.
    pub fn stop(&mut self) {
        self.stopped = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::codec::{OpusDecoder, packet_samples};

    const MS: Duration = Duration::from_millis(1);

    /// Polls like a transceiver loop would, at `step` intervals for `span`; returns (ms since
    /// start, frame) for each release.
    fn drive(p: &mut Player, t0: Instant, step: Duration, span: Duration) -> Vec<(u64, OutFrame)> {
        let mut out = Vec::new();
        let mut now = t0;
        while now <= t0 + span {
            while let Some(f) = p.next_frame(now) {
                out.push(((now - t0).as_millis() as u64, f));
            }
            now += step;
        }
        out
    }

    #[test]
    fn pcm_is_paced_in_real_time_after_a_short_burst() {
        let pcm: Vec<i16> = (0..48_000 + 100)
            .map(|i| ((i % 100) * 100) as i16)
            .collect();
        let mut p = Player::from_pcm("resp_1", pcm, Codec::Opus);
        assert_eq!(p.response_id(), "resp_1");
        assert_eq!(p.total_ms(), 1020); // 51 frames, the last padded
        assert_eq!(p.next_deadline(), None);
        let t0 = Instant::now();
        let sent = drive(&mut p, t0, MS, Duration::from_secs(2));
        assert_eq!(sent.len(), 51);
        // Three frames at once, then one per 20 ms.
        let times: Vec<u64> = sent.iter().map(|(t, _)| *t).collect();
        assert_eq!(&times[..5], &[0, 0, 0, 20, 40]);
        assert_eq!(times[50], 48 * 20);
        let mut dec = OpusDecoder::new();
        for (_, f) in &sent {
            assert_eq!(f.samples, 960);
            assert_eq!(packet_samples(&f.payload), Ok(960));
            assert_eq!(dec.decode(&f.payload).unwrap().len(), 960);
        }
        assert!(p.is_done());
        assert_eq!(p.played_ms(), 1020);
        assert_eq!(p.next_deadline(), None);
        assert_eq!(p.next_frame(t0 + Duration::from_secs(5)), None);
    }

    /// Audio that arrives while it plays: whole frames go out as they come, a gap is waited
    /// out rather than ended or filled, and the end pads the last partial frame.
    #[test]
    fn a_streaming_player_plays_what_has_come_and_ends_only_when_finished() {
        let mut p = Player::streaming("resp_1", Codec::Opus);
        let t0 = Instant::now();
        assert_eq!(p.next_frame(t0), None);
        assert!(!p.is_done(), "nothing yet is not the end");
        // 50 ms: two whole frames, 10 ms held back.
        p.push_pcm(&vec![500; 2400]);
        let first = drive(&mut p, t0, MS, Duration::from_millis(200));
        assert_eq!(first.len(), 2);
        assert!(!p.is_done() && p.next_deadline().is_none(), "dry, waiting");
        // 30 ms more make the held 10 ms two more frames.
        p.push_pcm(&vec![500; 1440]);
        let later = t0 + Duration::from_millis(300);
        let second = drive(&mut p, later, MS, Duration::from_millis(200));
        assert_eq!(second.len(), 2);
        p.push_pcm(&[500; 10]);
        p.finish();
        let last = drive(
            &mut p,
            later + Duration::from_millis(300),
            MS,
            Duration::from_millis(100),
        );
        assert_eq!(last.len(), 1, "the 10 samples, padded");
        assert!(p.is_done());
        assert_eq!(p.played_ms(), 100);
    }

    #[test]
    fn a_faster_pace_releases_the_same_frames_sooner() {
        let pcm: Vec<i16> = vec![1000; 48_000];
        let mut p = Player::from_pcm("resp_1", pcm, Codec::Opus);
        p.set_pace(4.0);
        let t0 = Instant::now();
        let sent = drive(&mut p, t0, MS, Duration::from_secs(2));
        assert_eq!(sent.len(), 50, "the same 20 ms frames");
        let last = sent.last().unwrap().0;
        // 49 frames after the first at 5 ms each, less the priming burst's 40 ms lead.
        assert!(
            (190..=250).contains(&last),
            "1 s of audio at 4x, last frame at {last} ms"
        );
        assert_eq!(p.played_ms(), 1000);
    }

    #[test]
    fn deadline_tells_when_to_wake() {
        let mut p = Player::from_pcm("r", vec![1000; 960 * 10], Codec::Opus);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(p.next_frame(t0).is_some());
        }
        assert_eq!(p.next_frame(t0), None);
        assert_eq!(p.next_deadline(), Some(t0 + 20 * MS));
        assert_eq!(p.next_frame(t0 + 19 * MS), None);
        assert!(p.next_frame(t0 + 20 * MS).is_some());
        assert_eq!(p.next_deadline(), Some(t0 + 40 * MS));
    }

    #[test]
    fn opus_frames_pass_through_with_their_durations() {
        let frames: Vec<(Bytes, u32)> = (0..6u8)
            .map(|i| (Bytes::from(vec![0xf8, i]), if i == 4 { 1920 } else { 960 }))
            .collect();
        let mut p = Player::from_frames("r", frames.clone(), Codec::Opus);
        assert_eq!(p.total_ms(), 140);
        let t0 = Instant::now();
        let sent = drive(&mut p, t0, MS, Duration::from_millis(500));
        let times: Vec<u64> = sent.iter().map(|(t, _)| *t).collect();
        // Frame 5 waits for frame 4's 40 ms.
        assert_eq!(times, vec![0, 0, 0, 20, 40, 80]);
        let got: Vec<(Bytes, u32)> = sent
            .into_iter()
            .map(|(_, f)| (f.payload, f.samples))
            .collect();
        assert_eq!(got, frames);
    }

    #[test]
    fn stop_is_immediate_and_heard_ms_trails_played_ms() {
        let mut p = Player::from_pcm("r", vec![1000; 48_000 * 5], Codec::Opus);
        let t0 = Instant::now();
        let sent = drive(&mut p, t0, 5 * MS, Duration::from_millis(300));
        assert_eq!(sent.len(), 18); // 3 primed + one per 20 ms for 300 ms
        let now = t0 + 300 * MS;
        assert_eq!(p.played_ms(), 360);
        assert_eq!(p.heard_ms(now), 300);
        p.stop();
        assert!(p.is_done() && p.is_stopped());
        assert_eq!(p.next_frame(now + Duration::from_secs(1)), None);
        assert_eq!(p.next_deadline(), None);
        assert_eq!(p.played_ms(), 360);
    }

    #[test]
    fn a_stalled_loop_does_not_get_a_burst() {
        let mut p = Player::from_pcm("r", vec![1000; 48_000], Codec::Opus);
        let t0 = Instant::now();
        assert!(p.next_frame(t0).is_some());
        // The loop wakes 500 ms late: one frame now, then the schedule continues from here.
        let late = t0 + 500 * MS;
        let mut burst = 0;
        while p.next_frame(late).is_some() {
            burst += 1;
        }
        assert_eq!(burst, 2);
        assert_eq!(p.next_frame(late + 5 * MS), None);
    }

    #[test]
    fn empty_input_is_done_at_once() {
        let mut p = Player::from_pcm("r", Vec::new(), Codec::Opus);
        assert!(p.is_done());
        assert_eq!(p.next_frame(Instant::now()), None);
        assert!(Player::from_frames("r", Vec::new(), Codec::Opus).is_done());
    }

    #[test]
    fn g711_frames_are_160_ticks_paced_every_20_ms() {
        // TTS PCM at 48 kHz becomes 160-byte G.711 frames, 160 ticks of the 8 kHz clock each.
        let pcm: Vec<i16> = crate::audio::codec::tests::tone(48_000 + 100, 440.0, -20.0);
        for codec in [Codec::Pcmu, Codec::Pcma] {
            let mut p = Player::from_pcm("r", pcm.clone(), codec);
            assert_eq!(p.total_ms(), 1020);
            let t0 = Instant::now();
            let sent = drive(&mut p, t0, MS, Duration::from_secs(2));
            assert_eq!(sent.len(), 51);
            let times: Vec<u64> = sent.iter().map(|(t, _)| *t).collect();
            assert_eq!(&times[..5], &[0, 0, 0, 20, 40]);
            assert_eq!(times[50], 48 * 20);
            assert!(
                sent.iter()
                    .all(|(_, f)| f.samples == 160 && f.payload.len() == 160)
            );
            assert_eq!(p.played_ms(), 1020);
            // Stored G.711 frames (echo) pass through on the same clock.
            let frames: Vec<(Bytes, u32)> =
                sent.into_iter().map(|(_, f)| (f.payload, 160)).collect();
            let mut echo = Player::from_frames("e", frames.clone(), codec);
            assert_eq!(echo.total_ms(), 1020);
            let again = drive(&mut echo, t0, MS, Duration::from_secs(2));
            assert_eq!(again.len(), 51);
            assert_eq!(again[3].0, 20);
        }
    }
}
