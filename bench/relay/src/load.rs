//! The load generator: F client sockets ("flows"), each connected to the target.
//!
//! - `handshake`: every flow sends a STUN binding request (USERNAME `serverUfrag:clientUfrag`) until it gets a
//!   datagram back. For the voice-edge relay this creates the flow (the sink echoes the request through the
//!   relay); for the other targets it is simply echoed and drained.
//! - `throughput`: closed loop, at most `window` datagrams in flight per flow; received echoes are counted in
//!   fixed windows and the median window rate is the result. A flow whose echoes stop for 20 ms writes its
//!   in-flight datagrams off as lost, so loss cannot stall the loop.
//! - `rtt`: paced sends at a fixed total rate, round robin over flows, send timestamp in the payload.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::net::{self, Batch};

const TAG: [u8; 4] = *b"VEBN";
/// Payload layout (after a 4-byte RTP-looking prefix so relays see a media-like first byte):
/// 4..8 tag, 8..12 phase, 12..16 flow, 16..24 seq, 24..32 send time (ns since process start).
const MIN_SIZE: usize = 32;

fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

fn ns(t: Instant) -> u64 {
    t.duration_since(base()).as_nanos() as u64
}

pub fn stun_binding_request(username: &str, txid: [u8; 12]) -> Vec<u8> {
    fn attr(out: &mut Vec<u8>, t: u16, v: &[u8]) {
        out.extend_from_slice(&t.to_be_bytes());
        out.extend_from_slice(&(v.len() as u16).to_be_bytes());
        out.extend_from_slice(v);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
    }
    let mut body = Vec::new();
    attr(&mut body, 0x0006, username.as_bytes()); // USERNAME
    attr(&mut body, 0x0024, &0x6e7f_00ffu32.to_be_bytes()); // PRIORITY
    attr(&mut body, 0x802A, &[7; 8]); // ICE-CONTROLLING
    attr(&mut body, 0x0008, &[0xaa; 20]); // MESSAGE-INTEGRITY (not checked by a relay)
    attr(&mut body, 0x8028, &[0xbb; 4]); // FINGERPRINT
    let mut pkt = Vec::with_capacity(20 + body.len());
    pkt.extend_from_slice(&0x0001u16.to_be_bytes());
    pkt.extend_from_slice(&(body.len() as u16).to_be_bytes());
    pkt.extend_from_slice(&0x2112_A442u32.to_be_bytes());
    pkt.extend_from_slice(&txid);
    pkt.extend_from_slice(&body);
    pkt
}

#[derive(Clone, Debug)]
pub struct ThroughputResult {
    /// Median of the per-window receive rates.
    pub pps: f64,
    pub windows: Vec<f64>,
    pub sent: u64,
    pub received: u64,
    pub timeouts: u64,
}

