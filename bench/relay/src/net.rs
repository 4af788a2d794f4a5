//! Batched UDP I/O over raw fds: recvmmsg/sendmmsg with preallocated buffers, and sockaddr helpers.
//!
//! Everything here is allocation-free after `Batch::new`, so the echo server, the baseline forwarder and
//! the load generator spend their time in the kernel, not in the allocator.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::ptr;
use std::time::Duration;

/// Preallocated recvmmsg/sendmmsg state: `n` buffers of `cap` bytes, each with room for `headroom` bytes in
/// front of what a receive writes (the forwarder builds the link header there without copying the payload).
pub struct Batch {
    bufs: Vec<u8>,
    cap: usize,
    headroom: usize,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    hdrs: Vec<libc::mmsghdr>,
}

// The raw pointers only point into the Batch's own heap allocations.
unsafe impl Send for Batch {}

impl Batch {
    pub fn new(n: usize, cap: usize, headroom: usize) -> Batch {
        assert!(n > 0 && cap > headroom);
        let mut b = Batch {
            bufs: vec![0u8; n * cap],
            cap,
            headroom,
            iovs: vec![
                libc::iovec {
                    iov_base: ptr::null_mut(),
                    iov_len: 0
                };
                n
            ],
            addrs: vec![unsafe { mem::zeroed() }; n],
            hdrs: vec![unsafe { mem::zeroed() }; n],
        };
        for i in 0..n {
            b.iovs[i].iov_base = unsafe { b.bufs.as_mut_ptr().add(i * cap + headroom) } as *mut _;
            b.iovs[i].iov_len = cap - headroom;
            let h = &mut b.hdrs[i].msg_hdr;
            h.msg_name = &mut b.addrs[i] as *mut _ as *mut _;
            h.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as u32;
            h.msg_iov = &mut b.iovs[i];
            h.msg_iovlen = 1;
        }
        b
    }

    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Receives up to `max` datagrams (at most the batch size). `flags` is usually `MSG_DONTWAIT` or
    /// `MSG_WAITFORONE`. Returns how many arrived; `WouldBlock` when none.
    pub fn recv(&mut self, fd: RawFd, max: usize, flags: i32) -> io::Result<usize> {
        let n = max.min(self.hdrs.len());
        for i in 0..n {
            self.iovs[i].iov_base =
                unsafe { self.bufs.as_mut_ptr().add(i * self.cap + self.headroom) } as *mut _;
            self.iovs[i].iov_len = self.cap - self.headroom;
            self.hdrs[i].msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as u32;
            self.hdrs[i].msg_len = 0;
        }
        let r =
            unsafe { libc::recvmmsg(fd, self.hdrs.as_mut_ptr(), n as u32, flags, ptr::null_mut()) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }

    /// Received length of datagram `i` (as written after the headroom).
    pub fn len(&self, i: usize) -> usize {
        self.hdrs[i].msg_len as usize
    }

    /// Datagram `i` as received.
    pub fn data(&self, i: usize) -> &[u8] {
        let start = i * self.cap + self.headroom;
        &self.bufs[start..start + self.len(i)]
    }

    /// The whole buffer `i` including headroom.
    pub fn buf_mut(&mut self, i: usize) -> &mut [u8] {
        let start = i * self.cap;
        &mut self.bufs[start..start + self.cap]
    }

    pub fn buf(&self, i: usize) -> &[u8] {
        let start = i * self.cap;
        &self.bufs[start..start + self.cap]
    }

    /// Source address of received datagram `i` (IPv4 only; the benchmark is 127.0.0.1-only).
    pub fn addr_v4(&self, i: usize) -> Option<SocketAddrV4> {
        sockaddr_to_v4(&self.addrs[i])
    }

    /// Prepares slot `i` to send `len` bytes starting at `offset` in its buffer (including headroom).
    pub fn set_send(&mut self, i: usize, offset: usize, len: usize) {
        assert!(offset + len <= self.cap);
        self.iovs[i].iov_base =
            unsafe { self.bufs.as_mut_ptr().add(i * self.cap + offset) } as *mut _;
        self.iovs[i].iov_len = len;
    }

    /// Sets slot `i`'s destination; `None` for a connected socket.
    pub fn set_dest(&mut self, i: usize, dest: Option<SocketAddrV4>) {
        match dest {
            Some(a) => {
                let sin = v4_to_sockaddr(a);
                unsafe {
                    ptr::write(&mut self.addrs[i] as *mut _ as *mut libc::sockaddr_in, sin);
                }
                self.hdrs[i].msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_in>() as u32;
            }
            None => self.hdrs[i].msg_hdr.msg_namelen = 0,
        }
    }

    /// Turns a received slot into an echo of itself: same bytes back to the source address.
    pub fn set_echo(&mut self, i: usize) {
        let len = self.len(i);
        self.iovs[i].iov_len = len;
        // msg_name/msg_namelen already hold the source as recvmmsg wrote them.
    }

    /// Sends slots `from..to` with one or more sendmmsg calls. Returns how many were sent; stops early on
    /// `WouldBlock` (after waiting for POLLOUT up to `wait`), and skips a datagram the kernel refuses with
    /// any other error (counted in the second value).
    pub fn send(&mut self, fd: RawFd, from: usize, to: usize, wait: Duration) -> (usize, usize) {
        let mut i = from;
        let mut sent = 0;
        let mut errors = 0;
        let mut waited = false;
        while i < to {
            let r =
                unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr().add(i), (to - i) as u32, 0) };
            if r > 0 {
                i += r as usize;
                sent += r as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) if !waited && !wait.is_zero() => {
                    waited = true;
                    poll_one(fd, libc::POLLOUT, wait);
                }
                Some(libc::EAGAIN) => break,
                _ => {
                    // ECONNREFUSED from an earlier ICMP, or similar: drop this one and go on.
                    errors += 1;
                    i += 1;
                }
            }
        }
        (sent, errors)
    }
}

