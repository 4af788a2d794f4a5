//! Batched UDP receive and send with `recvmmsg`/`sendmmsg`, shared by the relay and the
//! transceiver workers.
//!
//! One system call moves up to [`BATCH`] datagrams each way; on a busy socket that is where a
//! userspace UDP server's time goes (entry, socket lookup and locking per call). Hand-written
//! over `libc` because the batched-I/O crates (quinn-udp) batch *segments to one destination*
//! (GSO/GRO), while both of our sockets send every datagram to a different address.
//!
//! Memory safety does not rest on callers: the kernel structures ([`RecvBatch`]'s headers,
//! [`SendBatch`]'s) only ever point into memory the call that uses them borrows. A receive
//! batch points into its own boxed slices, which never move or resize; a send batch is handed
//! its datagrams as borrowed slices for the duration of one `send*` call and keeps only slot
//! indices in between. Buffers are allocated once per worker and reused, so the hot path never
//! allocates.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::ops::Range;
use std::os::fd::RawFd;

/// Datagrams per system call. 32 keeps a batch within L2 and amortizes the call well.
pub const BATCH: usize = 32;
/// Each slot's capacity; UDP payloads on the public internet stay below 1500, the header adds 26.
pub const SLOT: usize = 2048;
/// Pieces gathered into one outgoing datagram (a link header and a payload).
const PARTS: usize = 2;

fn zeroed_slots<T>(n: usize) -> Box<[T]> {
    // SAFETY: only instantiated with `libc` C structs (iovec, sockaddr_storage, mmsghdr), for
    // which all-zero bytes are a valid value (null pointers, zero lengths, AF_UNSPEC).
    (0..n).map(|_| unsafe { zeroed() }).collect()
}

/// A fixed set of receive slots plus the kernel structures that point into them.
pub struct RecvBatch {
    bufs: Box<[u8]>,
    iovs: Box<[libc::iovec]>,
    addrs: Box<[libc::sockaddr_storage]>,
    hdrs: Box<[libc::mmsghdr]>,
    /// Bytes received into each slot by the last [`RecvBatch::recv`].
    lens: [usize; BATCH],
    /// Whether the kernel cut that datagram to fit its slot (MSG_TRUNC).
    truncated: [bool; BATCH],
    /// Offset into each slot where received data is written (room for a header in front).
    headroom: usize,
}

// SAFETY: the raw pointers inside `iovs` and `hdrs` point only into this value's own boxed
// slices (heap memory owned by it), so moving the whole value to another thread moves the
// pointees' ownership with it; nothing else aliases them.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// Slots that receive after `headroom` bytes, so a header can later be written in front of
    /// the datagram without moving it.
    pub fn new(headroom: usize) -> Self {
        assert!(headroom < SLOT, "headroom must leave room for a datagram");
        let mut b = RecvBatch {
            bufs: vec![0u8; BATCH * SLOT].into_boxed_slice(),
            iovs: zeroed_slots(BATCH),
            addrs: zeroed_slots(BATCH),
            hdrs: zeroed_slots(BATCH),
            lens: [0; BATCH],
            truncated: [false; BATCH],
            headroom,
        };
        for i in 0..BATCH {
            let data = &mut b.bufs[i * SLOT + headroom..(i + 1) * SLOT];
            b.iovs[i] = libc::iovec {
                iov_base: data.as_mut_ptr().cast(),
                iov_len: data.len(),
            };
            let h = &mut b.hdrs[i].msg_hdr;
            h.msg_iov = &mut b.iovs[i];
            h.msg_iovlen = 1;
            h.msg_name = (&mut b.addrs[i] as *mut libc::sockaddr_storage).cast();
        }
        b
    }

    /// Bytes in slot `i` from the last receive.
    #[inline]
    pub fn len(&self, i: usize) -> usize {
        self.lens[i]
    }

    /// The whole slot `i` (headroom included).
    #[inline]
    pub fn slot(&self, i: usize) -> &[u8] {
        &self.bufs[i * SLOT..(i + 1) * SLOT]
    }

    /// The whole slot `i` (headroom included), to write a header in front of the datagram.
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

    /// Whether the datagram in slot `i` was larger than the slot and arrived cut short; such a
    /// datagram must be dropped, not handled.
    #[inline]
    pub fn truncated(&self, i: usize) -> bool {
        self.truncated[i]
    }

    /// Who sent the datagram in slot `i`.
    #[inline]
    pub fn addr(&self, i: usize) -> Option<SocketAddr> {
        sockaddr_to_std(&self.addrs[i])
    }

    /// Receives up to [`BATCH`] datagrams without blocking; returns how many.
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        for h in self.hdrs.iter_mut() {
            // The kernel overwrites these on every call; the iovecs it leaves alone.
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_controllen = 0;
            h.msg_hdr.msg_flags = 0;
        }
        // SAFETY: `hdrs` holds BATCH initialised headers whose iovecs and name buffers point
        // into `bufs` and `addrs`, owned by `self` and borrowed mutably for this call; each
        // iovec's length stays within its slot. A null timeout is allowed.
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
        let n = n as usize;
        for i in 0..n {
            self.lens[i] = self.hdrs[i].msg_len as usize;
            self.truncated[i] = self.hdrs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        }
        Ok(n)
    }
}

