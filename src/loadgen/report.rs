//! The load test's result and its Markdown table: what `voice-edge loadgen` prints and
//! `bench/load/run.sh` collects. Apart from the run so the table's wording changes without
//! touching how calls are driven.

use std::fmt::Write as _;

use super::LOSS_GRACE;
use super::stats::{Histogram, percentile};

/// Percentiles of one measurement, in milliseconds; `n` is how many calls (or packets) it
/// covers.
#[derive(Debug, Clone, Default)]
pub struct Percentiles {
    pub n: u64,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

impl Percentiles {
    pub(super) fn of(mut v: Vec<f64>) -> Percentiles {
        v.sort_by(|a, b| a.total_cmp(b));
        Percentiles {
            n: v.len() as u64,
            p50: percentile(&v, 50.0),
            p90: percentile(&v, 90.0),
            p99: percentile(&v, 99.0),
            max: v.last().copied(),
        }
    }

    pub(super) fn of_histogram(h: &Histogram) -> Percentiles {
        Percentiles {
            n: h.count(),
            p50: h.percentile_ms(50.0),
            p90: h.percentile_ms(90.0),
            p99: h.percentile_ms(99.0),
            max: h.max_ms(),
        }
    }

    pub fn is_populated(&self) -> bool {
        self.n > 0 && self.p50.is_some() && self.p90.is_some() && self.p99.is_some()
    }
}

/// What the server process cost over the steady window.
#[derive(Debug, Clone)]
pub struct ServerCost {
    pub pid: u32,
    /// Percent of one core, utime + stime over the steady window.
    pub cpu_percent: Option<f64>,
    pub steady_window_s: f64,
    pub rss_idle_kb: u64,
    pub rss_steady_kb: u64,
    /// Calls connected when the steady memory was read.
    pub live_sessions: usize,
    /// Datagrams dropped on the server's UDP sockets (receive buffer full) in the steady window.
    pub udp_drops: Option<u64>,
    /// Percent of one core per server thread name over the steady window, busiest first.
    pub threads: Vec<(String, f64)>,
}

/// The machine around the run, over the steady window: were others competing for the cores?
#[derive(Debug, Clone)]
pub struct HostLoad {
    pub cores: usize,
    /// All processes, in percent of one core (so at most 100 × cores).
    pub busy_percent: f64,
    /// Interrupt + softirq time (the loopback UDP path runs much of its receive side there).
    pub irq_percent: f64,
    /// VM steal time: the hypervisor gave this machine's CPU to someone else.
    pub steal_percent: f64,
    /// Busy time not spent in the server, this load generator or interrupts.
    pub others_percent: Option<f64>,
    /// Machine-wide UDP receive-buffer overflows.
    pub udp_rcvbuf_errors: Option<u64>,
}

impl ServerCost {
    pub fn kb_per_session(&self) -> Option<f64> {
        (self.live_sessions > 0).then(|| {
            (self.rss_steady_kb as f64 - self.rss_idle_kb as f64) / self.live_sessions as f64
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub url: String,
    pub model: String,
    pub sessions: usize,
    pub duration_s: f64,
    pub ramp: f64,
    pub workers: usize,
    pub wall_s: f64,
    pub connected: usize,
    /// Of the admitted calls (offers not refused for load), those that did not work out.
    pub failed: usize,
    /// Offers refused for load (429/503): admission control at work, not failures.
    pub refused: usize,
    /// Offer posted → refusal received.
    pub refusal_ms: Percentiles,
    /// Failure reasons with how many calls each ended, most common first.
    pub failures: Vec<(String, usize)>,
    pub answer_ms: Percentiles,
    pub ice_ms: Percentiles,
    pub dtls_ms: Percentiles,
    pub first_echo_ms: Percentiles,
    pub channel_open_ms: Percentiles,
    pub rtt_ms: Percentiles,
    /// Each call's longest silence between two echoes (20 ms when nothing was lost).
    pub echo_gap_ms: Percentiles,
    pub packets_sent: u64,
    pub packets_received: u64,
    /// Packets sent more than the grace before the end, and how many of them came back.
    pub counted_sent: u64,
    pub counted_received: u64,
    pub loss_percent: f64,
    pub duplicates: u64,
    pub misrouted: u64,
    pub channels_open: usize,
    pub session_updated: usize,
    pub error_events: u64,
    pub disconnects: u64,
    pub hangups_ok: usize,
    pub hangups_sent: usize,
    pub peak_live: usize,
    pub server: Option<ServerCost>,
    pub loadgen_cpu_percent: Option<f64>,
    pub loadgen_rss_kb: Option<u64>,
    /// Datagrams dropped on the load generator's own sockets in the steady window.
    pub loadgen_udp_drops: Option<u64>,
    pub host: Option<HostLoad>,
}

fn fmt_ms(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(x) if x < 10.0 => format!("{x:.2}"),
        Some(x) if x < 100.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.0}"),
    }
}

impl Report {
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "### voice-edge loadgen: {} calls, ramp {}/s, hold {} s, model {} ({} workers, {:.1} s wall, peak {} live)\n",
            self.sessions,
            self.ramp,
            self.duration_s,
            if self.model.is_empty() {
                "(server default)"
            } else {
                &self.model
            },
            self.workers,
            self.wall_s,
            self.peak_live
        );
        let _ = writeln!(s, "| ms | p50 | p90 | p99 | max | n |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
        for (name, p) in [
            ("offer posted → answer received", &self.answer_ms),
            ("offer posted → refusal (429/503)", &self.refusal_ms),
            ("offer posted → ICE connected", &self.ice_ms),
            ("offer posted → DTLS connected", &self.dtls_ms),
            ("offer posted → first echoed packet", &self.first_echo_ms),
            ("offer posted → oai-events open", &self.channel_open_ms),
            ("echo RTT", &self.rtt_ms),
            ("longest echo gap per call", &self.echo_gap_ms),
        ] {
            let _ = writeln!(
                s,
                "| {name} | {} | {} | {} | {} | {} |",
                fmt_ms(p.p50),
                fmt_ms(p.p90),
                fmt_ms(p.p99),
                fmt_ms(p.max),
                p.n
            );
        }
        let _ = writeln!(s, "\n| | |\n|---|---|");
        let _ = writeln!(
            s,
            "| sessions connected (DTLS) / failed | {} / {} of {} |",
            self.connected, self.failed, self.sessions
        );
        if self.refused > 0 {
            let _ = writeln!(
                s,
                "| offers refused for load (429/503) | {} of {} |",
                self.refused, self.sessions
            );
        }
        let _ = writeln!(
            s,
            "| packets sent / echoed | {} / {} |",
            self.packets_sent, self.packets_received
        );
        let _ = writeln!(
            s,
            "| loss (packets sent > {} s before the end) | {:.3} % ({} of {}) |",
            LOSS_GRACE.as_secs(),
            self.loss_percent,
            self.counted_sent - self.counted_received.min(self.counted_sent),
            self.counted_sent
        );
        if self.duplicates > 0 || self.misrouted > 0 {
            let _ = writeln!(
                s,
                "| duplicate / misrouted echoes | {} / {} |",
                self.duplicates, self.misrouted
            );
        }
        let _ = writeln!(
            s,
            "| oai-events open / session.updated | {} / {} |",
            self.channels_open, self.session_updated
        );
        if self.error_events > 0 || self.disconnects > 0 {
            let _ = writeln!(
                s,
                "| error events / ICE disconnects | {} / {} |",
                self.error_events, self.disconnects
            );
        }
        if self.hangups_sent > 0 {
            let _ = writeln!(
                s,
                "| HTTP hang-ups answered 2xx | {} of {} |",
                self.hangups_ok, self.hangups_sent
            );
        }
        match &self.server {
            Some(c) => {
                let cpu = c
                    .cpu_percent
                    .map(|p| format!("{p:.0} % of one core"))
                    .unwrap_or_else(|| "–".into());
                let _ = writeln!(
                    s,
                    "| server CPU (pid {}, steady {:.1} s) | {cpu} |",
                    c.pid, c.steady_window_s
                );
                let per = c
                    .kb_per_session()
                    .map(|k| format!("{k:.0} KB per session"))
                    .unwrap_or_else(|| "–".into());
                let _ = writeln!(
                    s,
                    "| server RSS idle → steady ({} live) | {:.1} → {:.1} MB, {per} |",
                    c.live_sessions,
                    c.rss_idle_kb as f64 / 1024.0,
                    c.rss_steady_kb as f64 / 1024.0
                );
                if !c.threads.is_empty() {
                    let busy: Vec<String> = c
                        .threads
                        .iter()
                        .filter(|(_, p)| *p >= 0.5)
                        .take(8)
                        .map(|(n, p)| format!("{n} {p:.0} %"))
                        .collect();
                    let _ = writeln!(s, "| server threads (steady) | {} |", busy.join(", "));
                }
                if let Some(d) = c.udp_drops {
                    let _ = writeln!(s, "| server UDP receive drops (steady) | {d} |");
                }
            }
            None => {
                let _ = writeln!(
                    s,
                    "| server CPU / memory | not measured (no --server-pid) |"
                );
            }
        }
        if let Some(p) = self.loadgen_cpu_percent {
            let rss = self
                .loadgen_rss_kb
                .map(|k| format!(", {:.1} MB RSS", k as f64 / 1024.0))
                .unwrap_or_default();
            let drops = self
                .loadgen_udp_drops
                .map(|d| format!(", {d} UDP receive drops"))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "| loadgen CPU (steady) | {p:.0} % of one core{rss}{drops} |"
            );
        }
        if let Some(h) = &self.host {
            let others = h
                .others_percent
                .map(|o| format!(", other processes {o:.0} %"))
                .unwrap_or_default();
            let rcvbuf = h
                .udp_rcvbuf_errors
                .map(|e| format!("; host UDP RcvbufErrors +{e}"))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "| host CPU busy (steady, {} cores) | {:.0} % of one core: irq/softirq {:.0} %, VM steal {:.0} %{others}{rcvbuf} |",
                h.cores, h.busy_percent, h.irq_percent, h.steal_percent
            );
        }
        if !self.failures.is_empty() {
            let _ = writeln!(s, "\nFailures:");
            for (why, n) in self.failures.iter().take(5) {
                let _ = writeln!(s, "- {n} × {why}");
            }
            if self.failures.len() > 5 {
                let _ = writeln!(s, "- … {} other reasons", self.failures.len() - 5);
            }
        }
        s
    }
}
