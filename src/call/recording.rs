//! Recordings of Live sessions started with `store: true`, served as a stereo WAV by
//! `GET /v1/live/sessions/{id}/content` once the session has ended: the caller on the left, the
//! model on the right, each placed on the session's timeline.
//!
//! The call already carries both directions' audio, encoded: the recorder decodes its own copy
//! of each (a second decoder per direction, so the media side's state is untouched) and keeps
//! 24 kHz PCM, bounded to [`MAX_RECORDING`]. Finished recordings wait a few minutes in a
//! store shared by the transceiver's workers, as ended event logs do.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::audio::Codec;
use crate::audio::codec::Decoder;

/// The recording's sample rate: the Live WebSocket's PCM rate.
pub const RATE: u32 = 24_000;
/// A recording stops growing past this (5 minutes of stereo 24 kHz PCM16 is ≈ 29 MB).
pub const MAX_RECORDING: Duration = Duration::from_secs(5 * 60);
/// How long an ended session's recording may be downloaded.
pub const ENDED_TTL: Duration = Duration::from_secs(5 * 60);
/// Recordings kept at once per transceiver; the oldest goes first.
const MAX_ENDED: usize = 16;

const SAMPLES_PER_MS: usize = (RATE / 1000) as usize;
const MAX_SAMPLES: usize = MAX_RECORDING.as_millis() as usize * SAMPLES_PER_MS;

pub struct Recorder {
    caller: Track,
    model: Track,
}

struct Track {
    decoder: Decoder,
    pcm: Vec<i16>,
}

impl Track {
    fn new(codec: Codec) -> Track {
        Track {
            decoder: Decoder::new(codec),
            pcm: Vec::new(),
        }
    }

    /// One encoded frame heard at `at_ms` of the session: decoded (48 kHz), halved to 24 kHz,
    /// and written at its time, or right after the previous frame when it arrives early.
    fn add(&mut self, at_ms: u64, frame: &[u8]) {
        let Ok(pcm) = self.decoder.decode_24k(frame) else {
            return;
        };
        let start = (at_ms as usize * SAMPLES_PER_MS).max(self.pcm.len());
        if start >= MAX_SAMPLES {
            return;
        }
        self.pcm.resize(start, 0);
        let room = MAX_SAMPLES - start;
        self.pcm.extend(pcm.into_iter().take(room));
    }
}

impl Recorder {
    /// `input` is the caller's codec, `output` ours (they differ only on a WebSocket).
    pub fn new(input: Codec, output: Codec) -> Recorder {
        Recorder {
            caller: Track::new(input),
            model: Track::new(output),
        }
    }

    pub fn caller(&mut self, at_ms: u64, frame: &[u8]) {
        self.caller.add(at_ms, frame);
    }

    pub fn model(&mut self, at_ms: u64, frame: &[u8]) {
        self.model.add(at_ms, frame);
    }

    /// The recording as a WAV file: 2 channels (caller, model), 24 kHz, PCM16.
    pub fn into_wav(self) -> Vec<u8> {
        let (l, r) = (self.caller.pcm, self.model.pcm);
        let frames = l.len().max(r.len());
        let data_len = (frames * 4) as u32;
        let mut out = Vec::with_capacity(44 + frames * 4);
        out.extend_from_slice(b"RIFF");
        out.extend_from_slice(&(36 + data_len).to_le_bytes());
        out.extend_from_slice(b"WAVEfmt ");
        out.extend_from_slice(&16u32.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes()); // PCM
        out.extend_from_slice(&2u16.to_le_bytes()); // channels
        out.extend_from_slice(&RATE.to_le_bytes());
        out.extend_from_slice(&(RATE * 4).to_le_bytes()); // bytes per second
        out.extend_from_slice(&4u16.to_le_bytes()); // block align
        out.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
        out.extend_from_slice(b"data");
        out.extend_from_slice(&data_len.to_le_bytes());
        for i in 0..frames {
            out.extend_from_slice(&l.get(i).copied().unwrap_or(0).to_le_bytes());
            out.extend_from_slice(&r.get(i).copied().unwrap_or(0).to_le_bytes());
        }
        out
    }
}

