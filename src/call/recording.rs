//! Recordings of Live sessions started with `store: true`, served as a stereo WAV by
//! `GET /v1/live/sessions/{id}/content` once the session has ended: the caller on the left, the
//! model on the right, each placed on the session's timeline.
//!
//! The call already carries both directions' audio, encoded: the recorder decodes its own copy
//! of each (a second decoder per direction, so the media side's state is untouched) and keeps
//! 24 kHz PCM, bounded to [`MAX_RECORDING`]. That is 96 KB/s, about 240 times what the rest of
//! a call holds, so recordings are counted in bytes ([`super::byte_budget`]): a session takes
//! its room 10 s at a time from the transceiver's recording budget, within its client's share;
//! one that finds none is refused at the start or, later, stops growing and its client is told
//! (`recording_budget_exceeded`). Finished recordings wait a few minutes in a store shared by
//! the transceiver's workers, as ended event logs do, still counted until they go.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::byte_budget::{ByteBudget, Exhausted, Held};
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
/// Both tracks' bytes per sample of the timeline (two PCM16 channels).
const BYTES_PER_SAMPLE: usize = 4;
/// A recording takes room from the budget 10 s of timeline at a time (960 KB), so it costs a
/// lock now and then, not per frame, and holds at most one chunk it has not used.
const CHUNK_SAMPLES: usize = 10_000 * SAMPLES_PER_MS;

pub struct Recorder {
    caller: Track,
    model: Track,
    room: RecordingRoom,
    /// The budget refused more room: the recording keeps what it has and takes no more.
    stopped: Option<Exhausted>,
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
}

impl Recorder {
    /// `input` is the caller's codec, `output` ours (they differ only on a WebSocket).
    pub fn new(input: Codec, output: Codec, room: RecordingRoom) -> Recorder {
        Recorder {
            caller: Track::new(input),
            model: Track::new(output),
            room,
            stopped: None,
        }
    }

    /// A frame of the caller's audio heard at `at_ms` of the session. `Some` the one time the
    /// budget stops the recording, for the client to be told.
    pub fn caller(&mut self, at_ms: u64, frame: &[u8]) -> Option<Exhausted> {
        self.add(Side::Caller, at_ms, frame)
    }

    pub fn model(&mut self, at_ms: u64, frame: &[u8]) -> Option<Exhausted> {
        self.add(Side::Model, at_ms, frame)
    }

    /// One encoded frame: decoded (48 kHz), halved to 24 kHz, and written at its time, or
    /// right after the previous frame when it arrives early; as much as there is room for.
    fn add(&mut self, side: Side, at_ms: u64, frame: &[u8]) -> Option<Exhausted> {
        if self.stopped.is_some() {
            return None;
        }
        let track = match side {
            Side::Caller => &mut self.caller,
            Side::Model => &mut self.model,
        };
        let Ok(pcm) = track.decoder.decode_24k(frame) else {
            return None;
        };
        let start = (at_ms as usize * SAMPLES_PER_MS).max(track.pcm.len());
        let end = (start + pcm.len()).min(MAX_SAMPLES);
        if start >= end {
            return None;
        }
        let mut refused = None;
        let have = self.room.held.bytes() / BYTES_PER_SAMPLE;
        if end > have {
            let want =
                (have + (end - have).div_ceil(CHUNK_SAMPLES) * CHUNK_SAMPLES).min(MAX_SAMPLES);
            if let Err(e) = self.room.grow_to(want * BYTES_PER_SAMPLE) {
                refused = Some(e);
                self.stopped = Some(e);
            }
        }
        // The vector holds exactly what the budget counts, never a doubling beyond it.
        let room = self.room.held.bytes() / BYTES_PER_SAMPLE;
        if track.pcm.capacity() < room {
            track.pcm.reserve_exact(room - track.pcm.len());
        }
        let end = end.min(room);
        if start < end {
            track.pcm.resize(start, 0);
            track.pcm.extend(pcm.into_iter().take(end - start));
        }
        refused
    }

    /// The WAV, for tests that look inside a recording.
    #[cfg(test)]
    pub fn wav(self) -> Vec<u8> {
        self.into_wav().0
    }