/// Outgoing datagrams, sent with as few `sendmmsg` calls as possible.
///
/// Two ways in: queue byte ranges of a [`RecvBatch`]'s slots with [`SendBatch::push_slot`] and
/// send them with [`SendBatch::flush_slots`] (the relay forwards in place), or hand over
/// datagrams as borrowed pieces with [`SendBatch::send`] (the transceiver's header + payload).
pub struct SendBatch {
    iovs: Box<[libc::iovec]>,
    addrs: Box<[libc::sockaddr_storage]>,
    hdrs: Box<[libc::mmsghdr]>,
    queued: Vec<(usize, Range<usize>, SocketAddr)>,
}

// SAFETY: the raw pointers in `iovs` and `hdrs` point into this value's own boxed slices, or
// are stale leftovers of a finished `send*` call that nothing dereferences before the next call
// rewrites them; moving the value between threads cannot create an alias.
unsafe impl Send for SendBatch {}

/// What one `send*` call achieved. A full socket buffer drops the rest, as the network would.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub sent: usize,
    pub failed: usize,
}

impl SendBatch {
    pub fn new() -> Self {
        let mut q = SendBatch {
            iovs: zeroed_slots(BATCH * PARTS),
            addrs: zeroed_slots(BATCH),
            hdrs: zeroed_slots(BATCH),
            queued: Vec::with_capacity(BATCH),
        };
        for i in 0..BATCH {
            let h = &mut q.hdrs[i].msg_hdr;
            h.msg_iov = &mut q.iovs[i * PARTS];
            h.msg_name = (&mut q.addrs[i] as *mut libc::sockaddr_storage).cast();
        }
        q
    }

    pub fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    /// Room for more slot ranges before [`SendBatch::flush_slots`] must run.
    pub fn is_full(&self) -> bool {
        self.queued.len() == BATCH
    }

    /// Queues bytes `range` of slot `slot` for `to`; [`SendBatch::flush_slots`] sends them from
    /// the batch it is given. Panics on a range outside a slot or a full queue, which are bugs.
    #[inline]
    pub fn push_slot(&mut self, slot: usize, range: Range<usize>, to: SocketAddr) {
        assert!(slot < BATCH && range.start <= range.end && range.end <= SLOT);
        assert!(
            !self.is_full(),
            "flush before queueing more than BATCH datagrams"
        );
        self.queued.push((slot, range, to));
    }

    /// Sends the queued slot ranges, read from `from`, and empties the queue.
    pub fn flush_slots(&mut self, fd: RawFd, from: &RecvBatch) -> Sent {
        let mut queued = std::mem::take(&mut self.queued);
        let r = self.send(
            fd,
            queued
                .drain(..)
                .map(|(slot, range, to)| (&from.bufs[slot * SLOT..][range], &[][..], to)),
        );
        self.queued = queued;
        r
    }

