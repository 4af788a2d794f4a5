//! The socket loop around one [`Endpoint`]: it owns the shared UDP socket, the clock and the command
//! queue, and decides nothing the endpoint could. Everything about calls lives in the endpoint;
//! datagrams both ways pass the [`FaultLayer`] in front of it, which leaves them alone unless a
//! call has a fault.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rtc::peer_connection::certificate::RTCCertificate;

use super::admission::SharedLoad;
use super::endpoint::{CallJob, Endpoint, UpstreamOpen};
use super::faults::FaultLayer;
use super::mailbox::{Inbox, Mailbox};
use super::transmit::Transmit;
use super::{TransceiverConfig, WorkerMessage};
use crate::call::media::JobDone;
use crate::routing::link::LINK_HEADER_LEN;
use crate::routing::local_link::{LocalInbox, LocalLinks, LocalRoutes};
use crate::saturation::{LoadMeter, Verdict};
use crate::udp_batch::{BATCH, RecvBatch, SendBatch};
use crate::wakeup::Sleeper;

/// Receive batches handled before timers and commands get a turn, so a flood cannot starve
/// them (8 × 32 datagrams is ~5 ms of 1,000 calls' audio).
const MAX_BATCHES_PER_TURN: usize = 8;

/// The sleeper's key for the worker's UDP socket; everything else wakes it through a waker.
const SOCKET: usize = 0;

/// What a worker is started with.
pub(super) struct WorkerParts {
    pub cfg: TransceiverConfig,
    pub index: u8,
    /// This worker's socket address.
    pub own: SocketAddr,
    /// The candidate put in answers: the relay, or this worker's own socket.
    pub advertise: SocketAddr,
    pub certificate: RTCCertificate,
    pub load: SharedLoad,
    pub stop: Arc<AtomicBool>,
    /// This worker's own command queue, where the synthesis pool hands speech back.
    pub mailbox: Mailbox,
    /// What the loop sleeps on; the mailbox and the in-memory link hold its waker.
    pub sleeper: Sleeper,
    /// A relay in this process, reached in memory (see [`crate::routing::local_link`]): the
    /// table of in-process link addresses and this worker's own queue in it.
    pub local: Option<(Arc<LocalLinks>, LocalInbox)>,
    /// The transceiver's store of ended calls' event logs.
    pub ended_logs: crate::call::event_log::SharedEndedLogs,
    pub recordings: crate::call::recording::SharedRecordings,
}

pub(super) struct Worker {
    endpoint: Endpoint,
    faults: FaultLayer,
    id: u16,
    index: u8,
    load: SharedLoad,
    meter: LoadMeter,
    stop: Arc<AtomicBool>,
    mailbox: Mailbox,
    sleeper: Sleeper,
    /// What the endpoint queued, gathered for one `sendmmsg`, and the link header of each.
    outgoing: Vec<Transmit>,
    heads: Vec<[u8; LINK_HEADER_LEN]>,
    sender: SendBatch,
    /// This worker's socket address: what its in-memory datagrams say they come from.
    own: SocketAddr,
    local_links: Option<Arc<LocalLinks>>,
    local_inbox: Option<LocalInbox>,
    routes: LocalRoutes,
}

impl Worker {
    pub(super) fn new(p: WorkerParts) -> Self {
        let id = p.cfg.id;
        let mut endpoint =
            Endpoint::new(Instant::now(), p.cfg, p.index, p.advertise, p.certificate);
        endpoint.share_ended_logs(p.ended_logs);
        endpoint.share_recordings(p.recordings);
        Worker {
            id,
            index: p.index,
            endpoint,
            faults: FaultLayer::default(),
            load: p.load,
            meter: LoadMeter::new(Instant::now()),
            stop: p.stop,
            mailbox: p.mailbox,
            sleeper: p.sleeper,
            outgoing: Vec::with_capacity(BATCH),
            heads: Vec::with_capacity(BATCH),
            sender: SendBatch::new(),
            own: p.own,
            local_links: p.local.as_ref().map(|(l, _)| l.clone()),
            local_inbox: p.local.map(|(_, i)| i),
            routes: LocalRoutes::default(),
        }
    }

