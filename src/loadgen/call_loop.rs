//! The loop a load-generator worker thread runs: one poller, many calls. (Named `CallLoop`,
//! not `Worker`: the relay and transceiver workers are server socket loops; this is a client.)
//!
//! Every call has its own UDP socket, because the server's candidate (the relay) is the same
//! address for all calls and the relay keys flows by client address: calls sharing a client
//! socket would be one flow. One poller (see [`crate::wakeup`]) covers all of a worker's sockets, so a call costs a
//! file descriptor and its `rtc` state, not a thread or a task. Timers (each call's `rtc`
//! deadline and its next 20 ms audio frame) live in one min-heap with stale entries skipped.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rtc::peer_connection::certificate::RTCCertificate;

use super::call::{Ctx, Live, Phase, Record};
use super::http::{HttpJob, HttpReply};
use super::stats::Histogram;
use crate::wakeup::Sleeper;

/// Readiness events taken per wait (the sleeper's capacity).
pub(super) const MAX_EVENTS: usize = 512;
/// Datagrams read from one socket per wake before moving on (level-triggered: the rest wait).
const READ_BURST: usize = 32;
const SWEEP_EVERY: Duration = Duration::from_millis(250);
/// How long a call waits for its HTTP hang-up before it just closes.
const HANGUP_WAIT: Duration = Duration::from_secs(3);

/// The run's timeline and settings, shared by every worker.
#[derive(Clone)]
pub struct Plan {
    pub sessions: usize,
    pub workers: usize,
    pub epoch: Instant,
    /// Calls per second.
    pub rate: f64,
    pub stop_audio: Instant,
    pub count_until: Instant,
    pub hangup_at: Instant,
    pub deadline: Instant,
    pub setup_timeout: Duration,
    pub http_hangup: bool,
    pub bind_ip: IpAddr,
}

impl Plan {
    pub fn start_of(&self, index: usize) -> Instant {
        self.epoch + Duration::from_secs_f64(index as f64 / self.rate)
    }
}

pub struct CallLoopResult {
    /// (global call index, record)
    pub records: Vec<(usize, Record)>,
    pub rtt: Histogram,
}

struct Slot {
    index: usize,
    rec: Record,
    live: Option<Box<Live>>,
    counted_live: bool,
    hangup_sent: Option<Instant>,
}

pub struct Shared {
    /// Calls connected (DTLS up) and not yet ended, across workers.
    pub live: Arc<AtomicUsize>,
    /// The most `live` has been.
    pub peak: Arc<AtomicUsize>,
}

pub struct CallLoop {
    id: usize,
    plan: Plan,
    certificate: RTCCertificate,
    jobs: async_channel::Sender<HttpJob>,
    replies: mpsc::Receiver<HttpReply>,
    shared: Shared,
    /// Every live call's socket, keyed by its slot; the signaling pool's replies wake it too.
    sleeper: Sleeper,
    slots: Vec<Slot>,
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    rtt: Histogram,
    open: usize,
}

impl CallLoop {
    pub fn new(
        id: usize,
        plan: Plan,
        certificate: RTCCertificate,
        jobs: async_channel::Sender<HttpJob>,
        replies: mpsc::Receiver<HttpReply>,
        sleeper: Sleeper,
        shared: Shared,
    ) -> anyhow::Result<CallLoop> {
        let slots = (id..plan.sessions)
            .step_by(plan.workers)
            .map(|index| Slot {
                index,
                rec: Record::default(),
                live: None,
                counted_live: false,
                hangup_sent: None,
            })
            .collect();
        Ok(CallLoop {
            id,
            plan,
            certificate,
            jobs,
            replies,
            shared,
            sleeper,
            slots,
            timers: BinaryHeap::new(),
            rtt: Histogram::default(),
            open: 0,
        })
    }

