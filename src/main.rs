//! `voice-edge`: with no subcommand, the all-in-one process for a laptop demo; subcommands run
//! one role each (for docker-compose and Kubernetes) or inspect routes.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use voice_edge::allinone::{self, AllInOneConfig, Running};
use voice_edge::media_address::Advertise;
use voice_edge::membership::parse_member;
use voice_edge::routing::{RouteKeys, ufrag};

#[derive(Parser, Debug)]
#[command(
    name = "voice-edge",
    version,
    about = "A WebRTC edge for voice AI (relay + transceivers + signaling)"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    all: AllInOneArgs,
    /// A conversation script (JSON, see fixtures/scripts/) that calls can choose with
    /// `?model=script:NAME` or `session.model`, NAME being the file's stem; repeat for more.
    /// Checked at startup. Give it to every role that sees calls (signaling checks names, the
    /// transceiver plays them); the scripts in fixtures/scripts/ are built in.
    #[arg(
        long = "script",
        value_name = "FILE",
        env = "VOICE_EDGE_SCRIPTS",
        value_delimiter = ',',
        global = true
    )]
    scripts: Vec<std::path::PathBuf>,
    #[command(flatten)]
    upstream: UpstreamArgs,
}

/// A real model behind the edge (see `voice_edge::upstream`): for the all-in-one, and for
/// signaling and transceivers alike in the split roles.
#[derive(Args, Debug)]
struct UpstreamArgs {
    /// A Realtime WebSocket (ws:// or wss://, e.g. wss://api.openai.com/v1/realtime or
    /// ws://127.0.0.1:8000/v1/realtime) that calls for any model but the stubs (echo, tts,
    /// loopback, script:NAME) are bridged to. Its key is VOICE_EDGE_UPSTREAM_KEY, an
    /// environment variable only, so that it is never on a command line.
    #[arg(long, env = "VOICE_EDGE_UPSTREAM", global = true)]
    upstream: Option<String>,
    /// The upstream model of a call that names none.
    #[arg(
        long,
        env = "VOICE_EDGE_UPSTREAM_MODEL",
        default_value = "gpt-realtime",
        global = true
    )]
    upstream_model: String,
    /// Caller audio goes upstream in appends of this many milliseconds (20–100).
    #[arg(long, env = "VOICE_EDGE_UPSTREAM_APPEND_MS", default_value_t = voice_edge::upstream::DEFAULT_APPEND_MS, global = true)]
    upstream_append_ms: u32,
}

impl UpstreamArgs {
    fn config(&self) -> anyhow::Result<Option<voice_edge::upstream::UpstreamConfig>> {
        let Some(url) = &self.upstream else {
            return Ok(None);
        };
        let key = std::env::var("VOICE_EDGE_UPSTREAM_KEY").ok();
        voice_edge::upstream::UpstreamConfig::new(
            url,
            key,
            &self.upstream_model,
            self.upstream_append_ms,
        )
        .map(Some)
        .map_err(anyhow::Error::msg)
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a relay alone: members from --transceiver ID=ADDR, or from Redis (--redis-url).
    Relay(RelayArgs),
    /// Run signaling alone (Realtime HTTP API + demo page); needs Redis (members) and the
    /// cluster secret (the transceivers' control API).
    Signaling(SignalingArgs),
    /// Run one transceiver alone; needs Redis (to register), the cluster secret (its control
    /// API), the route secret (shared with relays) and the relay's address as clients reach it.
    Transceiver(TransceiverArgs),
    /// Mint or decode server ufrags (routes).
    #[command(subcommand)]
    Route(RouteCommand),
    /// Probe a role's health endpoint (the container HEALTHCHECK): exit 0 on a 2xx.
    Health {
        /// `/health` of the role: signaling and the all-in-one serve it on their HTTP listener,
        /// relays and transceivers on their --metrics listener.
        #[arg(
            long,
            env = "VOICE_EDGE_HEALTH_URL",
            default_value = "http://127.0.0.1:8080/health"
        )]
        url: String,
    },
    /// Open many real WebRTC calls against a running server and print a table.
    Loadgen(voice_edge::loadgen::LoadgenArgs),
}

