//! The relay's one decision about a datagram from a source it has no flow for: forward it to an
//! owner, or drop it and say why.
//!
//! Kept apart from the worker's batching and sockets so the security rule it carries (only an
//! authenticated route opens a flow; a forged or foreign ufrag steers nothing) is a pure
//! function of bytes and configuration, tested without a socket or a clock.

use std::net::SocketAddr;

use super::Tier;
use crate::routing::stun::{PacketKind, classify, peek_binding_username};
use crate::routing::ufrag::{self, RouteKeys};

/// What to do with the first datagram of an unknown source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// A binding request whose ufrag names a live next hop: open a flow to `owner`, named `hop`.
    Forward { hop: u16, owner: SocketAddr },
    /// The ufrag's MAC, version or length fails: forged, stale beyond key rotation, or garbage.
    BadRoute,
    /// An authentic route minted by another cluster (a misdirected client).
    WrongCluster,
    /// An authentic route to a hop this relay does not know (yet, or any more).
    UnknownHop,
    /// Not a routable binding request: only a flow recovered after a restart can carry it.
    /// `stun` says whether it was STUN at all (the drop is counted by kind).
    Unroutable { stun: bool },
}

/// Decides the route of `pkt` from an unknown source. `next_hop` maps a hop id and worker to
/// its link address (the relay's membership view).
pub fn decide(
    pkt: &[u8],
    keys: &RouteKeys,
    tier: Tier,
    next_hop: impl Fn(u16, u8) -> Option<SocketAddr>,
) -> Route {
    let stun = !pkt.is_empty() && classify(pkt[0]) == PacketKind::Stun;
    let Some(server_ufrag) = stun.then(|| peek_binding_username(pkt).ok()).flatten() else {
        return Route::Unroutable { stun };
    };
    let Ok(hint) = ufrag::decode(server_ufrag, keys) else {
        return Route::BadRoute;
    };
    let (hop, worker) = match tier {
        Tier::Cluster { cluster } if hint.cluster != cluster => return Route::WrongCluster,
        Tier::Cluster { .. } => (hint.transceiver, hint.worker),
        Tier::Global => (hint.cluster, 0),
    };
    match next_hop(hop, worker) {
        Some(owner) => Route::Forward { hop, owner },
        None => Route::UnknownHop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::ufrag::{RouteKey, mint_with_nonce};

    fn key(id: u8, byte: u8) -> RouteKey {
        RouteKey {
            id,
            secret: vec![byte; 16],
        }
    }

    fn keys() -> RouteKeys {
        RouteKeys::new(key(1, 7))
    }

    /// A STUN binding request whose USERNAME is `server:client` (RFC 8489 layout, no MAC: the
    /// relay reads only the USERNAME).
    fn binding_request(server_ufrag: &[u8]) -> Vec<u8> {
        let mut username = server_ufrag.to_vec();
        username.extend_from_slice(b":abcd");
        let padded = username.len().div_ceil(4) * 4;
        let mut p = vec![0x00, 0x01];
        p.extend_from_slice(&((4 + padded) as u16).to_be_bytes());
        p.extend_from_slice(&0x2112_A442u32.to_be_bytes());
        p.extend_from_slice(&[9; 12]);
        p.extend_from_slice(&0x0006u16.to_be_bytes());
        p.extend_from_slice(&(username.len() as u16).to_be_bytes());
        p.extend_from_slice(&username);
        p.resize(20 + 4 + padded, 0);
        p
    }

    fn ufrag_for(cluster: u16, transceiver: u16, worker: u8, key: &RouteKey) -> Vec<u8> {
        let keys = RouteKeys::new(key.clone());
        mint_with_nonce(&keys, cluster, transceiver, worker, [42; 6]).into_bytes()
    }

    fn owner(hop: u16, worker: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, hop as u8], 4000 + worker as u16))
    }

    fn hops_0_to_3(hop: u16, worker: u8) -> Option<SocketAddr> {
        (hop < 4).then(|| owner(hop, worker))
    }

    const CLUSTER_5: Tier = Tier::Cluster { cluster: 5 };

    #[test]
    fn an_authentic_route_opens_a_flow_to_its_transceiver_worker() {
        let key = key(1, 7);
        let pkt = binding_request(&ufrag_for(5, 2, 1, &key));
        assert_eq!(
            decide(&pkt, &keys(), CLUSTER_5, hops_0_to_3),
            Route::Forward {
                hop: 2,
                owner: owner(2, 1)
            }
        );
    }

    #[test]
    fn a_forged_ufrag_is_dropped() {
        let forger = key(1, 8);
        let pkt = binding_request(&ufrag_for(5, 2, 0, &forger));
        assert_eq!(
            decide(&pkt, &keys(), CLUSTER_5, hops_0_to_3),
            Route::BadRoute
        );
        let mut tampered = ufrag_for(5, 2, 0, &key(1, 7));
        tampered[3] = if tampered[3] == b'A' { b'B' } else { b'A' };
        let pkt = binding_request(&tampered);
        assert_eq!(
            decide(&pkt, &keys(), CLUSTER_5, hops_0_to_3),
            Route::BadRoute
        );
        let pkt = binding_request(b"not-a-route-at-all");
        assert_eq!(
            decide(&pkt, &keys(), CLUSTER_5, hops_0_to_3),
            Route::BadRoute
        );
    }

    #[test]
    fn another_clusters_route_is_dropped_by_a_cluster_relay_and_forwarded_by_a_global_one() {
        let key = key(1, 7);
        let pkt = binding_request(&ufrag_for(3, 2, 1, &key));
        assert_eq!(
            decide(&pkt, &keys(), CLUSTER_5, hops_0_to_3),
            Route::WrongCluster
        );
        // A global relay routes by cluster, to that cluster relay's worker 0.
        assert_eq!(
            decide(&pkt, &keys(), Tier::Global, hops_0_to_3),
            Route::Forward {
                hop: 3,
                owner: owner(3, 0)
            }
        );
    }

    #[test]
    fn a_route_to_an_unknown_transceiver_is_dropped() {
        let key = key(1, 7);
        let pkt = binding_request(&ufrag_for(5, 9, 0, &key));
        assert_eq!(
            decide(&pkt, &keys(), CLUSTER_5, hops_0_to_3),
            Route::UnknownHop
        );
    }

    #[test]
    fn media_and_malformed_stun_from_an_unknown_source_are_unroutable() {
        // DTLS (first byte 20..=63) and RTP (128..=191) carry no route.
        assert_eq!(
            decide(&[22, 254, 253, 0], &keys(), CLUSTER_5, hops_0_to_3),
            Route::Unroutable { stun: false }
        );
        assert_eq!(
            decide(&[0x80, 0x6f, 0, 1], &keys(), CLUSTER_5, hops_0_to_3),
            Route::Unroutable { stun: false }
        );
        assert_eq!(
            decide(&[], &keys(), CLUSTER_5, hops_0_to_3),
            Route::Unroutable { stun: false }
        );
        // STUN by its first byte, but truncated: no USERNAME to read.
        let key = key(1, 7);
        let whole = binding_request(&ufrag_for(5, 2, 0, &key));
        assert_eq!(
            decide(&whole[..22], &keys(), CLUSTER_5, hops_0_to_3),
            Route::Unroutable { stun: true }
        );
    }

    #[test]
    fn the_previous_key_still_routes_during_rotation() {
        let old = key(1, 7);
        let new = key(2, 9);
        let rotating = RouteKeys::new(new.clone()).with_previous(old.clone());
        let pkt = binding_request(&ufrag_for(5, 1, 0, &old));
        assert_eq!(
            decide(&pkt, &rotating, CLUSTER_5, hops_0_to_3),
            Route::Forward {
                hop: 1,
                owner: owner(1, 0)
            }
        );
        let pkt = binding_request(&ufrag_for(5, 1, 0, &new));
        assert!(matches!(
            decide(&pkt, &rotating, CLUSTER_5, hops_0_to_3),
            Route::Forward { hop: 1, .. }
        ));
    }
}
