//! The process's speech synthesizers: a fixed set of worker threads and a bounded queue.
//!
//! A thread (plus an espeak-ng process and two pipe threads) per request made threads and memory
//! grow with whatever clients asked for: 300 `response.create` + `response.cancel` pairs on one
//! call left 117 threads and 6.45 GB behind, all synthesizing speech nobody would hear. Here the
//! number of synthesizers is fixed, the wait for one is bounded (a full queue refuses at once,
//! and the caller fails that response with a clear error), and each job stops when its
//! [`CancelToken`] fires: a queued job is dropped, a running one is interrupted between words
//! or in its wait on espeak-ng, whose process is killed.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use super::cancel::CancelToken;
use super::{Cancelled, Speech, Synth, bounded, synthesize_with};

/// Synthesis workers in the process. espeak-ng keeps one core busy per job and the transceivers'
/// socket loops need the rest: two let one call's speech start while another's is being made (a
/// sentence takes tens of milliseconds) without taking the machine from the media path. A
/// constant, not a flag, because it is a property of the stub models, not of a deployment.
pub const WORKERS: usize = 2;

/// Jobs that may wait for a worker. A sentence takes tens of milliseconds and the longest text
/// about a second, so 32 waiting is at most seconds of delay; beyond that a reply would come so
/// late that failing it at once, saying why, serves the caller better than an unbounded queue.
pub const QUEUE_CAP: usize = 32;

/// How one accepted job ended. Every job the pool accepts reports exactly once.
#[derive(Debug)]
pub enum Outcome {
    Spoken(Speech),
    Cancelled(Cancelled),
    /// The synthesizer panicked; the message is for the client, as a sentence.
    Failed(String),
}

/// The queue is full: the job was not accepted (and its callback is dropped uncalled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "speech synthesis is at capacity ({queued} responses are waiting for {workers} synthesizers)"
)]
pub struct Busy {
    pub queued: usize,
    pub workers: usize,
}

/// What a pool has done, for tests and operators.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PoolStats {
    pub workers: usize,
    pub accepted: u64,
    pub refused: u64,
    pub spoken: u64,
    pub cancelled: u64,
    pub failed: u64,
    /// Audio made by jobs that were then cancelled: the waste cancelling did not prevent.
    pub cancelled_audio_ms: u64,
    pub spoken_audio_ms: u64,
    /// Jobs a worker is synthesizing now.
    pub running: u64,
}

type Done = Box<dyn FnOnce(Outcome) + Send>;

struct Synthesis {
    text: String,
    voice: String,
    speed: f64,
    cancel: CancelToken,
    done: Done,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Synthesis>,
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    cap: usize,
    workers: usize,
    /// `None`: detected by the first worker that needs it (it runs `espeak-ng --version`, which
    /// must not happen on the socket loop that submits).
    synth: Option<Synth>,
    counters: Counters,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    refused: AtomicU64,
    spoken: AtomicU64,
    cancelled: AtomicU64,
    failed: AtomicU64,
    cancelled_audio_ms: AtomicU64,
    spoken_audio_ms: AtomicU64,
    running: AtomicU64,
}

/// A set of synthesis workers and their queue. The server uses [`Pool::global`]; tests make
/// their own. Dropping a pool lets its workers finish what is queued and exit.
pub struct Pool {
    shared: Arc<Shared>,
}

