//! The split roles as a deployment runs them, on separate hosts: every role is its own process
//! of the release binary in its own Linux network namespace, the namespaces joined by a bridge
//! (a switch in one more namespace) through veth pairs, one IPv4 address each on a private /24.
//! No role shares a loopback with another: Redis, the relay, two transceivers, signaling and a
//! real WebRTC client (`voice-edge loadgen`) reach each other only over those addresses.
//!
//! Phase 1: calls from the client host cross signaling (HTTP), the control API (signaling →
//! transceiver hosts), the relay (UDP, client → relay → transceiver and back) and come back
//! echoed; placement spreads them over both transceivers, whose registered addresses are the
//! hosts' own. Phase 2: one transceiver host dies (SIGKILL, no clean leave); its record expires
//! in Redis, signaling stops listing it within a few seconds and new calls all land on the other.
//!
//! Needs root, iproute2 (`ip netns`, veth, bridge) and redis-server. It fails, never skips,
//! when they are missing: CI runs as root and installs both. (The same roles in one process on
//! loopback: tests/integration/split_roles.rs.)

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use voice_edge::membership::registry::{self, MemberRecord};

const BIN: &str = env!("CARGO_BIN_EXE_voice-edge");
const CLUSTER_SECRET: &str = "multi-host-cluster-secret";
/// Signaling's admin listener is not loopback here, so it needs a token (every GET sends it).
const ADMIN_TOKEN: &str = "multi-host-admin-token";
const ROUTE_SECRET: &str = "8899aabbccddeeff0011223344556677";
/// The hosts' /24. Every namespace (and so every address) is private to one run, so parallel
/// runs cannot clash; it is still chosen to be unlikely on a real network.
const SUBNET: [u8; 3] = [10, 77, 231];

/// The hosts, each a network namespace with one interface on the bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Host {
    Redis,
    Relay,
    T1,
    T2,
    Signaling,
    Client,
}

const HOSTS: [Host; 6] = [
    Host::Redis,
    Host::Relay,
    Host::T1,
    Host::T2,
    Host::Signaling,
    Host::Client,
];

impl Host {
    fn name(self) -> &'static str {
        match self {
            Host::Redis => "redis",
            Host::Relay => "relay",
            Host::T1 => "t1",
            Host::T2 => "t2",
            Host::Signaling => "sig",
            Host::Client => "client",
        }
    }

    fn ip(self) -> Ipv4Addr {
        let last = match self {
            Host::Redis => 10,
            Host::Relay => 20,
            Host::T1 => 31,
            Host::T2 => 32,
            Host::Signaling => 40,
            Host::Client => 50,
        };
        Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], last)
    }

    fn at(self, port: u16) -> SocketAddr {
        SocketAddr::new(self.ip().into(), port)
    }
}

const REDIS_PORT: u16 = 6379;
const RELAY_PORT: u16 = 3478;
const RELAY_LINK_PORT: u16 = 3479;
const LINK_PORT: u16 = 4000;
const CONTROL_PORT: u16 = 7000;
const HTTP_PORT: u16 = 8080;
const ADMIN_PORT: u16 = 8081;

fn redis_url() -> String {
    format!("redis://{}", Host::Redis.at(REDIS_PORT))
}

/// A Redis connection (from the calling thread's namespace) whose replies are awaited 2 s at most.
fn redis_conn() -> anyhow::Result<redis::Connection> {
    let c = registry::connect(&redis_url())?;
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.set_write_timeout(Some(Duration::from_secs(2)))?;
    Ok(c)
}

/// Runs `ip ARGS`, panicking with its stderr when it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running `ip {}`: {e}", args.join(" ")));
    assert!(
        out.status.success(),
        "`ip {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// Fails (never skips) unless this process can build the hosts.
fn check_prerequisites() {
    // SAFETY: a plain syscall without arguments.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "tests/multi_host.rs creates network namespaces and must run as root (euid is {euid}); CI runs it as root"
    );
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "`ip -V` failed ({}): {}; tests/multi_host.rs needs iproute2",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!(
            "`ip` (iproute2) is needed by tests/multi_host.rs and could not be run: {e}; install iproute2 (apt-get install iproute2)"
        ),
    }
    match Command::new("redis-server").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        other => panic!(
            "redis-server is needed by tests/multi_host.rs ({other:?}); scripts/test.sh installs Debian's redis-server"
        ),
    }
}