    /// Sends each `(head, body, to)` as one datagram (`head` followed by `body`), in batches
    /// of [`BATCH`]. The pieces are borrowed only for this call.
    pub fn send<'a>(
        &mut self,
        fd: RawFd,
        datagrams: impl IntoIterator<Item = (&'a [u8], &'a [u8], SocketAddr)>,
    ) -> Sent {
        let mut total = Sent::default();
        let mut it = datagrams.into_iter().peekable();
        while it.peek().is_some() {
            let mut n = 0;
            for (head, body, to) in it.by_ref().take(BATCH) {
                let iov = &mut self.iovs[n * PARTS..(n + 1) * PARTS];
                let mut parts = 0;
                for piece in [head, body] {
                    if !piece.is_empty() {
                        // The kernel only reads through this pointer (sendmmsg); the cast to
                        // *mut is what the C struct's type asks for.
                        iov[parts] = libc::iovec {
                            iov_base: piece.as_ptr() as *mut _,
                            iov_len: piece.len(),
                        };
                        parts += 1;
                    }
                }
                let h = &mut self.hdrs[n].msg_hdr;
                h.msg_iovlen = parts as _;
                h.msg_namelen = std_to_sockaddr(to, &mut self.addrs[n]);
                n += 1;
            }
            let r = self.submit(fd, n);
            total.sent += r.sent;
            total.failed += r.failed;
        }
        total
    }

    /// Hands the first `n` prepared headers to the kernel. Only called from [`SendBatch::send`],
    /// while the pieces its iovecs point into are borrowed.
    fn submit(&mut self, fd: RawFd, n: usize) -> Sent {
        let mut sent = 0;
        let mut failed = 0;
        while sent + failed < n {
            let done = sent + failed;
            // SAFETY: headers `done..n` were filled by `send` in this same call: their iovecs
            // point into slices borrowed for the call (or are unused beyond `msg_iovlen`) and
            // their names into `addrs`, owned by `self`. sendmmsg only reads them.
            let r = unsafe {
                libc::sendmmsg(
                    fd,
                    self.hdrs.as_mut_ptr().add(done),
                    (n - done) as _,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                sent += r as usize;
                continue;
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted if r < 0 => continue,
                // A full socket buffer: what is left is dropped, like loss on the wire.
                io::ErrorKind::WouldBlock => break,
                // The kernel refused this one datagram (e.g. unreachable destination): skip it.
                _ if r < 0 => failed += 1,
                _ => break,
            }
        }
        Sent {
            sent,
            failed: n - sent,
        }
    }
}

impl Default for SendBatch {
    fn default() -> Self {
        Self::new()
    }
}

/// Datagrams the kernel dropped on this socket since it was opened because its receive buffer
/// was full: the loop did not read fast enough. `None` where the kernel does not say
/// (`SO_MEMINFO` is Linux 3.9+).
pub fn receive_drops(fd: RawFd) -> Option<u64> {
    // SO_MEMINFO is 55 on every Linux architecture but sparc/mips, which this does not run on;
    // the libc crate does not export it for x86-64 and aarch64.
    const SO_MEMINFO: libc::c_int = 55;
    // Room for every SK_MEMINFO_* value up to and past DROPS (the kernel has 9 today).
    let mut info = [0u32; 16];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: `info` is a live, writable array of `len` bytes for the whole call, and the kernel
    // writes at most `len` bytes into it (it truncates to the length it is given).
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let drops = libc::SK_MEMINFO_DROPS as usize;
    (r == 0 && len as usize > drops * 4).then(|| u64::from(info[drops]))
}

