//! Text to speech for the TTS stub model: real speech when `espeak-ng` is installed, audio the
//! binary ships otherwise — never silence.
//!
//! - **espeak-ng** (Debian package `espeak-ng`): the text goes in on stdin (so nothing in it can
//!   be read as an option), a WAV (22.05 kHz mono 16-bit) comes back on stdout, is resampled to
//!   48 kHz and word start times are estimated by character count within the voiced span, with
//!   extra weight for the pauses espeak makes at punctuation. The subprocess is killed after 5 s.
//!   **It blocks for tens of milliseconds: call it off any latency-critical thread** (a blocking
//!   pool or a thread of its own), never on a transceiver socket loop.
//! - **Shipped words** (`fixtures/tts/words.bin`, ~210 KB, compiled in): about 340 common English
//!   words, the letters and the digits, each spoken once by espeak-ng (voice en-us) and stored
//!   as 12 kbps SILK wideband Opus. Text is read word by word from it; a word not in it is
//!   spelled out letter by letter. Word times are exact (the start of each clip). It is robotic
//!   but says the text, so a transcript still matches the audio on a machine without espeak-ng.
//!   The Realtime voice does not change it.
//!
//! The pack is rebuilt by `VOICE_EDGE_REGEN_TTS=1 cargo test --release --lib audio::tts` (needs
//! espeak-ng) after editing [`VOCABULARY`].

use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::codec::{FRAME_SAMPLES, OpusDecoder};

/// How long espeak-ng may run before it is killed and the shipped words are used.
pub const ESPEAK_TIMEOUT: Duration = Duration::from_secs(5);
/// Longer text is cut here (about 5 minutes of speech).
pub const MAX_TEXT_CHARS: usize = 4000;

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

/// Speaks `text` with the best synthesizer on this machine. Blocking; see the module docs.
pub fn synthesize(text: &str, voice: &str) -> Speech {
    synthesize_with(text, voice, Synth::detect())
}

/// Speaks `text` with the given synthesizer; if espeak-ng fails, the shipped words are used.
/// Empty (or whitespace-only) text gives empty speech.
pub fn synthesize_with(text: &str, voice: &str, synth: Synth) -> Speech {
    let text = match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((i, _)) => &text[..i],
        None => text,
    };
    if text.split_whitespace().next().is_none() {
        return Speech {
            pcm48k: Vec::new(),
            words: Vec::new(),
            engine: synth,
        };
    }
    if synth == Synth::Espeak {
        match espeak(text, espeak_voice(voice)) {
            Ok(speech) => return speech,
            Err(e) => log::warn!("espeak-ng failed ({e}); speaking with the shipped words"),
        }
    }
    shipped(text)
}

/// The Realtime voice names mapped to espeak-ng English variants of a similar register.
pub fn espeak_voice(voice: &str) -> &'static str {
    match voice.to_ascii_lowercase().as_str() {
        "alloy" => "en-us+f2",
        "ash" => "en-us+m3",
        "ballad" => "en-gb+m1",
        "coral" => "en-us+f3",
        "echo" => "en-us+m1",
        "sage" => "en-us+f4",
        "shimmer" => "en-us+f5",
        "verse" => "en-us+m2",
        "marin" => "en-us+f1",
        "cedar" => "en-us+m7",
        _ => "en-us",
    }
}

// ---------------------------------------------------------------------------------------------
// espeak-ng

fn run_espeak(text: &str, voice: &str, words_per_minute: u32) -> std::io::Result<Vec<u8>> {
    let mut cmd = Command::new("espeak-ng");
    cmd.args(["--stdin", "--stdout", "-v", voice, "-s"])
        .arg(words_per_minute.to_string());
    run_bounded(cmd, text, ESPEAK_TIMEOUT)
}

/// Runs `cmd` with `input` on its stdin and returns its stdout, killing it after `timeout`.
fn run_bounded(mut cmd: Command, input: &str, timeout: Duration) -> std::io::Result<Vec<u8>> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    // Feed and drain on helper threads so a large text or output cannot deadlock the pipes. If
    // the child is killed they see a broken pipe or end of file and finish on their own.
    let mut stdin = child.stdin.take().expect("piped");
    let input = input.to_owned();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).map(|_| out)
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "synthesizer timed out",
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = writer.join();
    let out = reader
        .join()
        .map_err(|_| std::io::Error::other("reader panicked"))??;
    if !status.success() {
        return Err(std::io::Error::other(format!(
            "synthesizer exited with {status}"
        )));
    }
    Ok(out)
}

