//! Signaling for the load generator: a minimal HTTP/1.1 client on smol, many requests in flight
//! on one thread of their own, so a slow answer never stalls a media loop.
//!
//! Hand-written because all it needs is one `POST` with `Connection: close`, its status,
//! `Location` and body: an HTTP crate's client here would bring a second runtime (hyper on tokio)
//! into a process whose other loops are the poller and smol.
//!
//! Workers hand jobs to the pool and get replies on their own channel, woken through an
//! their poller's waker.

use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use async_io::{Async, Timer};
use futures_lite::{AsyncReadExt, AsyncWriteExt, future};

/// Enough for any answer SDP; more means something else answered.
const MAX_RESPONSE: usize = 256 * 1024;

#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    /// For the Host header.
    pub authority: String,
}

impl Target {
    /// Accepts `http://host[:port][/ignored]`.
    pub fn parse(url: &str) -> anyhow::Result<Target> {
        let rest = url
            .strip_prefix("http://")
            .with_context(|| format!("only http:// URLs are supported, got {url:?}"))?;
        let authority = rest.split('/').next().unwrap_or("").to_owned();
        if authority.is_empty() {
            bail!("no host in {url:?}");
        }
        let with_port = if authority.starts_with('[') {
            if authority.contains("]:") {
                authority.clone()
            } else {
                format!("{authority}:80")
            }
        } else if authority.contains(':') {
            authority.clone()
        } else {
            format!("{authority}:80")
        };
        use std::net::ToSocketAddrs;
        let addr = with_port
            .to_socket_addrs()
            .with_context(|| format!("resolve {with_port}"))?
            .next()
            .with_context(|| format!("{with_port} resolves to nothing"))?;
        Ok(Target { addr, authority })
    }
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
}

/// One request on a new connection; the whole exchange (connect, send, read to the close) must
/// end within `timeout`.
pub async fn post(
    t: &Target,
    path: &str,
    content_type: &str,
    body: &[u8],
    timeout: Duration,
) -> anyhow::Result<Response> {
    let exchange = async {
        let mut s = Async::<TcpStream>::connect(t.addr)
            .await
            .context("connect")?;
        s.get_ref().set_nodelay(true)?;
        let mut req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            t.authority,
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        s.write_all(&req).await.context("send request")?;
        let mut raw = Vec::with_capacity(4096);
        s.take(MAX_RESPONSE as u64)
            .read_to_end(&mut raw)
            .await
            .context("read response")?;
        parse_response(&raw)
    };
    let expired = async {
        Timer::after(timeout).await;
        bail!("no complete answer within {timeout:?}")
    };
    future::or(exchange, expired).await
}

