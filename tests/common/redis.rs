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
            if std::net::TcpStream::connect(addr).is_ok() {
                std::thread::sleep(Duration::from_millis(20));
                if child.try_wait().ok().flatten().is_none() {
                    return Some(RedisServer { addr, child });
                }
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
