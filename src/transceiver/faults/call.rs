//! One call's faults: its network impairment both ways, a blackout, and the NAT mapping an
//! emulated rebinding gave it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::super::transmit::Transmit;
use super::impairment::Impairment;
use super::request::{Direction, FaultState, NetworkSpec};

/// A datagram from the client as the socket read it (link header and all), held by an
/// impairment until it is due at the endpoint.
pub struct Held {
    pub from: SocketAddr,
    pub datagram: BytesMut,
}

/// The client's real address and the one its NAT now presents to the transceiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NatMapping {
    pub real: SocketAddr,
    pub seen: SocketAddr,
}

/// One call's active faults; a call that never had one has no entry in the layer.
#[derive(Default)]
pub struct CallFaults {
    network: Option<NetworkSpec>,
    to_client: Option<Impairment<Transmit>>,
    from_client: Option<Impairment<Held>>,
    blackout_until: Option<Instant>,
    pub nat: Option<NatMapping>,
    nat_rebinds: u32,
    dropped_blackout: u64,
    dropped_old_mapping: u64,
}

impl CallFaults {
    /// Replaces the network impairment (`None` or a no-op removes it). What the old one held is
    /// returned, to be delivered now: it was in flight, and removing a delay does not lose it.
    pub fn set_network(
        &mut self,
        spec: Option<NetworkSpec>,
        seed: u64,
    ) -> (Vec<Held>, Vec<Transmit>) {
        let inbound = self
            .from_client
            .take()
            .map(|mut q| q.drain_all().collect())
            .unwrap_or_default();
        let outbound: Vec<Transmit> = self
            .to_client
            .take()
            .map(|mut q| q.drain_all().collect())
            .unwrap_or_default();
        self.network = spec.filter(|s| !s.is_noop());
        if let Some(s) = self.network {
            let p = s.params();
            if s.direction != Direction::FromClient {
                self.to_client = Some(Impairment::new(p, seed));
            }
            if s.direction != Direction::ToClient {
                self.from_client = Some(Impairment::new(p, seed ^ 0x5eed));
            }
        }
        let outbound = outbound
            .into_iter()
            .filter_map(|t| self.translate(t))
            .collect();
        (inbound, outbound)
    }

    pub fn blackout(&mut self, now: Instant, duration: Duration) {
        self.blackout_until = Some(now + duration);
    }

    /// A new NAT mapping for the client now at `real`, seen as `seen` from here on.
    pub fn rebind(&mut self, real: SocketAddr, seen: SocketAddr) {
        self.nat = Some(NatMapping { real, seen });
        self.nat_rebinds += 1;
    }

    fn blacked_out(&mut self, now: Instant) -> bool {
        match self.blackout_until {
            Some(until) if now < until => {
                self.dropped_blackout += 1;
                true
            }
            Some(_) => {
                self.blackout_until = None;
                false
            }
            None => false,
        }
    }

    /// A datagram from the client: `Some` to deliver it now, `None` when it was dropped or is
    /// held (see [`Self::pop_from_client`]).
    pub fn push_from_client(&mut self, now: Instant, d: Held) -> Option<Held> {
        if self.blacked_out(now) {
            return None;
        }
        match &mut self.from_client {
            None => Some(d),
            Some(q) => {
                q.push(now, d.datagram.len(), d);
                None
            }
        }
    }

    /// A datagram to the client: `Some` to send it now, `None` when it was dropped or is held
    /// (see [`Self::pop_to_client`]).
    pub fn push_to_client(&mut self, now: Instant, t: Transmit) -> Option<Transmit> {
        if self.blacked_out(now) {
            return None;
        }
        match &mut self.to_client {
            None => self.translate(t),
            Some(q) => {
                q.push(now, t.payload.len(), t);
                None
            }
        }
    }

    pub fn pop_from_client(&mut self, now: Instant) -> Option<Held> {
        self.from_client.as_mut()?.pop_due(now)
    }

    pub fn pop_to_client(&mut self, now: Instant) -> Option<Transmit> {
        loop {
            let t = self.to_client.as_mut()?.pop_due(now)?;
            if let Some(t) = self.translate(t) {
                return Some(t);
            }
        }
    }

    /// The call is ending: its goodbye (DTLS close_notify, SCTP ABORT) leaves at once, through
    /// the NAT mapping but past any impairment, and what was held is dropped with the call.
    pub fn ending(&mut self) {
        self.network = None;
        self.to_client = None;
        self.from_client = None;
        self.blackout_until = None;
    }

    /// When a held datagram is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let a = self.to_client.as_ref().and_then(|q| q.poll_timeout());
        let b = self.from_client.as_ref().and_then(|q| q.poll_timeout());
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The NAT on the way back: only the current mapping leads to the client.
    fn translate(&mut self, mut t: Transmit) -> Option<Transmit> {
        let Some(nat) = self.nat else {
            return Some(t);
        };
        let peer = match &mut t.link {
            Some(h) => &mut h.client,
            None => &mut t.to,
        };
        if *peer != nat.seen {
            self.dropped_old_mapping += 1;
            return None;
        }
        *peer = nat.real;
        Some(t)
    }

    pub fn state(&self, now: Instant) -> FaultState {
        FaultState {
            network: self.network,
            blackout_remaining_ms: self
                .blackout_until
                .filter(|u| *u > now)
                .map(|u| (u - now).as_millis() as u64),
            nat_rebinds: self.nat_rebinds,
            client_seen_as: self.nat.map(|n| n.seen),
            to_client: self.to_client.as_ref().map(|q| q.stats()),
            from_client: self.from_client.as_ref().map(|q| q.stats()),
            dropped_blackout: self.dropped_blackout,
            dropped_old_mapping: self.dropped_old_mapping,
        }
    }
}
