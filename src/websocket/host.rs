//! The task that drives one [`WsSession`]: client frames, job results and the session's timer
//! in; server frames out.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::{EventStream, SessionRequest, WsSession};
use crate::call::byte_budget::Exhausted;
use crate::call::event_stream::{FrameReceiver, FrameSender, QueueBytes, frames};
use crate::call::media::JobDone;
use crate::call::recording::{RecordingRoom, SharedRecordings};
use crate::upstream::{LinkEnd, UpstreamConfig, UpstreamEvent, link};

/// The real service closes a session after 60 minutes; so does this one.
const MAX_SESSION: Duration = crate::realtime::session_limits::MAX_SESSION_DURATION;
/// How long a Live WebSocket may take to send a valid `session.start`.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts a session on the current tokio runtime and returns its stream; `live` counts it
/// until it ends. A Live session is made from the client's `session.start`; a stored one's
/// recording goes to `recordings` when it ends, as a WebRTC session's does. The client's
/// frames waiting for the session are counted in `queued` too (the transceiver's pool). A
/// session that hears nothing from its client for `idle` is closed, so an abandoned socket
/// gives its slot back long before the 60-minute limit.
pub fn spawn(
    request: SessionRequest,
    live: Arc<AtomicUsize>,
    recordings: SharedRecordings,
    upstream: Option<UpstreamConfig>,
    queued: Arc<QueueBytes>,
    idle: Duration,
) -> EventStream {
    let (to_session, mut from_client) = frames();
    let to_session = to_session.counted_in(queued);
    let (to_client, from_session) = frames();
    let expires = crate::realtime::session_limits::expires_at_unix();
    live.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        let _count = Live(live);
        let random = hex::encode(rand::random::<[u8; 12]>());
        let mut from_upstream = None;
        let session = match request {
            SessionRequest::Live { id, client } => {
                let record = || recordings.room(client);
                match await_start(id, expires, &mut from_client, &to_client, record).await {
                    Some(session) => session,
                    None => return,
                }
            }
            SessionRequest::Upstream(call) => {
                let mut session = WsSession::bridged(format!("sess_{random}"), &call);
                match &upstream {
                    Some(cfg) => {
                        let (link, events) =
                            link::open_to_channel(cfg.url_for(&call.model), cfg.key.clone());
                        session.attach_upstream(Instant::now(), link);
                        from_upstream = Some(events);
                    }
                    None => session.on_upstream(
                        Instant::now(),
                        UpstreamEvent::Closed(LinkEnd::Unreachable(
                            "this transceiver has no --upstream".into(),
                        )),
                    ),
                }
                session
            }
            request => WsSession::new(format!("sess_{random}"), &request, expires),
        };
        let mut session = session;
        run(&mut session, from_client, to_client, from_upstream, idle).await;
        if let Some(recording) = session.take_recording() {
            recordings.keep(Instant::now(), session.id.clone(), recording);
        }
    });
    EventStream {
        to_session,
        from_session,
    }
}

struct Live(Arc<AtomicUsize>);
impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn run(
    session: &mut WsSession,
    mut from_client: FrameReceiver,
    to_client: FrameSender,
    mut from_upstream: Option<mpsc::Receiver<UpstreamEvent>>,
    idle: Duration,
) {
    let (job_tx, mut job_rx) = mpsc::unbounded_channel::<JobDone>();
    let expires_at = tokio::time::Instant::now() + MAX_SESSION;
    // Idle or expired, the session says so once and then closes.
    let mut closing = false;
    let mut idle_at = tokio::time::Instant::now() + idle;
    log::debug!("{}: WebSocket session started", session.id);
    loop {
        for job in session.take_jobs() {
            let tx = job_tx.clone();
            if let Err(failed) = job.start(move |done| {
                let _ = tx.send(done);
            }) {
                session.on_job_done(Instant::now(), failed);
            }
        }
        while let Some(frame) = session.poll_frame() {
            if to_client.send(frame).await.is_err() {
                return; // the client is gone
            }
        }
        if session.is_ended() {
            break;
        }
        let timer = session.poll_timeout().map(tokio::time::Instant::from_std);
        tokio::select! {
            text = from_client.recv() => match text {
                Some(text) => {
                    idle_at = tokio::time::Instant::now() + idle;
                    session.on_client_text(Instant::now(), &text)
                }
                None => break,
            },
            Some(done) = job_rx.recv() => session.on_job_done(Instant::now(), done),
            Some(event) = next_upstream(&mut from_upstream) => {
                session.on_upstream(Instant::now(), event)
            }
            () = sleep_until(timer) => session.handle_timeout(Instant::now()),
            () = tokio::time::sleep_until(idle_at), if !closing => {
                closing = true;
                log::info!("{}: no client event for {idle:?}; closing", session.id);
                session.idle_out(Instant::now(), idle);
            }
            () = tokio::time::sleep_until(expires_at), if !closing => {
                closing = true;
                session.expire(Instant::now());
            }
        }
    }
    log::debug!("{}: WebSocket session ended", session.id);
}

/// A Live WebSocket's first messages until one is a valid `session.start`; each refusal is
/// answered with its `error`. `None` when the client leaves or takes too long.
async fn await_start(
    id: String,
    expires: u64,
    from_client: &mut FrameReceiver,
    to_client: &FrameSender,
    record: impl Fn() -> Result<RecordingRoom, Exhausted>,
) -> Option<WsSession> {
    let deadline = tokio::time::Instant::now() + START_TIMEOUT;
    loop {
        let text = tokio::time::timeout_at(deadline, from_client.recv())
            .await
            .ok()??;
        match WsSession::start_live(id.clone(), &text, expires, &record) {
            Ok(session) => return Some(session),
            Err(error) => to_client.send(error).await.ok()?,
        }
    }
}

/// The next event of a bridged session's link; never, for a session with none.
async fn next_upstream(rx: &mut Option<mpsc::Receiver<UpstreamEvent>>) -> Option<UpstreamEvent> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
