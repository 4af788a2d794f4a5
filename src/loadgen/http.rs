//! Signaling for the load generator: a minimal blocking HTTP/1.1 client and a small pool of
//! threads running it, so a slow answer never stalls a media loop.
//!
//! Workers hand jobs to the pool and get replies on their own channel, woken through an
//! eventfd registered in their epoll set.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

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

pub fn post(
    t: &Target,
    path: &str,
    content_type: &str,
    body: &[u8],
    timeout: Duration,
) -> anyhow::Result<Response> {
    let mut s = TcpStream::connect_timeout(&t.addr, timeout).context("connect")?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.set_nodelay(true)?;
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        t.authority,
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    s.write_all(&req).context("send request")?;
    let mut raw = Vec::with_capacity(4096);
    s.take(MAX_RESPONSE as u64)
        .read_to_end(&mut raw)
        .context("read response")?;
    parse_response(&raw)
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

/// Where a worker's replies go: its channel plus the eventfd that wakes its loop.
pub struct ReplyTo {
    pub tx: mpsc::Sender<HttpReply>,
    pub eventfd: std::sync::Arc<crate::wakeup::EventFd>,
}

pub struct PoolConfig {
    pub target: Target,
    pub path: String,
    pub timeout: Duration,
}

/// Runs jobs until the job channel closes (every sender dropped).
pub fn pool_thread(cfg: &PoolConfig, jobs: async_channel::Receiver<HttpJob>, replies: &[ReplyTo]) {
    while let Ok(job) = jobs.recv_blocking() {
        let (worker, reply) = match job {
            HttpJob::Offer { worker, slot, sdp } => {
                let posted = Instant::now();
                let r = post(
                    &cfg.target,
                    &cfg.path,
                    "application/sdp",
                    sdp.as_bytes(),
                    cfg.timeout,
                );
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
                    .map(|r| r.status)
                    .map_err(|e| format!("{e:#}"));
                (worker, HttpReply::Hangup { slot, result })
            }
        };
        let to = &replies[worker];
        if to.tx.send(reply).is_ok() {
            to.eventfd.notify();
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
