//! The espeak-ng backend: real speech from a subprocess, bounded in time and size, stopped
//! (and the process killed) the moment its job is cancelled, with word starts estimated because
//! espeak-ng reports none on a pipe.
//!
//! The job's own thread does all the I/O: the text is written whole before anything is read
//! (it is at most [`super::MAX_TEXT_BYTES`], which an empty pipe always holds, so the write
//! never waits for the child), then the output is read as the run's own poller reports it, with
//! the cancel token holding that poller's waker so a cancel interrupts the wait. No helper
//! threads.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::cancel::CancelToken;
use super::{Speech, Synth};
use crate::audio::resample::resample_to_48k;
use crate::audio::wav::parse_wav;
use crate::wakeup::Sleeper;

/// How long espeak-ng may run before it is killed and the shipped words are used.
const ESPEAK_TIMEOUT: Duration = Duration::from_secs(5);
/// More WAV than this is refused (the child killed): bounded text is about 5 minutes of speech,
/// 13 MB at espeak-ng's 22.05 kHz, so anything past this is a misbehaving synthesizer.
const MAX_WAV_BYTES: usize = 32 << 20;
/// espeak-ng's WAV is 22.05 kHz mono 16-bit: 44.1 bytes per ms, for reporting how much audio a
/// cancelled job had made.
const WAV_BYTES_PER_MS: u64 = 44;

/// Why espeak-ng gave no speech.
#[derive(Debug)]
pub(super) enum Stop {
    /// The job was cancelled; the audio it had read by then, in ms.
    Cancelled { produced_ms: u64 },
    /// Failed, timed out or produced nothing usable; the caller falls back to the shipped words.
    Failed(std::io::Error),
}

impl From<std::io::Error> for Stop {
    fn from(e: std::io::Error) -> Self {
        Stop::Failed(e)
    }
}

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
    cancel: &CancelToken,
) -> Result<Vec<u8>, Stop> {
    let mut cmd = Command::new("espeak-ng");
    cmd.args(["--stdin", "--stdout", "-v", voice, "-s"])
        .arg(words_per_minute.to_string());
    run_bounded(cmd, text, ESPEAK_TIMEOUT, cancel)
}

/// Runs `cmd` with `input` on its stdin and returns its stdout; kills it when `cancel` fires,
/// after `timeout`, or past [`MAX_WAV_BYTES`]. The child is always waited for, so none is left
/// behind.
fn run_bounded(
    mut cmd: Command,
    input: &str,
    timeout: Duration,
    cancel: &CancelToken,
) -> Result<Vec<u8>, Stop> {
    if cancel.is_cancelled() {
        return Err(Stop::Cancelled { produced_ms: 0 });
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    debug_assert!(input.len() <= super::MAX_TEXT_BYTES);
    {
        let mut stdin = child.stdin.take().expect("piped");
        // A child that exits without reading gives a broken pipe: its status says what went
        // wrong. Dropping stdin ends the input.
        let _ = stdin.write_all(input.as_bytes());
    }
    let mut stdout = child.stdout.take().expect("piped");
    let deadline = Instant::now() + timeout;
    let mut sleeper = Sleeper::new()?;
    if let Err(e) = sleeper.watch(stdout.as_fd(), 0) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e.into());
    }
    // The flag is checked at the top of every turn, after this: a cancel racing it is seen.
    cancel.set_waker(Some(sleeper.waker()));
    let read = read_until_end(&mut stdout, &mut sleeper, deadline, cancel);
    cancel.set_waker(None);
    sleeper.unwatch(stdout.as_fd());
    let out = match read {
        Ok(out) => out,
        Err(stop) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(stop);
        }
    };
    // End of output: the child is exiting.
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if cancel.is_cancelled() || Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(if cancel.is_cancelled() {
                Stop::Cancelled {
                    produced_ms: out.len() as u64 / WAV_BYTES_PER_MS,
                }
            } else {
                Stop::Failed(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "synthesizer did not exit",
                ))
            });
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    if !status.success() {
        return Err(Stop::Failed(std::io::Error::other(format!(
            "synthesizer exited with {status}"
        ))));
    }
    Ok(out)
}

/// Reads the child's output to its end, unless `cancel` fires, `deadline` passes or the output
/// grows past [`MAX_WAV_BYTES`].
fn read_until_end(
    stdout: &mut std::process::ChildStdout,
    sleeper: &mut Sleeper,
    deadline: Instant,
    cancel: &CancelToken,
) -> Result<Vec<u8>, Stop> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let read = loop {
        if cancel.is_cancelled() {
            break Err(Stop::Cancelled {
                produced_ms: out.len() as u64 / WAV_BYTES_PER_MS,
            });
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Err(Stop::Failed(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "synthesizer timed out",
            )));
        }
        sleeper.wait(Some(left));
        if !sleeper.is_ready(0) {
            continue; // a cancel (the flag says whether it was this job's) or the timeout
        }
        // The poller said readable: this returns data or end of file without blocking.
        match stdout.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) if out.len() + n > MAX_WAV_BYTES => {
                break Err(Stop::Failed(std::io::Error::other(format!(
                    "synthesizer output exceeds {MAX_WAV_BYTES} bytes"
                ))));
            }
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err(Stop::Failed(e)),
        }
    };
    read.map(|()| out)
}