fn espeak(text: &str, voice: &str) -> std::io::Result<Speech> {
    let wav = run_espeak(text, voice, 175)?;
    let (rate, pcm) = parse_wav(&wav).map_err(std::io::Error::other)?;
    let pcm48k = resample_to_48k(&pcm, rate);
    let (a, b) = voiced_span(&pcm48k, 200);
    if a >= b {
        return Err(std::io::Error::other("espeak-ng produced no audio"));
    }
    // Character-count timing across the voiced span; punctuation weighs like the pause espeak
    // makes there.
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let weight = |w: &str| -> u64 {
        let letters = w.chars().filter(|c| c.is_alphanumeric()).count() as u64;
        let pause = match w.chars().last() {
            Some('.' | '!' | '?') => 6,
            Some(',' | ';' | ':') => 4,
            _ => 0,
        };
        letters.max(1) + 1 + pause
    };
    let total: u64 = tokens.iter().map(|w| weight(w)).sum();
    let span = (b - a) as u64;
    let mut acc = 0;
    let words = tokens
        .iter()
        .map(|w| {
            let start = (a as u64 + span * acc / total) / 48;
            acc += weight(w);
            ((*w).to_owned(), start)
        })
        .collect();
    Ok(Speech {
        pcm48k,
        words,
        engine: Synth::Espeak,
    })
}

/// Reads a 16-bit PCM WAV (any channel count, mixed down to mono). espeak-ng writing to a pipe
/// cannot seek back to fill in sizes, so a data chunk longer than the file means "to the end".
pub fn parse_wav(b: &[u8]) -> Result<(u32, Vec<i16>), &'static str> {
    if b.len() < 12 || &b[0..4] != b"RIFF" || &b[8..12] != b"WAVE" {
        return Err("not a RIFF/WAVE file");
    }
    let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let mut fmt: Option<(u16, u16, u32, u16)> = None;
    let mut i = 12;
    while i + 8 <= b.len() {
        let id = &b[i..i + 4];
        let size = u32_at(i + 4) as usize;
        let body = i + 8;
        if id == b"fmt " {
            if size < 16 || body + 16 > b.len() {
                return Err("short fmt chunk");
            }
            fmt = Some((
                u16_at(body),
                u16_at(body + 2),
                u32_at(body + 4),
                u16_at(body + 14),
            ));
        } else if id == b"data" {
            let (format, channels, rate, bits) = fmt.ok_or("data before fmt")?;
            // 1 = PCM; 0xFFFE = WAVE_FORMAT_EXTENSIBLE (assumed PCM at 16 bits).
            if !(format == 1 || format == 0xfffe) || bits != 16 || channels == 0 || rate == 0 {
                return Err("not 16-bit PCM");
            }
            let end = body.saturating_add(size).min(b.len());
            let ch = usize::from(channels);
            let pcm = b[body..end]
                .chunks_exact(2 * ch)
                .map(|frame| {
                    let sum: i32 = frame
                        .chunks_exact(2)
                        .map(|s| i32::from(i16::from_le_bytes([s[0], s[1]])))
                        .sum();
                    (sum / ch as i32) as i16
                })
                .collect();
            return Ok((rate, pcm));
        }
        i = body.saturating_add(size).saturating_add(size & 1);
    }
    Err("no data chunk")
}

/// Resamples mono PCM to 48 kHz; see [`resample`].
pub fn resample_to_48k(pcm: &[i16], rate: u32) -> Vec<i16> {
    resample(pcm, rate, 48_000)
}