/// `voice-edge` with no subcommand: the all-in-one's own flags, and how this process stops.
#[derive(Args, Debug)]
struct AllInOneArgs {
    #[command(flatten)]
    config: AllInOneConfig,
    /// On SIGTERM, stop taking calls and wait this many seconds for live ones to end before
    /// closing them (SIGINT, or a second signal, stops at once).
    #[arg(long, env = "VOICE_EDGE_DRAIN_DEADLINE", default_value_t = 30)]
    drain_deadline: u64,
}

/// `--metrics`, which the relay and transceiver roles serve alike.
#[derive(Args, Debug)]
struct MetricsListener {
    /// The metrics listener: GET /metrics (Prometheus) and /health; "off" for none.
    #[arg(long, env = "VOICE_EDGE_METRICS", default_value = "0.0.0.0:9090")]
    metrics: String,
}

impl MetricsListener {
    /// The address to serve on, or `None` for "off".
    fn addr(&self) -> anyhow::Result<Option<SocketAddr>> {
        let s = &self.metrics;
        if s.eq_ignore_ascii_case("off") {
            return Ok(None);
        }
        s.parse()
            .map(Some)
            .map_err(|_| anyhow::anyhow!("--metrics {s:?}: expected IP:PORT or off"))
    }
}

/// `--key-id`, the route key's id, which relays and transceivers must agree on.
#[derive(Args, Debug)]
struct RouteKeyId {
    /// Key id of --route-secret (0–15).
    #[arg(long, env = "VOICE_EDGE_ROUTE_KEY_ID", default_value_t = 0)]
    key_id: u8,
}

#[derive(Args, Debug)]
struct SignalingArgs {
    /// The public listener: Realtime API and demo page (no admin endpoints).
    #[arg(long, env = "VOICE_EDGE_HTTP", default_value = "0.0.0.0:8080")]
    http: SocketAddr,
    /// The admin listener (/admin/stats, /admin/calls); keep it private.
    #[arg(long, env = "VOICE_EDGE_ADMIN", default_value = "127.0.0.1:8081")]
    admin: SocketAddr,
    /// Token admin requests must bring (Authorization: Bearer); required when --admin is not
    /// loopback. Without one, admin serves loopback peers only.
    #[arg(long, env = "VOICE_EDGE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Redis with the transceivers' membership: redis://[[USER]:PASSWORD@]HOST:PORT[/DB].
    #[arg(long, env = "VOICE_EDGE_REDIS_URL")]
    redis_url: String,
    /// The secret transceivers' control APIs require.
    #[arg(long, env = "VOICE_EDGE_CLUSTER_SECRET", hide_env_values = true)]
    cluster_secret: String,
    /// Calls need a server key (--api-key) or an unexpired ek_ key.
    #[arg(long, env = "VOICE_EDGE_REQUIRE_KEYS")]
    require_keys: bool,
    /// A server API key (repeatable).
    #[arg(
        long = "api-key",
        env = "VOICE_EDGE_API_KEYS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    api_keys: Vec<String>,
    #[command(flatten)]
    call_limits: voice_edge::signaling::call_limits::CallLimits,
    #[command(flatten)]
    http_limits: voice_edge::http_server::HttpLimits,
}