/// espeak-ng's own rate, words per minute: what speed 1.0 is.
pub(super) const NORMAL_WPM: f64 = 175.0;
/// The rates espeak-ng takes.
const WPM_RANGE: std::ops::RangeInclusive<f64> = 80.0..=450.0;

/// Speaks `text` with espeak-ng at `speed` times its normal rate; word times are estimated
/// (see the module docs). Below 80 words a minute (speed < 0.46), which espeak-ng does not go,
/// the rest of the slowing is a resample, as the shipped words get.
pub(super) fn speak(
    text: &str,
    voice: &str,
    speed: f64,
    cancel: &CancelToken,
) -> Result<Speech, Stop> {
    let wpm = (NORMAL_WPM * speed).clamp(*WPM_RANGE.start(), *WPM_RANGE.end());
    let speech = speak_at(text, voice, wpm.round() as u32, cancel)?;
    Ok(speech.faster(NORMAL_WPM * speed / wpm))
}

fn speak_at(text: &str, voice: &str, wpm: u32, cancel: &CancelToken) -> Result<Speech, Stop> {
    let wav = run_espeak(text, voice, wpm, cancel)?;
    if cancel.is_cancelled() {
        return Err(Stop::Cancelled {
            produced_ms: wav.len() as u64 / WAV_BYTES_PER_MS,
        });
    }
    let (rate, pcm) = parse_wav(&wav).map_err(std::io::Error::other)?;
    let pcm48k = resample_to_48k(&pcm, rate);
    let (a, b) = voiced_span(&pcm48k, 200);
    if a >= b {
        return Err(Stop::Failed(std::io::Error::other(
            "espeak-ng produced no audio",
        )));
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

    /// Pids of this process's children whose command line is exactly `args`.
    fn children_running(args: &[&str]) -> Vec<u32> {
        let me = std::process::id().to_string();
        let want: Vec<u8> = args
            .iter()
            .flat_map(|a| [a.as_bytes(), b"\0"].concat())
            .collect();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|p| {
                let pid: u32 = p.file_name().to_str()?.parse().ok()?;
                let stat = std::fs::read_to_string(p.path().join("stat")).ok()?;
                let ppid = stat.rsplit_once(") ")?.1.split(' ').nth(1)?.to_owned();
                let cmdline = std::fs::read(p.path().join("cmdline")).ok()?;
                (ppid == me && cmdline == want).then_some(pid)
            })
            .collect()
    }

    #[test]
    fn a_hung_synthesizer_is_killed_in_time() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let never = CancelToken::new();
        let err = run_bounded(cmd, "text", Duration::from_millis(200), &never).unwrap_err();
        assert!(
            matches!(&err, Stop::Failed(e) if e.kind() == std::io::ErrorKind::TimedOut),
            "{err:?}"
        );
        // A missing program is an error too (and synthesize falls back to the shipped words).
        let missing = Command::new("/nonexistent/espeak-ng");
        assert!(matches!(
            run_bounded(missing, "x", ESPEAK_TIMEOUT, &never),
            Err(Stop::Failed(_))
        ));
    }

    /// The cancel comes from another thread while the child runs; the run ends cancelled and the
    /// child is gone (killed and reaped), long before its own 3,600 s or the hour's timeout.
    #[test]
    fn a_cancel_kills_the_running_child() {
        let args = ["sleep", "3599.25"]; // a command line no other test runs
        let cancel = CancelToken::new();
        let canceller = {
            let cancel = cancel.clone();
            std::thread::spawn(move || {
                // Wait for the child to exist (no timing: as long as it takes).
                let pid = loop {
                    if let Some(&pid) = children_running(&args).first() {
                        break pid;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                };
                cancel.cancel();
                pid
            })
        };
        let mut cmd = Command::new(args[0]);
        cmd.arg(args[1]);
        let r = run_bounded(cmd, "text", Duration::from_secs(3600), &cancel);
        assert!(
            matches!(r, Err(Stop::Cancelled { produced_ms: 0 })),
            "{r:?}"
        );
        let pid = canceller.join().unwrap();
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "child {pid} is still there"
        );
        // Already cancelled: nothing is started at all.
        let mut cmd = Command::new(args[0]);
        cmd.arg(args[1]);
        assert!(matches!(
            run_bounded(cmd, "text", Duration::from_secs(3600), &cancel),
            Err(Stop::Cancelled { produced_ms: 0 })
        ));
        assert!(children_running(&args).is_empty());
    }

    #[test]
    fn voices_map_to_espeak_variants() {
        assert_eq!(voice("Coral"), "en-us+f3");
        assert_eq!(voice("unknown; rm -rf /"), "en-us");
    }
}
