//! Debian's redis-server for the tests that need a real Redis (membership, the flow cache), on a
//! port of its own so tests can run in parallel.

use std::net::SocketAddr;
use std::time::Duration;

/// A real Redis (Debian's redis-server) on a free loopback port, killed on drop.
pub struct RedisServer {
    pub addr: SocketAddr,
    child: std::process::Child,
}

impl RedisServer {
    /// On a free port. Picking a free port and binding it are two steps, so two tests can pick
    /// the same one; the loser's redis-server exits, and it must not go on with the winner's
    /// Redis (which disappears when that test ends): retry on a fresh port instead.
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// With extra `redis-server` arguments (e.g. `--requirepass`), on a free port.
    pub fn start_with(args: &[&str]) -> RedisServer {
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            if let Some(r) = Self::try_start_on(port, args) {
                return r;
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    pub fn start_on(port: u16) -> RedisServer {
        Self::try_start_on(port, &[])
            .unwrap_or_else(|| panic!("redis-server did not start on {port}"))
    }

    fn try_start_on(port: u16, args: &[&str]) -> Option<RedisServer> {
        let mut child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(args)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server is needed for this test (scripts/test.sh installs Debian's redis-server)");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        for _ in 0..100 {
            // Ours only while our process lives: a server that exited lost the port to another.
            if child.try_wait().ok().flatten().is_some() {
                return None;
            }
            match serving_pid(addr, args) {
                Some(pid) if pid == child.id() => return Some(RedisServer { addr, child }),
                // Another test's Redis won the port (ours is about to exit): try another port.
                Some(_) => break,
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

/// The process id of the Redis answering on `addr`, if one answers. A TCP connect alone does
/// not prove the server is ours: another test's Redis may hold the port, and a loopback connect
/// to a port nobody listens on can even connect to itself (TCP simultaneous open).
fn serving_pid(addr: SocketAddr, args: &[&str]) -> Option<u32> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    // A password given in `args` must be sent first, or INFO is refused.
    if let Some(i) = args.iter().position(|a| *a == "--requirepass") {
        let pass = args.get(i + 1)?;
        write!(s, "AUTH {pass}\r\n").ok()?;
        let mut ok = [0u8; 5];
        s.read_exact(&mut ok).ok()?;
    }
    s.write_all(b"INFO server\r\n").ok()?;
    // The reply is one bulk string, `$<len>\r\n<text>\r\n`: read all of it.
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    let text = loop {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        reply.extend_from_slice(&buf[..n]);
        let head_end = reply.windows(2).position(|w| w == b"\r\n")?;
        let len: usize = std::str::from_utf8(reply.get(1..head_end)?)
            .ok()?
            .parse()
            .ok()?;
        if reply.len() >= head_end + 2 + len {
            break String::from_utf8_lossy(&reply[head_end + 2..head_end + 2 + len]).into_owned();
        }
    };
    let line = text.lines().find(|l| l.starts_with("process_id:"))?;
    line["process_id:".len()..].trim().parse().ok()
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
