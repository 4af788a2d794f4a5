//! Everything a relay parses from an unauthenticated UDP datagram, fed arbitrary bytes.
//!
//! Beyond "never panics", it checks the property the MAC exists for: `decode` accepts only the exact
//! spelling `mint` produces, so there is no second encoding of a hint for an attacker to find.
//!
//! Run with `cargo +nightly fuzz run route_decode` from the crate root.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use voice_edge::routing::link::{self, LINK_HEADER_LEN, LinkHeader};
use voice_edge::routing::stun;
use voice_edge::routing::ufrag::{self, RouteKey, RouteKeys};

struct Keys {
    /// What a relay holds mid-rotation: current id 1, previous id 0.
    relay: RouteKeys,
    /// Minters for each key alone, to re-mint a hint with the key that verified it.
    current_only: RouteKeys,
    previous_only: RouteKeys,
}

fn keys() -> &'static Keys {
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

/// If `decode` accepts `input`, minting the decoded fields with the same key must give `input` back.
fn check_decode(input: &[u8]) {
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

fuzz_target!(|data: &[u8]| {
    // The raw bytes as a ufrag.
    check_decode(data);

    // The relay's path for an unknown source: peek USERNAME, then decode the server part.
    if let Ok(server_ufrag) = stun::peek_binding_username(data) {
        assert!(!server_ufrag.is_empty());
        assert!(!server_ufrag.contains(&b':'));
        let range = data.as_ptr_range();
        assert!(
            range.contains(&server_ufrag.as_ptr()),
            "peek must borrow from the packet"
        );
        check_decode(server_ufrag);
    }

    // The link header: anything accepted must re-encode byte for byte.
    if let Ok((header, payload)) = LinkHeader::parse(data) {
        assert!(link::is_link_packet(data));
        let mut again = [0u8; LINK_HEADER_LEN];
        assert_eq!(header.write(&mut again), LINK_HEADER_LEN);
        assert_eq!(&again[..], &data[..LINK_HEADER_LEN]);
        assert_eq!(payload, &data[LINK_HEADER_LEN..]);
    }

    // The accepting path, which random bytes essentially never reach: mint fuzzer-chosen fields and
    // require an exact round trip through the rotating key set.
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
});
