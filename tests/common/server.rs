//! The all-in-one server as most tests start it: every listener on loopback with a port of the
//! kernel's choosing, so tests run side by side.

use voice_edge::allinone::{self, AllInOneConfig, Running};

/// Starts `cfg` with its HTTP listener and relay on loopback ports the kernel picks.
pub async fn start_local(cfg: AllInOneConfig) -> Running {
    let _ = env_logger::builder().is_test(true).try_init();
    allinone::start(AllInOneConfig {
        http: "127.0.0.1:0".parse().unwrap(),
        relay: "127.0.0.1:0".parse().unwrap(),
        ..cfg
    })
    .await
    .expect("start the all-in-one")
}

/// Calls the server's transceivers hold (live or setting up).
pub async fn sessions(server: &Running) -> usize {
    let mut n = 0;
    for t in &server.transceivers {
        n += t.stats().await.sessions;
    }
    n
}
