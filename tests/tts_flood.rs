//! The TTS stub under a flood, through the real engine: one `tts` call sends 300 `response.create`
//! (long `instructions`), each followed at once by `response.cancel`. That probe once left a
//! synthesis thread, two pipe threads and an espeak-ng process per response (117 threads and
//! 6.45 GB), all saying speech nobody would hear. This binary holds only this test, so the
//! process's threads, children and synthesis pool are its own.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::Client;
use serde_json::{Value, json};
use voice_edge::allinone::{self, AllInOneConfig};
use voice_edge::audio::tts::{self, Pool};

const PAIRS: usize = 300;

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

async fn parsed(c: &Client) -> Vec<Value> {
    c.events
        .lock()
        .await
        .iter()
        .filter_map(|e| serde_json::from_str(e).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_cancelled_tts_responses_leaves_no_threads_or_children_behind() {
    let _ = env_logger::builder().is_test(true).try_init();
    let server = allinone::start(AllInOneConfig {
        http: "127.0.0.1:0".parse().unwrap(),
        relay: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .expect("start all-in-one");
    let mut c = Client::call(server.http_addr, "/v1/realtime/calls?model=tts").await;
    c.wait_connected(Duration::from_secs(10)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !c.event_types().await.iter().any(|t| t == "session.created") {
        assert!(tokio::time::Instant::now() < deadline, "no session.created");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

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
    for i in 0..PAIRS {
        let create = json!({"type": "response.create", "event_id": format!("create_{i}"),
            "response": {"instructions": long}});
        c.dc.send_text(&create.to_string()).await.unwrap();
        let cancel = json!({"type": "response.cancel", "event_id": format!("cancel_{i}")});
        c.dc.send_text(&cancel.to_string()).await.unwrap();
    }
    // Every create is answered and ends (cancelled, or failed if synthesis was refused).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let done = parsed(&c)
            .await
            .iter()
            .filter(|e| e["type"] == "response.done")
            .count();
        if done >= PAIRS {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{done} of {PAIRS} responses ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let abandoned work, if there were any, show in the samples.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let (peak_threads, peak_tts, peak_children) = sampler.join().unwrap();
    let stats = Pool::global().stats();
    println!(
        "{PAIRS} create+cancel pairs: threads {threads_before} before, peak {peak_threads}; \
         peak tts threads {peak_tts}; peak espeak-ng children {peak_children}; \
         peak RSS {} MB; {stats:?}",
        peak_rss_mb()
    );
    let events = parsed(&c).await;
    let created = events
        .iter()
        .filter(|e| e["type"] == "response.created")
        .count();
    assert_eq!(created, PAIRS, "every response.create is answered");
    for done in events.iter().filter(|e| e["type"] == "response.done") {
        let status = &done["response"]["status"];
        assert!(
            status == "cancelled" || status == "failed",
            "a flood response ended {status}: {done}"
        );
    }
    assert!(
        peak_tts <= tts::pool::WORKERS,
        "{peak_tts} synthesis threads"
    );
    assert!(
        peak_children <= tts::pool::WORKERS,
        "{peak_children} espeak-ng children"
    );
    // A few threads of slack: tokio and the client may start one.
    assert!(
        peak_threads <= threads_before + tts::pool::WORKERS + 4,
        "threads grew from {threads_before} to {peak_threads}"
    );
    // Cancelled speech stops early: all the cancelled jobs together made less audio than
    // one full rendering of the text (the engine cuts it to MAX_TEXT_BYTES: minutes of speech).
    assert!(
        stats.spoken == 0 && stats.cancelled_audio_ms < 60_000,
        "{stats:?}"
    );

    // The call still works: a short response is spoken and completes.
    let create = json!({"type": "response.create", "event_id": "after",
        "response": {"instructions": "Still here."}});
    c.dc.send_text(&create.to_string()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let events = parsed(&c).await;
        let done: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "response.done")
            .collect();
        if done.len() > PAIRS {
            assert_eq!(done[PAIRS]["response"]["status"], "completed");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the response after the flood never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(Pool::global().stats().spoken, 1);
    c.pc.close().await.unwrap();
    server.shutdown().await;
}