pub fn sockaddr_to_v4(ss: &libc::sockaddr_storage) -> Option<SocketAddrV4> {
    if ss.ss_family as i32 != libc::AF_INET {
        return None;
    }
    let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
    Some(SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
        u16::from_be(sin.sin_port),
    ))
}

pub fn v4_to_sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    let mut sin: libc::sockaddr_in = unsafe { mem::zeroed() };
    sin.sin_family = libc::AF_INET as libc::sa_family_t;
    sin.sin_port = a.port().to_be();
    sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    sin
}

pub fn v4(a: SocketAddr) -> io::Result<SocketAddrV4> {
    match a {
        SocketAddr::V4(v) => Ok(v),
        SocketAddr::V6(_) => Err(io::Error::new(io::ErrorKind::InvalidInput, "IPv4 only")),
    }
}

/// poll() on one fd; true if it became ready.
pub fn poll_one(fd: RawFd, events: i16, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    let r = unsafe { libc::poll(&mut p, 1, ms.max(if timeout.is_zero() { 0 } else { 1 })) };
    r > 0
}

/// Sets SO_RCVBUF/SO_SNDBUF, forcing past rmem_max when allowed (root). Test-infrastructure sockets (load
/// generator, echo) use this so that they are never the bottleneck; forwarders under test keep defaults.
pub fn set_buffers(sock: &UdpSocket, bytes: usize) {
    let fd = sock.as_raw_fd();
    let v = bytes as libc::c_int;
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        let ok = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                force,
                &v as *const _ as *const _,
                mem::size_of_val(&v) as u32,
            )
        } == 0;
        if !ok {
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    plain,
                    &v as *const _ as *const _,
                    mem::size_of_val(&v) as u32,
                );
            }
        }
    }
}

/// A short, low-slack sleep/poll granularity for pacing: the default 50 µs timer slack would blur a
/// 100 µs send interval.
pub fn set_timer_slack_ns(ns: u64) {
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
    }
}

/// poll over several fds with a nanosecond timeout (ppoll). Returns the number ready.
pub fn ppoll(fds: &mut [libc::pollfd], timeout: Duration) -> usize {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    let r = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            ptr::null(),
        )
    };
    if r < 0 { 0 } else { r as usize }
}
