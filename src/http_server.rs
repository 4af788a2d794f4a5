//! Every HTTP listener this crate runs (signaling's public and admin listeners, LAN mode's HTTPS,
//! the metrics and control listeners) is served here, so the limits that stop a stranger from
//! holding connections open are written once.
//!
//! `axum::serve` installs no timer, so hyper's header-read timeout never fires there: a probe held
//! 400 idle connections open for as long as it liked. Here:
//! - a connection must deliver a request's headers within `header_timeout` of opening, and again
//!   within `header_timeout` of each time it goes idle: hyper restarts the header timer whenever a
//!   keep-alive connection waits for its next request, so the one knob is also the keep-alive
//!   idle timeout;
//! - a TLS handshake must finish within `header_timeout` too;
//! - at most `max_connections` are served at once. The slot is taken *before* `accept`, so beyond
//!   the cap new connections wait in the kernel's accept backlog (and are refused once it is
//!   full) instead of each costing a task, buffers and a file descriptor here;
//! - HTTP/1.1 only. hyper's HTTP/2 server has no idle timeout (a peer that answers PINGs may sit
//!   on a connection forever), and the API is a few small requests per call, which HTTP/1.1
//!   serves as well; LAN mode's TLS offers only `http/1.1` in ALPN so browsers agree;
//! - the errors hyper answers itself (414, 431, a malformed request) carry the API's JSON error
//!   body like every other (see [`parse_errors`]).

mod parse_errors;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tower_service::Service;

/// Connections served at once per listener. A call's setup is one or two short requests, so a
/// few hundred concurrent connections is more than one signaling process meets in normal use;
/// the cap is what keeps a flood from exhausting file descriptors (the process also holds every
/// call's sockets), and past it clients wait rather than fail.
pub const MAX_CONNECTIONS: usize = 512;
/// How long a connection may take to send a request's headers, from opening or from going idle.
/// Browsers send them in one packet; 10 s covers a slow mobile link, and Node's fetch already
/// drops idle connections after 4 s, so nothing legitimate is cut.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// On stop, requests in flight get this long to finish before their connections are dropped.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// What each HTTP listener allows; `--http-max-connections` for the public ones.
#[derive(clap::Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections each HTTP listener serves at once; beyond it new ones wait to be accepted.
    #[arg(long = "http-max-connections", env = "VOICE_EDGE_HTTP_MAX_CONNECTIONS", default_value_t = MAX_CONNECTIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub max_connections: usize,
    /// Headers must arrive within this of a connection opening or going idle (tests shorten it).
    #[arg(skip = HEADER_TIMEOUT)]
    pub header_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        crate::flags::defaults()
    }
}

/// A listener being served; dropping it leaves it running (as a detached task), [`Self::stop`]
/// ends it.
pub struct HttpServer {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    /// Serves `router` on `listener` (over TLS with `tls`) within `limits`, on the current tokio
    /// runtime. Handlers see the peer as `ConnectInfo<SocketAddr>`, as with axum's own serve.
    pub fn spawn(
        listener: TcpListener,
        router: Router,
        limits: HttpLimits,
        tls: Option<Arc<ServerConfig>>,
    ) -> std::io::Result<HttpServer> {
        let addr = listener.local_addr()?;
        let (stop, stop_rx) = watch::channel(false);
        let tls = tls.map(|c| {
            let mut c = (*c).clone();
            c.alpn_protocols = vec![b"http/1.1".to_vec()];
            TlsAcceptor::from(Arc::new(c))
        });
        let task = tokio::spawn(accept_loop(listener, router, limits, tls, stop_rx));
        Ok(HttpServer { addr, stop, task })
    }

    /// Stops accepting, closes idle connections, lets requests in flight finish for a moment and
    /// then drops whatever is left.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    tls: Option<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        // The slot first: while none is free, connections stay in the kernel's backlog.
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            _ = stopped(&mut stop) => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    log::warn!("http accept on {:?}: {e}", listener.local_addr().ok());
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped(&mut stop) => break,
        };
        let (router, tls, stop) = (router.clone(), tls.clone(), stop.clone());
        tokio::spawn(async move {
            serve_connection(stream, peer, router, limits, tls, stop).await;
            drop(permit);
        });
    }
    drop(listener);
    // Every connection holds a slot, so holding them all means every connection has ended; each
    // ends within its grace of the stop.
    let all = limits.max_connections.min(u32::MAX as usize) as u32;
    let _ = tokio::time::timeout(STOP_GRACE * 2, slots.acquire_many(all)).await;
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: HttpLimits,
    tls: Option<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    match tls {
        None => {
            let io = TokioIo::new(parse_errors::JsonParseErrors::new(stream));
            serve_http1(io, peer, router, limits, stop).await
        }
        Some(acceptor) => {
            let handshake = tokio::time::timeout(limits.header_timeout, acceptor.accept(stream));
            let tls_stream = tokio::select! {
                r = handshake => match r {
                    Ok(Ok(s)) => s,
                    // A failed or slow handshake: nothing to answer, just close.
                    _ => return,
                },
                _ = stopped(&mut stop) => return,
            };
            let io = TokioIo::new(parse_errors::JsonParseErrors::new(tls_stream));
            serve_http1(io, peer, router, limits, stop).await
        }
    }
}

async fn serve_http1<I>(
    io: I,
    peer: SocketAddr,
    router: Router,
    limits: HttpLimits,
    mut stop: watch::Receiver<bool>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        let mut router = router.clone();
        // Router is always ready (its poll_ready is a constant Ready), so calling is enough.
        async move { Ok::<_, Infallible>(router.call(req).await.unwrap_or_else(|e| match e {})) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    // With upgrades: `GET /v1/realtime` hands the connection to a WebSocket, which then runs
    // on its own task, outside this connection's header timer.
    let conn = builder.serve_connection(io, service).with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stopped(&mut stop) => {}
    }
    // Finish the request in flight (an idle connection closes at once), within the grace.
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(STOP_GRACE, conn).await;
}

/// Resolves once a stop was sent; never, if the server was dropped (detached) instead.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}
