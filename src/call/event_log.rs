//! The per-call event log: every Realtime event on a call's `oai-events` channel, both ways, in
//! order and timed, served as JSON Lines at `GET /v1/realtime/calls/{id}/events` so a test can
//! assert on exactly what crossed the wire and a bug report can carry it.
//!
//! Recording happens on the worker's socket loop for every frame, so it only stores the frame
//! text it already has: server frames are the engine's compact JSON, taken as they are; client
//! frames are checked once (a validating parse that builds nothing) so a line never embeds
//! broken JSON. The lines themselves are built only when someone reads the log.
//!
//! A live call's log belongs to its session; when the call ends the log moves, without a copy,
//! into the transceiver's [`EndedLogs`], where a test that hung up can still fetch it.

use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Events stored per call; later ones are only counted (see [`EventLog::dropped`]).
pub const MAX_EVENTS: usize = 20_000;
/// Bytes of event JSON stored per call: a client can send as much as it likes, and the log
/// must not grow with it.
pub const MAX_BYTES: usize = 8 << 20;
/// How much of a client frame that is not JSON is kept: enough to see what it was.
pub const RAW_PREFIX: usize = 1024;
/// How long an ended call's log stays readable: long enough for a test or a person to fetch it
/// after hanging up.
pub const ENDED_TTL: Duration = Duration::from_secs(5 * 60);
/// Ended logs kept per transceiver, oldest dropped first.
pub const MAX_ENDED: usize = 256;
/// Bytes of ended logs kept per transceiver, oldest dropped first: without it, [`MAX_ENDED`]
/// calls that each filled [`MAX_BYTES`] would pin 2 GB for [`ENDED_TTL`].
pub const MAX_ENDED_BYTES: usize = 128 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Received from the client.
    Client,
    /// Sent to the client.
    Server,
}

struct Entry {
    /// Since the call was created.
    t_us: u64,
    dir: Dir,
    /// JSON text on one line, or for a client frame that is not JSON, its first
    /// [`RAW_PREFIX`] bytes.
    text: Box<str>,
    json: bool,
}

pub struct EventLog {
    created: Instant,
    /// The wall clock at `created`, so `at` follows the same monotonic clock as `t_ms`.
    created_unix_us: u64,
    entries: Vec<Entry>,
    bytes: usize,
    dropped: u64,
}

impl EventLog {
    pub fn new(created: Instant, created_unix_us: u64) -> Self {
        EventLog {
            created,
            created_unix_us,
            entries: Vec::new(),
            bytes: 0,
            dropped: 0,
        }
    }

    /// A log whose wall-clock origin is now.
    pub fn starting(created: Instant) -> Self {
        Self::new(created, crate::unix_time::now_us())
    }

    /// A frame the engine sent: its compact JSON is stored as it is.
    pub fn record_server(&mut self, now: Instant, frame: &str) {
        if self.full(frame.len()) {
            return;
        }
        self.push(now, Dir::Server, frame.into(), true);
    }

    /// A text frame the client sent. Valid JSON is stored as it came, except that line breaks
    /// between tokens become spaces (JSON strings cannot hold raw ones, so nothing else
    /// changes) to keep one event per line; anything else keeps its first [`RAW_PREFIX`] bytes.
    pub fn record_client(&mut self, now: Instant, text: &str) {
        let json = serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok();
        let kept = if json {
            text
        } else {
            let mut end = text.len().min(RAW_PREFIX);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            &text[..end]
        };
        if self.full(kept.len()) {
            return;
        }
        let stored: Box<str> = if json && kept.contains(['\n', '\r']) {
            kept.replace(['\n', '\r'], " ").into()
        } else {
            kept.into()
        };
        self.push(now, Dir::Client, stored, json);
    }

    /// Counts the event as dropped when it would pass a bound. Once one is dropped all later
    /// ones are too, so the stored log never has a hole in the middle.
    fn full(&mut self, len: usize) -> bool {
        let full =
            self.dropped > 0 || self.entries.len() >= MAX_EVENTS || self.bytes + len > MAX_BYTES;
        if full {
            self.dropped += 1;
        }
        full
    }