#[derive(Args, Debug)]
struct TransceiverArgs {
    /// This transceiver's cluster.
    #[arg(long, env = "VOICE_EDGE_CLUSTER", default_value_t = 0)]
    cluster: u16,
    /// Its id in the cluster (it goes into every route); default: the lowest free id in Redis.
    #[arg(long, env = "VOICE_EDGE_TRANSCEIVER_ID", value_parser = clap::value_parser!(u16).range(1..=1024))]
    id: Option<u16>,
    /// Worker 0's UDP socket, where relays forward; worker W binds the port + W.
    #[arg(
        long,
        env = "VOICE_EDGE_TRANSCEIVER_BIND",
        default_value = "0.0.0.0:4000"
    )]
    bind: SocketAddr,
    /// Worker threads, each with its own socket and calls.
    #[arg(long, env = "VOICE_EDGE_TRANSCEIVER_WORKERS", default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=64))]
    workers: u8,
    /// The relay as clients reach it, HOST[:PORT] (port 3478 if omitted): the candidate in
    /// every answer.
    #[arg(long, env = "VOICE_EDGE_ADVERTISE")]
    advertise: Advertise,
    /// The control API listener (signaling calls it with the cluster secret).
    #[arg(long, env = "VOICE_EDGE_CONTROL", default_value = "0.0.0.0:7000")]
    control: SocketAddr,
    /// The address relays and signaling reach this process at; default: the primary interface's.
    #[arg(long, env = "VOICE_EDGE_HOST")]
    host: Option<std::net::IpAddr>,
    /// Redis for membership: redis://[[USER]:PASSWORD@]HOST:PORT[/DB].
    #[arg(long, env = "VOICE_EDGE_REDIS_URL")]
    redis_url: String,
    #[arg(long, env = "VOICE_EDGE_CLUSTER_SECRET", hide_env_values = true)]
    cluster_secret: String,
    /// Route secret (hex, ≥ 16 bytes) shared with the relays.
    #[arg(long, env = "VOICE_EDGE_ROUTE_SECRET", hide_env_values = true)]
    route_secret: String,
    #[command(flatten)]
    route_key: RouteKeyId,
    /// On SIGTERM, stop taking calls and wait this many seconds for live ones to end.
    #[arg(long, env = "VOICE_EDGE_DRAIN_DEADLINE", default_value_t = 30)]
    drain_deadline: u64,
    #[command(flatten)]
    capacity: voice_edge::transceiver::admission::Capacity,
    /// Networks (CIDR, comma-separated; `private`, `any`) relays' link datagrams may come
    /// from; others are dropped unread.
    #[arg(long, env = "VOICE_EDGE_LINK_SOURCES", default_value = "private")]
    link_sources: voice_edge::routing::link_sources::LinkSources,
    #[command(flatten)]
    metrics: MetricsListener,
}

#[derive(Args, Debug)]
struct RelayArgs {
    /// Public UDP address clients send to.
    #[arg(long, env = "VOICE_EDGE_RELAY_LISTEN", default_value = "0.0.0.0:3478")]
    listen: SocketAddr,
    /// Link address transceivers answer to (and global relays forward to).
    #[arg(
        long,
        env = "VOICE_EDGE_RELAY_INTERNAL",
        default_value = "0.0.0.0:3479"
    )]
    internal: SocketAddr,
    /// This relay's cluster id (omit with --global).
    #[arg(long, env = "VOICE_EDGE_CLUSTER", default_value_t = 0)]
    cluster: u16,
    /// Route by cluster to cluster relays (`--next-hop CLUSTER=ADDR`) instead of to transceivers.
    #[arg(long, env = "VOICE_EDGE_RELAY_GLOBAL")]
    global: bool,
    /// A transceiver (or, with --global, a cluster relay link): ID=ADDR, repeatable. Without
    /// it, a cluster relay follows the cluster's members in Redis (--redis-url).
    #[arg(long = "transceiver", alias = "next-hop", env = "VOICE_EDGE_TRANSCEIVERS_MAP", value_delimiter = ',', value_parser = parse_member, required_unless_present = "redis_url")]
    transceivers: Vec<(u16, SocketAddr)>,
    /// Worker sockets per transceiver: worker W of transceiver ID=ADDR listens on ADDR's port + W
    /// (with Redis membership, the most any member registered).
    #[arg(long, env = "VOICE_EDGE_TRANSCEIVER_WORKERS", default_value_t = 1)]
    transceiver_workers: u8,
    /// Link address of a global relay allowed to hand over client datagrams; repeatable.
    #[arg(
        long = "upstream",
        env = "VOICE_EDGE_RELAY_UPSTREAMS",
        value_delimiter = ','
    )]
    upstreams: Vec<SocketAddr>,
    #[arg(long, env = "VOICE_EDGE_ROUTE_SECRET", hide_env_values = true)]
    route_secret: String,
    /// The previous route secret, still accepted during a key rotation (key id 0 → 1 → …).
    #[arg(long, env = "VOICE_EDGE_ROUTE_SECRET_PREVIOUS", hide_env_values = true)]
    previous_route_secret: Option<String>,
    #[command(flatten)]
    route_key: RouteKeyId,
    /// Worker threads (default: one per core).
    #[arg(long, env = "VOICE_EDGE_RELAY_WORKERS")]
    workers: Option<usize>,
    /// Do not pin workers to cores.
    #[arg(long, env = "VOICE_EDGE_RELAY_NO_PIN")]
    no_pin: bool,
    /// Idle seconds before a flow is forgotten.
    #[arg(long, env = "VOICE_EDGE_FLOW_IDLE", default_value_t = 30)]
    flow_idle: u64,
    /// Flows per worker.
    #[arg(long, env = "VOICE_EDGE_MAX_FLOWS", default_value_t = 100_000)]
    max_flows: usize,
    #[command(flatten)]
    metrics: MetricsListener,
    /// Redis for the flow cache and, without --transceiver, membership:
    /// redis://[[USER]:PASSWORD@]HOST:PORT[/DB]; none by default.
    #[arg(long, env = "VOICE_EDGE_REDIS_URL")]
    redis_url: Option<String>,
}