/// Resamples mono PCM by linear interpolation, with a 63-tap windowed-sinc low-pass at 45 % of the
/// lower rate — after interpolating when upsampling (it removes the interpolation images, ≈ 70 dB
/// down), before when downsampling (against aliasing). Plenty for a test voice, and a few ms per
/// second of audio.
pub fn resample(pcm: &[i16], from: u32, to: u32) -> Vec<i16> {
    if from == to || pcm.is_empty() || from == 0 || to == 0 {
        return pcm.to_vec();
    }
    let x: Vec<f32> = pcm.iter().map(|&s| f32::from(s)).collect();
    let cutoff = 0.45 * from.min(to) as f32;
    let y = if to > from {
        fir(
            &interpolate(&x, from, to),
            &lowpass_taps(cutoff / to as f32),
        )
    } else {
        interpolate(&fir(&x, &lowpass_taps(cutoff / from as f32)), from, to)
    };
    y.iter()
        .map(|&v| v.round().clamp(-32768.0, 32767.0) as i16)
        .collect()
}

fn interpolate(x: &[f32], from: u32, to: u32) -> Vec<f32> {
    let out_len = (x.len() as u64 * u64::from(to) / u64::from(from)) as usize;
    let step = f64::from(from) / f64::from(to);
    (0..out_len)
        .map(|j| {
            let pos = j as f64 * step;
            let i = pos as usize;
            let f = (pos - i as f64) as f32;
            let a = x[i.min(x.len() - 1)];
            let b = x[(i + 1).min(x.len() - 1)];
            a + (b - a) * f
        })
        .collect()
}

/// Zero-phase FIR filtering (the taps are symmetric; the output is aligned with the input).
fn fir(x: &[f32], taps: &[f32]) -> Vec<f32> {
    let half = taps.len() / 2;
    (0..x.len())
        .map(|j| {
            taps.iter()
                .enumerate()
                .filter_map(|(k, &t)| {
                    (j + k)
                        .checked_sub(half)
                        .and_then(|i| x.get(i))
                        .map(|&v| t * v)
                })
                .sum()
        })
        .collect()
}

/// 63-tap Blackman-windowed sinc low-pass with cutoff `fc` (a fraction of the sample rate),
/// normalized to unity gain at DC.
fn lowpass_taps(fc: f32) -> Vec<f32> {
    const N: usize = 63;
    let mid = (N / 2) as f32;
    let mut taps: Vec<f32> = (0..N)
        .map(|n| {
            let x = n as f32 - mid;
            let sinc = if x == 0.0 {
                2.0 * fc
            } else {
                (2.0 * std::f32::consts::PI * fc * x).sin() / (std::f32::consts::PI * x)
            };
            let w = 2.0 * std::f32::consts::PI * n as f32 / (N - 1) as f32;
            sinc * (0.42 - 0.5 * w.cos() + 0.08 * (2.0 * w).cos())
        })
        .collect();
    let sum: f32 = taps.iter().sum();
    taps.iter_mut().for_each(|t| *t /= sum);
    taps
}

/// First and one-past-last sample whose magnitude exceeds `level`.
fn voiced_span(pcm: &[i16], level: i16) -> (usize, usize) {
    let a = pcm
        .iter()
        .position(|s| s.unsigned_abs() > level.unsigned_abs());
    let b = pcm
        .iter()
        .rposition(|s| s.unsigned_abs() > level.unsigned_abs());
    match (a, b) {
        (Some(a), Some(b)) => (a, b + 1),
        _ => (0, 0),
    }
}

// ---------------------------------------------------------------------------------------------
// Shipped words

/// Words in the shipped pack; `#x` is the name of the letter or digit `x`, used for spelling.
pub const VOCABULARY: &str = "\
a about above after again against all almost also always am an and another answer any anyone \
anything are around as ask asked at audio away back bad be because been before being below best \
better between big bit both but by call called can can't cannot change check clear close come \
could day did didn't different do does doesn't doing don't done down during each early echo edge \
else end enough even ever every example fast few find fine first five for four free from full \
get give go going good got great had has have having he hear heard hello help her here hey hi him \
his hold how however i i'm i've if in information into is isn't it it's its just keep kind know \
last late later least left let let's like line listen little long look lot made make many may \
maybe me mean message might minute model more morning most much must my name need never new next \
nice night no not nothing now number of off ok okay old on once one only open or other our out \
over part people play please point question quite ready real really reply response right said \
same say says second see seems send sentence server session set she should show side since small \
so some something sorry sound speak speaking speech start still stop such sure system take talk \
talking tell test testing text than thank thanks that that's the their them then there these \
they thing things think this those though three through time to today together too try turn two \
under understand until up us use used very voice wait want was way we welcome well were what \
what's when where which while who why will with word words work world would wrong yeah year yes \
yet you you're your zero six seven eight nine ten eleven twelve twenty thirty forty fifty hundred \
thousand million again later assistant agent browser call connected connection demo goodbye \
interrupt interrupted microphone moment noise quiet repeat stub tone web webrtc \
#a #b #c #d #e #f #g #h #i #j #k #l #m #n #o #p #q #r #s #t #u #v #w #x #y #z \
#0 #1 #2 #3 #4 #5 #6 #7 #8 #9";

