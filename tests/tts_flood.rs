//! The TTS stub under a flood, through the real engine: one `tts` call sends 300 `response.create`
//! (long `instructions`), each followed at once by `response.cancel`. That probe once left a
//! synthesis thread, two pipe threads and an espeak-ng process per response (117 threads and
//! 6.45 GB), all saying speech nobody would hear. Then some cancels that arrive while the speech
//! is being made. This binary holds only this test, so the process's threads, children and
//! synthesis pool are its own.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::Client;
use serde_json::json;
use voice_edge::allinone::AllInOneConfig;
use voice_edge::audio::tts::{self, Pool};

const PAIRS: usize = 300;
/// Responses cancelled only once `response.created` is back, while their speech is being made.
const LATE: usize = 20;

/// Threads of this process, and the synthesis threads among them: the pool's `tts-N` workers
/// (and the `tts` threads, with the pipe threads they started, of the thread-per-request days).
fn threads() -> (usize, usize) {
    let mut all = 0;
    let mut tts = 0;
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        all += 1;
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let comm = comm.trim_end();
        if comm == "tts" || comm.starts_with("tts-") {
            tts += 1;
        }
    }
    (all, tts)
}

/// Live espeak-ng processes whose parent is this process.
fn espeak_children() -> usize {
    let me = std::process::id().to_string();
    let mut n = 0;
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(p.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid …
        let Some((head, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let ppid = rest.split(' ').nth(1).unwrap_or("");
        if ppid == me && head.ends_with("(espeak-ng") {
            n += 1;
        }
    }
    n
}

fn peak_rss_mb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_cancelled_tts_responses_leaves_no_threads_or_children_behind() {
    let server = common::start_local(AllInOneConfig::default()).await;
    let mut c = Client::call(server.http_addr, "/v1/realtime/calls?model=tts").await;
    c.wait_connected(Duration::from_secs(10)).await;
    c.wait_for("session.created", 1).await;

    // Sample threads and children while the flood runs.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut all, mut tts, mut kids) = (0, 0, 0);
            while !stop.load(Ordering::Relaxed) {
                let (a, t) = threads();
                all = all.max(a);
                tts = tts.max(t);
                kids = kids.max(espeak_children());
                std::thread::sleep(Duration::from_millis(2));
            }
            (all, tts, kids)
        })
    };
    let (threads_before, _) = threads();
    let long = "This is a long sentence for the speech synthesizer to read aloud. ".repeat(60);
    let create = |id: String| {
        json!({"type": "response.create", "event_id": id, "response": {"instructions": long}})
            .to_string()
    };
    let cancel = |id: String| json!({"type": "response.cancel", "event_id": id}).to_string();
    // The probe: each create followed at once by its cancel.
    for i in 0..PAIRS {
        c.dc.send_text(&create(format!("create_{i}")))
            .await
            .unwrap();
        c.dc.send_text(&cancel(format!("cancel_{i}")))
            .await
            .unwrap();
    }
    // Every create is answered and ends (cancelled, or failed if synthesis was refused).
    c.wait_for("response.done", PAIRS).await;
    // Then cancels that come once the response exists, when its speech is being made.
    for j in 0..LATE {
        c.dc.send_text(&create(format!("late_{j}"))).await.unwrap();
        c.wait_for("response.created", PAIRS + j + 1).await;
        c.dc.send_text(&cancel(format!("late_cancel_{j}")))
            .await
            .unwrap();
        c.wait_for("response.done", PAIRS + j + 1).await;
    }
    // Every job has reported: none is running or waiting.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let stats = loop {
        let s = Pool::global().stats();
        if s.running == 0 && s.spoken + s.cancelled + s.failed == s.accepted {
            break s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "jobs never ended: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    stop.store(true, Ordering::Relaxed);
    let (peak_threads, peak_tts, peak_children) = sampler.join().unwrap();
    println!(
        "{PAIRS} create+cancel pairs and {LATE} later cancels: threads {threads_before} before, \
         peak {peak_threads}; peak tts threads {peak_tts}; peak espeak-ng children \
         {peak_children}; peak RSS {} MB; {stats:?}",
        peak_rss_mb()
    );
    let events = c.received().await;
    let created = events
        .iter()
        .filter(|e| e["type"] == "response.created")
        .count();
    assert_eq!(created, PAIRS + LATE, "every response.create is answered");
    for done in events.iter().filter(|e| e["type"] == "response.done") {
        let status = &done["response"]["status"];
        assert!(
            status == "cancelled" || status == "failed",
            "a flood response ended {status}: {done}"
        );
    }
    assert_eq!(stats.accepted as usize, PAIRS + LATE);
    assert!(
        peak_tts <= tts::pool::WORKERS,
        "{peak_tts} synthesis threads"
    );
    assert!(
        peak_children <= tts::pool::WORKERS,
        "{peak_children} espeak-ng children"
    );
    assert_eq!(espeak_children(), 0, "every espeak-ng was reaped");
    // A few threads of slack: tokio and the client may start one.
    assert!(
        peak_threads <= threads_before + tts::pool::WORKERS + 4,
        "threads grew from {threads_before} to {peak_threads}"
    );
    // Cancelled speech stops early: what all the jobs made is a sliver of speaking them all
    // (a late cancel on a stalled machine may find a job done; that is counted too).
    let full_ms = tts::synthesize(&long, "alloy").duration_ms();
    let made_ms = stats.cancelled_audio_ms + stats.spoken_audio_ms;
    let jobs = (PAIRS + LATE) as u64;
    assert!(
        made_ms < jobs * full_ms / 10,
        "{made_ms} ms made for {jobs} cancelled responses of {full_ms} ms: {stats:?}"
    );

    // The call still works: a short response is spoken and completes.
    let after = json!({"type": "response.create", "event_id": "after",
        "response": {"instructions": "Still here."}});
    c.dc.send_text(&after.to_string()).await.unwrap();
    let events = c.wait_for("response.done", PAIRS + LATE + 1).await;
    let last = events
        .iter()
        .filter(|e| e["type"] == "response.done")
        .nth(PAIRS + LATE)
        .unwrap();
    assert_eq!(last["response"]["status"], "completed");
    assert_eq!(Pool::global().stats().spoken, stats.spoken + 1);
    c.pc.close().await.unwrap();
    server.shutdown().await;
}
