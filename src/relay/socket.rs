//! Socket setup for relay workers.

use std::net::{SocketAddr, UdpSocket};

use socket2::{Domain, Protocol, Socket, Type};

/// Large kernel buffers absorb bursts while a worker is between batches; loopback and 10G
/// links fill the 208 KB default in well under a millisecond.
const SOCKET_BUFFER: usize = 4 << 20;

/// Binds a non-blocking UDP socket with SO_REUSEPORT, so N workers can share one port and the
/// kernel spreads clients across them by 4-tuple hash (each client stays on one worker).
pub fn bind_reuseport(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_port(true)?;
    s.set_reuse_address(true)?;
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    Ok(s.into())
}
