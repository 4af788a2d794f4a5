//! Server-side voice activity detection on decoded caller audio.
//!
//! This looks only at the PCM itself, so it works for clients that do not send the RFC 6464
//! audio-level header extension. It is an energy detector with an adaptive noise floor:
//!
//! - Each frame's level is its RMS in dBFS (digital silence counts as −120 dBFS).
//! - The noise floor is the minimum of the (lightly smoothed) level over the last ~3 s, tracked
//!   in 500 ms blocks ("minimum statistics"). For the first 3 s a prior of −70 dBFS (a quiet
//!   headset with browser noise suppression) takes part, so a caller who talks at once is heard.
//!   During a turn the floor may fall but not rise (for up to 15 s), so a long turn is not cut
//!   when the speaker's own quieter stretches would otherwise become the "noise".
//! - A frame is speech when its level exceeds `floor + margin` and an absolute floor. Both grow
//!   with the Realtime `threshold` (0–1): margin = 6 + 18·t dB, absolute floor = −58 + 20·t dBFS,
//!   so the default 0.5 needs 15 dB over the noise and at least −48 dBFS. Digital silence and a
//!   −60 dBFS hiss never trigger, at any threshold. Once speaking, frames count as speech down
//!   to 4 dB below that (hysteresis), so a fading word does not end the turn early.
//! - A turn starts after `min_speech_ms` (default 100 ms) of speech with gaps of at most 40 ms,
//!   so clicks and pops do not start turns. It ends after `silence_duration_ms` with no speech.
//!
//! Times are input-time milliseconds given by the caller for each frame (see `input.rs`).

/// The Realtime `server_vad` knobs, plus the minimum speech length that is ours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VadConfig {
    /// 0–1; higher needs louder speech relative to the noise floor.
    pub threshold: f32,
    /// Audio before the detected onset that belongs to the turn.
    pub prefix_padding_ms: u32,
    /// Silence that ends a turn.
    pub silence_duration_ms: u32,
    /// Speech needed before a turn starts (not a Realtime setting).
    pub min_speech_ms: u32,
}

impl Default for VadConfig {
    fn default() -> Self {
        Self {
            threshold: 0.5,
            prefix_padding_ms: 300,
            silence_duration_ms: 500,
            min_speech_ms: 100,
        }
    }
}