#[derive(Subcommand, Debug)]
enum RouteCommand {
    /// Print a fresh server ufrag routing to CLUSTER / TRANSCEIVER.
    Mint {
        #[arg(long)]
        cluster: u16,
        #[arg(long)]
        transceiver: u16,
        #[arg(long, default_value_t = 0)]
        worker: u8,
        #[arg(long, env = "VOICE_EDGE_ROUTE_SECRET")]
        route_secret: String,
        #[arg(long, default_value_t = 0)]
        key_id: u8,
    },
    /// Print a ufrag's fields and whether its MAC holds.
    Decode {
        ufrag: String,
        #[arg(long, env = "VOICE_EDGE_ROUTE_SECRET")]
        route_secret: String,
        #[arg(long, default_value_t = 0)]
        key_id: u8,
    },
}

/// Large buffers (a WebSocket message is up to 16 MiB, and is copied a few times on its way in)
/// are mapped and unmapped on their own, so freeing one gives its memory back at once. glibc's
/// default raises that threshold after each such free, up to 32 MiB, so buffers of a flood of
/// big messages came from the heap and stayed in the process's RSS after they were freed.
fn return_large_buffers_to_the_system() {
    // SAFETY: mallopt only sets an allocator parameter; it is called before any other thread
    // exists, and M_MMAP_THRESHOLD with 1 MiB is within the documented range.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// How often a server gives the heap's free pages back to the system (see
/// [`give_freed_heap_back`]).
const HEAP_TRIM_EVERY: Duration = Duration::from_secs(30);

/// glibc keeps the pages of freed memory in each thread's arena (nine here: the loop threads
/// and tokio's), and gives back only what lies at the top of the main one. So a server held on
/// to the high-water mark of its busiest moment: after 500 calls hung up, RSS stayed at 69.9 MB
/// (15 MB before them). A thread of its own trims every [`HEAP_TRIM_EVERY`]: 40 s after the same
/// 500 calls, 36.8 MB. A trim holds one arena's lock at a time and took 0.4 ms in all with 1,000
/// live calls (each is logged under `voice_edge::heap` at debug). It does not stop the slower
/// creep of an hour's churn (bench/soak/README.md): that is memory a trim cannot return, in
/// use or on pages that a live allocation pins.
fn give_freed_heap_back() {
    let spawned = std::thread::Builder::new()
        .name("heap-trim".into())
        .spawn(|| {
            loop {
                std::thread::sleep(HEAP_TRIM_EVERY);
                let started = std::time::Instant::now();
                // SAFETY: malloc_trim only returns free memory to the system; it takes each arena's
                // own lock, so it is safe to call while other threads allocate.
                let released = unsafe { libc::malloc_trim(0) };
                let took = started.elapsed();
                // SAFETY: mallinfo2 only reads the allocator's counters, under its locks.
                let m = unsafe { libc::mallinfo2() };
                log::debug!(
                    target: "voice_edge::heap",
                    "malloc_trim took {took:?} (released: {}); heap in use {} KB in {} KB of arenas, {} KB mapped apart",
                    released != 0,
                    m.uordblks >> 10,
                    m.arena >> 10,
                    m.hblkhd >> 10,
                );
            }
        });
    if let Err(e) = spawned {
        log::warn!("no heap-trim thread ({e}): freed memory stays in the process's RSS");
    }
}

fn main() -> anyhow::Result<()> {
    return_large_buffers_to_the_system();
    let cli = Cli::parse();
    // The load generator drives hundreds of rtc stacks; their per-call info lines would drown
    // the table.
    let default_filter = match cli.command {
        Some(Command::Loadgen(_)) => "warn,voice_edge=info",
        _ => "info",
    };
    let mut logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_filter));
    // One JSON object per line for log pipelines (Loki, CloudWatch, …): VOICE_EDGE_LOG_FORMAT=json.
    if std::env::var("VOICE_EDGE_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json")) {
        logger.format(|buf, record| {
            use std::io::Write;
            let ts = voice_edge::unix_time::now_secs_f64();
            writeln!(
                buf,
                "{}",
                serde_json::json!({
                    "ts": ts,
                    "level": record.level().as_str(),
                    "target": record.target(),
                    "msg": record.args().to_string(),
                })
            )
        });
    }
    logger.init();
    for file in &cli.scripts {
        let name = voice_edge::model::script::library::load_file(file)
            .map_err(|e| anyhow::anyhow!("--script {e}"))?;
        log::info!("script {name:?} loaded from {}", file.display());
    }
    let upstream = cli.upstream.config()?;
    if let Some(u) = &upstream {
        log::info!(
            "upstream: calls for models other than the stubs go to {} (default model {}, key {})",
            u.url,
            u.model,
            if u.key.is_some() { "set" } else { "not set" }
        );
    }
    if matches!(
        cli.command,
        None | Some(Command::Relay(_) | Command::Signaling(_) | Command::Transceiver(_))
    ) {
        give_freed_heap_back();
    }
    match cli.command {
        None => run_all_in_one(AllInOneArgs {
            config: AllInOneConfig {
                upstream,
                ..cli.all.config
            },
            ..cli.all
        }),
        Some(Command::Relay(a)) => run_relay(a),
        Some(Command::Signaling(a)) => run_signaling(a, upstream),
        Some(Command::Transceiver(a)) => run_transceiver(a, upstream),
        Some(Command::Route(r)) => run_route(r),
        Some(Command::Health { url }) => {
            let status = voice_edge::ops::check(&url, Duration::from_secs(3))?;
            println!("{url}: {status}");
            Ok(())
        }
        Some(Command::Loadgen(a)) => {
            let report = voice_edge::loadgen::run(a)?;
            println!("{}", report.to_markdown());
            Ok(())
        }
    }
}

