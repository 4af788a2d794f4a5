//! The two servers that stand behind the forwarders under test:
//! - `echo`: sends every datagram back to its source unchanged (the upstream for the direct row and nginx);
//! - `sink` (`link = true`): the same, but only for datagrams that carry the voice-edge link header, i.e. a
//!   link-aware transceiver stand-in that answers each datagram with the same header and payload, which the
//!   relay (or the baseline forwarder) then delivers to the client from its public port.
//!
//! And the baseline: a minimal batched single-thread forwarder with a per-client flow map, which speaks the
//! same link header to the sink as the voice-edge relay does, but has no STUN parsing and no routing logic.

#![allow(clippy::needless_range_loop)] // parallel arrays indexed by batch slot

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Write};
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::net::{self, Batch};

pub const LINK_HEADER_LEN: usize = 26;
const LINK_MAGIC: [u8; 2] = [0x56, 0x45];
const LINK_VERSION: u8 = 1;
const BATCH: usize = 64;
const MAX_DATAGRAM: usize = 2048;

fn announce(addr: SocketAddr) {
    // The orchestrator reads this first line to learn the bound port.
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "listening {addr}");
    let _ = out.flush();
}

fn is_link(pkt: &[u8]) -> bool {
    pkt.len() >= LINK_HEADER_LEN && pkt[0..2] == LINK_MAGIC && pkt[2] == LINK_VERSION
}

/// Sends the slots of `b` in `0..n` whose `ok` flag is set, in contiguous runs.
fn send_runs(b: &mut Batch, fd: i32, ok: &[bool], n: usize) -> (usize, usize) {
    let (mut sent, mut err) = (0, 0);
    let mut i = 0;
    while i < n {
        if !ok[i] {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < n && ok[j] {
            j += 1;
        }
        let (s, e) = b.send(fd, i, j, Duration::from_millis(2));
        sent += s;
        err += e + (j - i - s - e);
        i = j;
    }
    (sent, err)
}

pub fn echo(listen: SocketAddr, link: bool, max_secs: u64) -> io::Result<()> {
    let sock = UdpSocket::bind(listen)?;
    net::set_buffers(&sock, 4 << 20);
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    announce(sock.local_addr()?);
    let fd = sock.as_raw_fd();
    let mut b = Batch::new(BATCH, MAX_DATAGRAM, 0);
    let mut ok = [false; BATCH];
    let deadline = Instant::now() + Duration::from_secs(max_secs);
    let (mut echoed, mut dropped) = (0u64, 0u64);
    while Instant::now() < deadline {
        let n = match b.recv(fd, BATCH, libc::MSG_WAITFORONE) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e),
        };
        for i in 0..n {
            ok[i] = !link || is_link(b.data(i));
            if ok[i] {
                b.set_echo(i);
            }
        }
        let (s, e) = send_runs(&mut b, fd, &ok, n);
        echoed += s as u64;
        dropped += (n - s) as u64;
        let _ = e;
    }
    eprintln!(
        "{}: echoed {echoed}, dropped {dropped}",
        if link { "sink" } else { "echo" }
    );
    Ok(())
}

/// FxHash-style hasher: the flow key is already a well-mixed-enough u64 (ip << 16 | port).
#[derive(Default)]
struct FlowHasher(u64);
impl Hasher for FlowHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

struct Flow {
    last_seen: Instant,
}

fn key(a: SocketAddrV4) -> u64 {
    (u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port())
}

