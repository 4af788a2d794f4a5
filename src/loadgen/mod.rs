//! `voice-edge loadgen`: many real WebRTC calls against a running voice-edge, and a table of
//! what they saw.
//!
//! Each call is what an OpenAI Realtime client does: an offer with one Opus m-line and the
//! `oai-events` data channel (created before the offer), `POST`ed to the signaling URL; then
//! full ICE (controlling) against the answer's one candidate (the relay), DTLS (client role),
//! SRTP and SCTP, a `session.update` on the channel as soon as it opens, and a 20 ms audio
//! packet stream whose payloads carry a call index, a sequence number and the send time, so the
//! echo model's replies are matched to their own packets (round-trip time, loss, misrouting)
//! however long the model waits before echoing.
//!
//! Calls are sans-I/O `rtc` peer connections driven by a few worker threads, each one poller
//! over its calls' sockets ([`call_loop`]); signaling runs on a thread of its own (a smol
//! executor, many requests in flight) so a slow answer never stalls media. The run ramps calls at `--ramp` per second, holds them all
//! for `--duration` seconds, hangs up and stops by itself; no loop outlives
//! ramp + duration + 30 s.

mod call;
mod call_loop;
mod http;
pub mod procstat;
mod report;
mod stats;

#[cfg(test)]
mod tests;

pub use report::{HostLoad, Percentiles, Report, ServerCost};

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rtc::peer_connection::certificate::{CertificateParams, RTCCertificate};

use self::call_loop::{CallLoop, CallLoopResult, Plan, Shared};
use self::stats::Histogram;

/// Payloads sent within this long before audio stops are not counted as lost if no echo
/// comes back: the model may still be holding them.
const LOSS_GRACE: Duration = Duration::from_secs(2);
/// After audio stops, late echoes still count for round-trip time until the hang-up.
const DRAIN: Duration = Duration::from_secs(1);
/// Every loop ends by ramp + duration + this.
const HARD_MARGIN: Duration = Duration::from_secs(30);
/// A run starts this long after `run()` is called, so the threads are up before call 0.
const LEAD: Duration = Duration::from_millis(50);

#[derive(clap::Args, Debug, Clone)]
pub struct LoadgenArgs {
    /// Signaling base URL of the voice-edge to load (http only).
    #[arg(
        long,
        env = "VOICE_EDGE_LOADGEN_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub url: String,
    /// Concurrent calls to open.
    #[arg(long, env = "VOICE_EDGE_LOADGEN_SESSIONS", default_value_t = 10)]
    pub sessions: usize,
    /// Seconds to hold all calls once the ramp is done.
    #[arg(long, env = "VOICE_EDGE_LOADGEN_DURATION", default_value_t = 30.0)]
    pub duration: f64,
    /// New calls per second while ramping up.
    #[arg(long, env = "VOICE_EDGE_LOADGEN_RAMP", default_value_t = 50.0)]
    pub ramp: f64,
    /// Path the SDP offer is POSTed to.
    #[arg(
        long,
        env = "VOICE_EDGE_LOADGEN_PATH",
        default_value = "/v1/realtime/calls"
    )]
    pub path: String,
    /// Model stub to ask for (`?model=` on the offer POST): `loopback` reflects every packet at
    /// once (the network reference), `echo` answers after each turn; empty sends no query.
    #[arg(long, env = "VOICE_EDGE_LOADGEN_MODEL", default_value = "loopback")]
    pub model: String,
    /// Server process to measure (CPU, resident memory); found by the URL's port when the URL
    /// is loopback and this is not given.
    #[arg(long, env = "VOICE_EDGE_LOADGEN_SERVER_PID")]
    pub server_pid: Option<u32>,
    /// Worker threads driving calls (each one epoll loop).
    #[arg(long, env = "VOICE_EDGE_LOADGEN_WORKERS", default_value_t = 2)]
    pub workers: usize,
    /// Seconds from offer posted to DTLS connected before a call counts as failed.
    #[arg(long, env = "VOICE_EDGE_LOADGEN_SETUP_TIMEOUT", default_value_t = 10.0)]
    pub setup_timeout: f64,
    /// End calls by closing the peer connection only, without `POST {Location}/hangup`.
    #[arg(long, env = "VOICE_EDGE_LOADGEN_NO_HTTP_HANGUP")]
    pub no_http_hangup: bool,
    /// Local IP for the calls' UDP sockets (default: the one that routes to the URL's host).
    #[arg(long, env = "VOICE_EDGE_LOADGEN_BIND")]
    pub bind: Option<IpAddr>,
    /// Offers and hang-ups in flight at once (on one signaling thread).
    #[arg(
        long,
        alias = "http-threads",
        env = "VOICE_EDGE_LOADGEN_HTTP_CONCURRENCY",
        default_value_t = 8
    )]
    pub http_concurrency: usize,
    /// Write every silence between two echoes of 50 ms or more to FILE, a line each: when it
    /// ended (unix time, ms), how long it was (ms) and the call's index. For telling the gaps an
    /// event caused (a relay restart at a known time) from the rest.
    #[arg(long, value_name = "FILE", env = "VOICE_EDGE_LOADGEN_GAP_LOG")]
    pub gap_log: Option<std::path::PathBuf>,
}