fn run_all_in_one(a: AllInOneArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let lan = a.config.lan.enabled;
        let running = allinone::start(a.config)
        .await?;
        print!("{}", banner(&running, lan));
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => println!("stopping…"),
            _ = term.recv() => {
                println!("SIGTERM: draining (no new calls; up to {} s for live ones)", a.drain_deadline);
                let second = async {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = term.recv() => {}
                    }
                };
                let left = running
                    .drain(Duration::from_secs(a.drain_deadline), second)
                    .await;
                println!("drained: {left} call(s) still live are closed now");
            }
        }
        running.shutdown().await;
        Ok(())
    })
}

/// What a user needs from the startup output: the URL to open (on a phone: the QR code), and the
/// media address clients are told to use, which is what a firewall must let through.
fn banner(r: &Running, lan: bool) -> String {
    let mut out = format!("voice-edge is running: open {}\n", r.http_url);
    if let Some(url) = &r.https_url {
        out += &format!(
            "  on a phone or another machine on this network: open {url}\n  ({}; accept the browser's warning once)\n",
            r.https_cert.as_deref().unwrap_or("TLS")
        );
        if let Ok(code) = qrcode::QrCode::new(url.as_bytes()) {
            // Light modules drawn as blocks: reads as a normal QR code on a dark terminal.
            out += &code
                .render::<qrcode::render::unicode::Dense1x2>()
                .dark_color(qrcode::render::unicode::Dense1x2::Light)
                .light_color(qrcode::render::unicode::Dense1x2::Dark)
                .build();
            out.push('\n');
        }
    } else if !lan && !r.media_addr.ip().is_loopback() {
        out += "  (other devices on this network: run with --lan for HTTPS, which their microphones need)\n";
    }
    let bound = if r.media_bind == r.media_addr {
        String::new()
    } else {
        format!(", bound to {}", r.media_bind)
    };
    out += &format!(
        "  media: clients send UDP to {}{bound}; {} relay(s), {} transceivers, flow cache {}\n",
        r.media_addr,
        r.relays.len(),
        r.transceivers.len(),
        r.flow_cache.as_deref().unwrap_or("off")
    );
    out
}

