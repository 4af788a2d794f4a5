//! SIGTERM drains the all-in-one process, as Kubernetes stops a pod: no new calls (503), live
//! calls carry on until they end, and the process exits by itself; calls still live at the
//! drain deadline are closed (the client is told, not left to time out).

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Client, http_post};

struct Server {
    child: Child,
    http: SocketAddr,
}

impl Server {
    fn start(drain_deadline_s: u64) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_voice-edge"))
            .args(["--http", "127.0.0.1:0", "--relay", "127.0.0.1:0"])
            .args(["--drain-deadline", &drain_deadline_s.to_string()])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start voice-edge");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let http = loop {
            let line = lines
                .next()
                .expect("voice-edge exited before it was ready")
                .unwrap();
            if let Some(rest) = line.split("open http://").nth(1) {
                break rest.split('/').next().unwrap().parse().unwrap();
            }
        };
        // Keep draining stdout so the process never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server { child, http }
    }

    fn sigterm(&self) {
        // SAFETY: kill(2) takes plain integers and touches no memory of ours; the pid is our own
        // child, not yet reaped (we hold its `Child`), so it names no other process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
    }

    /// Waits for the process to exit by itself; returns how long that took.
    fn wait_exit(&mut self, within: Duration) -> Duration {
        let t0 = Instant::now();
        while t0.elapsed() < within {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "voice-edge exited with {status}");
                return t0.elapsed();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("voice-edge did not exit within {within:?}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn new_call_status(http: SocketAddr) -> u16 {
    // An offer the server would answer (Chromium's): a draining server must refuse it anyway.
    let offer = include_str!("../../fixtures/sdp/chromium-offer.sdp");
    http_post(
        http,
        "/v1/realtime/calls",
        "application/sdp",
        offer.as_bytes(),
    )
    .await
    .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_refuses_new_calls_keeps_live_ones_and_exits_when_they_end() {
    let mut server = Server::start(60);
    let mut c = Client::call(server.http, "/v1/realtime/calls?model=loopback").await;
    c.wait_connected(Duration::from_secs(10)).await;
    assert!(c.echo_round(0x51, 10).await >= 9);

    server.sigterm();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        new_call_status(server.http).await,
        503,
        "a draining server took a call"
    );
    // The live call is untouched: audio still comes back, well past the signal.
    for round in 0..3 {
        assert!(c.echo_round(0x52 + round, 10).await >= 9, "round {round}");
    }
    let stats = common::http_get(server.http, "/admin/stats").await.body;
    assert!(stats.contains("\"draining\":true"), "{stats}");

    // The client hangs up; the process notices the last call ended and exits by itself, long
    // before the 60 s deadline.
    c.pc.close().await.unwrap();
    let took = tokio::task::block_in_place(|| server.wait_exit(Duration::from_secs(20)));
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_still_live_at_the_drain_deadline_are_closed_and_the_process_exits() {
    let mut server = Server::start(2);
    let mut c = Client::call(server.http, "/v1/realtime/calls?model=loopback").await;
    c.wait_connected(Duration::from_secs(10)).await;
    assert!(c.echo_round(0x61, 10).await >= 9);

    server.sigterm();
    // The call keeps working inside the deadline...
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(c.echo_round(0x62, 10).await >= 9);
    // ...and at the deadline the server closes it (DTLS close_notify) and exits.
    let took = tokio::task::block_in_place(|| server.wait_exit(Duration::from_secs(15)));
    assert!(
        took >= Duration::from_millis(500),
        "exited before the deadline: {took:?}"
    );
    c.wait_told_closed(Duration::from_secs(2)).await;
}