/// Ended sessions' recordings, by session id, for [`ENDED_TTL`].
#[derive(Default)]
pub struct EndedRecordings {
    entries: VecDeque<(Instant, String, Arc<Vec<u8>>)>,
}

pub type SharedRecordings = Arc<Mutex<EndedRecordings>>;

impl EndedRecordings {
    pub fn shared() -> SharedRecordings {
        Arc::default()
    }

    pub fn insert(&mut self, now: Instant, id: String, wav: Vec<u8>) {
        self.expire(now);
        if self.entries.len() == MAX_ENDED {
            self.entries.pop_front();
        }
        self.entries.push_back((now, id, Arc::new(wav)));
    }

    pub fn get(&mut self, now: Instant, id: &str) -> Option<Arc<Vec<u8>>> {
        self.expire(now);
        self.entries
            .iter()
            .find(|(_, i, _)| i == id)
            .map(|(_, _, wav)| wav.clone())
    }

    fn expire(&mut self, now: Instant) {
        while self
            .entries
            .front()
            .is_some_and(|(at, _, _)| now.duration_since(*at) >= ENDED_TTL)
        {
            self.entries.pop_front();
        }
    }
}

/// The store behind its lock; a panic elsewhere while it was held leaves it usable.
pub fn lock(r: &SharedRecordings) -> std::sync::MutexGuard<'_, EndedRecordings> {
    r.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::codec::Encoder;

    fn tone(freq: f32) -> Vec<i16> {
        (0..960)
            .map(|i| ((i as f32 * freq * std::f32::consts::TAU / 48_000.0).sin() * 8000.0) as i16)
            .collect()
    }

    #[test]
    fn both_directions_land_on_their_channel_at_their_time() {
        let mut enc = Encoder::new(Codec::Pcmu);
        let frame = enc.encode(&tone(440.0)).unwrap().to_vec();
        let mut r = Recorder::new(Codec::Pcmu, Codec::Pcmu);
        r.caller(0, &frame);
        r.model(1000, &frame);
        let wav = r.into_wav();
        assert_eq!(&wav[0..4], b"RIFF");
        assert_eq!(u16::from_le_bytes([wav[22], wav[23]]), 2, "stereo");
        assert_eq!(
            u32::from_le_bytes([wav[24], wav[25], wav[26], wav[27]]),
            RATE
        );
        let samples: Vec<i16> = wav[44..]
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        let (left, right): (Vec<i16>, Vec<i16>) =
            samples.chunks_exact(2).map(|f| (f[0], f[1])).unzip();
        // 1 s of timeline plus the model's 20 ms frame.
        assert_eq!(left.len(), 24_000 + 480);
        let energy = |s: &[i16]| s.iter().map(|&x| i64::from(x).abs()).sum::<i64>();
        assert!(
            energy(&left[..480]) > 100_000,
            "the caller's frame is at 0 ms, left"
        );
        assert_eq!(
            energy(&right[..24_000]),
            0,
            "nothing from the model before 1 s"
        );
        assert!(
            energy(&right[24_000..]) > 100_000,
            "the model's frame at 1 s, right"
        );
        assert_eq!(energy(&left[480..]), 0);
    }

    #[test]
    fn recordings_are_bounded_and_expire() {
        let mut enc = Encoder::new(Codec::Pcma);
        let frame = enc.encode(&tone(300.0)).unwrap().to_vec();
        let mut r = Recorder::new(Codec::Pcma, Codec::Pcma);
        r.caller(MAX_RECORDING.as_millis() as u64 - 10, &frame);
        r.caller(MAX_RECORDING.as_millis() as u64 + 10, &frame);
        assert_eq!(r.caller.pcm.len(), MAX_SAMPLES, "cut at the bound");

        let t0 = Instant::now();
        let mut store = EndedRecordings::default();
        for i in 0..MAX_ENDED + 1 {
            store.insert(t0, format!("live_{i}"), vec![i as u8]);
        }
        assert!(store.get(t0, "live_0").is_none(), "the oldest went first");
        assert_eq!(store.get(t0, "live_1").unwrap()[0], 1);
        assert!(store.get(t0 + ENDED_TTL, "live_1").is_none());
    }
}