impl VadConfig {
    fn threshold(&self) -> f32 {
        if self.threshold.is_finite() {
            self.threshold.clamp(0.0, 1.0)
        } else {
            0.5
        }
    }
    /// dB above the noise floor that a frame needs to start speech.
    pub fn margin_db(&self) -> f32 {
        6.0 + 18.0 * self.threshold()
    }
    /// dBFS a frame needs to be speech whatever the noise floor.
    pub fn absolute_floor_dbfs(&self) -> f32 {
        -58.0 + 20.0 * self.threshold()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VadEvent {
    /// A turn began. `audio_start_ms` is the onset minus `prefix_padding_ms` (at least 0), as the
    /// Realtime `input_audio_buffer.speech_started` reports it.
    SpeechStarted { audio_start_ms: u64 },
    /// A turn ended. `audio_end_ms` is the input time at which `silence_duration_ms` of silence had
    /// passed (end of the last speech frame + silence): like the real `speech_stopped`, it
    /// includes the silence. `speech_end_ms` is the end of the last speech frame, for trimming
    /// the trailing silence off a turn. The event itself comes with the first frame (or
    /// [`Vad::advance_to`]) at or past `audio_end_ms`.
    SpeechStopped {
        audio_end_ms: u64,
        speech_end_ms: u64,
    },
}

const SILENCE_DBFS: f32 = -120.0;
const PRIOR_FLOOR_DBFS: f32 = -70.0;
const FLOOR_BLOCK_MS: u64 = 500;
const FLOOR_BLOCKS: usize = 6;
const HYSTERESIS_DB: f32 = 4.0;
const MAX_ONSET_GAP_MS: u64 = 40;
const FLOOR_FREEZE_MAX_MS: u64 = 15_000;

#[derive(Debug, Clone, Copy)]
enum State {
    Idle,
    Pending {
        onset_ms: u64,
        speech_ms: u64,
        last_speech_end: u64,
    },
    Speaking {
        last_speech_end: u64,
        onset_ms: u64,
        /// The noise floor when the turn started; see `update_floor`.
        floor: f32,
    },
}

#[derive(Debug, Clone)]
pub struct Vad {
    cfg: VadConfig,
    state: State,
    /// Minimum smoothed level of each finished 500 ms block, newest last.
    block_mins: [f32; FLOOR_BLOCKS],
    block_min: f32,
    block_start_ms: u64,
    smoothed_power: f32,
    last_level: f32,
    started: bool,
}

impl Vad {
    pub fn new(cfg: VadConfig) -> Self {
        Self {
            cfg,
            state: State::Idle,
            block_mins: [PRIOR_FLOOR_DBFS; FLOOR_BLOCKS],
            block_min: f32::INFINITY,
            block_start_ms: 0,
            smoothed_power: 0.0,
            last_level: SILENCE_DBFS,
            started: false,
        }
    }

    /// Takes new settings; a turn in progress continues under them.
    pub fn set_config(&mut self, cfg: VadConfig) {
        self.cfg = cfg;
    }

    pub fn config(&self) -> &VadConfig {
        &self.cfg
    }

    /// Whether a turn has started and not yet ended.
    pub fn is_speaking(&self) -> bool {
        matches!(self.state, State::Speaking { .. })
    }

    /// Level of the last frame, dBFS.
    pub fn level_dbfs(&self) -> f32 {
        self.last_level
    }

    /// Current noise-floor estimate, dBFS.
    pub fn noise_floor_dbfs(&self) -> f32 {
        self.block_mins
            .iter()
            .copied()
            .fold(self.block_min, f32::min)
            .max(SILENCE_DBFS)
    }

    /// Forgets any turn in progress (e.g. on `input_audio_buffer.clear`); keeps the noise floor.
    pub fn reset_turn(&mut self) {
        self.state = State::Idle;
    }

    /// Feeds one frame of 48 kHz mono PCM (normally 20 ms) that starts at `frame_start_ms` of
    /// input time. Frames must come in time order; a gap between frames counts as silence.
    pub fn push_frame(&mut self, pcm: &[i16], frame_start_ms: u64) -> Option<VadEvent> {
        if pcm.is_empty() {
            return None;
        }
        let dur_ms = (pcm.len() as u64 * 1000).div_ceil(48_000);
        let end_ms = frame_start_ms + dur_ms;
        let power = pcm.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>()
            / pcm.len() as f64
            / (32768.0 * 32768.0);
        let level = if power > 0.0 {
            ((10.0 * power.log10()) as f32).max(SILENCE_DBFS)
        } else {
            SILENCE_DBFS
        };
        self.last_level = level;

        // The thresholds come from the floor before this frame, so a loud onset is not compared
        // with itself.
        let floor = self.noise_floor_dbfs();
        let on = (floor + self.cfg.margin_db()).max(self.cfg.absolute_floor_dbfs());
        let off = on - HYSTERESIS_DB;
        self.update_floor(power as f32, frame_start_ms, end_ms);

        match self.state {
            State::Idle => {
                if level > on {
                    self.state = State::Pending {
                        onset_ms: frame_start_ms,
                        speech_ms: dur_ms,
                        last_speech_end: end_ms,
                    };
                    return self.maybe_start();
                }
                None
            }
            State::Pending {
                onset_ms,
                speech_ms,
                last_speech_end,
            } => {
                if level > off {
                    self.state = State::Pending {
                        onset_ms,
                        speech_ms: speech_ms + dur_ms,
                        last_speech_end: end_ms,
                    };
                    self.maybe_start()
                } else {
                    if end_ms.saturating_sub(last_speech_end) > MAX_ONSET_GAP_MS {
                        self.state = State::Idle;
                    }
                    None
                }
            }
            State::Speaking {
                last_speech_end,
                onset_ms,
                floor,
            } => {
                if frame_start_ms.saturating_sub(last_speech_end)
                    >= u64::from(self.cfg.silence_duration_ms)
                {
                    // A gap in the input (no packets) was already long enough.
                    return self.advance_to(frame_start_ms);
                }
                if level > off {
                    self.state = State::Speaking {
                        last_speech_end: end_ms,
                        onset_ms,
                        floor,
                    };
                    None
                } else {
                    self.advance_to(end_ms)
                }
            }
        }
    }

    /// Lets input time pass without audio (the caller's packets stopped, e.g. a muted mic or DTX):
    /// ends a turn whose silence has lasted long enough by `now_ms`.
    pub fn advance_to(&mut self, now_ms: u64) -> Option<VadEvent> {
        let State::Speaking {
            last_speech_end, ..
        } = self.state
        else {
            return None;
        };
        if now_ms.saturating_sub(last_speech_end) < u64::from(self.cfg.silence_duration_ms) {
            return None;
        }
        self.state = State::Idle;
        Some(VadEvent::SpeechStopped {
            audio_end_ms: last_speech_end + u64::from(self.cfg.silence_duration_ms),
            speech_end_ms: last_speech_end,
        })
    }

    fn maybe_start(&mut self) -> Option<VadEvent> {
        let State::Pending {
            onset_ms,
            speech_ms,
            last_speech_end,
        } = self.state
        else {
            return None;
        };
        if speech_ms < u64::from(self.cfg.min_speech_ms) {
            return None;
        }
        self.state = State::Speaking {
            last_speech_end,
            onset_ms,
            floor: self.noise_floor_dbfs(),
        };
        Some(VadEvent::SpeechStarted {
            audio_start_ms: onset_ms.saturating_sub(u64::from(self.cfg.prefix_padding_ms)),
        })
    }

    fn update_floor(&mut self, power: f32, start_ms: u64, end_ms: u64) {
        // ~60 ms smoothing so one odd frame (a concealed loss, a gap) does not set the floor.
        self.smoothed_power = if self.started {
            0.7 * self.smoothed_power + 0.3 * power
        } else {
            self.started = true;
            self.block_start_ms = start_ms;
            power
        };
        let smoothed = if self.smoothed_power > 0.0 {
            (10.0 * self.smoothed_power.log10()).max(SILENCE_DBFS)
        } else {
            SILENCE_DBFS
        };
        self.block_min = self.block_min.min(smoothed);
        let window = FLOOR_BLOCK_MS * FLOOR_BLOCKS as u64;
        if end_ms > self.block_start_ms + window {
            // After a long gap in the input, only the last window's worth of blocks matters.
            self.block_start_ms = end_ms - window;
        }
        while end_ms >= self.block_start_ms + FLOOR_BLOCK_MS {
            // A block that saw no frame (a gap) repeats the previous block's minimum.
            let mut min = if self.block_min.is_finite() {
                self.block_min
            } else {
                self.block_mins[FLOOR_BLOCKS - 1]
            };
            // During a turn the floor does not rise: the end of a long turn is judged against the
            // noise before it, not against the speaker's own quieter syllables. A turn that goes
            // on for over 15 s may be a noise that started loud; then the floor adapts again.
            if let State::Speaking {
                onset_ms, floor, ..
            } = self.state
                && end_ms.saturating_sub(onset_ms) < FLOOR_FREEZE_MAX_MS
            {
                min = min.min(floor);
            }
            self.block_mins.rotate_left(1);
            self.block_mins[FLOOR_BLOCKS - 1] = min;
            self.block_min = f32::INFINITY;
            self.block_start_ms += FLOOR_BLOCK_MS;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: usize = 960;

    /// Deterministic white noise at `dbfs` RMS.
    fn noise(len: usize, dbfs: f32, seed: &mut u64) -> Vec<i16> {
        // Uniform in [-a, a] has RMS a/√3.
        let a = 32768.0 * 10f32.powf(dbfs / 20.0) * 3f32.sqrt();
        (0..len)
            .map(|_| {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (*seed >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
                (a * u) as i16
            })
            .collect()
    }

    fn tone(len: usize, dbfs: f32, phase0: usize) -> Vec<i16> {
        let amp = 32768.0 * 10f32.powf(dbfs / 20.0) * std::f32::consts::SQRT_2;
        (0..len)
            .map(|i| {
                let t = (i + phase0) as f32 / 48_000.0;
                (amp * (2.0 * std::f32::consts::PI * 300.0 * t).sin()) as i16
            })
            .collect()
    }

    /// Runs `signal` through a VAD in 20 ms frames, returning (event, frame index) pairs.
    fn run(vad: &mut Vad, signal: &[i16]) -> Vec<VadEvent> {
        signal
            .chunks_exact(FRAME)
            .enumerate()
            .filter_map(|(i, f)| vad.push_frame(f, i as u64 * 20))
            .collect()
    }

    /// `before_ms` of background, then `tone_ms` of −20 dBFS 300 Hz tone over it, then `after_ms`.
    fn burst(
        before_ms: usize,
        tone_ms: usize,
        after_ms: usize,
        noise_dbfs: Option<f32>,
    ) -> Vec<i16> {
        let n = (before_ms + tone_ms + after_ms) * 48;
        let mut s = match noise_dbfs {
            Some(db) => noise(n, db, &mut 7),
            None => vec![0; n],
        };
        let t = tone(tone_ms * 48, -20.0, 0);
        for (o, x) in s[before_ms * 48..].iter_mut().zip(t) {
            *o = o.saturating_add(x);
        }
        s
    }

    fn within_frame(got: u64, want: u64) -> bool {
        got.abs_diff(want) <= 20
    }

    #[test]
    fn silence_and_noise_floor_never_trigger() {
        let mut vad = Vad::new(VadConfig::default());
        assert!(run(&mut vad, &vec![0; 48_000 * 5]).is_empty());
        for threshold in [0.0, 0.5, 1.0] {
            let mut vad = Vad::new(VadConfig {
                threshold,
                ..VadConfig::default()
            });
            let events = run(&mut vad, &noise(48_000 * 5, -60.0, &mut 1));
            assert!(events.is_empty(), "threshold {threshold}: {events:?}");
            assert!(
                (vad.noise_floor_dbfs() + 60.0).abs() < 3.0,
                "{}",
                vad.noise_floor_dbfs()
            );
        }
    }

    #[test]
    fn tone_burst_starts_and_stops_on_time() {
        for background in [None, Some(-60.0)] {
            let mut vad = Vad::new(VadConfig::default());
            let events = run(&mut vad, &burst(1000, 1000, 2000, background));
            assert_eq!(events.len(), 2, "{background:?}: {events:?}");
            let VadEvent::SpeechStarted { audio_start_ms } = events[0] else {
                panic!("{events:?}")
            };
            assert!(within_frame(audio_start_ms, 1000 - 300), "{audio_start_ms}");
            let VadEvent::SpeechStopped {
                audio_end_ms,
                speech_end_ms,
            } = events[1]
            else {
                panic!("{events:?}")
            };
            assert!(within_frame(speech_end_ms, 2000), "{speech_end_ms}");
            assert!(within_frame(audio_end_ms, 2000 + 500), "{audio_end_ms}");
            assert!(!vad.is_speaking());
        }
    }

    #[test]
    fn is_speaking_follows_the_turn_and_detection_latency_is_min_speech() {
        let mut vad = Vad::new(VadConfig::default());
        let s = burst(1000, 1000, 1000, Some(-60.0));
        let mut started_at = None;
        for (i, f) in s.chunks_exact(FRAME).enumerate() {
            let t = i as u64 * 20;
            if let Some(VadEvent::SpeechStarted { .. }) = vad.push_frame(f, t) {
                started_at = Some(t + 20);
            }
            if (1200..2000).contains(&t) {
                assert!(vad.is_speaking(), "{t}");
            }
        }
        // Detected once min_speech_ms (100 ms) of tone has been heard.
        assert!(within_frame(started_at.unwrap(), 1100), "{started_at:?}");
    }

    #[test]
    fn prefix_padding_shifts_audio_start_and_clamps_at_zero() {
        let signal = burst(1000, 600, 1000, Some(-60.0));
        let start_with = |prefix_padding_ms| {
            let mut vad = Vad::new(VadConfig {
                prefix_padding_ms,
                ..VadConfig::default()
            });
            match run(&mut vad, &signal).first() {
                Some(VadEvent::SpeechStarted { audio_start_ms }) => *audio_start_ms,
                e => panic!("{e:?}"),
            }
        };
        assert!(within_frame(start_with(0), 1000));
        assert_eq!(start_with(0) - start_with(300), 300);
        assert_eq!(start_with(2000), 0);
    }

    #[test]
    fn clicks_and_short_blips_do_not_start_turns() {
        let mut vad = Vad::new(VadConfig::default());
        let mut s = noise(48_000 * 3, -60.0, &mut 3);
        // A 2 ms full-scale click at 1 s and a 60 ms loud blip at 2 s.
        for x in &mut s[48_000..48_000 + 96] {
            *x = i16::MAX;
        }
        for (o, x) in s[96_000..].iter_mut().zip(tone(60 * 48, -10.0, 0)) {
            *o = x;
        }
        let events = run(&mut vad, &s);
        assert!(events.is_empty(), "{events:?}");
    }

    #[test]
    fn silence_duration_and_threshold_are_honoured() {
        let signal = burst(1000, 1000, 3000, Some(-60.0));
        let mut vad = Vad::new(VadConfig {
            silence_duration_ms: 1200,
            ..VadConfig::default()
        });
        let events = run(&mut vad, &signal);
        let stopped_at = match events[1] {
            VadEvent::SpeechStopped { audio_end_ms, .. } => audio_end_ms,
            e => panic!("{e:?}"),
        };
        assert!(within_frame(stopped_at, 3200), "{events:?}");

        // A quiet talker at −40 dBFS is heard at the default threshold but not at 1.0.
        let quiet: Vec<i16> = {
            let mut s = noise(48_000 * 4, -70.0, &mut 5);
            for (o, x) in s[48_000..96_000].iter_mut().zip(tone(48_000, -40.0, 0)) {
                *o = o.saturating_add(x);
            }
            s
        };
        assert_eq!(run(&mut Vad::new(VadConfig::default()), &quiet).len(), 2);
        let mut strict = Vad::new(VadConfig::default());
        strict.set_config(VadConfig {
            threshold: 1.0,
            ..VadConfig::default()
        });
        assert!(run(&mut strict, &quiet).is_empty());
    }

    #[test]
    fn input_gap_ends_a_turn() {
        let mut vad = Vad::new(VadConfig::default());
        let t = tone(48_000, -20.0, 0);
        let mut events: Vec<VadEvent> = t
            .chunks_exact(FRAME)
            .enumerate()
            .filter_map(|(i, f)| vad.push_frame(f, 1000 + i as u64 * 20))
            .collect();
        assert!(vad.is_speaking());
        // Packets stop; the transceiver's timer asks later.
        assert_eq!(vad.advance_to(2300), None);
        events.extend(vad.advance_to(2500));
        assert_eq!(
            events[1],
            VadEvent::SpeechStopped {
                audio_end_ms: 2500,
                speech_end_ms: 2000
            }
        );
        // Or the next packet arrives after the gap.
        let mut vad = Vad::new(VadConfig::default());
        for (i, f) in t.chunks_exact(FRAME).enumerate() {
            vad.push_frame(f, i as u64 * 20);
        }
        let e = vad.push_frame(&t[..FRAME], 5000);
        assert_eq!(
            e,
            Some(VadEvent::SpeechStopped {
                audio_end_ms: 1500,
                speech_end_ms: 1000
            })
        );
    }

    #[test]
    fn stationary_loud_noise_becomes_the_floor() {
        // A fan switches on at −35 dBFS: at most one false turn (of up to ~15 s, as the floor
        // holds during a turn), then the floor adapts.
        let mut vad = Vad::new(VadConfig::default());
        let mut s = noise(48_000, -65.0, &mut 9);
        s.extend(noise(48_000 * 22, -35.0, &mut 11));
        let events = run(&mut vad, &s);
        assert!(events.len() <= 2, "{events:?}");
        assert!(!vad.is_speaking());
        assert!((vad.noise_floor_dbfs() + 35.0).abs() < 3.0);
    }

    #[test]
    fn a_long_continuous_turn_is_not_cut() {
        // The fixture's 3.1 s of speech three times over, back to back, between silences.
        let wav = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/speech.wav"))
            .expect("fixtures/speech.wav");
        let (_, pcm) = crate::audio::wav::parse_wav(&wav).unwrap();
        let speech = &pcm[..3100 * 48];
        let mut s = noise(48_000, -65.0, &mut 13);
        for _ in 0..3 {
            s.extend_from_slice(speech);
        }
        s.extend(noise(48_000 * 2, -65.0, &mut 17));
        let mut vad = Vad::new(VadConfig::default());
        let events = run(&mut vad, &s);
        assert_eq!(events.len(), 2, "{events:?}");
        let VadEvent::SpeechStopped { speech_end_ms, .. } = events[1] else {
            panic!("{events:?}")
        };
        assert!(speech_end_ms.abs_diff(1000 + 3 * 3100) <= 200, "{events:?}");
    }

    #[test]
    fn a_quieter_stretch_late_in_a_long_turn_does_not_end_it() {
        // 4 s of loud "syllables" (−20 dBFS with 10 dB dips at 4 Hz), then 1 s spoken 12 dB
        // quieter, then loud again, over a −65 dBFS room.
        let mut s = noise(48_000, -65.0, &mut 19);
        let syllables = |ms: usize, dbfs: f32| -> Vec<i16> {
            tone(ms * 48, dbfs, 0)
                .iter()
                .enumerate()
                .map(|(i, &x)| if (i / 48) % 250 < 150 { x } else { x / 3 })
                .collect()
        };
        s.extend(syllables(4000, -20.0));
        s.extend(syllables(1000, -32.0));
        s.extend(syllables(1000, -20.0));
        s.extend(noise(48_000 * 2, -65.0, &mut 23));
        let mut vad = Vad::new(VadConfig::default());
        let events = run(&mut vad, &s);
        assert_eq!(events.len(), 2, "{events:?}");
        let VadEvent::SpeechStopped { speech_end_ms, .. } = events[1] else {
            panic!("{events:?}")
        };
        assert!(within_frame(speech_end_ms, 7000), "{events:?}");
    }
}