impl Default for LoadgenArgs {
    fn default() -> Self {
        crate::flags::defaults()
    }
}

/// Raises the open-file limit to its hard maximum: every call is a socket.
fn raise_fd_limit(need: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a live struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
    if lim.rlim_cur < need {
        log::warn!(
            "open-file limit {} is below the {need} this run needs; raise `ulimit -n`",
            lim.rlim_cur
        );
    }
}

/// The local address the kernel would use toward `dst` (no packet is sent).
fn route_source(dst: SocketAddr) -> Option<IpAddr> {
    let bind: SocketAddr = if dst.is_ipv4() {
        "0.0.0.0:0".parse().ok()?
    } else {
        "[::]:0".parse().ok()?
    };
    let s = UdpSocket::bind(bind).ok()?;
    s.connect(SocketAddr::new(dst.ip(), dst.port().max(9)))
        .ok()?;
    Some(s.local_addr().ok()?.ip())
}

fn client_certificate() -> anyhow::Result<RTCCertificate> {
    let provider = rtc::crypto::default_provider()?;
    Ok(RTCCertificate::generate(
        provider.crypto(),
        rtc::crypto::SignatureScheme::EcdsaP256Sha256,
        CertificateParams::new(vec!["voice-edge-loadgen".to_owned()])?,
    )?)
}

/// Sleeps until `t` or until every worker is done, whichever is first.
fn wait_until(t: Instant, workers: &[std::thread::JoinHandle<CallLoopResult>]) {
    while Instant::now() < t && !workers.iter().all(|w| w.is_finished()) {
        std::thread::sleep(
            t.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(50)),
        );
    }
}