    /// The loop: run due timers and send, sleep until the socket is readable, a command or an
    /// in-memory datagram is queued or the endpoint's next deadline, then handle what woke it.
    pub(super) fn run(mut self, socket: UdpSocket, inbox: Inbox) {
        // recvmmsg/sendmmsg pass MSG_DONTWAIT; this keeps any other call from blocking too.
        if let Err(e) = socket.set_nonblocking(true) {
            log::warn!("transceiver {}.{}: {e}", self.id, self.index);
        }
        if let Err(e) = self.sleeper.watch(socket.as_fd(), SOCKET) {
            log::error!("transceiver {}.{}: {e}", self.id, self.index);
            return;
        }
        let fd = socket.as_raw_fd();
        let mut batch = RecvBatch::new(0);
        while !self.stop.load(Ordering::Relaxed) {
            if let Some(l) = &self.local_links {
                self.routes.refresh(l);
            }
            let now = Instant::now();
            self.faults.handle_timeout(&mut self.endpoint, now);
            self.output(fd);
            let timeout = self
                .faults
                .poll_timeout(&self.endpoint)
                .saturating_duration_since(now);
            self.meter.turn_done(Instant::now());
            self.sleeper.wait(Some(timeout));
            let woke = Instant::now();
            if self.meter.window_over(woke) {
                self.judge_load(fd, woke);
            }
            let mut handled = 0;
            if self.sleeper.is_ready(SOCKET) {
                handled += self.drain_socket(fd, &mut batch);
            }
            // A waker says only that something was queued: look at both queues.
            handled += self.drain_local(fd);
            for c in inbox.take_all() {
                handled += 1;
                self.on_message(c);
            }
            self.sleeper.turn_handled(handled);
            self.output(fd);
        }
        // Tell every client we are going, so they need not wait for consent to expire.
        self.endpoint.close_all(Instant::now());
        self.output(fd);
        self.sleeper.unwatch(socket.as_fd());
    }

    /// Reads what the socket holds, a batch per system call, answering each batch before
    /// reading the next so replies leave as soon as their input is handled; returns how many
    /// datagrams it read.
    fn drain_socket(&mut self, fd: RawFd, batch: &mut RecvBatch) -> usize {
        let mut read = 0;
        for _ in 0..MAX_BATCHES_PER_TURN {
            let n = match batch.recv(fd) {
                Ok(n) => n,
                Err(e) => {
                    if e.kind() != std::io::ErrorKind::WouldBlock {
                        log::debug!("recv: {e}");
                    }
                    return read;
                }
            };
            read += n;
            let now = Instant::now();
            for i in 0..n {
                // Cut short by the slot: no valid datagram of ours is that large.
                if batch.truncated(i) {
                    continue;
                }
                if let Some(from) = batch.addr(i) {
                    self.faults
                        .handle_datagram(&mut self.endpoint, now, from, batch.received(i));
                }
            }
            self.output(fd);
            if n < BATCH {
                return read;
            }
        }
        read
    }

    fn on_message(&mut self, message: WorkerMessage) {
        let now = Instant::now();
        match message {
            WorkerMessage::Create {
                offer_sdp,
                setup,
                reply,
            } => {
                let r = self.endpoint.create_call(now, offer_sdp, *setup);
                // Counted before the reply: placement reads the count as soon as it has the
                // answer, and a call it cannot see yet would draw the next one here too.
                self.publish_counts();
                let _ = reply.send(r);
            }
            WorkerMessage::Call {
                call_id,
                command,
                reply,
            } => {
                let r = self
                    .faults
                    .command(&mut self.endpoint, now, &call_id, command);
                // A hang-up or a fault can change the counts placement reads.
                self.publish_counts();
                let _ = reply.send(r);
            }
            WorkerMessage::JobDone { call_id, done } => self.endpoint.job_done(now, &call_id, done),
            WorkerMessage::Upstream { call_id, event } => {
                self.endpoint.on_upstream(now, &call_id, event)
            }
            WorkerMessage::AttachSideband {
                call_id,
                out,
                reply,
            } => {
                let _ = reply.send(self.endpoint.attach_sideband(&call_id, out));
            }
            WorkerMessage::SidebandText { call_id, text } => {
                self.endpoint.sideband_text(now, &call_id, &text);
            }
            WorkerMessage::DetachSideband { call_id, id } => {
                self.endpoint.detach_sideband(&call_id, id);
            }
            WorkerMessage::Stats { reply } => {
                let _ = reply.send(self.endpoint.stats());
            }
            WorkerMessage::List { reply } => {
                let _ = reply.send(self.endpoint.list(now));
            }
        }
    }

    /// Datagrams from a relay in this process, as [`Self::drain_socket`] reads the socket's;
    /// returns how many.
    fn drain_local(&mut self, fd: RawFd) -> usize {
        let Some(inbox) = self.local_inbox.take() else {
            return 0;
        };
        let max = BATCH * MAX_BATCHES_PER_TURN;
        let mut taken = 0;
        let now = Instant::now();
        for (from, datagram) in inbox.take(max) {
            taken += 1;
            self.faults
                .handle_datagram(&mut self.endpoint, now, from, &datagram);
            if taken % BATCH == 0 {
                self.output(fd);
            }
        }
        if taken == max {
            inbox.again();
        }
        self.local_inbox = Some(inbox);
        taken
    }

