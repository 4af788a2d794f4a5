//! The load generator against the all-in-one server, in process: real HTTP, ICE, DTLS, SRTP and
//! SCTP through the relay.

use super::*;
use crate::allinone::{self, AllInOneConfig};
use std::time::Duration;

#[test]
fn ten_calls_for_three_seconds_through_the_relay() {
    let _ = env_logger::builder().is_test(true).try_init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(allinone::start(AllInOneConfig {
            http: "127.0.0.1:0".parse().unwrap(),
            relay: "127.0.0.1:0".parse().unwrap(),
            ..Default::default()
        }))
        .expect("start all-in-one");
    let url = format!("http://{}", server.http_addr);
    let report = run(LoadgenArgs {
        url,
        sessions: 10,
        duration: 3.0,
        ..Default::default()
    })
    .expect("run loadgen");
    println!("{}", report.to_markdown());
    let relay = server.relay().counters();
    // Bounded, so a server that cannot stop fails this test instead of hanging the suite.
    let stopped = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), server.shutdown()).await });
    assert!(
        stopped.is_ok(),
        "the all-in-one server did not shut down within 10 s"
    );

    assert_eq!(report.failed, 0, "failures: {:?}", report.failures);
    assert_eq!(report.connected, 10);
    for (name, p) in [
        ("answer", &report.answer_ms),
        ("ICE", &report.ice_ms),
        ("DTLS", &report.dtls_ms),
        ("first echo", &report.first_echo_ms),
        ("channel open", &report.channel_open_ms),
    ] {
        assert!(p.is_populated(), "{name} column empty: {p:?}");
        assert_eq!(p.n, 10, "{name}: {p:?}");
    }
    assert!(report.rtt_ms.is_populated(), "{:?}", report.rtt_ms);
    // Every call heard its echoes at the 20 ms pace; its longest silence is a few frames at most.
    assert_eq!(report.echo_gap_ms.n, 10, "{:?}", report.echo_gap_ms);
    assert!(
        report
            .echo_gap_ms
            .p50
            .is_some_and(|g| (10.0..200.0).contains(&g)),
        "{:?}",
        report.echo_gap_ms
    );
    assert!(
        report.counted_sent >= 10 * 40,
        "too few packets counted: {}",
        report.counted_sent
    );
    assert!(
        report.loss_percent < 1.0,
        "loss {:.2} %",
        report.loss_percent
    );
    assert_eq!(report.misrouted, 0);
    assert_eq!(report.channels_open, 10);
    // Every call went through the relay, each from its own client address.
    assert!(relay.flows_created >= 10, "{relay:?}");
}

#[test]
fn flags_have_env_twins_and_defaults() {
    use clap::{CommandFactory, Parser};
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LoadgenArgs,
    }
    Cli::command().debug_assert();
    for arg in Cli::command().get_arguments() {
        let Some(env) = arg.get_env() else {
            panic!("--{} has no env twin", arg.get_id());
        };
        assert!(
            env.to_string_lossy().starts_with("VOICE_EDGE_LOADGEN_"),
            "{env:?}"
        );
    }
    let cli = Cli::try_parse_from([
        "loadgen",
        "--url",
        "http://127.0.0.1:9",
        "--sessions",
        "5",
        "--duration",
        "2.5",
        "--ramp",
        "10",
        "--workers",
        "1",
        "--server-pid",
        "42",
    ])
    .unwrap();
    assert_eq!(cli.args.sessions, 5);
    assert_eq!(cli.args.duration, 2.5);
    assert_eq!(cli.args.server_pid, Some(42));
    assert_eq!(cli.args.path, LoadgenArgs::default().path);
    assert_eq!(cli.args.model, "loopback");
}

#[test]
fn a_server_that_is_not_there_fails_every_call_quickly_and_says_why() {
    // A port nobody listens on: every offer POST is refused, and the run still ends by itself.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t = Instant::now();
    let report = run(LoadgenArgs {
        url: format!("http://127.0.0.1:{port}"),
        sessions: 3,
        duration: 1.0,
        server_pid: Some(std::process::id()),
        ..Default::default()
    })
    .unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(report.failed, 3);
    assert_eq!(report.connected, 0);
    assert!(
        report.failures[0].0.contains("POST"),
        "{:?}",
        report.failures
    );
    assert!(report.to_markdown().contains("Failures:"));
}