/// The namespaces of one run, deleted on drop (also when the test panics).
struct Net {
    prefix: String,
    created: Vec<String>,
}

impl Net {
    fn ns(&self, host: Host) -> String {
        format!("{}-{}", self.prefix, host.name())
    }

    fn switch(&self) -> String {
        format!("{}-sw", self.prefix)
    }

    /// A switch namespace with a bridge, and one namespace per host with a veth into it.
    fn build() -> Net {
        // Names carry the pid so parallel runs never clash; this file holds one test (two
        // phases) for that reason: a second #[test] here would run in the same process.
        let prefix = format!("ve{}", std::process::id());
        let mut net = Net {
            prefix,
            created: vec![],
        };
        let mut names = vec![net.switch()];
        names.extend(HOSTS.iter().map(|h| net.ns(*h)));
        // A namespace already named like ours is a leftover of a killed run whose pid this
        // process now has (names carry the pid): nobody else can be using it.
        let listed = Command::new("ip")
            .args(["netns", "list"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
            .unwrap_or_default();
        for name in &names {
            if listed
                .lines()
                .any(|l| l.split_whitespace().next() == Some(name.as_str()))
            {
                let _ = Command::new("ip").args(["netns", "del", name]).status();
            }
        }
        for name in &names {
            ip(&["netns", "add", name]);
            net.created.push(name.clone());
        }
        let sw = net.switch();
        ip(&[
            "-n",
            &sw,
            "link",
            "add",
            "br0",
            "type",
            "bridge",
            "stp_state",
            "0",
            "forward_delay",
            "0",
        ]);
        ip(&["-n", &sw, "link", "set", "lo", "up"]);
        ip(&["-n", &sw, "link", "set", "br0", "up"]);
        for (i, host) in HOSTS.iter().enumerate() {
            let ns = net.ns(*host);
            let port = format!("p{i}");
            ip(&[
                "-n", &sw, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                &ns,
            ]);
            ip(&["-n", &sw, "link", "set", &port, "master", "br0"]);
            ip(&["-n", &sw, "link", "set", &port, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", host.ip()),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
        }
        net
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for name in self.created.iter().rev() {
            match Command::new("ip").args(["netns", "del", name]).output() {
                Ok(o) if o.status.success() => {}
                Ok(o) => eprintln!(
                    "multi_host: `ip netns del {name}` failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
                Err(e) => eprintln!("multi_host: `ip netns del {name}`: {e}"),
            }
        }
    }
}

/// Runs `f` on a thread that entered `ns`'s network namespace: sockets it opens live there, as
/// on that host. (Network namespaces are per thread; the test's own threads stay where they are.)
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = File::open(&path).unwrap_or_else(|e| panic!("opening {path}: {e}"));
        // SAFETY: setns on an open namespace file; it changes only this thread's namespace.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns({path}): {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// A blocking HTTP/1.1 GET with timeouts: (status, body).
fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    s.set_write_timeout(Some(Duration::from_secs(5))).ok();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("write to {addr}: {e}"))?;
    let mut raw = vec![];
    s.read_to_end(&mut raw)
        .map_err(|e| format!("read from {addr}: {e}"))?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP head from {addr}: {text:?}"))?;
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line from {addr}: {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// One process on one host, its stdout and stderr in files; killed (and reaped) on drop.
struct Proc {
    name: String,
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
    status: Option<ExitStatus>,
}

impl Proc {
    fn spawn(net: &Net, dir: &std::path::Path, host: Host, name: &str, cmd: &[&str]) -> Proc {
        let stdout = dir.join(format!("{name}.stdout"));
        let stderr = dir.join(format!("{name}.stderr"));
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &net.ns(host)])
            .args(cmd)
            .stdin(Stdio::null())
            .stdout(File::create(&stdout).unwrap())
            .stderr(File::create(&stderr).unwrap());
        // SAFETY: only async-signal-safe prctl between fork and exec. If the test process dies
        // without unwinding (SIGKILL), the roles die with it instead of keeping the namespaces.
        unsafe {
            c.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = c
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name} ({cmd:?}) in {}: {e}", net.ns(host)));
        Proc {
            name: name.to_owned(),
            child,
            stdout,
            stderr,
            status: None,
        }
    }

    fn out(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    fn tail(&self, lines: usize) -> String {
        let mut s = String::new();
        for (what, path) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let all: Vec<&str> = text.lines().collect();
            let from = all.len().saturating_sub(lines);
            s += &format!(
                "----- {} {what} ({} lines, last {}) -----\n",
                self.name,
                all.len(),
                all.len() - from
            );
            for l in &all[from..] {
                s += l;
                s.push('\n');
            }
        }
        s
    }

    /// The exit status if it has exited.
    fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// SIGKILL, no goodbye (the pid is the role's own: `ip netns exec` execs it).
    fn kill(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }

    /// Sends `sig` and waits up to `within` for the exit.
    fn signal_and_wait(&mut self, sig: i32, within: Duration) -> Option<ExitStatus> {
        if self.exited().is_none() {
            // SAFETY: kill(2) on our own child's pid, not yet reaped.
            unsafe { libc::kill(self.child.id() as i32, sig) };
        }
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The hosts and the roles running on them. Drop kills every process, then deletes the
/// namespaces; when the test failed it prints the roles' logs first.
struct Testbed {
    procs: Vec<Proc>,
    dir: PathBuf,
    net: Net,
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        if failed {
            eprintln!(
                "multi_host failed; role logs (full files in {}):",
                self.dir.display()
            );
            for p in &self.procs {
                eprint!("{}", p.tail(40));
            }
        }
        for p in &mut self.procs {
            p.kill();
        }
        self.procs.clear();
        if !failed {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        // self.net drops next: the namespaces go once nothing runs in them.
    }
}

/// Polls `f` until it returns `Some`, or panics after `within` with `what` and the last
/// observation.
fn wait_for<T>(what: &str, within: Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + within;
    loop {
        match f() {
            Ok(v) => return v,
            Err(last) => {
                assert!(
                    Instant::now() < deadline,
                    "timed out after {within:?} waiting for {what}; last: {last}"
                );
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Testbed {
    fn start(&mut self, host: Host, name: &str, cmd: &[&str]) -> usize {
        let p = Proc::spawn(&self.net, &self.dir, host, name, cmd);
        self.procs.push(p);
        self.procs.len() - 1
    }

    /// Waits for a line containing `needle` on process `i`'s stdout; fails at once if it exits.
    fn wait_line(&mut self, i: usize, needle: &str, within: Duration) -> String {
        let name = self.procs[i].name.clone();
        let procs = &mut self.procs;
        wait_for(&format!("{name} to print {needle:?}"), within, || {
            if let Some(line) = procs[i].out().lines().find(|l| l.contains(needle)) {
                return Ok(line.to_owned());
            }
            if let Some(st) = procs[i].exited() {
                panic!("{name} exited ({st}) before printing {needle:?}");
            }
            Err("not yet".into())
        })
    }

    /// GET on signaling's admin listener, from the client host.
    fn admin(&self, path: &str) -> Result<Value, String> {
        let (addr, path) = (Host::Signaling.at(ADMIN_PORT), path.to_owned());
        let (status, body) = in_ns(&self.net.ns(Host::Client), move || http_get(addr, &path))?;
        if status != 200 {
            return Err(format!("status {status}: {body}"));
        }
        serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))
    }

    /// The transceiver ids signaling lists, with the control address each registered.
    fn listed_transceivers(&self) -> Result<BTreeMap<u16, String>, String> {
        let stats = self.admin("/admin/stats")?;
        let list = stats["transceivers"]
            .as_array()
            .ok_or_else(|| format!("no transceivers array: {stats}"))?;
        Ok(list
            .iter()
            .map(|t| {
                (
                    t["id"].as_u64().unwrap_or(0) as u16,
                    t["control"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect())
    }

    /// The members in Redis, read from the signaling host.
    fn members(&self) -> Result<Vec<MemberRecord>, String> {
        in_ns(&self.net.ns(Host::Signaling), || {
            redis_conn()
                .and_then(|mut c| registry::list(&mut c, Some(0)))
                .map_err(|e| format!("{e:#}"))
        })
    }

    /// Runs `voice-edge loadgen` on the client host against signaling, polling
    /// `/admin/calls` while it runs. Kills it after 60 s.
    fn loadgen(&mut self, name: &str, sessions: usize, hold_s: u32, ramp: f64) -> LoadRun {
        let url = format!("http://{}", Host::Signaling.at(HTTP_PORT));
        let (sessions_s, hold, ramp) = (sessions.to_string(), hold_s.to_string(), ramp.to_string());
        let cmd = [
            BIN,
            "loadgen",
            "--url",
            &url,
            "--sessions",
            &sessions_s,
            "--duration",
            &hold,
            "--ramp",
            &ramp,
            "--model",
            "loopback",
            "--workers",
            "1",
        ];
        let i = self.start(Host::Client, name, &cmd);
        let started = Instant::now();
        let mut seen: BTreeMap<String, SeenCall> = BTreeMap::new();
        let mut unreachable = vec![];
        let status = loop {
            if let Some(st) = self.procs[i].exited() {
                break st;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{name} still running after 60 s"
            );
            if let Ok(v) = self.admin("/admin/calls") {
                for c in v["calls"].as_array().into_iter().flatten() {
                    let id = c["call_id"].as_str().unwrap_or("").to_owned();
                    let e = seen.entry(id).or_default();
                    e.transceiver = c["transceiver"].as_u64().map(|t| t as u16);
                    e.client = c["client"].as_str().map(str::to_owned).or(e.client.take());
                    e.via_relay = c["via_relay"]
                        .as_str()
                        .map(str::to_owned)
                        .or(e.via_relay.take());
                    e.connected |= c["state"] == "connected";
                    e.packets_in = e
                        .packets_in
                        .max(c["counters"]["packets_in"].as_u64().unwrap_or(0));
                }
                for u in v["unreachable"].as_array().into_iter().flatten() {
                    unreachable.push(u.clone());
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        };
        let wall = started.elapsed();
        let table = self.procs[i].out();
        let stderr = std::fs::read_to_string(&self.procs[i].stderr).unwrap_or_default();
        assert!(
            status.success(),
            "{name} exited with {status}:\n{table}\n{stderr}"
        );
        LoadRun {
            report: LoadReport::parse(&table),
            table,
            seen,
            unreachable,
            wall,
        }
    }
}

#[derive(Debug, Default)]
struct SeenCall {
    transceiver: Option<u16>,
    client: Option<String>,
    via_relay: Option<String>,
    connected: bool,
    packets_in: u64,
}

struct LoadRun {
    report: LoadReport,
    table: String,
    /// Calls `/admin/calls` listed while the load generator ran, by call id.
    seen: BTreeMap<String, SeenCall>,
    unreachable: Vec<Value>,
    wall: Duration,
}

impl LoadRun {
    fn by_transceiver(&self) -> BTreeMap<u16, usize> {
        let mut m = BTreeMap::new();
        for c in self.seen.values() {
            *m.entry(c.transceiver.unwrap_or(0)).or_insert(0) += 1;
        }
        m
    }
}

/// What the load generator's markdown table says (see `Report::to_markdown`).
#[derive(Debug, Default)]
struct LoadReport {
    connected: usize,
    failed: usize,
    sessions: usize,
    sent: u64,
    echoed: u64,
    loss_percent: f64,
    misrouted: u64,
    channels_open: usize,
    session_updated: usize,
    hangups_ok: usize,
    hangups_sent: usize,
}

impl LoadReport {
    /// The value cell of the `| label | value |` row starting with `label`.
    fn row<'a>(table: &'a str, label: &str) -> Option<&'a str> {
        table
            .lines()
            .find(|l| l.starts_with(&format!("| {label}")))
            .and_then(|l| l.split('|').nth(2))
            .map(str::trim)
    }

    /// The numbers in a cell, in order ("6 / 0 of 6" → [6, 0, 6]).
    fn numbers(cell: Option<&str>) -> Vec<f64> {
        cell.unwrap_or("")
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter_map(|t| t.parse().ok())
            .collect()
    }

    fn parse(table: &str) -> LoadReport {
        let n = |label: &str| Self::numbers(Self::row(table, label));
        let sessions = n("sessions connected (DTLS) / failed");
        assert_eq!(sessions.len(), 3, "no sessions row in:\n{table}");
        let packets = n("packets sent / echoed");
        assert_eq!(packets.len(), 2, "no packets row in:\n{table}");
        let loss = n("loss (packets sent >");
        assert!(!loss.is_empty(), "no loss row in:\n{table}");
        let channels = n("oai-events open / session.updated");
        let dup = n("duplicate / misrouted echoes");
        let hangups = n("HTTP hang-ups answered 2xx");
        LoadReport {
            connected: sessions[0] as usize,
            failed: sessions[1] as usize,
            sessions: sessions[2] as usize,
            sent: packets[0] as u64,
            echoed: packets[1] as u64,
            loss_percent: loss[0],
            misrouted: dup.get(1).copied().unwrap_or(0.0) as u64,
            channels_open: channels.first().copied().unwrap_or(0.0) as usize,
            session_updated: channels.get(1).copied().unwrap_or(0.0) as usize,
            hangups_ok: hangups.first().copied().unwrap_or(0.0) as usize,
            hangups_sent: hangups.get(1).copied().unwrap_or(0.0) as usize,
        }
    }
}

/// Checks a finished run: every call connected, echoed, hung up, and seen by `/admin/calls`
/// with the client host's address, via the relay's link address.
fn check_run(run: &LoadRun, sessions: usize) {
    let r = &run.report;
    let t = &run.table;
    assert_eq!(r.sessions, sessions, "{t}");
    assert_eq!(r.connected, sessions, "not every call connected:\n{t}");
    assert_eq!(r.failed, 0, "calls failed:\n{t}");
    assert!(r.sent > 0 && r.echoed > 0, "no echo came back:\n{t}");
    assert!(r.loss_percent < 3.0, "echo loss {} %:\n{t}", r.loss_percent);
    assert_eq!(r.misrouted, 0, "echoes came back on the wrong call:\n{t}");
    assert_eq!(
        r.channels_open, sessions,
        "oai-events did not open on every call:\n{t}"
    );
    assert_eq!(r.session_updated, sessions, "{t}");
    assert_eq!(
        (r.hangups_ok, r.hangups_sent),
        (sessions, sessions),
        "hang-ups did not all cross signaling and the control API:\n{t}"
    );
    assert!(
        run.unreachable.is_empty(),
        "signaling could not reach a transceiver's control API: {:?}",
        run.unreachable
    );
    assert_eq!(
        run.seen.len(),
        sessions,
        "/admin/calls did not list every call while they were held: {:?}",
        run.seen
    );
    let client = Host::Client.ip().to_string();
    let relay_link = Host::Relay.at(RELAY_LINK_PORT).to_string();
    for (id, c) in &run.seen {
        assert!(c.connected, "call {id} never listed as connected: {c:?}");
        assert!(c.packets_in > 0, "call {id} received nothing: {c:?}");
        let from = c.client.as_deref().unwrap_or("none");
        assert!(
            from.starts_with(&format!("{client}:")),
            "call {id}: the transceiver sees client {from}, not the client host {client} (the relay's link header carries the client address)"
        );
        assert_eq!(
            c.via_relay.as_deref(),
            Some(relay_link.as_str()),
            "call {id} did not come through the relay's link address: {c:?}"
        );
    }
}

#[test]
fn split_roles_on_separate_hosts_place_spread_and_survive_a_dead_transceiver() {
    let t0 = Instant::now();
    check_prerequisites();
    let dir = std::env::temp_dir().join(format!("voice-edge-multi-host-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let net = Net::build();
    let mut tb = Testbed {
        procs: vec![],
        dir,
        net,
    };

    // Redis, on its own host; reachable from the signaling host before anything needs it.
    let (redis_port, redis_ip) = (REDIS_PORT.to_string(), Host::Redis.ip().to_string());
    let redis = tb.start(
        Host::Redis,
        "redis",
        &[
            "redis-server",
            "--port",
            &redis_port,
            "--bind",
            &redis_ip,
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
        ],
    );
    {
        let ns = tb.net.ns(Host::Signaling);
        let procs = &mut tb.procs;
        wait_for(
            "Redis reachable from the signaling host",
            Duration::from_secs(10),
            || {
                if let Some(st) = procs[redis].exited() {
                    panic!("redis-server exited: {st}");
                }
                let addr = Host::Redis.at(REDIS_PORT);
                in_ns(&ns, move || {
                    TcpStream::connect_timeout(&addr, Duration::from_millis(500))
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                })
            },
        );
    }

    // The relay: members from Redis (no --transceiver).
    let url = redis_url();
    let (listen, link) = (
        Host::Relay.at(RELAY_PORT).to_string(),
        Host::Relay.at(RELAY_LINK_PORT).to_string(),
    );
    let relay = tb.start(
        Host::Relay,
        "relay",
        &[
            BIN,
            "relay",
            "--listen",
            &listen,
            "--internal",
            &link,
            "--cluster",
            "0",
            "--route-secret",
            ROUTE_SECRET,
            "--transceiver-workers",
            "2",
            "--redis-url",
            &url,
            "--workers",
            "1",
            "--no-pin",
        ],
    );
    let line = tb.wait_line(relay, "relay running", Duration::from_secs(10));
    assert_eq!(
        line.trim(),
        format!("relay running: udp {listen} link {link}"),
        "the relay bound something else"
    );

    // Two transceivers, one after the other so ids are claimed in order (the mapping below
    // does not rely on it: it goes by registered address).
    for (host, name) in [(Host::T1, "t1"), (Host::T2, "t2")] {
        let (bind, control, own) = (
            host.at(LINK_PORT).to_string(),
            host.at(CONTROL_PORT).to_string(),
            host.ip().to_string(),
        );
        let i = tb.start(
            host,
            name,
            &[
                BIN,
                "transceiver",
                "--bind",
                &bind,
                "--workers",
                "2",
                "--advertise",
                &listen,
                "--control",
                &control,
                "--host",
                &own,
                "--redis-url",
                &url,
                "--cluster-secret",
                CLUSTER_SECRET,
                "--route-secret",
                ROUTE_SECRET,
            ],
        );
        tb.wait_line(i, "running: link", Duration::from_secs(10));
    }

    // Signaling, its public and admin listeners on its own address.
    let (http, admin) = (
        Host::Signaling.at(HTTP_PORT).to_string(),
        Host::Signaling.at(ADMIN_PORT).to_string(),
    );
    let sig = tb.start(
        Host::Signaling,
        "signaling",
        &[
            BIN,
            "signaling",
            "--http",
            &http,
            "--admin",
            &admin,
            "--admin-token",
            ADMIN_TOKEN,
            "--redis-url",
            &url,
            "--cluster-secret",
            CLUSTER_SECRET,
        ],
    );
    tb.wait_line(sig, "signaling running", Duration::from_secs(10));

    // Ready: signaling (from the client host, over the network) lists both transceivers.
    let listed = wait_for(
        "signaling to list both transceivers",
        Duration::from_secs(10),
        || {
            let l = tb.listed_transceivers()?;
            if l.len() == 2 {
                Ok(l)
            } else {
                Err(format!("{l:?}"))
            }
        },
    );
    let id_of = |host: Host| -> u16 {
        let control = host.at(CONTROL_PORT).to_string();
        *listed
            .iter()
            .find(|(_, c)| **c == control)
            .unwrap_or_else(|| panic!("no transceiver registered control {control}: {listed:?}"))
            .0
    };
    let (t1_id, t2_id) = (id_of(Host::T1), id_of(Host::T2));
    assert_ne!(t1_id, t2_id);

    // What Redis holds: each transceiver's own host address (link and control) and the relay
    // as clients reach it.
    let members = tb.members().expect("reading members from Redis");
    assert_eq!(members.len(), 2, "{members:?}");
    for (host, id) in [(Host::T1, t1_id), (Host::T2, t2_id)] {
        let m = members.iter().find(|m| m.id == id).unwrap();
        assert_eq!(m.link, host.at(LINK_PORT), "{m:?}");
        assert_eq!(m.control, host.at(CONTROL_PORT), "{m:?}");
        assert_eq!(m.media, Host::Relay.at(RELAY_PORT), "{m:?}");
        assert_eq!(m.workers, 2, "{m:?}");
        assert!(!m.draining, "{m:?}");
    }
    // The relay follows membership from its own host: it holds a Redis connection from there,
    // and re-reads members every 500 ms; one more period and its table has both.
    {
        let relay_ip = format!("addr={}:", Host::Relay.ip());
        let ns = tb.net.ns(Host::Signaling);
        wait_for(
            "the relay's Redis connection",
            Duration::from_secs(10),
            || {
                let clients: String = in_ns(&ns, || {
                    redis_conn()
                        .and_then(|mut c| Ok(redis::cmd("CLIENT").arg("LIST").query(&mut c)?))
                        .map_err(|e| format!("{e:#}"))
                })?;
                if clients.contains(&relay_ip) {
                    Ok(())
                } else {
                    Err(clients)
                }
            },
        );
        std::thread::sleep(Duration::from_millis(600));
    }
    // Admin is not on the public listener, also across hosts.
    let (status, _) = in_ns(&tb.net.ns(Host::Client), {
        let a = Host::Signaling.at(HTTP_PORT);
        move || http_get(a, "/admin/stats")
    })
    .expect("public listener reachable from the client host");
    assert_eq!(
        status, 404,
        "admin must not be served on the public listener"
    );
    let ready = t0.elapsed();

    // Phase 1: 6 calls at 2 per second, held 4 s. Membership reports load every second and
    // signaling re-reads it every 500 ms, so by the call at 2 s the first call's load shows and
    // later ones must spread onto the idle transceiver.
    let p1 = Instant::now();
    let run1 = tb.loadgen("loadgen-1", 6, 4, 2.0);
    check_run(&run1, 6);
    let spread = run1.by_transceiver();
    assert_eq!(
        spread.keys().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from([t1_id, t2_id]),
        "calls were not spread over both transceivers: {spread:?}\n{}",
        run1.table
    );
    // Hang-ups reached the transceivers: nothing left live.
    wait_for("calls to end after hang-up", Duration::from_secs(5), || {
        let v = tb.admin("/admin/calls")?;
        let n = v["calls"].as_array().map_or(0, |a| a.len());
        if n == 0 { Ok(()) } else { Err(v.to_string()) }
    });
    let phase1 = p1.elapsed();

    // Phase 2: t1's host dies (SIGKILL: no drain, no leave). Its record expires (TTL 3 s after
    // its last heartbeat) and signaling drops it at its next read.
    let p2 = Instant::now();
    let t1_proc = tb.procs.iter().position(|p| p.name == "t1").unwrap();
    tb.procs[t1_proc].kill();
    let killed = Instant::now();
    let left = wait_for(
        "signaling to drop the killed transceiver",
        Duration::from_secs(10),
        || {
            let l = tb.listed_transceivers()?;
            if l.len() == 1 {
                Ok(l)
            } else {
                Err(format!("{l:?}"))
            }
        },
    );
    let dropped_after = killed.elapsed();
    assert_eq!(
        left.keys().copied().collect::<Vec<_>>(),
        vec![t2_id],
        "the survivor is not t2: {left:?}"
    );
    assert!(
        dropped_after < Duration::from_secs(6),
        "the dead transceiver stayed in placement {dropped_after:?} (TTL 3 s + 0.5 s refresh)"
    );
    let members = tb.members().expect("reading members from Redis");
    assert_eq!(
        members.iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![t2_id],
        "{members:?}"
    );
    // The relay's table follows on the same schedule.
    std::thread::sleep(Duration::from_millis(600));
    let run2 = tb.loadgen("loadgen-2", 3, 2, 5.0);
    check_run(&run2, 3);
    assert_eq!(
        run2.by_transceiver(),
        BTreeMap::from([(t2_id, 3)]),
        "after t1 died, calls must all go to t2\n{}",
        run2.table
    );
    let phase2 = p2.elapsed();

    // The relay, stopped cleanly, reports what it forwarded: one flow per call (the client's
    // 5-tuple), nothing dropped for a bad route.
    let st = tb.procs[relay].signal_and_wait(libc::SIGTERM, Duration::from_secs(10));
    assert!(st.is_some(), "the relay did not stop on SIGTERM");
    let out = tb.procs[relay].out();
    let counter = |name: &str| -> u64 {
        out.split(&format!("{name}: "))
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in the relay's output:\n{out}"))
    };
    let (flows, bad_route, unknown) = (
        counter("flows_created"),
        counter("dropped_bad_route"),
        counter("dropped_unknown_transceiver"),
    );
    assert!(
        flows >= 9,
        "relay created {flows} flows for 9 calls:\n{out}"
    );
    assert_eq!(bad_route, 0, "{out}");

    eprintln!(
        "multi_host: ready in {ready:?}; phase 1 {phase1:?} (loadgen {:?}, spread {spread:?}, t1 = {t1_id}, t2 = {t2_id}, loss {} %); killed t1 dropped from placement after {dropped_after:?}; phase 2 {phase2:?} (loadgen {:?}, loss {} %); relay flows {flows}, dropped_unknown_transceiver {unknown}; total {:?}",
        run1.wall,
        run1.report.loss_percent,
        run2.wall,
        run2.report.loss_percent,
        t0.elapsed()
    );
    eprintln!("{}\n{}", run1.table, run2.table);
}