    /// The recording as a WAV file: 2 channels (caller, model), 24 kHz, PCM16; and the room
    /// it holds, now its size.
    fn into_wav(self) -> (Vec<u8>, Held) {
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
        let mut held = self.room.held;
        held.shrink_to(out.len());
        (out, held)
    }
}

#[derive(Clone, Copy)]
enum Side {
    Caller,
    Model,
}

/// What a client is told when a stored session finds no room for its recording.
pub fn no_room(e: Exhausted) -> String {
    format!(
        "no room to record this session ({e}): start it without store, or once other stored sessions have ended"
    )
}

/// A transceiver's recordings, running and kept, within one memory budget
/// (`--recording-budget-mb`; a client may hold a quarter of it). Kept recordings give way,
/// oldest first, to a running one that needs room.
pub struct Recordings {
    budget: Arc<ByteBudget>,
    ended: Mutex<EndedRecordings>,
}

pub type SharedRecordings = Arc<Recordings>;

/// A running recording's room in the budget.
pub struct RecordingRoom {
    store: SharedRecordings,
    held: Held,
}

impl RecordingRoom {
    fn grow_to(&mut self, bytes: usize) -> Result<(), Exhausted> {
        let more = bytes.saturating_sub(self.held.bytes());
        self.store.make_room(&mut self.held, more)
    }
}

impl Recordings {
    pub fn shared(budget_bytes: usize) -> SharedRecordings {
        Arc::new(Recordings {
            budget: ByteBudget::new(budget_bytes, budget_bytes / 4),
            ended: Mutex::default(),
        })
    }

    /// Room to start recording for `client`: the first 10 s, taken before the session starts,
    /// so a full budget refuses the session instead of recording nothing.
    pub fn room(self: &Arc<Self>, client: Option<IpAddr>) -> Result<RecordingRoom, Exhausted> {
        let mut held = self.budget.reserve(client, 0)?;
        self.make_room(&mut held, CHUNK_SAMPLES * BYTES_PER_SAMPLE)?;
        Ok(RecordingRoom {
            store: self.clone(),
            held,
        })
    }

    /// `more` bytes for `held`, dropping kept recordings, oldest first, while that helps: any
    /// when the transceiver's budget is short, only the same client's when its share is.
    fn make_room(&self, held: &mut Held, more: usize) -> Result<(), Exhausted> {
        loop {
            let refused = match held.grow(more) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            let mut ended = self.lock();
            let victim = ended.entries.iter().position(|e| match refused {
                Exhausted::Transceiver(_) => true,
                Exhausted::Client(_) => e.held.client() == held.client(),
            });
            match victim {
                Some(i) => drop(ended.entries.remove(i)),
                None => return Err(refused),
            }
        }
    }

    /// Keeps a finished recording under session `id` for [`ENDED_TTL`].
    pub fn keep(&self, now: Instant, id: String, recorder: Recorder) {
        let (wav, held) = recorder.into_wav();
        let mut ended = self.lock();
        ended.expire(now);
        if ended.entries.len() == MAX_ENDED {
            ended.entries.pop_front();
        }
        ended.entries.push_back(Ended {
            at: now,
            id,
            wav: Arc::new(wav),
            held,
        });
    }

    pub fn get(&self, now: Instant, id: &str) -> Option<Arc<Vec<u8>>> {
        let mut ended = self.lock();
        ended.expire(now);
        ended
            .entries
            .iter()
            .find(|e| e.id == id)
            .map(|e| e.wav.clone())
    }

    /// The store behind its lock; a panic elsewhere while it was held leaves it usable.
    fn lock(&self) -> std::sync::MutexGuard<'_, EndedRecordings> {
        self.ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Ended sessions' recordings, for [`ENDED_TTL`].
#[derive(Default)]
struct EndedRecordings {
    entries: VecDeque<Ended>,
}

struct Ended {
    at: Instant,
    id: String,
    wav: Arc<Vec<u8>>,
    /// Its room in the budget, given back when it goes.
    held: Held,
}

impl EndedRecordings {
    fn expire(&mut self, now: Instant) {
        while self
            .entries
            .front()
            .is_some_and(|e| now.duration_since(e.at) >= ENDED_TTL)
        {
            self.entries.pop_front();
        }
    }
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