/// Runs the whole load test and returns its report; blocks for about ramp + duration + 2 s.
/// Errors only when the run cannot start (bad URL, no threads); failed calls are in the report.
pub fn run(args: LoadgenArgs) -> anyhow::Result<Report> {
    if args.sessions == 0 {
        bail!("--sessions must be at least 1");
    }
    if !(args.duration > 0.0 && args.duration.is_finite()) {
        bail!("--duration must be a positive number of seconds");
    }
    if !(args.ramp > 0.0 && args.ramp.is_finite()) {
        bail!("--ramp must be a positive number of calls per second");
    }
    if !(args.setup_timeout > 0.0 && args.setup_timeout <= 3600.0) {
        bail!("--setup-timeout must be between 0 and 3600 seconds");
    }
    if args.duration > 86_400.0 || args.sessions as f64 / args.ramp > 86_400.0 {
        bail!("a run is limited to a day of ramp and a day of hold");
    }
    let workers = args.workers.clamp(1, 64).min(args.sessions);
    let http_concurrency = args.http_concurrency.clamp(1, 256);
    let target = http::Target::parse(&args.url)?;
    let mut path = if args.path.starts_with('/') {
        args.path.clone()
    } else {
        format!("/{}", args.path)
    };
    let model = args.model.trim();
    if !model.is_empty() {
        let sep = if path.contains('?') { '&' } else { '?' };
        path = format!("{path}{sep}model={model}");
    }
    raise_fd_limit(args.sessions as u64 + 64);
    let bind_ip = match args.bind {
        Some(ip) => ip,
        None => route_source(target.addr)
            .with_context(|| format!("no local address routes to {}", target.addr))?,
    };
    let server_pid = args
        .server_pid
        .or_else(|| procstat::find_listener(target.addr.ip(), target.addr.port()));
    match server_pid {
        Some(pid) => log::info!("loadgen: measuring server pid {pid}"),
        None => log::info!("loadgen: server process not known; CPU and memory not measured"),
    }
    let certificate = client_certificate()?;

    // The idle baseline, before the first call.
    let server_idle = server_pid.and_then(|p| procstat::sample(Some(p)));
    if server_pid.is_some() && server_idle.is_none() {
        log::warn!("loadgen: cannot read /proc for pid {server_pid:?}; server cost not measured");
    }

    let duration = Duration::from_secs_f64(args.duration);
    let ramp_time = Duration::from_secs_f64(args.sessions as f64 / args.ramp);
    let epoch = Instant::now() + LEAD;
    let ramp_end = epoch + ramp_time;
    let stop_audio = ramp_end + duration;
    let plan = Plan {
        sessions: args.sessions,
        workers,
        epoch,
        rate: args.ramp,
        stop_audio,
        count_until: stop_audio.checked_sub(LOSS_GRACE).unwrap_or(epoch),
        hangup_at: stop_audio + DRAIN,
        deadline: epoch + ramp_time + duration + HARD_MARGIN,
        setup_timeout: Duration::from_secs_f64(args.setup_timeout),
        http_hangup: !args.no_http_hangup,
        bind_ip,
    };
    log::info!(
        "loadgen: {} calls to {}{} from {bind_ip}, ramp {:.1} s, hold {:.1} s, {workers} workers",
        args.sessions,
        args.url,
        path,
        ramp_time.as_secs_f64(),
        args.duration
    );

    // Signaling pool and per-worker reply channels.
    let (job_tx, job_rx) = async_channel::unbounded::<http::HttpJob>();
    let mut reply_tos = Vec::new();
    let mut reply_rxs = Vec::new();
    let mut sleepers = Vec::new();
    for _ in 0..workers {
        let (tx, rx) = std::sync::mpsc::channel();
        let sleeper = crate::wakeup::Sleeper::with_capacity(call_loop::MAX_EVENTS)?;
        reply_tos.push(http::ReplyTo {
            tx,
            waker: sleeper.waker(),
        });
        reply_rxs.push(rx);
        sleepers.push(sleeper);
    }
    let reply_tos = Arc::new(reply_tos);
    let pool_cfg = Arc::new(http::PoolConfig {
        target,
        path,
        timeout: Duration::from_secs_f64(args.setup_timeout.min(10.0)),
    });
    let pool = {
        let (cfg, to) = (pool_cfg.clone(), reply_tos.clone());
        std::thread::Builder::new()
            .name("loadgen-http".into())
            .spawn(move || http::run_pool(&cfg, job_rx, &to, http_concurrency))?
    };

    let plan_deadline = plan.deadline;
    let live = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for (id, (rx, sleeper)) in reply_rxs.into_iter().zip(sleepers).enumerate() {
        let w = CallLoop::new(
            id,
            plan.clone(),
            certificate.clone(),
            job_tx.clone(),
            rx,
            sleeper,
            Shared {
                live: live.clone(),
                peak: peak.clone(),
            },
        )?;
        handles.push(
            std::thread::Builder::new()
                .name(format!("loadgen-{id}"))
                .spawn(move || w.run())?,
        );
    }
    drop(job_tx);

    // Steady window: from shortly after the ramp until audio stops.
    let settle = (duration / 3).min(Duration::from_secs(2));
    let steady_start = ramp_end + settle;
    wait_until(steady_start, &handles);
    let steady_a = Steady::sample(server_pid);
    wait_until(stop_audio - Duration::from_millis(20), &handles);
    let steady_b = Steady::sample(server_pid);
    let live_at_b = live.load(Ordering::Relaxed);

    let mut results = Vec::new();
    for h in handles {
        match h.join() {
            Ok(r) => results.push(r),
            Err(_) => bail!("a load-generator worker panicked"),
        }
    }
    // The pool ends once every job sender is gone; a request still in flight is bounded by its
    // own timeout, and is left to finish on its own rather than hold the run past its deadline.
    while Instant::now() < plan_deadline && !pool.is_finished() {
        std::thread::sleep(Duration::from_millis(20));
    }
    if pool.is_finished() {
        let _ = pool.join();
    }

    if let Some(path) = &args.gap_log {
        write_gap_log(path, &results)?;
    }
    let mut report = summarize(&args, workers, epoch, results);
    report.peak_live = peak.load(Ordering::Relaxed);
    let (a, b) = (&steady_a, &steady_b);
    let delta = |x: Option<u64>, y: Option<u64>| Some(y?.saturating_sub(x?));
    let server_cpu = match (&a.server, &b.server) {
        (Some(x), Some(y)) => procstat::cpu_percent(x, y),
        _ => None,
    };
    if let (Some(pid), Some(idle), Some(bs)) = (server_pid, server_idle, b.server) {
        report.server = Some(ServerCost {
            pid,
            cpu_percent: server_cpu,
            steady_window_s: a
                .server
                .map(|x| bs.at.duration_since(x.at).as_secs_f64())
                .unwrap_or(0.0),
            rss_idle_kb: idle.rss_kb,
            rss_steady_kb: bs.rss_kb,
            live_sessions: live_at_b,
            udp_drops: delta(a.server_drops, b.server_drops),
            threads: match &a.server {
                Some(x) => procstat::thread_percents(
                    &a.server_threads,
                    &b.server_threads,
                    bs.at.duration_since(x.at).as_secs_f64(),
                ),
                None => vec![],
            },
        });
    }
    if let (Some(x), Some(y)) = (&a.me, &b.me) {
        report.loadgen_cpu_percent = procstat::cpu_percent(x, y);
        report.loadgen_rss_kb = Some(y.rss_kb);
    }
    report.loadgen_udp_drops = delta(a.my_drops, b.my_drops);
    if let (Some(ha), Some(hb)) = (a.host, b.host) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let wall = (hb.total - ha.total) / cores as f64;
        if wall > 0.0 {
            let busy_percent = (hb.busy - ha.busy) / wall * 100.0;
            let irq_percent = (hb.irq - ha.irq) / wall * 100.0;
            let steal_percent = (hb.steal - ha.steal) / wall * 100.0;
            let others_percent = report.loadgen_cpu_percent.map(|l| {
                (busy_percent - irq_percent - steal_percent - l - server_cpu.unwrap_or(0.0))
                    .max(0.0)
            });
            report.host = Some(HostLoad {
                cores,
                busy_percent,
                irq_percent,
                steal_percent,
                others_percent,
                udp_rcvbuf_errors: delta(a.rcvbuf_errors, b.rcvbuf_errors),
            });
        }
    }
    Ok(report)
}

