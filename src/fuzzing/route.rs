//! The route hint in a server ufrag: what the relay trusts to pick a transceiver.
//!
//! Beyond "never panics" it checks the property the MAC exists for: `decode` accepts only the
//! exact spelling `mint` produces, so there is no second encoding of a hint for an attacker to
//! find, and every hint `mint` produces decodes to the fields it was minted from.

use std::sync::OnceLock;

use crate::routing::ufrag::{self, RouteKey, RouteKeys};

pub(super) struct Keys {
    /// What a relay holds mid-rotation: current id 1, previous id 0, so both the current and
    /// the fallback path of `decode` are reachable.
    pub relay: RouteKeys,
    /// Minters for each key alone, to re-mint a hint with the key that verified it.
    current_only: RouteKeys,
    previous_only: RouteKeys,
}

/// Fixed secrets, so that seeds can hold ufrags minted with them (`fuzz/seeds/capture.sh` runs
/// voice-edge with the previous one): the accepting branch is then in the corpus, not left for
/// the fuzzer to forge a MAC.
pub(super) fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let current = RouteKey {
            id: 1,
            secret: b"fuzz-current-secret-0123456789ab".to_vec(),
        };
        let previous = RouteKey {
            id: 0,
            secret: b"fuzz-previous-secret-0123456789a".to_vec(),
        };
        Keys {
            relay: RouteKeys::new(current.clone()).with_previous(previous.clone()),
            current_only: RouteKeys::new(current),
            previous_only: RouteKeys::new(previous),
        }
    })
}

/// If `decode` accepts `input`, minting the decoded fields with the same key must give `input`
/// back. Shared with the STUN target, which feeds it what the relay would: the peeked ufrag.
pub(super) fn check_decode(input: &[u8]) {
    let keys = keys();
    if let Ok(h) = ufrag::decode(input, &keys.relay) {
        let minter = if h.key_id == keys.relay.current.id {
            &keys.current_only
        } else {
            assert_eq!(h.key_id, 0, "decode reported a key it does not hold");
            &keys.previous_only
        };
        let again = ufrag::mint_with_nonce(minter, h.cluster, h.transceiver, h.worker, h.nonce);
        assert_eq!(
            again.as_bytes(),
            input,
            "decode accepted a non-minted spelling"
        );
    }
}

pub fn route_decode(data: &[u8]) {
    check_decode(data);

    // The accepting path, which random bytes essentially never reach: mint fuzzer-chosen fields
    // and require an exact round trip through the rotating key set.
    if let Some(&[sel, c0, c1, t0, t1, worker, n0, n1, n2, n3, n4, n5]) = data.first_chunk::<12>() {
        let keys = keys();
        let minter = if sel & 1 == 0 {
            &keys.current_only
        } else {
            &keys.previous_only
        };
        let (cluster, transceiver) = (u16::from_be_bytes([c0, c1]), u16::from_be_bytes([t0, t1]));
        let nonce = [n0, n1, n2, n3, n4, n5];
        let u = ufrag::mint_with_nonce(minter, cluster, transceiver, worker, nonce);
        assert!(ufrag::is_valid_ice_ufrag(u.as_bytes()));
        let h = ufrag::decode(u.as_bytes(), &keys.relay).expect("minted ufrag must decode");
        assert_eq!(
            (h.key_id, h.cluster, h.transceiver, h.worker, h.nonce),
            (minter.current.id, cluster, transceiver, worker, nonce)
        );
    }
}
