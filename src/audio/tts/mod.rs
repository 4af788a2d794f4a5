//! Text to speech for the TTS stub model: real speech when `espeak-ng` is installed, audio the
//! binary ships otherwise — never silence.
//!
//! - **espeak-ng** (Debian package `espeak-ng`): the text goes in on stdin (so nothing in it can
//!   be read as an option), a WAV (22.05 kHz mono 16-bit) comes back on stdout, is resampled to
//!   48 kHz and word start times are estimated by character count within the voiced span, with
//!   extra weight for the pauses espeak makes at punctuation. `audio.output.speed` sets its rate
//!   (`-s`: 175 words a minute times the speed). The subprocess is killed after 5 s,
//!   or at once when its job is cancelled. **It blocks for tens of milliseconds: servers run it
//!   on the [`pool`]**, never on a transceiver socket loop.
//! - **Shipped words** (`fixtures/tts/words.bin`, ~210 KB, compiled in): about 340 common English
//!   words, the letters and the digits, each spoken once by espeak-ng (voice en-us) and stored
//!   as 12 kbps SILK wideband Opus. Text is read word by word from it; a word not in it is
//!   spelled out letter by letter. Word times are exact (the start of each clip). It is robotic
//!   but says the text, so a transcript still matches the audio on a machine without espeak-ng.
//!   The Realtime voice does not change it; `audio.output.speed` resamples it, so its pitch moves
//!   with its rate.
//!
//! The pack is rebuilt by `VOICE_EDGE_REGEN_TTS=1 cargo test --release --lib audio::tts` (needs
//! espeak-ng) after editing `VOCABULARY` in `words.rs`.
//!
//! The two backends are `espeak` and `words`; WAV parsing and resampling, which espeak's output
//! needs but nothing here owns, are [`crate::audio::wav`] and [`crate::audio::resample`].
//!
//! Synthesis runs on the process's fixed [`pool`] of workers, never on a thread per request, and
//! every job carries a [`CancelToken`]: a response that ends early stops its synthesis (and its
//! espeak-ng process) instead of paying for speech nobody hears.

mod cancel;
mod espeak;
pub mod pool;
mod words;

use std::process::{Command, Stdio};
use std::sync::OnceLock;

pub use cancel::{CancelOnDrop, CancelToken};
pub use pool::{Outcome, Pool, PoolStats};

/// The most text one job speaks, in bytes of UTF-8 (about 5 minutes of English); longer text is
/// cut at a character boundary. Also the most espeak-ng's stdin is given: a pipe holds at least
/// one page (4096 bytes) whatever the system's pipe limits, so writing it never waits for the
/// child to read, and a hung child cannot hang a worker. The Realtime engine cuts a reply's
/// transcript to the same bound, so what is said is what the client reads.
pub const MAX_TEXT_BYTES: usize = 4096;

/// `text` cut to at most [`MAX_TEXT_BYTES`] at a character boundary.
pub fn bounded(text: &str) -> &str {
    if text.len() <= MAX_TEXT_BYTES {
        return text;
    }
    let mut end = MAX_TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Synthesized speech: 48 kHz mono PCM and where each word of the text starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Speech {
    pub pcm48k: Vec<i16>,
    /// Each whitespace-separated word of the text (punctuation kept) and its start, ms.
    pub words: Vec<(String, u64)>,
    pub engine: Synth,
}

impl Speech {
    pub fn duration_ms(&self) -> u64 {
        self.pcm48k.len() as u64 / 48
    }

    /// The same speech `factor` times faster (slower below 1), by resampling: the pitch moves
    /// with it. What a synthesizer that has no rate of its own (the shipped words) does for
    /// `audio.output.speed`.
    fn faster(self, factor: f64) -> Speech {
        if (factor - 1.0).abs() < 1e-3 {
            return self;
        }
        let from = (48_000.0 * factor).round() as u32;
        Speech {
            pcm48k: crate::audio::resample::resample(&self.pcm48k, from, 48_000),
            words: (self.words.into_iter())
                .map(|(w, at)| (w, (at as f64 / factor) as u64))
                .collect(),
            engine: self.engine,
        }
    }
}

/// A job stopped by its [`CancelToken`]; `produced_ms` is how much audio it had made by then
/// (what cancelling saved is the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled {
    pub produced_ms: u64,
}

/// Which synthesizer produced (or is to produce) speech.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synth {
    Espeak,
    Shipped,
}

impl Synth {
    /// `Espeak` when an `espeak-ng` that runs is on the PATH (checked once per process), unless
    /// `VOICE_EDGE_TTS=shipped` asks for the shipped words.
    pub fn detect() -> Synth {
        static DETECTED: OnceLock<Synth> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            if std::env::var("VOICE_EDGE_TTS").is_ok_and(|v| v == "shipped") {
                return Synth::Shipped;
            }
            let ok = Command::new("espeak-ng")
                .arg("--version")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok { Synth::Espeak } else { Synth::Shipped }
        })
    }
}

/// The session's `audio.output.speed` range, as the Realtime API bounds it.
pub const SPEEDS: std::ops::RangeInclusive<f64> = 0.25..=1.5;

/// Speaks `text` with the best synthesizer on this machine, on the calling thread, uncancellable.
/// Blocking; see the module docs. Servers go through [`pool`] instead.
pub fn synthesize(text: &str, voice: &str) -> Speech {
    match synthesize_with(text, voice, 1.0, Synth::detect(), &CancelToken::new()) {
        Ok(speech) => speech,
        Err(_) => unreachable!("a fresh token is never cancelled"),
    }
}

