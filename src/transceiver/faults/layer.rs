//! The layer between a worker's socket loop and its endpoint that carries out faults: the
//! worker hands it every datagram it reads and takes every datagram to send from it; it passes
//! them through to the endpoint untouched unless the call they belong to has a fault.
//!
//! It follows the endpoint's drive contract (datagrams in, timeouts, transmits out) and adds
//! its own deadlines (held datagrams) to the endpoint's, so the worker drives one thing. The
//! endpoint is passed in rather than owned: everything else the worker asks of the endpoint
//! (calls, sidebands, jobs, stats) does not pass through here.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::call::{CallFaults, Held};
use super::request::{Fault, FaultState, NetworkSpec};
use crate::routing::link::{LINK_HEADER_LEN, LinkHeader, is_link_packet};
use crate::transceiver::endpoint::{CallKey, Endpoint};
use crate::transceiver::transmit::Transmit;
use crate::transceiver::{CallCommand, CallError, CallReply};

#[derive(Default)]
pub struct FaultLayer {
    /// Calls that had a fault, until they end: their counters are what the API reports.
    calls: HashMap<CallKey, CallFaults>,
    /// Clients whose NAT rebinding is emulated: their real address and the one datagrams from
    /// it are presented as.
    nat_seen: HashMap<SocketAddr, SocketAddr>,
    /// Datagrams to the client that passed or were released, in order.
    out: VecDeque<Transmit>,
    /// Fault changes so far, so each impairment gets its own random seed.
    changes: u64,
}

impl FaultLayer {
    /// Calls that have (or had) a fault and are not known to have ended.
    pub fn calls(&self) -> usize {
        self.calls.len()
    }

    /// A datagram the socket read.
    pub fn handle_datagram(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        from: SocketAddr,
        pkt: &[u8],
    ) {
        if self.calls.is_empty() {
            return ep.handle_datagram(now, from, pkt);
        }
        let rebound = self.through_nat(from, pkt);
        let (from, pkt) = rebound.as_ref().map_or((from, pkt), |(f, d)| (*f, &d[..]));
        let faults = ep.call_of(from, pkt).and_then(|k| self.calls.get_mut(&k));
        let Some(f) = faults else {
            return ep.handle_datagram(now, from, pkt);
        };
        let held = Held {
            from,
            datagram: BytesMut::from(pkt),
        };
        if let Some(d) = f.push_from_client(now, held) {
            ep.handle_datagram(now, d.from, &d.datagram);
        }
    }

    /// The next datagram to send: the endpoint's, unless its call's faults hold or drop it.
    pub fn poll_transmit(&mut self, ep: &mut Endpoint, now: Instant) -> Option<Transmit> {
        loop {
            if let Some(t) = self.out.pop_front() {
                return Some(t);
            }
            let t = ep.poll_transmit()?;
            let Some(f) = self.calls.get_mut(&t.call) else {
                return Some(t);
            };
            // A call's goodbye (DTLS close_notify, SCTP ABORT) leaves at once, through the
            // NAT mapping but past any impairment; what was held goes with the call.
            if !ep.is_live(t.call) {
                f.ending();
            }
            if let Some(t) = f.push_to_client(now, t) {
                return Some(t);
            }
        }
    }

    /// When the endpoint or a held datagram is next due.
    pub fn poll_timeout(&self, ep: &Endpoint) -> Instant {
        self.calls
            .values()
            .filter_map(CallFaults::poll_timeout)
            .fold(ep.poll_timeout(), Instant::min)
    }

    /// Forgets calls that ended, releases what is due both ways, then runs the endpoint's
    /// timers.
    pub fn handle_timeout(&mut self, ep: &mut Endpoint, now: Instant) {
        if !self.calls.is_empty() {
            let nat_seen = &mut self.nat_seen;
            self.calls.retain(|&key, f| {
                let live = ep.is_live(key);
                if !live && let Some(nat) = f.nat {
                    nat_seen.remove(&nat.real);
                }
                live
            });
            for f in self.calls.values_mut() {
                while let Some(t) = f.pop_to_client(now) {
                    self.out.push_back(t);
                }
                while let Some(d) = f.pop_from_client(now) {
                    ep.handle_datagram(now, d.from, &d.datagram);
                }
            }
        }
        ep.handle_timeout(now);
    }

    /// Runs a per-call operation: a fault here, anything else at the endpoint.
    pub fn command(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        call_id: &str,
        command: CallCommand,
    ) -> Option<Result<CallReply, CallError>> {
        match command {
            CallCommand::Fault { fault } => Some(
                self.fault(ep, now, call_id, fault)?
                    .map(|state| CallReply::Fault { state })
                    .map_err(CallError::FaultRefused),
            ),
            other => ep.command(now, call_id, other),
        }
    }

