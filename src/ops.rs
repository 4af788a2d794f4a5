//! The operations listener every split role runs (`--metrics`): `GET /metrics` in the
//! Prometheus text format and `GET /health`, on a port of its own so scraping and probes never
//! share the public listener or need the cluster secret. `voice-edge health` is the matching
//! probe (the image's HEALTHCHECK): a UDP-only role such as the relay has nothing else to ask.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

/// Renders the role's metrics in the Prometheus text exposition format (async: a transceiver
/// asks its workers).
pub type MetricsFn =
    Arc<dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = String> + Send>> + Send + Sync>;

pub fn router(metrics: MetricsFn) -> Router {
    Router::new()
        .route("/health", get(|| async { "ok\n" }))
        .route(
            "/metrics",
            get(move || {
                let m = metrics.clone();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        m().await,
                    )
                        .into_response()
                }
            }),
        )
}

/// Binds `addr` and serves [`router`] on the current tokio runtime until the process ends.
pub async fn serve(addr: SocketAddr, metrics: MetricsFn) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the metrics listener on {addr}"))?;
    // Detached: the listener serves until the process ends.
    let server = crate::http_server::HttpServer::spawn(
        listener,
        router(metrics),
        crate::http_server::HttpLimits::default(),
        None,
    )?;
    Ok(server.addr)
}

/// `voice-edge health`: GET `url` (plain `http://host:port/path`) and succeed on a 2xx.
pub fn check(url: &str, timeout: Duration) -> anyhow::Result<u16> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("only http:// URLs, got {url:?}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = authority
        .to_socket_addrs()
        .with_context(|| format!("resolving {authority}"))?
        .next()
        .with_context(|| format!("{authority} resolves to nothing"))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout)
        .with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 64];
    let n = s.read(&mut head)?;
    let line = String::from_utf8_lossy(&head[..n]);
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("not an HTTP reply: {line:?}"))?;
    if !(200..300).contains(&status) {
        bail!("{url} answered {status}");
    }
    Ok(status)
}

/// Prometheus text for a set of counters or gauges of one family, one sample per label value.
/// The values already live in the roles' own atomics and snapshots (the relay's per-reason
/// counters, the transceivers' bookkeeping), so rendering them is all there is to do.
pub fn family(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: &[(&[(&str, &str)], f64)],
) {
    use std::fmt::Write;
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, v) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {v}");
        } else {
            let l: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
                .collect();
            let _ = writeln!(out, "{name}{{{}}} {v}", l.join(","));
        }
    }
}

/// Upper bounds (ms) of [`Histogram`]'s buckets: call setup is single-digit ms on a LAN and
/// seconds when something is wrong, loop lag a millisecond or two until a core saturates, so the
/// buckets cover all of it.
pub const SETUP_BUCKETS_MS: [u64; 11] = [2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];

/// A fixed-bucket histogram of milliseconds: cheap to record on a socket loop (no allocation),
/// summed across workers by plain addition.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Histogram {
    /// Observations per bucket of [`SETUP_BUCKETS_MS`] (not cumulative), then the overflow.
    pub counts: [u64; 12],
    pub sum_ms: u64,
}

impl Histogram {
    pub fn record(&mut self, d: Duration) {
        let ms = d.as_millis() as u64;
        let i = SETUP_BUCKETS_MS
            .iter()
            .position(|&b| ms <= b)
            .unwrap_or(SETUP_BUCKETS_MS.len());
        self.counts[i] += 1;
        self.sum_ms += ms;
    }

    pub fn merge(mut self, o: &Histogram) -> Histogram {
        for (a, b) in self.counts.iter_mut().zip(o.counts) {
            *a += b;
        }
        self.sum_ms += o.sum_ms;
        self
    }

    /// This histogram's samples (buckets, sum, count) in seconds, the unit Prometheus expects.
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        use std::fmt::Write;
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cum = 0;
        for (i, b) in SETUP_BUCKETS_MS.iter().enumerate() {
            cum += self.counts[i];
            let le = *b as f64 / 1000.0;
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cum}");
        }
        cum += self.counts[SETUP_BUCKETS_MS.len()];
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {cum}");
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum_ms as f64 / 1000.0);
        let _ = writeln!(out, "{name}_count{braces} {cum}");
    }
}

/// One Prometheus histogram family: its HELP and TYPE once, then each labelled histogram
/// (`labels` as `key="value"`, empty for none).
pub fn histogram_family(out: &mut String, name: &str, help: &str, series: &[(&str, &Histogram)]) {
    use std::fmt::Write;
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    for (labels, h) in series {
        h.render(out, name, labels);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn histograms_bucket_merge_and_render_cumulatively() {
        let mut h = Histogram::default();
        h.record(Duration::from_millis(1));
        h.record(Duration::from_millis(7));
        h.record(Duration::from_millis(9000));
        let h = h.merge(&h.clone());
        let mut s = String::new();
        histogram_family(&mut s, "x_seconds", "X.", &[("step=\"ice\"", &h)]);
        assert!(
            s.starts_with("# HELP x_seconds X.\n# TYPE x_seconds histogram\n"),
            "{s}"
        );
        assert!(
            s.contains("x_seconds_bucket{step=\"ice\",le=\"0.002\"} 2\n"),
            "{s}"
        );
        assert!(
            s.contains("x_seconds_bucket{step=\"ice\",le=\"0.01\"} 4\n"),
            "{s}"
        );
        assert!(
            s.contains("x_seconds_bucket{step=\"ice\",le=\"5\"} 4\n"),
            "{s}"
        );
        assert!(
            s.contains("x_seconds_bucket{step=\"ice\",le=\"+Inf\"} 6\n"),
            "{s}"
        );
        assert!(s.contains("x_seconds_count{step=\"ice\"} 6\n"), "{s}");
        assert!(s.contains("x_seconds_sum{step=\"ice\"} 18.016\n"), "{s}");
    }

    use super::*;

    #[test]
    fn families_render_in_the_text_format() {
        let mut s = String::new();
        family(
            &mut s,
            "voice_edge_relay_packets_total",
            "counter",
            "Datagrams by outcome.",
            &[
                (&[("reason", "forwarded_in")], 3.0),
                (&[("reason", "bad\"route")], 1.0),
            ],
        );
        assert_eq!(
            s,
            "# HELP voice_edge_relay_packets_total Datagrams by outcome.\n\
             # TYPE voice_edge_relay_packets_total counter\n\
             voice_edge_relay_packets_total{reason=\"forwarded_in\"} 3\n\
             voice_edge_relay_packets_total{reason=\"bad\\\"route\"} 1\n"
        );
    }

    #[tokio::test]
    async fn health_and_metrics_answer_and_the_probe_reads_them() {
        let addr = serve(
            "127.0.0.1:0".parse().unwrap(),
            Arc::new(|| Box::pin(async { "up 1\n".to_owned() })),
        )
        .await
        .unwrap();
        let url = format!("http://{addr}/health");
        let status = tokio::task::spawn_blocking(move || check(&url, Duration::from_secs(2)))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(status, 200);
        let url = format!("http://{addr}/nothing");
        assert!(
            tokio::task::spawn_blocking(move || check(&url, Duration::from_secs(2)))
                .await
                .unwrap()
                .is_err()
        );
    }
}