fn run_relay(a: RelayArgs) -> anyhow::Result<()> {
    use voice_edge::relay::{RelayConfig, Tier};
    use voice_edge::roles::relay::{self, RelayRoleConfig};
    let mut keys = RouteKeys::from_hex(a.route_key.key_id, &a.route_secret)?;
    if let Some(prev) = &a.previous_route_secret {
        keys = keys.with_previous(voice_edge::routing::RouteKey::from_hex(
            a.route_key.key_id.wrapping_sub(1) & 0x0f,
            prev,
        )?);
    }
    let redis_url = a
        .redis_url
        .as_deref()
        .map(voice_edge::cache::parse_redis_url)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let relay = RelayConfig {
        listen: a.listen,
        link: a.internal,
        tier: if a.global {
            Tier::Global
        } else {
            Tier::Cluster { cluster: a.cluster }
        },
        next_hops: a.transceivers.into_iter().collect(),
        hop_workers: a.transceiver_workers,
        upstreams: a.upstreams,
        route_keys: keys,
        workers: a.workers.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        }),
        pin: !a.no_pin,
        flow_idle: Duration::from_secs(a.flow_idle),
        max_flows: a.max_flows,
        learn_outbound: true,
        cache: None,
        live_hops: None,
        local_links: None,
        headroom: Default::default(),
    };
    let running = relay::start(RelayRoleConfig {
        relay,
        redis_url,
        metrics: a.metrics.addr()?,
    })?;
    if let Some(bound) = running.metrics_addr {
        println!("relay metrics on http://{bound}/metrics");
    }
    println!(
        "relay running: udp {} link {}",
        running.handle.public_addr, running.handle.link_addr
    );
    let (tx, rx) = std::sync::mpsc::channel();
    ctrlc_channel(tx);
    let _ = rx.recv();
    println!("stopping… {:?}", running.stop());
    Ok(())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Resolves on SIGINT or SIGTERM; true for SIGTERM (drain), false for SIGINT (stop now).
async fn stop_signal() -> anyhow::Result<bool> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    Ok(tokio::select! {
        _ = tokio::signal::ctrl_c() => false,
        _ = term.recv() => true,
    })
}

fn run_signaling(
    a: SignalingArgs,
    upstream: Option<voice_edge::upstream::UpstreamConfig>,
) -> anyhow::Result<()> {
    use voice_edge::roles::signaling::{self, SignalingRoleConfig};
    runtime()?.block_on(async move {
        let running = signaling::start(SignalingRoleConfig {
            upstream,
            http: a.http,
            admin: Some(a.admin),
            admin_token: a.admin_token,
            redis_url: voice_edge::cache::parse_redis_url(&a.redis_url)
                .map_err(anyhow::Error::msg)?,
            cluster_secret: a.cluster_secret,
            require_keys: a.require_keys,
            api_keys: a.api_keys,
            call_limits: a.call_limits,
            refresh: Duration::from_millis(500),
            http_limits: a.http_limits,
        })
        .await?;
        println!(
            "signaling running: open http://{}/ (admin on {}; members from {})",
            voice_edge::media_address::reachable(running.http_addr),
            running
                .admin_addr
                .map(|a| a.to_string())
                .unwrap_or_default(),
            voice_edge::cache::redact_redis_url(&a.redis_url)
        );
        stop_signal().await?;
        running.stop().await;
        Ok(())
    })
}

