//! Batched UDP receive and send with `recvmmsg`/`sendmmsg`.
//!
//! One system call moves up to [`BATCH`] datagrams each way, which is where a userspace UDP
//! forwarder's time goes. Hand-written over `libc` because the batched-I/O crates (quinn-udp)
//! batch *segments to one destination* (GSO/GRO); a relay sends every datagram to a different
//! address. Buffers, iovecs and address slots are allocated once per worker and reused, so the
//! hot path never allocates.

use std::io;
use std::mem::{MaybeUninit, size_of, zeroed};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Datagrams per system call. 32 keeps a batch within L2 and amortizes the call well.
pub const BATCH: usize = 32;
/// Each slot's capacity; UDP payloads on the public internet stay below 1500, the header adds 26.
pub const SLOT: usize = 2048;

/// A fixed set of datagram slots plus the kernel structures that point into them.
///
/// The `mmsghdr`s hold raw pointers into `bufs`, `iovs` and `addrs`, which live in boxed slices
/// that never move or resize, so the pointers stay valid for the batch's lifetime.
pub struct Batch {
    bufs: Box<[u8]>,
    iovs: Box<[libc::iovec]>,
    addrs: Box<[libc::sockaddr_storage]>,
    hdrs: Box<[libc::mmsghdr]>,
    /// Bytes per received slot / bytes to send per slot.
    pub lens: [usize; BATCH],
    /// Offset into each slot where received data is written (room for a header in front).
    pub headroom: usize,
}

// The raw pointers only point into the batch's own boxed slices.
unsafe impl Send for Batch {}

impl Batch {
    pub fn new(headroom: usize) -> Self {
        let mut b = Batch {
            bufs: vec![0u8; BATCH * SLOT].into_boxed_slice(),
            iovs: (0..BATCH)
                .map(|_| libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                })
                .collect(),
            addrs: (0..BATCH).map(|_| unsafe { zeroed() }).collect(),
            hdrs: (0..BATCH).map(|_| unsafe { zeroed() }).collect(),
            lens: [0; BATCH],
            headroom,
        };
        for i in 0..BATCH {
            let base = unsafe { b.bufs.as_mut_ptr().add(i * SLOT) };
            b.iovs[i].iov_base = base.cast();
            b.iovs[i].iov_len = SLOT;
            let h = &mut b.hdrs[i].msg_hdr;
            h.msg_iov = &mut b.iovs[i];
            h.msg_iovlen = 1;
            h.msg_name = (&mut b.addrs[i] as *mut libc::sockaddr_storage).cast();
        }
        b
    }

    /// The whole slot `i` (headroom included).
    #[inline]
    pub fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i * SLOT..(i + 1) * SLOT]
    }

    /// The received datagram in slot `i` (after the headroom).
    #[inline]
    pub fn received(&self, i: usize) -> &[u8] {
        let start = i * SLOT + self.headroom;
        &self.bufs[start..start + self.lens[i]]
    }

    #[inline]
    pub fn addr(&self, i: usize) -> Option<SocketAddr> {
        sockaddr_to_std(&self.addrs[i])
    }

    /// Receives up to [`BATCH`] datagrams without blocking; returns how many.
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        for i in 0..BATCH {
            self.iovs[i].iov_base =
                unsafe { self.bufs.as_mut_ptr().add(i * SLOT + self.headroom) }.cast();
            self.iovs[i].iov_len = SLOT - self.headroom;
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_controllen = 0;
            h.msg_flags = 0;
        }
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                BATCH as _,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        for i in 0..n as usize {
            self.lens[i] = self.hdrs[i].msg_len as usize;
        }
        Ok(n as usize)
    }
}

/// Outgoing datagrams gathered from anywhere (typically a [`Batch`]'s slots) and sent with one
/// `sendmmsg`. Entries are (slot pointer, length, destination).
pub struct SendQueue {
    iovs: Box<[libc::iovec]>,
    addrs: Box<[libc::sockaddr_storage]>,
    hdrs: Box<[libc::mmsghdr]>,
    len: usize,
}

unsafe impl Send for SendQueue {}

