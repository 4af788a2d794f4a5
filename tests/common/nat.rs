//! A userspace NAT, so rebinding and vanished clients are tested on loopback without root.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A userspace NAT between a test client and the media address: the client is told (by a
/// rewritten answer) to send here, and the NAT forwards from a socket of its own. `rebind`
/// moves to a new source port mid-call (NAT rebinding); `blackhole` drops everything (a client
/// that vanished without saying goodbye).
pub struct Nat {
    pub addr: SocketAddr,
    back: Arc<std::sync::Mutex<Arc<tokio::net::UdpSocket>>>,
    front: Arc<tokio::net::UdpSocket>,
    client: Arc<std::sync::Mutex<Option<SocketAddr>>>,
    dropping: Arc<std::sync::atomic::AtomicBool>,
    target: SocketAddr,
}

impl Nat {
    pub async fn start(target: SocketAddr) -> Nat {
        let front = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let back = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let nat = Nat {
            addr: front.local_addr().unwrap(),
            back: Arc::new(std::sync::Mutex::new(back.clone())),
            front: front.clone(),
            client: Arc::new(std::sync::Mutex::new(None)),
            dropping: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            target,
        };
        let (b, c, d) = (nat.back.clone(), nat.client.clone(), nat.dropping.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            while let Ok((n, from)) = front.recv_from(&mut buf).await {
                *c.lock().unwrap() = Some(from);
                if d.load(std::sync::atomic::Ordering::Relaxed) {
                    continue;
                }
                let sock = b.lock().unwrap().clone();
                let _ = sock.send_to(&buf[..n], target).await;
            }
        });
        nat.spawn_reader(back);
        nat
    }

    fn spawn_reader(&self, back: Arc<tokio::net::UdpSocket>) {
        let (front, c, d, current) = (
            self.front.clone(),
            self.client.clone(),
            self.dropping.clone(),
            self.back.clone(),
        );
        tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            loop {
                let Ok(Ok((n, _))) =
                    tokio::time::timeout(Duration::from_millis(200), back.recv_from(&mut buf))
                        .await
                else {
                    // Stop once this socket is no longer the NAT's current binding.
                    if !Arc::ptr_eq(&current.lock().unwrap(), &back) {
                        return;
                    }
                    continue;
                };
                let to = *c.lock().unwrap();
                if let Some(to) = to
                    && !d.load(std::sync::atomic::Ordering::Relaxed)
                {
                    let _ = front.send_to(&buf[..n], to).await;
                }
            }
        });
    }

    /// Continues from a new source port, as a NAT that lost its binding does.
    pub async fn rebind(&self) -> SocketAddr {
        let back = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let addr = back.local_addr().unwrap();
        *self.back.lock().unwrap() = back.clone();
        self.spawn_reader(back);
        addr
    }

    pub fn blackhole(&self, on: bool) {
        self.dropping
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// Points an answer's candidate at the NAT instead of the media address.
    pub fn rewrite_answer(&self, sdp: &str) -> String {
        sdp.replace(
            &format!("{} {} typ host", self.target.ip(), self.target.port()),
            &format!("{} {} typ host", self.addr.ip(), self.addr.port()),
        )
    }
}
