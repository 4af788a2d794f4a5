//! The espeak-ng backend: real speech from a subprocess, bounded in time, with word starts
//! estimated because espeak-ng reports none on a pipe.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Speech, Synth};
use crate::audio::resample::resample_to_48k;
use crate::audio::wav::parse_wav;

/// How long espeak-ng may run before it is killed and the shipped words are used.
const ESPEAK_TIMEOUT: Duration = Duration::from_secs(5);

/// The Realtime voice names mapped to espeak-ng English variants of a similar register.
pub(super) fn voice(voice: &str) -> &'static str {
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

pub(super) fn run_espeak(
    text: &str,
    voice: &str,
    words_per_minute: u32,
) -> std::io::Result<Vec<u8>> {
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

/// Speaks `text` with espeak-ng; word times are estimated (see the module docs).
pub(super) fn speak(text: &str, voice: &str) -> std::io::Result<Speech> {
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

/// First and one-past-last sample whose magnitude exceeds `level`.
pub(super) fn voiced_span(pcm: &[i16], level: i16) -> (usize, usize) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(voice("Coral"), "en-us+f3");
        assert_eq!(voice("unknown; rm -rf /"), "en-us");
    }
}