    fn push(&mut self, now: Instant, dir: Dir, text: Box<str>, json: bool) {
        self.bytes += text.len();
        self.entries.push(Entry {
            t_us: now.saturating_duration_since(self.created).as_micros() as u64,
            dir,
            text,
            json,
        });
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Events counted but not stored.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Bytes of event text held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The JSON Lines for events with `seq >= since`, then the truncation note if events were
    /// dropped (its `seq` is the first one not stored).
    pub fn render(&self, since: u64) -> String {
        let from = usize::try_from(since)
            .unwrap_or(usize::MAX)
            .min(self.entries.len());
        let tail = &self.entries[from..];
        let mut out =
            String::with_capacity(tail.iter().map(|e| e.text.len() + 96).sum::<usize>() + 96);
        for (i, e) in tail.iter().enumerate() {
            let dir = match e.dir {
                Dir::Client => "client",
                Dir::Server => "server",
            };
            // Rounded to 0.1 ms in integers: float formatting would round 12.45 down.
            let tenths = (e.t_us + 50) / 100;
            let _ = write!(
                out,
                r#"{{"seq":{},"t_ms":{}.{},"at":{},"dir":"{dir}","event":"#,
                from + i,
                tenths / 10,
                tenths % 10,
                (self.created_unix_us + e.t_us) / 1000,
            );
            if e.json {
                out.push_str(&e.text);
            } else {
                out.push_str(r#"null,"raw":"#);
                out.push_str(&serde_json::to_string(&*e.text).unwrap_or_default());
            }
            out.push_str("}\n");
        }
        let end = self.entries.len() as u64;
        if self.dropped > 0 && since <= end {
            let _ = writeln!(
                out,
                r#"{{"seq":{end},"dir":"note","event":{{"type":"log.truncated","dropped":{}}}}}"#,
                self.dropped
            );
        }
        out
    }
}

/// The logs of a transceiver's ended calls, shared by its workers (which put them here) and
/// its handle (which reads them without troubling a worker).
pub type SharedEndedLogs = Arc<Mutex<EndedLogs>>;

pub struct EndedLogs {
    /// In the order the calls ended, oldest first.
    logs: VecDeque<Ended>,
    bytes: usize,
    max_logs: usize,
    max_bytes: usize,
}

impl Default for EndedLogs {
    fn default() -> Self {
        EndedLogs {
            logs: VecDeque::new(),
            bytes: 0,
            max_logs: MAX_ENDED,
            max_bytes: MAX_ENDED_BYTES,
        }
    }
}

struct Ended {
    call_id: String,
    at: Instant,
    log: Arc<EventLog>,
}

impl EndedLogs {
    pub fn shared() -> SharedEndedLogs {
        Arc::default()
    }

    /// Keeps the log of a call that ended `now`, dropping the oldest to stay in bounds.
    pub fn insert(&mut self, now: Instant, call_id: String, log: EventLog) {
        self.expire(now);
        self.bytes += log.bytes();
        self.logs.push_back(Ended {
            call_id,
            at: now,
            log: Arc::new(log),
        });
        while self.logs.len() > self.max_logs || self.bytes > self.max_bytes {
            self.pop_oldest();
        }
    }

    /// The ended call's log, if still kept. Shared, so the caller renders it outside the lock.
    pub fn get(&mut self, now: Instant, call_id: &str) -> Option<Arc<EventLog>> {
        self.expire(now);
        self.logs
            .iter()
            .find(|e| e.call_id == call_id)
            .map(|e| e.log.clone())
    }

    pub fn len(&self) -> usize {
        self.logs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.logs.is_empty()
    }

    fn expire(&mut self, now: Instant) {
        while self
            .logs
            .front()
            .is_some_and(|e| now.saturating_duration_since(e.at) >= ENDED_TTL)
        {
            self.pop_oldest();
        }
    }

    fn pop_oldest(&mut self) {
        if let Some(e) = self.logs.pop_front() {
            self.bytes -= e.log.bytes();
        }
    }
}

/// The store's lock. Every change under it is one push or pop, so a holder that panicked left it
/// whole, and a poisoned lock is used as it is rather than spreading the panic to the worker.
pub fn lock(logs: &SharedEndedLogs) -> std::sync::MutexGuard<'_, EndedLogs> {
    logs.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An ended call's log from `since` as JSON Lines, rendered outside the lock so a large log
/// never holds up a worker that is storing another.
pub fn read_ended(
    logs: &SharedEndedLogs,
    now: Instant,
    call_id: &str,
    since: u64,
) -> Option<String> {
    let log = lock(logs).get(now, call_id)?;
    Some(log.render(since))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn lines(s: &str) -> Vec<Value> {
        assert!(s.is_empty() || s.ends_with('\n'), "{s:?}");
        s.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    const T0_US: u64 = 1_764_554_000_123_000;

    #[test]
    fn lines_carry_seq_time_direction_and_the_event_as_it_was() {
        let t0 = Instant::now();
        let mut log = EventLog::new(t0, T0_US);
        log.record_server(
            t0 + Duration::from_micros(12_450),
            r#"{"type":"session.created","event_id":"ev_1"}"#,
        );
        log.record_client(
            t0 + Duration::from_millis(20),
            "{\n  \"type\": \"session.update\",\r\n  \"session\": {\"instructions\": \"a\\nb\"}\n}",
        );
        log.record_client(t0 + Duration::from_millis(30), "not json {");
        let out = lines(&log.render(0));
        assert_eq!(out.len(), 3);
        assert_eq!(
            out[0],
            json!({"seq": 0, "t_ms": 12.5, "at": 1_764_554_000_135u64, "dir": "server",
                   "event": {"type": "session.created", "event_id": "ev_1"}})
        );
        assert_eq!(out[1]["dir"], "client");
        assert_eq!(out[1]["t_ms"], 20.0);
        assert_eq!(out[1]["event"]["session"]["instructions"], "a\nb");
        assert_eq!(out[2]["event"], Value::Null);
        assert_eq!(out[2]["raw"], "not json {");
        // since= skips what was already read.
        let tail = lines(&log.render(2));
        assert_eq!(tail.len(), 1);
        assert_eq!(tail[0]["seq"], 2);
        assert_eq!(log.render(3), "");
        assert_eq!(log.render(u64::MAX), "");
    }

    #[test]
    fn a_frame_that_is_not_json_keeps_its_first_kilobyte() {
        let t0 = Instant::now();
        let mut log = EventLog::new(t0, T0_US);
        let long = "é".repeat(RAW_PREFIX); // 2 bytes each: the cut lands inside one
        log.record_client(t0, &long);
        let raw = lines(&log.render(0))[0]["raw"].as_str().unwrap().to_owned();
        assert_eq!(raw.len(), RAW_PREFIX);
        assert!(long.starts_with(&raw));
    }

    #[test]
    fn past_the_event_bound_events_are_counted_and_a_note_ends_the_log() {
        let t0 = Instant::now();
        let mut log = EventLog::new(t0, T0_US);
        for i in 0..MAX_EVENTS + 5 {
            log.record_server(t0, &format!(r#"{{"type":"x","n":{i}}}"#));
        }
        assert_eq!((log.len(), log.dropped()), (MAX_EVENTS, 5));
        let out = lines(&log.render(MAX_EVENTS as u64 - 1));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0]["event"]["n"], MAX_EVENTS - 1);
        assert_eq!(
            out[1],
            json!({"seq": MAX_EVENTS, "dir": "note",
                   "event": {"type": "log.truncated", "dropped": 5}})
        );
        // Polling from the end still sees the note; past it, nothing.
        assert_eq!(lines(&log.render(MAX_EVENTS as u64)).len(), 1);
        assert_eq!(log.render(MAX_EVENTS as u64 + 1), "");
    }

    #[test]
    fn past_the_byte_bound_nothing_more_is_stored_even_if_small() {
        let t0 = Instant::now();
        let mut log = EventLog::new(t0, T0_US);
        let big = format!(r#"{{"type":"x","pad":"{}"}}"#, "p".repeat(MAX_BYTES / 3));
        for _ in 0..3 {
            log.record_client(t0, &big);
        }
        assert_eq!((log.len(), log.dropped()), (2, 1));
        log.record_server(t0, r#"{"type":"small"}"#);
        assert_eq!((log.len(), log.dropped()), (2, 2), "no hole after a drop");
        assert!(log.bytes() <= MAX_BYTES);
        let out = lines(&log.render(0));
        assert_eq!(out.last().unwrap()["event"]["dropped"], 2);
        assert_eq!(out.last().unwrap()["seq"], 2);
    }

    fn log_of(t0: Instant, n: usize) -> EventLog {
        let mut log = EventLog::new(t0, T0_US);
        for _ in 0..n {
            log.record_server(t0, r#"{"type":"x"}"#);
        }
        log
    }

    #[test]
    fn ended_logs_expire_after_their_ttl() {
        let t0 = Instant::now();
        let mut ended = EndedLogs::default();
        ended.insert(t0, "rtc_a".into(), log_of(t0, 1));
        ended.insert(t0 + Duration::from_secs(60), "rtc_b".into(), log_of(t0, 2));
        let just_before = t0 + ENDED_TTL - Duration::from_millis(1);
        assert_eq!(ended.get(just_before, "rtc_a").unwrap().len(), 1);
        assert!(ended.get(t0 + ENDED_TTL, "rtc_a").is_none());
        assert_eq!(ended.get(t0 + ENDED_TTL, "rtc_b").unwrap().len(), 2);
        assert_eq!(ended.len(), 1);
        assert!(
            ended
                .get(t0 + Duration::from_secs(60) + ENDED_TTL, "rtc_b")
                .is_none()
        );
        assert!(ended.is_empty());
        assert_eq!(ended.bytes, 0);
    }

    #[test]
    fn beyond_the_count_or_byte_bound_the_oldest_ended_log_goes_first() {
        let t0 = Instant::now();
        let mut ended = EndedLogs::default();
        for i in 0..MAX_ENDED + 2 {
            ended.insert(t0, format!("rtc_{i}"), log_of(t0, 1));
        }
        assert_eq!(ended.len(), MAX_ENDED);
        assert!(ended.get(t0, "rtc_0").is_none());
        assert!(ended.get(t0, "rtc_1").is_none());
        assert!(ended.get(t0, "rtc_2").is_some());
        assert!(ended.get(t0, &format!("rtc_{}", MAX_ENDED + 1)).is_some());

        // The byte budget (scaled down here) drops the oldest too, before the count is reached.
        let mut ended = EndedLogs {
            max_bytes: 100,
            ..EndedLogs::default()
        };
        for i in 0..4 {
            ended.insert(t0, format!("rtc_{i}"), log_of(t0, 3)); // 36 bytes each
        }
        assert_eq!(ended.len(), 2);
        assert_eq!(ended.bytes, 72);
        assert!(ended.get(t0, "rtc_1").is_none());
        assert!(ended.get(t0, "rtc_2").is_some());
    }
}