    pub fn run(mut self) -> CallLoopResult {
        let mut buf = vec![0u8; 2048];
        let mut keys = Vec::with_capacity(MAX_EVENTS);
        let mut next_start = 0usize;
        let mut hung_up = false;
        let mut next_sweep = Instant::now();
        loop {
            let now = Instant::now();
            if now >= self.plan.deadline {
                for k in 0..self.slots.len() {
                    if self.slots[k].live.is_some() {
                        self.fail(k, "still open at the run's hard deadline".into());
                    }
                }
                break;
            }
            while next_start < self.slots.len()
                && self.plan.start_of(self.slots[next_start].index) <= now
            {
                if hung_up {
                    self.slots[next_start].rec.error =
                        Some("not started before the end of the run".into());
                } else {
                    self.start_call(next_start, now);
                }
                next_start += 1;
            }
            self.take_replies();
            self.fire_timers();
            let now = Instant::now();
            if !hung_up && now >= self.plan.hangup_at {
                hung_up = true;
                for k in 0..self.slots.len() {
                    self.begin_hangup(k, now);
                }
            }
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + SWEEP_EVERY;
            }
            if next_start >= self.slots.len() && self.open == 0 {
                break;
            }

            let mut wake = self.plan.deadline.min(next_sweep);
            if let Some(Reverse((t, _))) = self.timers.peek() {
                wake = wake.min(*t);
            }
            if next_start < self.slots.len() {
                wake = wake.min(self.plan.start_of(self.slots[next_start].index));
            }
            if !hung_up {
                wake = wake.min(self.plan.hangup_at);
            }
            self.sleeper
                .wait(Some(wake.saturating_duration_since(Instant::now())));
            keys.clear();
            keys.extend(self.sleeper.ready());
            for &k in &keys {
                self.read_socket(k, &mut buf);
            }
            // A waker says only that a signaling reply may be queued.
            self.take_replies();
        }
        let records = self.slots.into_iter().map(|s| (s.index, s.rec)).collect();
        CallLoopResult {
            records,
            rtt: self.rtt,
        }
    }

    fn start_call(&mut self, k: usize, now: Instant) {
        self.slots[k].rec.started = Some(now);
        let socket = match UdpSocket::bind(SocketAddr::new(self.plan.bind_ip, 0))
            .and_then(|s| s.set_nonblocking(true).map(|_| s))
        {
            Ok(s) => s,
            Err(e) => {
                self.slots[k].rec.error = Some(format!("bind a UDP socket: {e}"));
                return;
            }
        };
        let (live, sdp) = match Live::new(now, socket, &self.certificate) {
            Ok(x) => x,
            Err(e) => {
                self.slots[k].rec.error = Some(format!("could not create the offer: {e}"));
                return;
            }
        };
        if let Err(e) = self.sleeper.watch(live.socket.as_fd(), k) {
            self.slots[k].rec.error = Some(format!("poller: {e}"));
            return;
        }
        self.slots[k].live = Some(Box::new(live));
        self.open += 1;
        let job = HttpJob::Offer {
            worker: self.id,
            slot: k,
            sdp,
        };
        if self.jobs.send_blocking(job).is_err() {
            self.fail(k, "signaling pool is gone".into());
        }
    }

    fn take_replies(&mut self) {
        while let Ok(reply) = self.replies.try_recv() {
            let now = Instant::now();
            match reply {
                HttpReply::Offer {
                    slot,
                    posted,
                    result,
                } => {
                    let s = &mut self.slots[slot];
                    let Some(live) = s.live.as_mut() else {
                        continue;
                    };
                    s.rec.posted = Some(posted);
                    match result {
                        Err(e) => self.fail(slot, e),
                        Ok((resp, answered)) if !(200..300).contains(&resp.status) => {
                            s.rec.answered = Some(answered);
                            // Turned away for load (admission control): not a failure of
                            // the calls that were admitted.
                            if matches!(resp.status, 429 | 503) {
                                s.rec.refused = Some(resp.status);
                            }
                            let why =
                                format!("HTTP {}: {}", resp.status, super::http::short(&resp.body));
                            self.fail(slot, why);
                        }
                        Ok((resp, answered)) => {
                            s.rec.answered = Some(answered);
                            live.location = resp.location;
                            if let Err(e) = live.apply_answer(now, resp.body) {
                                self.fail(slot, format!("the answer was refused: {e}"));
                            } else {
                                self.settle(slot, now);
                            }
                        }
                    }
                }
                HttpReply::Hangup { slot, result } => {
                    self.slots[slot].rec.hangup_status = Some(result);
                    self.end(slot);
                }
            }
        }
    }

    fn read_socket(&mut self, k: usize, buf: &mut [u8]) {
        let Some(live) = self.slots.get_mut(k).and_then(|s| s.live.as_mut()) else {
            return;
        };
        let now = Instant::now();
        let (mut media, mut other) = (0, 0);
        for _ in 0..READ_BURST {
            match live.socket.recv_from(buf) {
                Ok((n, from)) => {
                    live.handle_datagram(now, from, &buf[..n]);
                    // RFC 7983: 128–191 is RTP/RTCP; STUN, DTLS (and SCTP inside it) are not.
                    if n > 0 && (128..=191).contains(&buf[0]) {
                        media += 1;
                    } else {
                        other += 1;
                    }
                }
                Err(_) => break, // WouldBlock, or an ICMP error surfacing: nothing to read
            }
        }
        if other == 0 && media > 0 && live.phase == Phase::Live {
            // The hot path, an echo on a live call: it can only yield that echo, queues nothing
            // to send (no interceptors) and moves no `rtc` timer, so skip the event, write and
            // timeout sweeps of the full settle. Events and anything left over are drained on
            // the next non-media datagram or `rtc` timer (at least every ICE keepalive).
            let plan = &self.plan;
            let slot = &mut self.slots[k];
            let ctx = Ctx {
                index: slot.index as u32,
                epoch: plan.epoch,
                stop_audio: plan.stop_audio,
                count_until: plan.count_until,
            };
            if let Some(live) = slot.live.as_mut() {
                live.read_media(now, media, &ctx, &mut slot.rec, &mut self.rtt);
            }
        } else if media + other > 0 {
            self.settle(k, now);
        }
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        let mut due = Vec::new();
        while let Some(Reverse((t, k))) = self.timers.peek().copied() {
            if t > now {
                break;
            }
            self.timers.pop();
            due.push((t, k));
        }
        for (t, k) in due {
            let ctx_idx = k;
            let Some(live) = self.slots[k].live.as_mut() else {
                continue;
            };
            if live.scheduled != Some(t) {
                continue; // superseded
            }
            live.scheduled = None;
            let rtc_due = live.rtc_timeout.is_some_and(|r| r <= now);
            if rtc_due {
                live.handle_timeout(now);
            }
            // Split borrows: the call's context reads the plan, the call mutates its slot.
            let plan = &self.plan;
            let slot = &mut self.slots[ctx_idx];
            let ctx = Ctx {
                index: slot.index as u32,
                epoch: plan.epoch,
                stop_audio: plan.stop_audio,
                count_until: plan.count_until,
            };
            let Some(live) = slot.live.as_mut() else {
                continue;
            };
            let frames = live.send_due_audio(now, &ctx, &mut slot.rec);
            if rtc_due {
                self.settle(k, now);
            } else {
                // Only audio went out: one datagram per frame, nothing to read or react to,
                // no `rtc` timer moved.
                live.flush_n(frames);
                self.reschedule(k, false);
            }
        }
    }

    fn reschedule(&mut self, k: usize, refresh: bool) {
        let Some(live) = self.slots[k].live.as_mut() else {
            return;
        };
        let wake = live.wake_at(refresh);
        if wake != live.scheduled {
            live.scheduled = wake;
            if let Some(t) = wake {
                self.timers.push(Reverse((t, k)));
            }
        }
    }

    /// After any input: drive the call, send what it queued, reschedule, and end it if it
    /// failed.
    fn settle(&mut self, k: usize, now: Instant) {
        let plan = &self.plan;
        let slot = &mut self.slots[k];
        let Some(live) = slot.live.as_mut() else {
            return;
        };
        let ctx = Ctx {
            index: slot.index as u32,
            epoch: plan.epoch,
            stop_audio: plan.stop_audio,
            count_until: plan.count_until,
        };
        live.drive(now, &ctx, &mut slot.rec, &mut self.rtt);
        if live.phase == Phase::Connecting
            && slot.rec.ice_connected.is_some()
            && slot.rec.dtls_connected.is_none()
        {
            // rtc 0.21.1: when ICE selects a pair, the DTLS client's flights are queued inside
            // the DTLS endpoint and reach `poll_write` only on the next `handle_timeout`, while
            // `poll_timeout` still names the ICE check interval (200 ms). Ticking now sends
            // each flight at once, as a browser would; the endpoint retransmits only when its
            // own timer is due, so an early tick costs nothing else.
            live.handle_timeout(now);
            live.drive(now, &ctx, &mut slot.rec, &mut self.rtt);
        }
        // Audio may have become due (DTLS just came up): send it now rather than a turn later.
        live.send_due_audio(now, &ctx, &mut slot.rec);
        live.flush();
        if slot.rec.dtls_connected.is_some() && !slot.counted_live {
            slot.counted_live = true;
            let now_live = self.shared.live.fetch_add(1, Ordering::Relaxed) + 1;
            self.shared.peak.fetch_max(now_live, Ordering::Relaxed);
        }
        if slot.rec.error.is_some() {
            self.end(k);
            return;
        }
        self.reschedule(k, true);
    }

    /// Setup deadlines and overdue hang-ups.
    fn sweep(&mut self, now: Instant) {
        for k in 0..self.slots.len() {
            let s = &self.slots[k];
            let Some(live) = s.live.as_ref() else {
                continue;
            };
            match live.phase {
                Phase::Connecting => {
                    let since = s.rec.posted.unwrap_or(now);
                    if now.duration_since(since) > self.plan.setup_timeout {
                        let t = self.plan.setup_timeout.as_secs_f64();
                        let why = if s.rec.ice_connected.is_none() {
                            format!("setup timeout: ICE not connected {t:.0} s after the offer")
                        } else {
                            format!(
                                "setup timeout: ICE up but DTLS not connected {t:.0} s after the offer"
                            )
                        };
                        self.fail(k, why);
                    }
                }
                Phase::HangingUp => {
                    if s.hangup_sent
                        .is_some_and(|t| now.duration_since(t) > HANGUP_WAIT)
                    {
                        self.slots[k].rec.hangup_status =
                            Some(Err("no reply to the hang-up".into()));
                        self.end(k);
                    }
                }
                Phase::Offering | Phase::Live => {}
            }
        }
    }

    fn begin_hangup(&mut self, k: usize, now: Instant) {
        let http_hangup = self.plan.http_hangup;
        let slot = &mut self.slots[k];
        let Some(live) = slot.live.as_mut() else {
            return;
        };
        if live.phase != Phase::Live {
            let why = match live.phase {
                Phase::Offering => "no answer before the end of the run",
                _ => "not connected before the end of the run",
            };
            self.fail(k, why.into());
            return;
        }
        if slot.rec.channel_open.is_none() && slot.rec.error.is_none() {
            slot.rec.error = Some("the oai-events channel never opened".into());
        }
        match (http_hangup, live.location.clone()) {
            (true, Some(location)) => {
                live.phase = Phase::HangingUp;
                slot.hangup_sent = Some(now);
                let job = HttpJob::Hangup {
                    worker: self.id,
                    slot: k,
                    location,
                };
                if self.jobs.send_blocking(job).is_err() {
                    self.end(k);
                }
            }
            _ => self.end(k),
        }
    }

    fn fail(&mut self, k: usize, why: String) {
        let slot = &mut self.slots[k];
        if slot.rec.error.is_none() {
            log::debug!("loadgen call {}: {why}", slot.index);
            slot.rec.error = Some(why);
        }
        self.end(k);
    }

    /// Closes the peer connection (DTLS close_notify goes out) and releases the socket.
    fn end(&mut self, k: usize) {
        let slot = &mut self.slots[k];
        let Some(mut live) = slot.live.take() else {
            return;
        };
        live.close();
        self.sleeper.unwatch(live.socket.as_fd());
        self.open -= 1;
        if slot.counted_live {
            self.shared.live.fetch_sub(1, Ordering::Relaxed);
        }
        // Dropping `live` closes the socket.
    }
}