/// Everything read at each end of the steady window.
struct Steady {
    server: Option<procstat::Sample>,
    server_drops: Option<u64>,
    server_threads: Vec<(u32, String, f64)>,
    me: Option<procstat::Sample>,
    my_drops: Option<u64>,
    host: Option<procstat::HostCpu>,
    rcvbuf_errors: Option<u64>,
}

impl Steady {
    fn sample(server_pid: Option<u32>) -> Steady {
        Steady {
            server: server_pid.and_then(|p| procstat::sample(Some(p))),
            server_drops: server_pid.and_then(|p| procstat::process_udp_drops(Some(p))),
            server_threads: server_pid.map(procstat::threads).unwrap_or_default(),
            me: procstat::sample(None),
            my_drops: procstat::process_udp_drops(None),
            host: procstat::host_cpu(),
            rcvbuf_errors: procstat::udp_rcvbuf_errors(),
        }
    }
}

/// `--gap-log`: each call's long gaps, oldest first, with their end as unix time.
fn write_gap_log(path: &std::path::Path, results: &[CallLoopResult]) -> anyhow::Result<()> {
    use std::fmt::Write as _;
    let (now, wall) = (Instant::now(), std::time::SystemTime::now());
    let unix_ms = |t: Instant| {
        let at = wall - now.saturating_duration_since(t);
        at.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    };
    let mut gaps: Vec<(u128, f64, usize)> = results
        .iter()
        .flat_map(|w| &w.records)
        .flat_map(|(i, rec)| {
            rec.long_gaps
                .iter()
                .map(move |(end, gap)| (unix_ms(*end), gap.as_secs_f64() * 1000.0, *i))
        })
        .collect();
    gaps.sort_by(|a, b| a.0.cmp(&b.0).then(a.2.cmp(&b.2)));
    let mut out = String::new();
    for (end, gap, call) in gaps {
        let _ = writeln!(out, "{end} {gap:.1} {call}");
    }
    std::fs::write(path, out).with_context(|| format!("--gap-log {}", path.display()))
}

