//! The process's background runtimes: one tokio thread per kind of network work the socket
//! loops hand off (MCP requests, upstream model links), so none of it runs on a worker and one
//! kind cannot starve the other. Each kind keeps its runtime in its own `OnceLock`.

/// A one-thread runtime named `name`. Its TLS clients (reqwest for MCP, tungstenite for
/// `wss://` upstreams) take the process's default rustls provider: ring, as the LAN listener.
pub fn runtime(name: &'static str) -> tokio::runtime::Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("the {name} runtime starts: {e}"))
}