fn run_transceiver(
    a: TransceiverArgs,
    upstream: Option<voice_edge::upstream::UpstreamConfig>,
) -> anyhow::Result<()> {
    use voice_edge::roles::transceiver::{self, TransceiverRoleConfig};
    let host = match a.host {
        Some(h) => h,
        None => voice_edge::media_address::HostAddrs::read()
            .primary()
            .ok_or_else(|| anyhow::anyhow!("no network interface to register; pass --host"))?,
    };
    let media = SocketAddr::new(
        a.advertise.ip,
        a.advertise
            .port
            .unwrap_or(voice_edge::media_address::DEFAULT_MEDIA_PORT),
    );
    runtime()?.block_on(async move {
        let running = transceiver::start(TransceiverRoleConfig {
            upstream,
            cluster: a.cluster,
            id: a.id,
            bind: a.bind,
            workers: a.workers,
            media,
            control: a.control,
            host,
            redis_url: voice_edge::cache::parse_redis_url(&a.redis_url)
                .map_err(anyhow::Error::msg)?,
            cluster_secret: a.cluster_secret,
            route_keys: RouteKeys::from_hex(a.route_key.key_id, &a.route_secret)?,
            lifecycle: Default::default(),
            capacity: a.capacity,
            link_sources: a.link_sources,
            heartbeat: Duration::from_secs(1),
            ttl: Duration::from_secs(3),
        })
        .await?;
        if let Some(addr) = a.metrics.addr()? {
            let h = running.handle.clone();
            let bound = voice_edge::ops::serve(
                addr,
                std::sync::Arc::new(move || {
                    let h = h.clone();
                    Box::pin(async move { voice_edge::roles::transceiver::metrics(&h).await })
                }),
            )
            .await?;
            println!("transceiver metrics on http://{bound}/metrics");
        }
        println!(
            "transceiver {}.{} running: link {}, control {}, answers name {media}",
            running.record.cluster, running.record.id, running.record.link, running.control_addr
        );
        if stop_signal().await? {
            println!(
                "SIGTERM: draining (no new calls; up to {} s for live ones)",
                a.drain_deadline
            );
            let left = running.drain(Duration::from_secs(a.drain_deadline)).await;
            println!("drained: {left} call(s) still live are closed now");
        }
        running.stop().await;
        Ok(())
    })
}

/// SIGINT/SIGTERM → one message, without pulling a runtime into the relay role.
fn ctrlc_channel(tx: std::sync::mpsc::Sender<()>) {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("signal runtime");
        rt.block_on(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        });
        let _ = tx.send(());
    });
}

fn run_route(r: RouteCommand) -> anyhow::Result<()> {
    match r {
        RouteCommand::Mint {
            cluster,
            transceiver,
            worker,
            route_secret,
            key_id,
        } => {
            let keys = RouteKeys::from_hex(key_id, &route_secret)?;
            println!("{}", ufrag::mint(&keys, cluster, transceiver, worker));
        }
        RouteCommand::Decode {
            ufrag: u,
            route_secret,
            key_id,
        } => {
            let keys = RouteKeys::from_hex(key_id, &route_secret)?;
            match ufrag::decode(u.as_bytes(), &keys) {
                Ok(h) => println!(
                    "valid: key_id={} cluster={} transceiver={} worker={} nonce={}",
                    h.key_id,
                    h.cluster,
                    h.transceiver,
                    h.worker,
                    hex::encode(h.nonce)
                ),
                Err(e) => {
                    println!("invalid: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
    Ok(())
}