impl Pool {
    /// The process-wide pool ([`WORKERS`], [`QUEUE_CAP`]), started on first use.
    pub fn global() -> &'static Pool {
        static POOL: OnceLock<Pool> = OnceLock::new();
        POOL.get_or_init(|| Pool::new("tts", WORKERS, QUEUE_CAP, None))
    }

    /// `workers` threads named `{name}-{i}`; at most `cap` jobs wait. `synth: None` detects it.
    pub fn new(name: &str, workers: usize, cap: usize, synth: Option<Synth>) -> Pool {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            cap,
            workers,
            synth,
            counters: Counters::default(),
        });
        for i in 0..workers {
            let shared = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || work(&shared));
            if let Err(e) = spawned {
                log::error!("could not start speech synthesis worker {name}-{i}: {e}");
            }
        }
        Pool { shared }
    }

    /// Queues `text` (cut to [`super::MAX_TEXT_BYTES`]) for synthesis; `done` gets the outcome
    /// on a worker thread. A job whose token is already cancelled, or is cancelled while it
    /// waits, holds no place: `done` gets [`Outcome::Cancelled`] on the submitting thread, here
    /// or in a later `submit`. Refused with [`Busy`] when [`QUEUE_CAP`] jobs are waiting.
    pub fn submit(
        &self,
        text: &str,
        voice: &str,
        speed: f64,
        cancel: CancelToken,
        done: impl FnOnce(Outcome) + Send + 'static,
    ) -> Result<(), Busy> {
        let c = &self.shared.counters;
        if cancel.is_cancelled() {
            c.accepted.fetch_add(1, Ordering::Relaxed);
            c.cancelled.fetch_add(1, Ordering::Relaxed);
            done(Outcome::Cancelled(Cancelled { produced_ms: 0 }));
            return Ok(());
        }
        let mut dropped = Vec::new();
        let result = {
            let mut q = self.lock();
            // Jobs cancelled while waiting give their places back.
            let (waiting, gone): (VecDeque<Synthesis>, VecDeque<Synthesis>) =
                std::mem::take(&mut q.jobs)
                    .into_iter()
                    .partition(|j| !j.cancel.is_cancelled());
            q.jobs = waiting;
            dropped.extend(gone);
            if q.jobs.len() >= self.shared.cap {
                Err(Busy {
                    queued: q.jobs.len(),
                    workers: self.shared.workers,
                })
            } else {
                q.jobs.push_back(Synthesis {
                    text: bounded(text).to_owned(),
                    voice: voice.to_owned(),
                    speed,
                    cancel,
                    done: Box::new(done),
                });
                Ok(())
            }
        };
        match result {
            Ok(()) => {
                c.accepted.fetch_add(1, Ordering::Relaxed);
                self.shared.ready.notify_one();
            }
            Err(_) => {
                c.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
        for job in dropped {
            c.cancelled.fetch_add(1, Ordering::Relaxed);
            (job.done)(Outcome::Cancelled(Cancelled { produced_ms: 0 }));
        }
        result
    }

    pub fn stats(&self) -> PoolStats {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PoolStats {
            workers: self.shared.workers,
            accepted: get(&c.accepted),
            refused: get(&c.refused),
            spoken: get(&c.spoken),
            cancelled: get(&c.cancelled),
            failed: get(&c.failed),
            cancelled_audio_ms: get(&c.cancelled_audio_ms),
            spoken_audio_ms: get(&c.spoken_audio_ms),
            running: get(&c.running),
        }
    }

    /// Jobs waiting for a worker (cancelled ones included until they are dropped).
    pub fn queued(&self) -> usize {
        self.lock().jobs.len()
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.shared.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.lock().closed = true;
        self.shared.ready.notify_all();
    }
}

/// One worker: takes jobs until the pool is dropped and its queue is empty.
fn work(shared: &Shared) {
    let c = &shared.counters;
    loop {
        let job = {
            let mut q = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(job) = q.jobs.pop_front() {
                    break job;
                }
                if q.closed {
                    return;
                }
                q = shared.ready.wait(q).unwrap_or_else(|e| e.into_inner());
            }
        };
        c.running.fetch_add(1, Ordering::Relaxed);
        let synth = shared.synth.unwrap_or_else(Synth::detect);
        let outcome = run(&job, synth);
        c.running.fetch_sub(1, Ordering::Relaxed);
        match &outcome {
            Outcome::Spoken(s) => {
                c.spoken.fetch_add(1, Ordering::Relaxed);
                c.spoken_audio_ms
                    .fetch_add(s.duration_ms(), Ordering::Relaxed);
            }
            Outcome::Cancelled(x) => {
                c.cancelled.fetch_add(1, Ordering::Relaxed);
                c.cancelled_audio_ms
                    .fetch_add(x.produced_ms, Ordering::Relaxed);
            }
            Outcome::Failed(_) => {
                c.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        // A panicking callback must not take the worker with it.
        let done = job.done;
        if catch_unwind(AssertUnwindSafe(move || done(outcome))).is_err() {
            log::error!("a speech synthesis callback panicked");
        }
    }
}

fn run(job: &Synthesis, synth: Synth) -> Outcome {
    let r = catch_unwind(AssertUnwindSafe(|| {
        synthesize_with(&job.text, &job.voice, job.speed, synth, &job.cancel)
    }));
    match r {
        Ok(Ok(speech)) => Outcome::Spoken(speech),
        Ok(Err(cancelled)) => Outcome::Cancelled(cancelled),
        Err(_) => {
            log::error!("speech synthesis panicked");
            Outcome::Failed("Speech synthesis failed; this response was not spoken.".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::CancelOnDrop;
    use super::*;
    use std::sync::mpsc;

    /// Threads of this process whose name starts with `prefix`.
    fn threads_named(prefix: &str) -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|comm| comm.starts_with(prefix))
            })
            .count()
    }

    /// This process's espeak-ng children speaking with `variant` (the `-v` argument).
    fn espeak_children(variant: &str) -> usize {
        let me = std::process::id().to_string();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|p| {
                let stat = std::fs::read_to_string(p.path().join("stat")).unwrap_or_default();
                let ppid = stat
                    .rsplit_once(") ")
                    .and_then(|(_, rest)| rest.split(' ').nth(1));
                let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
                let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
                ppid == Some(me.as_str())
                    && args.first() == Some(&&b"espeak-ng"[..])
                    && args.contains(&variant.as_bytes())
            })
            .count()
    }

    #[test]
    fn a_full_queue_refuses_and_a_cancelled_job_gives_its_place_back() {
        let pool = Pool::new("ttsq", 1, 2, Some(Synth::Shipped));
        let (busy_tx, busy_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        // The one worker finishes A and then waits in A's callback until released.
        pool.submit("hello", "alloy", 1.0, CancelToken::new(), move |o| {
            busy_tx.send(matches!(o, Outcome::Spoken(_))).unwrap();
            release_rx.recv().unwrap();
        })
        .unwrap();
        assert!(busy_rx.recv().unwrap());
        let (done_tx, done_rx) = mpsc::channel();
        let report = |name: &'static str| {
            let tx = done_tx.clone();
            move |o: Outcome| tx.send((name, o)).unwrap()
        };
        let c_token = CancelToken::new();
        pool.submit("two", "alloy", 1.0, CancelToken::new(), report("b"))
            .unwrap();
        pool.submit("three", "alloy", 1.0, c_token.clone(), report("c"))
            .unwrap();
        let refused = pool.submit("four", "alloy", 1.0, CancelToken::new(), report("d"));
        assert_eq!(
            refused,
            Err(Busy {
                queued: 2,
                workers: 1
            })
        );
        assert!(refused.unwrap_err().to_string().contains("at capacity"));
        // C is cancelled while waiting: the next submit drops it and takes its place.
        drop(CancelOnDrop(c_token));
        pool.submit("five", "alloy", 1.0, CancelToken::new(), report("e"))
            .unwrap();
        let (name, o) = done_rx.recv().unwrap();
        assert_eq!(name, "c");
        assert!(matches!(
            o,
            Outcome::Cancelled(Cancelled { produced_ms: 0 })
        ));
        // An already-cancelled job is answered at once and takes no place.
        let gone = CancelToken::new();
        gone.cancel();
        pool.submit("six", "alloy", 1.0, gone, report("f")).unwrap();
        assert_eq!(done_rx.recv().unwrap().0, "f");
        release_tx.send(()).unwrap();
        let mut rest: Vec<&str> = (0..2)
            .map(|_| {
                let (name, o) = done_rx.recv().unwrap();
                assert!(matches!(o, Outcome::Spoken(_)), "{name}: {o:?}");
                name
            })
            .collect();
        rest.sort();
        assert_eq!(rest, ["b", "e"]);
        let s = pool.stats();
        assert_eq!(
            (s.accepted, s.refused, s.spoken, s.cancelled),
            (5, 1, 3, 2),
            "{s:?}"
        );
    }

    /// 300 long jobs, each cancelled as the next is queued: never more synthesis threads or
    /// espeak-ng processes than workers, every job reports, and what cancelled jobs made is a
    /// sliver of what speaking them all would have been.
    #[test]
    fn a_flood_of_cancelled_jobs_stays_within_the_workers_and_stops_early() {
        const JOBS: usize = 300;
        let text = "This is a long sentence for the speech synthesizer to read aloud. ".repeat(70);
        let text = bounded(&text);
        assert!(text.len() > 4000);
        // "cedar" is espeak's en-us+m7, which no other test uses, so its children are ours.
        let full_ms = super::super::synthesize(text, "cedar").duration_ms();
        assert!(full_ms > 120_000, "{full_ms} ms");
        let pool = Pool::new("ttsflood", WORKERS, QUEUE_CAP, None);
        let (tx, rx) = mpsc::channel();
        let mut previous: Option<CancelOnDrop> = None;
        let (mut peak_threads, mut peak_children, mut peak_running) = (0, 0, 0);
        let mut refused = 0;
        for i in 0..JOBS {
            let token = CancelToken::new();
            let tx = tx.clone();
            match pool.submit(text, "cedar", 1.0, token.clone(), move |o| {
                tx.send((i, o)).unwrap()
            }) {
                Ok(()) => {}
                Err(_) => refused += 1,
            }
            // Cancelling the previous job once this one is queued lets most jobs start first.
            previous = Some(CancelOnDrop(token));
            peak_threads = peak_threads.max(threads_named("ttsflood"));
            peak_children = peak_children.max(espeak_children("en-us+m7"));
            peak_running = peak_running.max(pool.stats().running);
        }
        drop(previous);
        drop(tx);
        let outcomes: Vec<(usize, Outcome)> = rx.iter().take(JOBS - refused).collect();
        let mut made_ms = 0;
        for (i, o) in &outcomes {
            match o {
                Outcome::Cancelled(c) => made_ms += c.produced_ms,
                // Only if a job outran the loop that queued the next one.
                Outcome::Spoken(s) => made_ms += s.duration_ms(),
                Outcome::Failed(e) => panic!("job {i}: {e}"),
            }
        }
        let s = pool.stats();
        println!(
            "{JOBS} jobs of {full_ms} ms each: {made_ms} ms made in all; peak {peak_threads} \
             threads, {peak_children} espeak-ng, {peak_running} running; {refused} refused; {s:?}"
        );
        assert_eq!(outcomes.len() + refused, JOBS);
        assert_eq!(refused, 0, "cancelled jobs hold no place in the queue");
        assert_eq!(peak_threads, WORKERS);
        assert!(
            peak_children <= WORKERS,
            "{peak_children} espeak-ng children"
        );
        assert!(peak_running <= WORKERS as u64);
        // Speaking everything would have been JOBS × full_ms; cancelled work stops early.
        assert!(
            made_ms < JOBS as u64 * full_ms / 20,
            "{made_ms} ms of audio made for {JOBS} cancelled jobs of {full_ms} ms"
        );
        drop(pool);
        // Every child was reaped.
        assert_eq!(espeak_children("en-us+m7"), 0);
    }

    #[test]
    fn the_shipped_words_stop_between_words() {
        let text = "hello there ".repeat(100);
        let cancel = CancelToken::new();
        cancel.cancel();
        assert_eq!(
            super::super::words::speak(&text, &cancel),
            Err(Cancelled { produced_ms: 0 })
        );
    }
}