/// The baseline forwarder. One thread, two sockets (public, internal), poll + recvmmsg/sendmmsg, a flow map
/// keyed by client address (created on the first datagram, capped), the 26-byte link header on the internal
/// side, payload delivered from the public socket on the way back.
pub fn forward(listen: SocketAddr, upstream: SocketAddrV4, max_secs: u64) -> io::Result<()> {
    const MAX_FLOWS: usize = 100_000;
    let public = UdpSocket::bind(listen)?;
    let internal = UdpSocket::bind(SocketAddr::new(listen.ip(), 0))?;
    public.set_nonblocking(true)?;
    internal.set_nonblocking(true)?;
    announce(public.local_addr()?);
    let (pfd, ifd) = (public.as_raw_fd(), internal.as_raw_fd());
    let mut flows: HashMap<u64, Flow, BuildHasherDefault<FlowHasher>> =
        HashMap::with_capacity_and_hasher(1024, Default::default());
    let mut inb = Batch::new(BATCH, MAX_DATAGRAM, LINK_HEADER_LEN);
    let mut outb = Batch::new(BATCH, MAX_DATAGRAM, 0);
    let mut ok = [false; BATCH];
    let mut hdr = [0u8; LINK_HEADER_LEN];
    hdr[0..2].copy_from_slice(&LINK_MAGIC);
    hdr[2] = LINK_VERSION;
    hdr[3] = 4;
    let deadline = Instant::now() + Duration::from_secs(max_secs);
    let (mut fwd_in, mut fwd_out, mut dropped) = (0u64, 0u64, 0u64);
    let mut now = Instant::now();
    while now < deadline {
        let mut fds = [
            libc::pollfd {
                fd: pfd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: ifd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, 200) };
        now = Instant::now();
        if r <= 0 {
            continue;
        }
        // Client -> sink.
        if fds[0].revents != 0 {
            for _ in 0..8 {
                let n = match inb.recv(pfd, BATCH, libc::MSG_DONTWAIT) {
                    Ok(n) => n,
                    Err(_) => break,
                };
                for i in 0..n {
                    let Some(src) = inb.addr_v4(i) else {
                        ok[i] = false;
                        continue;
                    };
                    let k = key(src);
                    let full = flows.len() >= MAX_FLOWS;
                    ok[i] = match flows.get_mut(&k) {
                        Some(f) => {
                            f.last_seen = now;
                            true
                        }
                        None if !full => {
                            flows.insert(k, Flow { last_seen: now });
                            true
                        }
                        None => false,
                    };
                    if ok[i] {
                        let len = inb.len(i);
                        let buf = inb.buf_mut(i);
                        buf[..LINK_HEADER_LEN].copy_from_slice(&hdr);
                        buf[8..10].copy_from_slice(&src.port().to_be_bytes());
                        buf[10..26].copy_from_slice(&src.ip().to_ipv6_mapped().octets());
                        inb.set_send(i, 0, LINK_HEADER_LEN + len);
                        inb.set_dest(i, Some(upstream));
                    }
                }
                let (s, _) = send_runs(&mut inb, ifd, &ok, n);
                fwd_in += s as u64;
                dropped += (n - s) as u64;
                if n < BATCH {
                    break;
                }
            }
        }
        // Sink -> client.
        if fds[1].revents != 0 {
            for _ in 0..8 {
                let n = match outb.recv(ifd, BATCH, libc::MSG_DONTWAIT) {
                    Ok(n) => n,
                    Err(_) => break,
                };
                for i in 0..n {
                    let d = outb.data(i);
                    ok[i] = false;
                    if !is_link(d) || d[3] != 4 {
                        continue;
                    }
                    let port = u16::from_be_bytes([d[8], d[9]]);
                    let Some(ip) =
                        std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&d[10..26]).unwrap())
                            .to_ipv4_mapped()
                    else {
                        continue;
                    };
                    let client = SocketAddrV4::new(ip, port);
                    if !flows.contains_key(&key(client)) {
                        continue;
                    }
                    let len = d.len();
                    ok[i] = true;
                    outb.set_send(i, LINK_HEADER_LEN, len - LINK_HEADER_LEN);
                    outb.set_dest(i, Some(client));
                }
                let (s, _) = send_runs(&mut outb, pfd, &ok, n);
                fwd_out += s as u64;
                dropped += (n - s) as u64;
                if n < BATCH {
                    break;
                }
            }
        }
        // Idle expiry, bounded work: only when the table is large.
        if flows.len() > MAX_FLOWS / 2 {
            flows.retain(|_, f| now.duration_since(f.last_seen) < Duration::from_secs(30));
        }
    }
    eprintln!(
        "forward: in {fwd_in}, out {fwd_out}, dropped {dropped}, flows {}",
        flows.len()
    );
    Ok(())
}
