//! The shipped-words backend: a pack of Opus clips compiled into the binary, so the TTS stub
//! says the text (and a transcript matches its audio) on a machine without espeak-ng.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::cancel::CancelToken;
#[cfg(test)]
use super::espeak::{Stop, run_espeak, voiced_span};
use super::{Cancelled, Speech, Synth};
use crate::audio::codec::{FRAME_SAMPLES, OpusDecoder};
#[cfg(test)]
use crate::audio::{resample::resample, wav::parse_wav};

/// Words in the shipped pack; `#x` is the name of the letter or digit `x`, used for spelling.
/// Only the test that checks (and rebuilds) the pack reads it: at run time the pack is the list.
#[cfg(test)]
const VOCABULARY: &str = "\
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

/// Speaks `text` from the shipped pack, spelling the words it lacks; stops between words once
/// `cancel` fires.
pub(super) fn speak(text: &str, cancel: &CancelToken) -> Result<Speech, Cancelled> {
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
        if cancel.is_cancelled() {
            return Err(Cancelled {
                produced_ms: pcm.len() as u64 / 48,
            });
        }
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
    Ok(Speech {
        pcm48k: pcm,
        words,
        engine: Synth::Shipped,
    })
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
        let wav = match run_espeak(spoken, "en-us", 210, &CancelToken::new()) {
            Ok(wav) => wav,
            Err(Stop::Failed(e)) => return Err(e),
            Err(Stop::Cancelled { .. }) => unreachable!("never cancelled"),
        };
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
    use crate::audio::test_signal::rms_dbfs;

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
    fn normalize_keeps_letters_digits_and_apostrophes() {
        assert_eq!(normalize("Hello,"), "hello");
        assert_eq!(normalize("Don’t"), "don't");
        assert_eq!(normalize("'quoted'"), "quoted");
        assert_eq!(normalize("WebRTC."), "webrtc");
    }
}