fn sockaddr_to_std(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which it is large and
            // aligned enough for (that is sockaddr_storage's purpose).
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                u32::from_be(a.sin_addr.s_addr).into(),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
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
            // SAFETY: all-zero is a valid sockaddr_in.
            let mut sin: libc::sockaddr_in = unsafe { zeroed() };
            sin.sin_family = libc::AF_INET as _;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            // SAFETY: sockaddr_storage is large and aligned enough for any sockaddr, and `out`
            // is a unique reference.
            unsafe { std::ptr::write((out as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>() as _
        }
        SocketAddr::V6(a) => {
            // SAFETY: all-zero is a valid sockaddr_in6.
            let mut sin6: libc::sockaddr_in6 = unsafe { zeroed() };
            sin6.sin6_family = libc::AF_INET6 as _;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            // SAFETY: as above.
            unsafe { std::ptr::write((out as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>() as _
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    fn pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    fn wait_readable() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    #[test]
    fn pieces_arrive_as_one_datagram_each() {
        let (a, b) = pair();
        let to = b.local_addr().unwrap();
        let bodies: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 10 + i as usize]).collect();
        let head = *b"HDR";
        let mut q = SendBatch::new();
        let r = q.send(
            a.as_raw_fd(),
            bodies.iter().map(|p| (&head[..], &p[..], to)),
        );
        assert_eq!(r, Sent { sent: 5, failed: 0 });
        wait_readable();
        let mut batch = RecvBatch::new(26);
        assert_eq!(batch.recv(b.as_raw_fd()).unwrap(), 5);
        for (i, p) in bodies.iter().enumerate() {
            assert_eq!(&batch.received(i)[..3], b"HDR");
            assert_eq!(&batch.received(i)[3..], &p[..]);
            assert_eq!(batch.addr(i), Some(a.local_addr().unwrap()));
        }
        assert_eq!(
            batch.recv(b.as_raw_fd()).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
    }

    #[test]
    fn more_than_a_batch_goes_out_in_several_calls() {
        let (a, b) = pair();
        let to = b.local_addr().unwrap();
        let n = BATCH * 2 + 3;
        let bodies: Vec<[u8; 4]> = (0..n as u32).map(u32::to_be_bytes).collect();
        let r = SendBatch::new().send(a.as_raw_fd(), bodies.iter().map(|p| (&[][..], &p[..], to)));
        assert_eq!(r.sent, n);
        wait_readable();
        let mut batch = RecvBatch::new(0);
        let mut got = Vec::new();
        while let Ok(k) = batch.recv(b.as_raw_fd()) {
            got.extend((0..k).map(|i| batch.received(i).to_vec()));
        }
        assert_eq!(got, bodies.iter().map(|p| p.to_vec()).collect::<Vec<_>>());
    }

    #[test]
    fn slot_ranges_forward_in_place_with_a_header_in_front() {
        let (a, b) = pair();
        let (c, d) = pair();
        a.send_to(b"payload", b.local_addr().unwrap()).unwrap();
        wait_readable();
        let mut batch = RecvBatch::new(4);
        assert_eq!(batch.recv(b.as_raw_fd()).unwrap(), 1);
        let n = batch.len(0);
        batch.slot_mut(0)[..4].copy_from_slice(b"LINK");
        let mut q = SendBatch::new();
        q.push_slot(0, 0..4 + n, d.local_addr().unwrap());
        assert_eq!(q.flush_slots(c.as_raw_fd(), &batch).sent, 1);
        assert!(q.is_empty());
        wait_readable();
        let mut out = RecvBatch::new(0);
        assert_eq!(out.recv(d.as_raw_fd()).unwrap(), 1);
        assert_eq!(out.received(0), b"LINKpayload");
    }

    #[test]
    fn a_datagram_larger_than_its_slot_is_marked_truncated() {
        let (a, b) = pair();
        let to = b.local_addr().unwrap();
        a.send_to(&vec![1u8; SLOT], to).unwrap();
        a.send_to(&[2u8; 100], to).unwrap();
        wait_readable();
        let mut batch = RecvBatch::new(26);
        assert_eq!(batch.recv(b.as_raw_fd()).unwrap(), 2);
        assert!(batch.truncated(0));
        assert!(!batch.truncated(1));
        assert_eq!(batch.received(1), &[2u8; 100][..]);
    }

    #[test]
    #[should_panic]
    fn a_range_outside_the_slot_is_refused() {
        SendBatch::new().push_slot(0, 0..SLOT + 1, "127.0.0.1:9".parse().unwrap());
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
            // SAFETY: all-zero is a valid sockaddr_storage.
            let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
            std_to_sockaddr(a, &mut ss);
            assert_eq!(sockaddr_to_std(&ss), Some(a));
        }
    }
}