fn parse_response(raw: &[u8]) -> anyhow::Result<Response> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("truncated HTTP response")?;
    let head = std::str::from_utf8(&raw[..split]).context("non-UTF-8 response head")?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .context("bad status line")?;
    let mut location = None;
    let mut chunked = false;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let k = k.trim();
            if k.eq_ignore_ascii_case("location") {
                location = Some(v.trim().to_owned());
            } else if k.eq_ignore_ascii_case("transfer-encoding")
                && v.trim().eq_ignore_ascii_case("chunked")
            {
                chunked = true;
            }
        }
    }
    let body = &raw[split + 4..];
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_vec()
    };
    Ok(Response {
        status,
        location,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&b[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 || b.len() < eol + 2 + size {
            break;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[(eol + 4 + size).min(b.len())..];
    }
    out
}

pub enum HttpJob {
    Offer {
        worker: usize,
        slot: usize,
        sdp: String,
    },
    Hangup {
        worker: usize,
        slot: usize,
        location: String,
    },
}

pub enum HttpReply {
    Offer {
        slot: usize,
        /// When the request left (the connect time's zero), not when it was queued.
        posted: Instant,
        /// The response (any status) and when it had fully arrived.
        result: Result<(Response, Instant), String>,
    },
    Hangup {
        slot: usize,
        result: Result<u16, String>,
    },
}

/// Where a worker's replies go: its channel plus the waker of its loop.
pub struct ReplyTo {
    pub tx: mpsc::Sender<HttpReply>,
    pub waker: crate::wakeup::Waker,
}

pub struct PoolConfig {
    pub target: Target,
    pub path: String,
    pub timeout: Duration,
}

/// Runs jobs, `concurrency` at a time, until the job channel closes (every sender dropped).
/// Blocks the calling thread: the pool's one thread, running a smol executor.
pub fn run_pool(
    cfg: &PoolConfig,
    jobs: async_channel::Receiver<HttpJob>,
    replies: &[ReplyTo],
    concurrency: usize,
) {
    let ex = smol::LocalExecutor::new();
    let clients: Vec<_> = (0..concurrency.max(1))
        .map(|_| ex.spawn(client(cfg, jobs.clone(), replies)))
        .collect();
    drop(jobs);
    async_io::block_on(ex.run(async {
        for c in clients {
            c.await;
        }
    }));
}

/// One request at a time, job after job.
async fn client(cfg: &PoolConfig, jobs: async_channel::Receiver<HttpJob>, replies: &[ReplyTo]) {
    while let Ok(job) = jobs.recv().await {
        let (worker, reply) = match job {
            HttpJob::Offer { worker, slot, sdp } => {
                let posted = Instant::now();
                let r = post(
                    &cfg.target,
                    &cfg.path,
                    "application/sdp",
                    sdp.as_bytes(),
                    cfg.timeout,
                )
                .await;
                let answered = Instant::now();
                // Any status is a reply: the call loop tells an answer from a refusal.
                let result = r
                    .map(|resp| (resp, answered))
                    .map_err(|e| format!("POST {}: {e:#}", cfg.path));
                (
                    worker,
                    HttpReply::Offer {
                        slot,
                        posted,
                        result,
                    },
                )
            }
            HttpJob::Hangup {
                worker,
                slot,
                location,
            } => {
                let path = format!("{}/hangup", location.trim_end_matches('/'));
                let result = post(&cfg.target, &path, "application/json", b"{}", cfg.timeout)
                    .await
                    .map(|r| r.status)
                    .map_err(|e| format!("{e:#}"));
                (worker, HttpReply::Hangup { slot, result })
            }
        };
        let to = &replies[worker];
        if to.tx.send(reply).is_ok() {
            to.waker.wake();
        }
    }
}

/// One line, bounded, for error reports.
pub fn short(s: &str) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let t = one_line.trim();
    if t.chars().count() > 160 {
        format!("{}…", t.chars().take(160).collect::<String>())
    } else {
        t.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        let t = Target::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(t.addr, "127.0.0.1:8080".parse::<SocketAddr>().unwrap());
        assert_eq!(t.authority, "127.0.0.1:8080");
        let t = Target::parse("http://127.0.0.1/x").unwrap();
        assert_eq!(t.addr.port(), 80);
        assert!(Target::parse("https://example.com").is_err());
    }

    /// A real server on loopback: one answers, one never does and is cut at the timeout.
    #[test]
    fn posts_and_gives_up_at_the_timeout() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let t = Target::parse(&format!("http://{}", l.local_addr().unwrap())).unwrap();
        let server = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut got = vec![0u8; 4096];
            let n = c.read(&mut got).unwrap();
            let head = String::from_utf8_lossy(&got[..n]).into_owned();
            c.write_all(b"HTTP/1.1 201 Created\r\nLocation: /x\r\n\r\nv=0")
                .unwrap();
            drop(c);
            let (_silent, _) = l.accept().unwrap();
            std::thread::sleep(Duration::from_millis(500));
            head
        });
        let r = async_io::block_on(post(
            &t,
            "/p",
            "application/sdp",
            b"o",
            Duration::from_secs(5),
        ))
        .unwrap();
        assert_eq!(
            (r.status, r.location.as_deref(), r.body.as_str()),
            (201, Some("/x"), "v=0")
        );
        let e = async_io::block_on(post(
            &t,
            "/p",
            "text/plain",
            b"",
            Duration::from_millis(100),
        ))
        .unwrap_err();
        assert!(format!("{e:#}").contains("no complete answer"), "{e:#}");
        let head = server.join().unwrap();
        assert!(head.starts_with("POST /p HTTP/1.1\r\n"), "{head}");
        assert!(head.ends_with("\r\n\r\no"), "{head}");
    }

    #[test]
    fn parses_responses() {
        let r = parse_response(
            b"HTTP/1.1 201 Created\r\nlocation: /v1/realtime/calls/rtc_1\r\ncontent-length: 3\r\n\r\nv=0",
        )
        .unwrap();
        assert_eq!(r.status, 201);
        assert_eq!(r.location.as_deref(), Some("/v1/realtime/calls/rtc_1"));
        assert_eq!(r.body, "v=0");
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.body, "abcde");
    }
}