    fn frame(codec: Codec) -> Vec<u8> {
        Encoder::new(codec).encode(&tone(440.0)).unwrap().to_vec()
    }

    const MIB: usize = 1 << 20;
    const A: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1)));
    const B: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2)));

    #[test]
    fn both_directions_land_on_their_channel_at_their_time() {
        let store = Recordings::shared(512 * MIB);
        let f = frame(Codec::Pcmu);
        let mut r = Recorder::new(Codec::Pcmu, Codec::Pcmu, store.room(None).unwrap());
        r.caller(0, &f);
        r.model(1000, &f);
        let (wav, _) = r.into_wav();
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
        let store = Recordings::shared(512 * MIB);
        let f = frame(Codec::Pcma);
        let mut r = Recorder::new(Codec::Pcma, Codec::Pcma, store.room(None).unwrap());
        r.caller(MAX_RECORDING.as_millis() as u64 - 10, &f);
        r.caller(MAX_RECORDING.as_millis() as u64 + 10, &f);
        assert_eq!(r.caller.pcm.len(), MAX_SAMPLES, "cut at the bound");
        assert_eq!(r.room.held.bytes(), MAX_SAMPLES * BYTES_PER_SAMPLE);

        let t0 = Instant::now();
        for i in 0..MAX_ENDED + 1 {
            let r = Recorder::new(Codec::Pcma, Codec::Pcma, store.room(None).unwrap());
            store.keep(t0, format!("live_{i}"), r);
        }
        assert!(store.get(t0, "live_0").is_none(), "the oldest went first");
        assert!(store.get(t0, "live_1").is_some());
        assert!(store.get(t0 + ENDED_TTL, "live_1").is_none());
    }

    /// 8 MiB in all, 2 MiB per client: a recording takes ~0.94 MiB per 10 s of timeline.
    #[test]
    fn recordings_are_held_to_their_budget() {
        let store = Recordings::shared(8 * MIB);
        let f = frame(Codec::Pcmu);
        let mut a = Recorder::new(Codec::Pcmu, Codec::Pcmu, store.room(A).unwrap());
        assert_eq!(store.budget.used(A).1, CHUNK_SAMPLES * BYTES_PER_SAMPLE);
        assert_eq!(a.caller(10_000, &f), None, "a second chunk fits the share");
        assert_eq!(
            a.caller(20_000, &f),
            Some(Exhausted::Client(2 * MIB)),
            "a third does not: told once"
        );
        assert_eq!(a.caller(20_020, &f), None);
        assert_eq!(a.caller.pcm.len(), CHUNK_SAMPLES + 480, "kept what it had");
        assert_eq!(
            a.caller.pcm.capacity(),
            2 * CHUNK_SAMPLES,
            "no more than is counted"
        );
        assert!(store.room(A).is_err(), "no room for another of A's");

        // A's kept recording gives way to A's next one; B's, kept too, does not.
        let b = Recorder::new(Codec::Pcmu, Codec::Pcmu, store.room(B).unwrap());
        let now = Instant::now();
        store.keep(now, "live_a".into(), a);
        store.keep(now, "live_b".into(), b);
        let a2 = store.room(A).unwrap();
        assert!(
            store.get(now, "live_a").is_some(),
            "it fits beside the kept one"
        );
        let a3 = store.room(A).unwrap();
        assert!(
            store.get(now, "live_a").is_none(),
            "A's kept recording gave way"
        );
        assert!(store.get(now, "live_b").is_some(), "B's is not A's to take");
        assert_eq!(store.budget.used(A).1, 2 * CHUNK_SAMPLES * BYTES_PER_SAMPLE);
        drop(a3);
        drop(a2);
        assert_eq!(store.budget.used(A).1, 0);
        assert!(
            store.budget.used(B).1 > 0,
            "a kept recording counts until it goes"
        );
    }
}