impl ThroughputResult {
    pub fn loss_pct(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            100.0 * self.sent.saturating_sub(self.received) as f64 / self.sent as f64
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct RttResult {
    pub sent: u64,
    pub received: u64,
}

pub struct Client {
    socks: Vec<UdpSocket>,
    usernames: Vec<String>,
    size: usize,
    phase: u32,
    rx: Batch,
    tx: Batch,
}

pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

impl Client {
    /// One POLLIN entry per socket, in socket order (`ppoll` rewrites `revents` each call).
    fn pollfds(&self) -> Vec<libc::pollfd> {
        self.socks
            .iter()
            .map(|s| libc::pollfd {
                fd: s.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect()
    }

    /// `usernames[i]` is flow i's STUN USERNAME (`serverUfrag:clientUfrag`).
    pub fn new(target: SocketAddr, usernames: Vec<String>, size: usize) -> io::Result<Client> {
        assert!((MIN_SIZE..=1400).contains(&size));
        let _ = base();
        let mut socks = Vec::new();
        for _ in &usernames {
            let s = UdpSocket::bind("127.0.0.1:0")?;
            net::set_buffers(&s, 4 << 20);
            s.connect(target)?;
            s.set_nonblocking(true)?;
            socks.push(s);
        }
        let mut tx = Batch::new(64, 2048, 0);
        for i in 0..tx.capacity() {
            let b = tx.buf_mut(i);
            b[..size].fill(0);
            b[0] = 0x80; // RTP v2
            b[1] = 111; // PT 111 (Opus in browsers)
            b[4..8].copy_from_slice(&TAG);
            tx.set_dest(i, None);
        }
        Ok(Client {
            socks,
            usernames,
            size,
            phase: 1,
            rx: Batch::new(64, 2048, 0),
            tx,
        })
    }

    fn drain(&mut self) {
        for s in &self.socks {
            for _ in 0..1000 {
                if self.rx.recv(s.as_raw_fd(), 64, libc::MSG_DONTWAIT).is_err() {
                    break;
                }
            }
        }
    }

    /// Sends a STUN binding request per flow until each flow has received a STUN message back.
    pub fn handshake(&mut self, timeout: Duration) -> Result<Duration, String> {
        self.drain();
        let start = Instant::now();
        let deadline = start + timeout;
        let mut done = vec![false; self.socks.len()];
        let mut attempt = 0u32;
        while done.iter().any(|d| !d) {
            if Instant::now() >= deadline {
                let n = done.iter().filter(|d| !**d).count();
                return Err(format!(
                    "{n} of {} flows got no STUN answer within {timeout:?}",
                    done.len()
                ));
            }
            attempt += 1;
            for (i, s) in self.socks.iter().enumerate() {
                if done[i] {
                    continue;
                }
                let mut txid = [0u8; 12];
                txid[..4].copy_from_slice(&attempt.to_be_bytes());
                txid[4..8].copy_from_slice(&(i as u32).to_be_bytes());
                let req = stun_binding_request(&self.usernames[i], txid);
                let _ = s.send(&req);
            }
            let wait_until = (Instant::now() + Duration::from_millis(100)).min(deadline);
            let mut fds = self.pollfds();
            while Instant::now() < wait_until && done.iter().any(|d| !d) {
                net::ppoll(
                    &mut fds,
                    wait_until.saturating_duration_since(Instant::now()),
                );
                for (i, p) in fds.iter().enumerate() {
                    if p.revents == 0 {
                        continue;
                    }
                    while let Ok(n) = self.rx.recv(p.fd, 64, libc::MSG_DONTWAIT) {
                        for k in 0..n {
                            let d = self.rx.data(k);
                            if d.len() >= 20 && d[0] < 4 && d[4..8] == 0x2112_A442u32.to_be_bytes()
                            {
                                done[i] = true;
                            }
                        }
                    }
                }
            }
        }
        // Let stray duplicate answers arrive, then drop them.
        std::thread::sleep(Duration::from_millis(20));
        self.drain();
        Ok(start.elapsed())
    }

    fn next_phase(&mut self) -> u32 {
        self.phase += 1;
        let p = self.phase;
        for i in 0..self.tx.capacity() {
            self.tx.buf_mut(i)[8..12].copy_from_slice(&p.to_be_bytes());
        }
        p
    }

    /// Parses one of our datagrams: (flow, send time ns) if it belongs to `phase`.
    fn parse(d: &[u8], size: usize, phase: u32) -> Option<(u32, u64)> {
        if d.len() != size || d[4..8] != TAG || d[8..12] != phase.to_be_bytes() {
            return None;
        }
        let flow = u32::from_be_bytes(d[12..16].try_into().unwrap());
        let ts = u64::from_be_bytes(d[24..32].try_into().unwrap());
        Some((flow, ts))
    }

    /// Closed-loop maximum rate: `window` in flight per flow, `warmup` then `measure` split into `win`
    /// windows, then a 100 ms drain that only counts late echoes for the loss figure.
    pub fn throughput(
        &mut self,
        window: usize,
        warmup: Duration,
        measure: Duration,
        win: Duration,
    ) -> ThroughputResult {
        let window = window.clamp(1, self.tx.capacity());
        let phase = self.next_phase();
        let size = self.size;
        let nflows = self.socks.len();
        let mut outstanding = vec![0usize; nflows];
        let mut last_progress = vec![Instant::now(); nflows];
        let mut seq = vec![0u64; nflows];
        let nwin = (measure.as_nanos() / win.as_nanos()).max(1) as usize;
        let mut counts = vec![0u64; nwin];
        let (mut sent, mut received, mut timeouts) = (0u64, 0u64, 0u64);
        let start = Instant::now();
        let mstart = start + warmup;
        let end = mstart + win * nwin as u32;
        let drain_end = end + Duration::from_millis(100);
        let stall = Duration::from_millis(20);
        let mut fds = self.pollfds();
        loop {
            let now = Instant::now();
            if now >= drain_end {
                break;
            }
            let sending = now < end;
            if sending {
                for f in 0..nflows {
                    if outstanding[f] < window {
                        let k = window - outstanding[f];
                        let t = ns(now).to_be_bytes();
                        for i in 0..k {
                            let b = self.tx.buf_mut(i);
                            b[12..16].copy_from_slice(&(f as u32).to_be_bytes());
                            b[16..24].copy_from_slice(&seq[f].to_be_bytes());
                            b[24..32].copy_from_slice(&t);
                            seq[f] += 1;
                            self.tx.set_send(i, 0, size);
                        }
                        let (s, _) = self
                            .tx
                            .send(self.socks[f].as_raw_fd(), 0, k, Duration::ZERO);
                        if outstanding[f] == 0 {
                            last_progress[f] = now;
                        }
                        outstanding[f] += s;
                        sent += s as u64;
                    } else if now.duration_since(last_progress[f]) > stall {
                        timeouts += outstanding[f] as u64;
                        outstanding[f] = 0;
                    }
                }
            }
            for p in fds.iter_mut() {
                p.revents = 0;
            }
            let timeout = if sending {
                Duration::from_millis(5)
            } else {
                drain_end.saturating_duration_since(now)
            };
            if net::ppoll(&mut fds, timeout) == 0 {
                continue;
            }
            for (f, p) in fds.iter().enumerate() {
                if p.revents == 0 {
                    continue;
                }
                for _ in 0..4 {
                    let n = match self.rx.recv(p.fd, 64, libc::MSG_DONTWAIT) {
                        Ok(n) => n,
                        Err(_) => break,
                    };
                    let rx_t = Instant::now();
                    let mut got = 0usize;
                    for k in 0..n {
                        if Self::parse(self.rx.data(k), size, phase).is_some() {
                            got += 1;
                        }
                    }
                    received += got as u64;
                    outstanding[f] = outstanding[f].saturating_sub(got);
                    if got > 0 {
                        last_progress[f] = rx_t;
                    }
                    if rx_t >= mstart && rx_t < end {
                        let w = (rx_t.duration_since(mstart).as_nanos() / win.as_nanos()) as usize;
                        if w < nwin {
                            counts[w] += got as u64;
                        }
                    }
                    if n < 64 {
                        break;
                    }
                }
            }
        }
        let mut windows: Vec<f64> = counts
            .iter()
            .map(|&c| c as f64 / win.as_secs_f64())
            .collect();
        let pps = median(&mut windows.clone());
        windows.truncate(nwin);
        ThroughputResult {
            pps,
            windows,
            sent,
            received,
            timeouts,
        }
    }

    /// Paced sends at `rate` datagrams/s in total for `dur`; appends RTT samples (ns) to `samples` for
    /// datagrams sent after the first `skip`.
    pub fn rtt(
        &mut self,
        rate: f64,
        dur: Duration,
        skip: Duration,
        samples: &mut Vec<u32>,
    ) -> RttResult {
        net::set_timer_slack_ns(1_000);
        let phase = self.next_phase();
        let size = self.size;
        let nflows = self.socks.len();
        let interval = Duration::from_secs_f64(1.0 / rate);
        let mut res = RttResult::default();
        let start = Instant::now();
        let skip_ns = ns(start + skip);
        let end = start + dur;
        let drain_end = end + Duration::from_millis(50);
        let mut next = start;
        let mut i: u64 = 0;
        let mut fds = self.pollfds();
        let mut pkt = vec![0u8; size];
        pkt.copy_from_slice(&self.tx.buf(0)[..size]);
        loop {
            let now = Instant::now();
            if now >= drain_end {
                break;
            }
            if now < end {
                let mut burst = 0;
                while next <= now && burst < 16 {
                    let f = (i % nflows as u64) as usize;
                    pkt[12..16].copy_from_slice(&(f as u32).to_be_bytes());
                    pkt[16..24].copy_from_slice(&i.to_be_bytes());
                    pkt[24..32].copy_from_slice(&ns(Instant::now()).to_be_bytes());
                    if self.socks[f].send(&pkt).is_ok() {
                        res.sent += 1;
                    }
                    i += 1;
                    next += interval;
                    burst += 1;
                }
                if now.duration_since(next) > Duration::from_millis(5) {
                    next = now; // fell far behind (descheduled): skip rather than burst
                }
            }
            for p in fds.iter_mut() {
                p.revents = 0;
            }
            let wake = if now < end { next.min(end) } else { drain_end };
            let timeout = wake.saturating_duration_since(Instant::now());
            if net::ppoll(&mut fds, timeout) == 0 {
                continue;
            }
            for p in fds.iter() {
                if p.revents == 0 {
                    continue;
                }
                while let Ok(n) = self.rx.recv(p.fd, 64, libc::MSG_DONTWAIT) {
                    let rx_ns = ns(Instant::now());
                    for k in 0..n {
                        if let Some((_, ts)) = Self::parse(self.rx.data(k), size, phase) {
                            res.received += 1;
                            if ts >= skip_ns && samples.len() < samples.capacity() {
                                samples.push(rx_ns.saturating_sub(ts).min(u32::MAX as u64) as u32);
                            }
                        }
                    }
                    if n < 64 {
                        break;
                    }
                }
            }
        }
        res
    }
}

pub fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx] as f64
}