fn summarize(
    args: &LoadgenArgs,
    workers: usize,
    epoch: Instant,
    results: Vec<CallLoopResult>,
) -> Report {
    let mut rtt = Histogram::default();
    let mut r = Report {
        url: args.url.clone(),
        model: args.model.trim().to_owned(),
        sessions: args.sessions,
        duration_s: args.duration,
        ramp: args.ramp,
        workers,
        ..Default::default()
    };
    let (mut answer, mut ice, mut dtls, mut echo) = (vec![], vec![], vec![], vec![]);
    let mut channel = vec![];
    let mut refusal = vec![];
    let mut gaps = vec![];
    let mut reasons: HashMap<String, usize> = HashMap::new();
    for w in results {
        rtt.merge(&w.rtt);
        for (_, rec) in w.records {
            if rec.refused.is_some() {
                r.refused += 1;
                refusal.extend(rec.ms_after_post(rec.answered));
                continue;
            }
            answer.extend(rec.ms_after_post(rec.answered));
            ice.extend(rec.ms_after_post(rec.ice_connected));
            dtls.extend(rec.ms_after_post(rec.dtls_connected));
            echo.extend(rec.ms_after_post(rec.first_echo));
            channel.extend(rec.ms_after_post(rec.channel_open));
            gaps.extend(rec.max_echo_gap.map(|g| g.as_secs_f64() * 1000.0));
            if rec.dtls_connected.is_some() {
                r.connected += 1;
            }
            if let Some(e) = &rec.error {
                r.failed += 1;
                *reasons.entry(e.clone()).or_default() += 1;
            }
            r.packets_sent += rec.sent;
            r.packets_received += rec.received;
            r.counted_sent += rec.counted;
            r.counted_received += rec.counted_received;
            r.duplicates += rec.duplicates;
            r.misrouted += rec.misrouted;
            r.channels_open += rec.channel_open.is_some() as usize;
            r.session_updated += rec.session_updated as usize;
            r.error_events += rec.error_events as u64;
            r.disconnects += rec.disconnects as u64;
            if let Some(h) = &rec.hangup_status {
                r.hangups_sent += 1;
                r.hangups_ok += matches!(h, Ok(s) if (200..300).contains(s)) as usize;
            }
        }
    }
    r.answer_ms = Percentiles::of(answer);
    r.refusal_ms = Percentiles::of(refusal);
    r.ice_ms = Percentiles::of(ice);
    r.dtls_ms = Percentiles::of(dtls);
    r.first_echo_ms = Percentiles::of(echo);
    r.channel_open_ms = Percentiles::of(channel);
    r.rtt_ms = Percentiles::of_histogram(&rtt);
    r.echo_gap_ms = Percentiles::of(gaps);
    r.loss_percent = if r.counted_sent > 0 {
        (r.counted_sent - r.counted_received.min(r.counted_sent)) as f64 * 100.0
            / r.counted_sent as f64
    } else {
        100.0
    };
    let mut failures: Vec<(String, usize)> = reasons.into_iter().collect();
    failures.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    r.failures = failures;
    r.wall_s = epoch.elapsed().as_secs_f64();
    r
}