/// Speaks `text` (cut to [`MAX_TEXT_BYTES`]) with the given synthesizer at `speed` (clamped to
/// [`SPEEDS`]) until `cancel` fires; if espeak-ng fails, the shipped words are used. Empty (or
/// whitespace-only) text gives empty speech.
pub fn synthesize_with(
    text: &str,
    voice: &str,
    speed: f64,
    synth: Synth,
    cancel: &CancelToken,
) -> Result<Speech, Cancelled> {
    let text = bounded(text);
    if text.split_whitespace().next().is_none() {
        return Ok(Speech {
            pcm48k: Vec::new(),
            words: Vec::new(),
            engine: synth,
        });
    }
    let speed = speed.clamp(*SPEEDS.start(), *SPEEDS.end());
    if synth == Synth::Espeak {
        match espeak::speak(text, espeak::voice(voice), speed, cancel) {
            Ok(speech) => return Ok(speech),
            Err(espeak::Stop::Cancelled { produced_ms }) => return Err(Cancelled { produced_ms }),
            Err(espeak::Stop::Failed(e)) => {
                log::warn!("espeak-ng failed ({e}); speaking with the shipped words")
            }
        }
    }
    Ok(words::speak(text, cancel)?.faster(speed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::test_signal::rms_dbfs;

    /// Checks speech is audible, words are in order and inside the audio, and about as long as
    /// the text needs.
    fn check_speech(s: &Speech, text: &str) {
        let tokens: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(
            s.words.iter().map(|(w, _)| w.as_str()).collect::<Vec<_>>(),
            tokens
        );
        assert!(s.words.windows(2).all(|w| w[0].1 < w[1].1), "{:?}", s.words);
        assert!(s.words.last().unwrap().1 < s.duration_ms());
        let ms_per_word = s.duration_ms() / tokens.len() as u64;
        assert!((150..=900).contains(&ms_per_word), "{ms_per_word} ms/word");
        let level = rms_dbfs(&s.pcm48k);
        assert!(level > -35.0, "speech level {level:.1} dBFS");
    }

    #[test]
    fn detected_synth_speaks() {
        let text = "Hello from voice edge, this is a test of the text to speech model.";
        let s = synthesize(text, "alloy");
        assert_eq!(s.engine, Synth::detect());
        check_speech(&s, text);
        println!(
            "synthesize() used {:?}: {} words, {} ms",
            s.engine,
            s.words.len(),
            s.duration_ms()
        );
    }

    #[test]
    fn shipped_words_speak_and_spell() {
        let text = "Hello, this is the voice edge stub. Zyx 42!";
        let s = synthesize_with(text, "ash", 1.0, Synth::Shipped, &CancelToken::new()).unwrap();
        assert_eq!(s.engine, Synth::Shipped);
        check_speech(&s, text);
        // Each known word starts on its clip: the audio there is not silent.
        for (w, ms) in &s.words {
            let at = *ms as usize * 48;
            let head = &s.pcm48k[at..(at + 4800).min(s.pcm48k.len())];
            assert!(rms_dbfs(head) > -45.0, "{w} at {ms} ms is silent");
        }
        // "Zyx" is spelled: three letters, so longer than a short word.
        let zyx = s.words[7].1 - s.words[6].1;
        assert!(zyx > 450, "{zyx} ms");
    }

    #[test]
    fn unsayable_text_is_still_not_silence() {
        let never = CancelToken::new();
        let s = synthesize_with("… ☺ 日本", "alloy", 1.0, Synth::Shipped, &never).unwrap();
        assert_eq!(s.words.len(), 3);
        assert!(rms_dbfs(&s.pcm48k) > -40.0);
        let empty = synthesize_with("  \n ", "alloy", 1.0, Synth::Espeak, &never).unwrap();
        assert!(empty.pcm48k.is_empty() && empty.words.is_empty());
    }

    /// `audio.output.speed` changes how long the same text takes, with either synthesizer, and
    /// the word times follow the audio.
    #[test]
    fn speed_sets_the_speaking_rate() {
        let text = "Hello from voice edge.";
        let mut synths = vec![Synth::Shipped];
        if Synth::detect() == Synth::Espeak {
            synths.push(Synth::Espeak);
        }
        for synth in synths {
            let at =
                |speed| synthesize_with(text, "alloy", speed, synth, &CancelToken::new()).unwrap();
            let normal = at(1.0);
            // 0.25 is below espeak-ng's slowest rate: a resample does the rest.
            for (speed, want) in [(1.5, 1.5), (0.25, 0.25)] {
                let s = at(speed);
                assert_eq!(s.words.len(), 4);
                assert!(s.words.windows(2).all(|w| w[0].1 < w[1].1), "{:?}", s.words);
                assert!(s.words.last().unwrap().1 < s.duration_ms());
                let ratio = normal.duration_ms() as f64 / s.duration_ms() as f64;
                println!("{synth:?} at {speed}: {} ms, {ratio:.2}x", s.duration_ms());
                assert!(
                    (want * 0.75..want * 1.3).contains(&ratio),
                    "{synth:?} at speed {speed}: {} ms against {} ms ({ratio:.2}x)",
                    s.duration_ms(),
                    normal.duration_ms()
                );
            }
        }
    }
}