impl SendQueue {
    pub fn new() -> Self {
        let mut q = SendQueue {
            iovs: (0..BATCH)
                .map(|_| libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                })
                .collect(),
            addrs: (0..BATCH).map(|_| unsafe { zeroed() }).collect(),
            hdrs: (0..BATCH).map(|_| unsafe { zeroed() }).collect(),
            len: 0,
        };
        for i in 0..BATCH {
            let h = &mut q.hdrs[i].msg_hdr;
            h.msg_iov = &mut q.iovs[i];
            h.msg_iovlen = 1;
            h.msg_name = (&mut q.addrs[i] as *mut libc::sockaddr_storage).cast();
        }
        q
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues `data` for `to`. The bytes must stay untouched until [`SendQueue::flush`]; callers
    /// queue slices of a [`Batch`] and flush before receiving into it again.
    #[inline]
    pub fn push(&mut self, data: &[u8], to: SocketAddr) {
        debug_assert!(self.len < BATCH);
        let i = self.len;
        self.iovs[i].iov_base = data.as_ptr() as *mut _;
        self.iovs[i].iov_len = data.len();
        self.hdrs[i].msg_hdr.msg_namelen = std_to_sockaddr(to, &mut self.addrs[i]);
        self.len += 1;
    }

    /// Sends everything queued; returns (sent, failed). A full socket buffer drops the rest,
    /// as the network would.
    pub fn flush(&mut self, fd: RawFd) -> (usize, usize) {
        let total = self.len;
        let mut sent = 0;
        while sent < total {
            let n = unsafe {
                libc::sendmmsg(
                    fd,
                    self.hdrs.as_mut_ptr().add(sent),
                    (total - sent) as _,
                    libc::MSG_DONTWAIT,
                )
            };
            if n <= 0 {
                let err = io::Error::last_os_error();
                if n < 0 && err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // Skip the datagram the kernel refused (e.g. unreachable destination) and go on.
                if n < 0 && err.kind() != io::ErrorKind::WouldBlock {
                    sent += 1;
                    continue;
                }
                break;
            }
            sent += n as usize;
        }
        self.len = 0;
        (sent.min(total), total - sent.min(total))
    }
}

impl Default for SendQueue {
    fn default() -> Self {
        Self::new()
    }
}

fn sockaddr_to_std(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            let a: &libc::sockaddr_in = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                u32::from_be(a.sin_addr.s_addr).into(),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            let a: &libc::sockaddr_in6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                a.sin6_addr.s6_addr.into(),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

fn std_to_sockaddr(addr: SocketAddr, out: &mut libc::sockaddr_storage) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(a) => {
            let mut sin: libc::sockaddr_in = unsafe { MaybeUninit::zeroed().assume_init() };
            sin.sin_family = libc::AF_INET as _;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            unsafe { std::ptr::write(out as *mut _ as *mut libc::sockaddr_in, sin) };
            size_of::<libc::sockaddr_in>() as _
        }
        SocketAddr::V6(a) => {
            let mut sin6: libc::sockaddr_in6 = unsafe { MaybeUninit::zeroed().assume_init() };
            sin6.sin6_family = libc::AF_INET6 as _;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            unsafe { std::ptr::write(out as *mut _ as *mut libc::sockaddr_in6, sin6) };
            size_of::<libc::sockaddr_in6>() as _
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn batch_round_trip_over_loopback() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        b.set_nonblocking(true).unwrap();
        let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 10 + i as usize]).collect();
        let mut q = SendQueue::new();
        for p in &payloads {
            q.push(p, b.local_addr().unwrap());
        }
        assert_eq!(q.flush(a.as_raw_fd()), (5, 0));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut batch = Batch::new(26);
        let n = batch.recv(b.as_raw_fd()).unwrap();
        assert_eq!(n, 5);
        for (i, p) in payloads.iter().enumerate() {
            assert_eq!(batch.received(i), &p[..]);
            assert_eq!(batch.addr(i), Some(a.local_addr().unwrap()));
        }
        assert_eq!(
            batch.recv(b.as_raw_fd()).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
    }

    #[test]
    fn sockaddr_conversions_round_trip() {
        for s in [
            "127.0.0.1:5",
            "[::1]:7",
            "[2001:db8::1]:65535",
            "10.1.2.3:0",
        ] {
            let a: SocketAddr = s.parse().unwrap();
            let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
            std_to_sockaddr(a, &mut ss);
            assert_eq!(sockaddr_to_std(&ss), Some(a));
        }
    }
}