static PACK: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fixtures/tts/words.bin"
));
const PACK_MAGIC: &[u8; 4] = b"VEW1";
/// Pack clips are encoded at this bitrate; espeak's 11 kHz-band voice needs no more.
#[cfg(test)]
const PACK_BITRATE: i32 = 12_000;
const WORD_GAP_MS: usize = 40;
const LETTER_GAP_MS: usize = 30;
const COMMA_PAUSE_MS: usize = 200;
const STOP_PAUSE_MS: usize = 350;

/// The pack's index: word → its Opus packets (borrowed from the compiled-in bytes).
struct Pack {
    preskip: usize,
    words: HashMap<&'static str, Vec<&'static [u8]>>,
}

fn pack() -> &'static Pack {
    static INDEX: OnceLock<Pack> = OnceLock::new();
    INDEX.get_or_init(|| parse_pack(PACK).expect("fixtures/tts/words.bin is well formed"))
}

fn parse_pack(b: &'static [u8]) -> Result<Pack, &'static str> {
    let mut r = b;
    let mut take = |n: usize| -> Result<&'static [u8], &'static str> {
        if r.len() < n {
            return Err("truncated pack");
        }
        let (head, rest) = r.split_at(n);
        r = rest;
        Ok(head)
    };
    if take(4)? != PACK_MAGIC {
        return Err("bad magic");
    }
    let u16_of = |s: &[u8]| usize::from(u16::from_le_bytes([s[0], s[1]]));
    let preskip = u16_of(take(2)?);
    let count = u16_of(take(2)?);
    let mut words = HashMap::with_capacity(count);
    for _ in 0..count {
        let len = usize::from(take(1)?[0]);
        let word = std::str::from_utf8(take(len)?).map_err(|_| "bad word")?;
        let packets = u16_of(take(2)?);
        let mut clip = Vec::with_capacity(packets);
        for _ in 0..packets {
            let len = usize::from(take(1)?[0]);
            clip.push(take(len)?);
        }
        words.insert(word, clip);
    }
    Ok(Pack { preskip, words })
}

fn decode_clip(pack: &Pack, packets: &[&[u8]]) -> Vec<i16> {
    let mut dec = OpusDecoder::new();
    let mut pcm = Vec::with_capacity(packets.len() * FRAME_SAMPLES);
    for p in packets {
        match dec.decode(p) {
            Ok(s) => pcm.extend_from_slice(s),
            Err(_) => pcm.extend_from_slice(dec.decode_lost(None)),
        }
    }
    pcm.drain(..pack.preskip.min(pcm.len()));
    pcm
}

/// Lower-case letters, digits and apostrophes of a word ("Hello," → "hello", "Don’t" → "don't").
fn normalize(word: &str) -> String {
    word.chars()
        .map(|c| if c == '’' { '\'' } else { c })
        .filter(|c| c.is_alphanumeric() || *c == '\'')
        .flat_map(char::to_lowercase)
        .collect::<String>()
        .trim_matches('\'')
        .to_owned()
}

fn shipped(text: &str) -> Speech {
    let pack = pack();
    let mut cache: HashMap<&str, Vec<i16>> = HashMap::new();
    let mut clip = |key: &str| -> Option<Vec<i16>> {
        let (k, packets) = pack.words.get_key_value(key)?;
        Some(
            cache
                .entry(k)
                .or_insert_with(|| decode_clip(pack, packets))
                .clone(),
        )
    };
    let silence = |pcm: &mut Vec<i16>, ms: usize| pcm.resize(pcm.len() + ms * 48, 0);
    let mut pcm = Vec::new();
    let mut words = Vec::new();
    for token in text.split_whitespace() {
        words.push((token.to_owned(), pcm.len() as u64 / 48));
        let w = normalize(token);
        if let Some(c) = clip(&w) {
            pcm.extend_from_slice(&c);
        } else {
            // Not in the pack: spell it.
            let mut first = true;
            for ch in w.chars().filter(char::is_ascii_alphanumeric) {
                if let Some(c) = clip(&format!("#{ch}")) {
                    if !first {
                        silence(&mut pcm, LETTER_GAP_MS);
                    }
                    first = false;
                    pcm.extend_from_slice(&c);
                }
            }
        }
        let pause = match token.chars().last() {
            Some('.' | '!' | '?') => STOP_PAUSE_MS,
            Some(',' | ';' | ':') => COMMA_PAUSE_MS,
            _ => WORD_GAP_MS,
        };
        silence(&mut pcm, pause);
    }
    // Nothing sayable at all (e.g. only symbols or non-Latin script): never answer with silence.
    if pcm.iter().all(|&s| s == 0) {
        let sorry = clip("sorry").unwrap_or_default();
        pcm.splice(0..0, sorry);
    }
    Speech {
        pcm48k: pcm,
        words,
        engine: Synth::Shipped,
    }
}

/// Builds the word pack with espeak-ng (from a test; see the module docs): each word spoken
/// alone, trimmed, and encoded as 20 ms SILK wideband Opus packets. (The pack is encoded at
/// 16 kHz because `opus-rs` keeps the full band at 48 kHz whatever the bitrate; any Opus decoder
/// plays it back at 48 kHz.)
#[cfg(test)]
fn build_pack(vocabulary: &str) -> std::io::Result<Vec<u8>> {
    const RATE: usize = 16_000;
    const FRAME: usize = RATE / 50;
    let preskip: u16 = 312; // the encoder's look-ahead, 6.5 ms, in 48 kHz samples
    let mut entries: Vec<&str> = vocabulary.split_whitespace().collect();
    entries.sort_unstable();
    entries.dedup();
    let mut out = Vec::new();
    out.extend_from_slice(PACK_MAGIC);
    out.extend_from_slice(&preskip.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    let mut packet = [0u8; 1500];
    for key in entries {
        // Letters and digits alone are read as their names.
        let spoken = key.strip_prefix('#').unwrap_or(key);
        // A little faster than running speech: words said alone are drawn out.
        let wav = run_espeak(spoken, "en-us", 210)?;
        let (rate, pcm) = parse_wav(&wav).map_err(std::io::Error::other)?;
        let pcm = resample(&pcm, rate, RATE as u32);
        let (a, b) = voiced_span(&pcm, 150);
        let mut clip = pcm[a..b].to_vec();
        // Room for the look-ahead, then whole frames.
        clip.resize(
            (clip.len() + usize::from(preskip) / 3).div_ceil(FRAME) * FRAME,
            0,
        );
        let mut enc = opus_rs::OpusEncoder::new(RATE as i32, 1, opus_rs::Application::Voip)
            .map_err(std::io::Error::other)?;
        enc.bitrate_bps = PACK_BITRATE;
        enc.complexity = 10;
        out.push(key.len() as u8);
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(&((clip.len() / FRAME) as u16).to_le_bytes());
        for frame in clip.chunks_exact(FRAME) {
            let n = enc
                .encode_i16(frame, FRAME, &mut packet)
                .map_err(std::io::Error::other)?;
            out.push(u8::try_from(n).map_err(|_| std::io::Error::other("packet > 255 B"))?);
            out.extend_from_slice(&packet[..n]);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rms_dbfs(x: &[i16]) -> f64 {
        let p = x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / x.len().max(1) as f64;
        10.0 * (p / 32768f64.powi(2) + 1e-13).log10()
    }

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
        let s = synthesize_with(text, "ash", Synth::Shipped);
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
        let s = synthesize_with("… ☺ 日本", "alloy", Synth::Shipped);
        assert_eq!(s.words.len(), 3);
        assert!(rms_dbfs(&s.pcm48k) > -40.0);
        let empty = synthesize_with("  \n ", "alloy", Synth::Espeak);
        assert!(empty.pcm48k.is_empty() && empty.words.is_empty());
    }

    #[test]
    fn shipped_pack_matches_vocabulary() {
        if std::env::var("VOICE_EDGE_REGEN_TTS").is_ok_and(|v| v == "1") {
            let bytes = build_pack(VOCABULARY).expect("espeak-ng is needed to rebuild the pack");
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/tts/words.bin");
            std::fs::write(path, &bytes).unwrap();
            println!("wrote {path}: {} bytes; rebuild to embed it", bytes.len());
            return;
        }
        let p = pack();
        let mut want: Vec<&str> = VOCABULARY.split_whitespace().collect();
        want.sort_unstable();
        want.dedup();
        let mut have: Vec<&str> = p.words.keys().copied().collect();
        have.sort_unstable();
        assert_eq!(
            have, want,
            "fixtures/tts/words.bin is stale: \
             VOICE_EDGE_REGEN_TTS=1 cargo test --release --lib audio::tts"
        );
        assert!(PACK.len() < 300_000, "{} bytes", PACK.len());
        for w in ["hello", "#z", "#7"] {
            let pcm = decode_clip(p, &p.words[w]);
            assert!(
                (100..1500).contains(&(pcm.len() / 48)),
                "{w}: {} ms",
                pcm.len() / 48
            );
            assert!(rms_dbfs(&pcm) > -30.0);
        }
    }

    #[test]
    fn wav_parsing_and_resampling() {
        let mut wav = Vec::new();
        wav.extend_from_slice(b"RIFF\x24\xf0\xff\x7fWAVE");
        wav.extend_from_slice(b"fmt \x10\0\0\0");
        wav.extend_from_slice(&1u16.to_le_bytes());
        wav.extend_from_slice(&2u16.to_le_bytes());
        wav.extend_from_slice(&22_050u32.to_le_bytes());
        wav.extend_from_slice(&(22_050u32 * 4).to_le_bytes());
        wav.extend_from_slice(&4u16.to_le_bytes());
        wav.extend_from_slice(&16u16.to_le_bytes());
        // A streamed data chunk: the size field says "huge".
        wav.extend_from_slice(b"data\x00\xf0\xff\x7f");
        for i in 0..22_050i32 {
            let s = ((i % 50) * 400 - 10_000) as i16;
            wav.extend_from_slice(&s.to_le_bytes());
            wav.extend_from_slice(&(s / 2).to_le_bytes());
        }
        let (rate, pcm) = parse_wav(&wav).unwrap();
        assert_eq!((rate, pcm.len()), (22_050, 22_050));
        assert_eq!(pcm[1], ((-9600 + -4800) / 2) as i16);
        let up = resample_to_48k(&pcm, rate);
        assert_eq!(up.len(), 48_000);
        assert!((rms_dbfs(&up) - rms_dbfs(&pcm)).abs() < 1.5);
        assert!(parse_wav(b"RIFF\0\0\0\0WAVE").is_err());
        assert!(parse_wav(b"not a wav").is_err());
    }

    #[test]
    fn normalize_keeps_letters_digits_and_apostrophes() {
        assert_eq!(normalize("Hello,"), "hello");
        assert_eq!(normalize("Don’t"), "don't");
        assert_eq!(normalize("'quoted'"), "quoted");
        assert_eq!(normalize("WebRTC."), "webrtc");
    }

    #[test]
    fn a_hung_synthesizer_is_killed_in_time() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let t = Instant::now();
        let err = run_bounded(cmd, "text", Duration::from_millis(200)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        // A missing program is an error too (and synthesize falls back to the shipped words).
        assert!(run_bounded(Command::new("/nonexistent/espeak-ng"), "x", ESPEAK_TIMEOUT).is_err());
    }

    #[test]
    fn voices_map_to_espeak_variants() {
        assert_eq!(espeak_voice("Coral"), "en-us+f3");
        assert_eq!(espeak_voice("unknown; rm -rf /"), "en-us");
    }
}