    /// Starts the jobs the endpoint queued, sends what it queued (a `sendmmsg` per
    /// [`BATCH`]), publishes the call count. Jobs go first: a refusal fails its response at
    /// once, and those events leave in this same send.
    fn output(&mut self, fd: RawFd) {
        while let Some(job) = self.endpoint.poll_job() {
            if let Err((call_id, done)) = start_job(job, &self.mailbox) {
                self.endpoint.job_done(Instant::now(), &call_id, done);
            }
        }
        while let Some(open) = self.endpoint.poll_upstream_open() {
            let link = open_upstream(&open, &self.mailbox);
            self.endpoint
                .attach_upstream(Instant::now(), &open.call_id, link);
        }
        let (endpoint, faults, now) = (&mut self.endpoint, &mut self.faults, Instant::now());
        self.outgoing
            .extend(std::iter::from_fn(|| faults.poll_transmit(endpoint, now)));
        if !self.outgoing.is_empty() {
            self.heads.clear();
            self.heads.extend(self.outgoing.iter().map(|t| {
                let mut head = [0u8; LINK_HEADER_LEN];
                if let Some(h) = &t.link {
                    h.write(&mut head);
                }
                head
            }));
            let (routes, own) = (&mut self.routes, self.own);
            // To a relay in this process in memory; the rest by UDP, in one sendmmsg.
            let datagrams = self
                .outgoing
                .iter()
                .zip(&self.heads)
                .filter_map(|(t, head)| match &t.link {
                    Some(h) => match routes.deliver(t.to, h.client, own, &[head, &t.payload]) {
                        Some(_) => None,
                        None => Some((&head[..], &t.payload[..], t.to)),
                    },
                    None => Some((&[][..], &t.payload[..], t.to)),
                });
            // Send errors are dropped like any UDP loss.
            let r = self.sender.send(fd, datagrams);
            self.routes.wake_all();
            if r.failed > 0 {
                log::debug!(
                    "transceiver {}.{}: {} datagrams not sent",
                    self.id,
                    self.index,
                    r.failed
                );
            }
            self.outgoing.clear();
        }
        self.publish_counts();
    }

    fn publish_counts(&self) {
        self.load
            .calls
            .store(self.endpoint.len(), Ordering::Relaxed);
        self.load
            .connecting
            .store(self.endpoint.connecting(), Ordering::Relaxed);
    }

    /// Closes a measurement window: is this loop keeping up with its calls?
    fn judge_load(&mut self, fd: RawFd, now: Instant) {
        let drops = crate::udp_batch::receive_drops(fd).unwrap_or(0)
            + self.local_inbox.as_ref().map_or(0, LocalInbox::dropped);
        let Verdict {
            window,
            saturated,
            changed,
        } = self.meter.judge(
            now,
            drops,
            self.endpoint.take_max_timer_lag(),
            self.endpoint.len(),
        );
        // Lateness short of saturation, at debug: what the soak needs to place a stall in time.
        if window.max_timer_lag >= Duration::from_millis(5) {
            log::debug!(
                target: "voice_edge::load",
                "transceiver {}.{}: timers up to {:?} late ({} calls, {:.0} % busy)",
                self.id,
                self.index,
                window.max_timer_lag,
                window.calls,
                100.0 * window.busy_share(),
            );
        }
        if saturated {
            self.load.saturated_windows.fetch_add(1, Ordering::Relaxed);
        }
        if changed {
            log::warn!(
                "transceiver {}.{}: {} ({} calls, {:.0} % busy, {} drops, timers up to {:?} late)",
                self.id,
                self.index,
                if saturated {
                    "saturated: out of placement until it recovers"
                } else {
                    "recovered: back in placement"
                },
                window.calls,
                100.0 * window.busy_share(),
                window.dropped,
                window.max_timer_lag
            );
        }
        self.load.saturated.store(saturated, Ordering::Relaxed);
    }
}

/// Opens a bridged call's upstream WebSocket; what it reports comes back as
/// [`WorkerMessage::Upstream`], waiting (off this thread) while the mailbox is full.
fn open_upstream(open: &UpstreamOpen, mailbox: &Mailbox) -> crate::upstream::UpstreamLink {
    let (mailbox, call_id) = (mailbox.clone(), open.call_id.clone());
    crate::upstream::link::open(open.url.clone(), open.key.clone(), move |event| {
        let (mailbox, call_id) = (mailbox.clone(), call_id.clone());
        async move {
            mailbox
                .send(WorkerMessage::Upstream { call_id, event })
                .await
                .is_ok()
        }
    })
}

/// Starts a call's job off the socket thread (see [`Job::start`]); its result comes back as
/// [`WorkerMessage::JobDone`]. A job that cannot start is returned as the failure to report.
fn start_job(job: CallJob, mailbox: &Mailbox) -> Result<(), (String, JobDone)> {
    let CallJob { call_id, job } = job;
    let (mailbox, id) = (mailbox.clone(), call_id.clone());
    job.start(move |done| {
        let _ = mailbox.send_blocking(WorkerMessage::JobDone { call_id: id, done });
    })
    .map_err(|done| (call_id, done))
}