    /// Injects a fault into a call: `None` when the call is not here, else its fault state
    /// after the change, or why the call cannot take it.
    pub fn fault(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        call_id: &str,
        fault: Fault,
    ) -> Option<Result<FaultState, String>> {
        let key = ep.call_key(call_id)?;
        // Seeds differ per call and per change; determinism is for the impairment's own tests.
        self.changes += 1;
        let seed = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ self.changes.rotate_left(17);
        match fault {
            Fault::Status => {}
            Fault::Network(spec) => {
                log::info!("{call_id}: fault: network {spec:?}");
                self.set_network(ep, now, key, Some(spec), seed);
            }
            Fault::ClearNetwork => self.set_network(ep, now, key, None, seed),
            Fault::Blackout { duration_ms } => {
                let until = Duration::from_millis(duration_ms);
                self.calls.entry(key).or_default().blackout(now, until);
                log::info!("{call_id}: fault: blackout for {duration_ms} ms");
            }
            Fault::NatRebind => match self.nat_rebind(ep, key) {
                Some((real, seen)) => {
                    log::info!("{call_id}: fault: NAT rebinding, {real} now seen as {seen}");
                }
                None => {
                    let why = "has no client address yet: nothing to rebind";
                    return Some(Err(format!("call {call_id} {why}")));
                }
            },
            Fault::SessionExpired => {
                // Long enough for the error event to cross whatever delay the call was given.
                let held = self
                    .calls
                    .get(&key)
                    .and_then(|f| f.state(now).network)
                    .map_or(0, |n| 2 * u64::from(n.delay_ms + n.jitter_ms));
                ep.expire(now, call_id, Duration::from_millis(1000 + held))?;
            }
        }
        Some(Ok(self
            .calls
            .get(&key)
            .map(|f| f.state(now))
            .unwrap_or_default()))
    }

    /// Replaces a call's network impairment; what the old one held is delivered now.
    fn set_network(
        &mut self,
        ep: &mut Endpoint,
        now: Instant,
        key: CallKey,
        spec: Option<NetworkSpec>,
        seed: u64,
    ) {
        if spec.is_none() && !self.calls.contains_key(&key) {
            return;
        }
        let (inbound, outbound) = self.calls.entry(key).or_default().set_network(spec, seed);
        self.out.extend(outbound);
        for d in inbound {
            ep.handle_datagram(now, d.from, &d.datagram);
        }
    }

    /// Emulates the client's NAT giving it a new external port: from now on the call's
    /// datagrams arrive from the same IP at another port, which the call accepts only through
    /// its normal path (an authenticated binding request). Its real address and the new one;
    /// `None` when the call has no client address yet.
    fn nat_rebind(&mut self, ep: &Endpoint, key: CallKey) -> Option<(SocketAddr, SocketAddr)> {
        let (real, before) = match (self.calls.get(&key).and_then(|f| f.nat), ep.client_of(key)) {
            (Some(n), _) => (n.real, n.seen),
            (None, Some(c)) => (c, c),
            (None, None) => return None,
        };
        // The next port up that is neither the real one, the one it was last seen at, nor any
        // address a call here already answers to.
        let mut port = before.port();
        let seen = loop {
            port = if port >= 65000 { 1024 } else { port + 1 };
            let a = SocketAddr::new(real.ip(), port);
            if a != real && a != before && !ep.answers_to(a) {
                break a;
            }
        };
        self.calls.entry(key).or_default().rebind(real, seen);
        self.nat_seen.insert(real, seen);
        Some((real, seen))
    }

    /// A datagram from a rebound client as its new NAT mapping presents it: the source (or the
    /// client in its link header) moved to the new port. `None` for everyone else.
    fn through_nat(&self, from: SocketAddr, pkt: &[u8]) -> Option<(SocketAddr, Vec<u8>)> {
        if self.nat_seen.is_empty() {
            return None;
        }
        if !is_link_packet(pkt) {
            let seen = self.nat_seen.get(&from)?;
            return Some((*seen, pkt.to_vec()));
        }
        let (mut header, inner) = LinkHeader::parse(pkt).ok()?;
        header.client = *self.nat_seen.get(&header.client)?;
        let mut datagram = vec![0; LINK_HEADER_LEN];
        header.write(&mut datagram);
        datagram.extend_from_slice(inner);
        Some((from, datagram))
    }
}
