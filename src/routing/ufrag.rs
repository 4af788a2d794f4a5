//! The route hint carried in the server's ICE ufrag.
//!
//! A client echoes the server's ufrag in every STUN binding request (`USERNAME = serverUfrag:clientUfrag`),
//! so a ufrag that names its owner lets a relay with no state route the very first packet of a session,
//! and keep routing after it restarts. Because the relay forwards wherever the hint points, the hint is
//! MAC'd: without the shared secret nobody can mint a ufrag that steers packets at a transceiver of their
//! choosing. The hint names a transceiver by index into configured membership, never by address, so even a
//! leaked key cannot aim traffic at a host outside that membership.
//!
//! Wire layout (18 bytes, then base64 STANDARD without padding = 24 chars):
//!
//! ```text
//! 0        1        3            5        6          12         18
//! +--------+--------+------------+--------+----------+----------+
//! |ver|kid | cluster| transceiver| worker |  nonce   |   MAC    |
//! +--------+--------+------------+--------+----------+----------+
//!   4b  4b   u16 BE     u16 BE      u8      6 bytes    6 bytes
//! ```
//!
//! `MAC = HMAC-SHA256(secret, bytes[0..12])[..6]`. The key id (`kid`) works like QUIC-LB's config
//! rotation bits: relays accept the current and the previous key, so a new secret can roll out while
//! sessions minted under the old one are still alive.
//!
//! Base64's standard alphabet is exactly ICE's `ice-char` set (ALPHA / DIGIT / "+" / "/", RFC 8839), and
//! 18 bytes encode to 24 chars with no padding and no leftover bits, so every minted ufrag is a legal ICE
//! ufrag and every 24-char string decodes to exactly one byte string: a hint has a single spelling.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use hmac::{Hmac, Mac};
use rand::Rng as _;
use sha2::Sha256;

/// Format version in the high nibble of byte 0; bumping it lets relays reject hints they cannot parse
/// instead of misrouting them.
pub const VERSION: u8 = 1;

/// Length of a minted ufrag in characters (18 bytes in base64 without padding).
pub const UFRAG_LEN: usize = 24;

/// Raw (decoded) hint length.
const RAW_LEN: usize = 18;
/// Bytes covered by the MAC: everything but the MAC itself.
const BODY_LEN: usize = 12;
/// 48 bits of MAC: a forger needs ~2^47 binding requests per success, each of which only buys routing a
/// packet to a real transceiver that will then fail ICE's own MESSAGE-INTEGRITY check anyway.
const MAC_LEN: usize = RAW_LEN - BODY_LEN;
/// Highest key id that fits in the nibble.
const MAX_KEY_ID: u8 = 0x0f;
/// One observed ufrag is enough to test guesses at the secret offline, and a recovered secret forges every
/// hint, so the secret must be out of brute-force reach: 128 bits is the floor.
const MIN_SECRET_LEN: usize = 16;
/// RFC 8839 requires at least 22 ice-chars of password; 24 base64 chars carry exactly 144 random bits.
const ICE_PWD_LEN: usize = 24;

type HmacSha256 = Hmac<Sha256>;

/// Why a ufrag (or a key configuration) was rejected. The variants are distinct so relays can count drop
/// reasons separately: `BadMac` spikes mean forgery or a key mismatch, `UnknownKey` means a rotation
/// outran its rollout.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
pub enum RouteError {
    #[error("route ufrag must be exactly {UFRAG_LEN} characters")]
    BadLength,
    #[error("route ufrag contains a character outside the ICE/base64 alphabet")]
    BadChar,
    #[error("route ufrag has an unsupported format version")]
    BadVersion,
    #[error(
        "route ufrag names a key id that is neither the current nor the previous key (ids are 0..=15)"
    )]
    UnknownKey,
    #[error("route ufrag MAC does not verify")]
    BadMac,
    #[error("route key secret must be hex encoding at least {MIN_SECRET_LEN} bytes")]
    BadSecret,
}

/// One routing secret and the id that names it inside ufrags.
#[derive(Clone, PartialEq, Eq)]
pub struct RouteKey {
    /// 0..=15; it is stored in a nibble.
    pub id: u8,
    pub secret: Vec<u8>,
}

impl RouteKey {
    /// Parses a secret from configuration, where hex survives env vars and YAML without quoting trouble.
    pub fn from_hex(id: u8, hex: &str) -> Result<RouteKey, RouteError> {
        if id > MAX_KEY_ID {
            return Err(RouteError::UnknownKey);
        }
        let secret = hex::decode(hex.trim()).map_err(|_| RouteError::BadSecret)?;
        if secret.len() < MIN_SECRET_LEN {
            return Err(RouteError::BadSecret);
        }
        Ok(RouteKey { id, secret })
    }
}

/// Hand-written so that logging a configuration never prints the secret.
impl fmt::Debug for RouteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteKey")
            .field("id", &self.id)
            .field(
                "secret",
                &format_args!("<{} bytes redacted>", self.secret.len()),
            )
            .finish()
    }
}

/// The keys a node holds during a rotation: it mints with `current` only and accepts either, so sessions
/// minted under the old key keep routing while the new one rolls out. Update the nodes that only decode
/// (relays) before the ones that mint, so no hint arrives under a key its relay does not know yet; drop
/// `previous` once the sessions minted under it have ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteKeys {
    pub current: RouteKey,
    pub previous: Option<RouteKey>,
}

impl RouteKeys {
    pub fn new(current: RouteKey) -> RouteKeys {
        RouteKeys {
            current,
            previous: None,
        }
    }

    pub fn with_previous(mut self, previous: RouteKey) -> RouteKeys {
        self.previous = Some(previous);
        self
    }

    /// Shortcut for the common single-key configuration.
    pub fn from_hex(id: u8, hex: &str) -> Result<RouteKeys, RouteError> {
        RouteKey::from_hex(id, hex).map(RouteKeys::new)
    }

    /// Keys that may have minted a hint carrying `key_id`. More than one only if an operator reused an
    /// id across a rotation; trying both then keeps sessions alive instead of failing closed.
    fn candidates(&self, key_id: u8) -> impl Iterator<Item = &RouteKey> {
        std::iter::once(&self.current)
            .chain(self.previous.as_ref())
            .filter(move |k| k.id == key_id)
    }
}

/// The routing data recovered from a verified ufrag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteHint {
    /// Which key verified it; lets operators see when the previous key stops being used.
    pub key_id: u8,
    /// Lets a relay notice hints minted by another cluster (a misdirected client) instead of routing
    /// them to an index that means something else here.
    pub cluster: u16,
    /// Index into the configured transceiver membership.
    pub transceiver: u16,
    /// Worker (socket/thread) inside that transceiver, so its internal dispatch needs no table either.
    pub worker: u8,
    /// Makes ufrags of sessions with the same owner distinct (ICE needs per-session ufrags).
    pub nonce: [u8; 6],
}

impl fmt::Display for RouteHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cluster {} transceiver {} worker {} (key {}, nonce ",
            self.cluster, self.transceiver, self.worker, self.key_id
        )?;
        for b in self.nonce {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

/// Mints a ufrag for a new session, with a fresh random nonce so concurrent sessions on one worker
/// still get distinct ufrags.
///
/// # Panics
/// If `keys.current.id > 15`: such a key could never be matched on decode, so minting with it would
/// silently produce unroutable sessions.
pub fn mint(keys: &RouteKeys, cluster: u16, transceiver: u16, worker: u8) -> String {
    let mut nonce = [0u8; 6];
    rand::rng().fill(&mut nonce);
    mint_with_nonce(keys, cluster, transceiver, worker, nonce)
}

/// Deterministic minting, for tests and for checking a decoded hint against its spelling.
///
/// # Panics
/// As [`mint`].
pub fn mint_with_nonce(
    keys: &RouteKeys,
    cluster: u16,
    transceiver: u16,
    worker: u8,
    nonce: [u8; 6],
) -> String {
    let key = &keys.current;
    assert!(
        key.id <= MAX_KEY_ID,
        "route key id {} does not fit in 4 bits",
        key.id
    );
    let mut raw = [0u8; RAW_LEN];
    raw[0] = (VERSION << 4) | key.id;
    raw[1..3].copy_from_slice(&cluster.to_be_bytes());
    raw[3..5].copy_from_slice(&transceiver.to_be_bytes());
    raw[5] = worker;
    raw[6..12].copy_from_slice(&nonce);
    let tag = keyed(&key.secret, &raw[..BODY_LEN]).finalize().into_bytes();
    raw[BODY_LEN..].copy_from_slice(&tag[..MAC_LEN]);
    STANDARD_NO_PAD.encode(raw)
}

/// Recovers and authenticates the hint in a server ufrag.
///
/// Runs on the relay for every packet from an unknown source, so it touches only the stack; the MAC is
/// compared in constant time so response timing cannot be used to guess it byte by byte.
pub fn decode(ufrag: &[u8], keys: &RouteKeys) -> Result<RouteHint, RouteError> {
    if ufrag.len() != UFRAG_LEN {
        return Err(RouteError::BadLength);
    }
    let mut raw = [0u8; RAW_LEN];
    base64_decode_24(ufrag, &mut raw)?;
    if raw[0] >> 4 != VERSION {
        return Err(RouteError::BadVersion);
    }
    let key_id = raw[0] & MAX_KEY_ID;
    let (body, tag) = raw.split_at(BODY_LEN);
    let mut known = false;
    for key in keys.candidates(key_id) {
        known = true;
        if keyed(&key.secret, body).verify_truncated_left(tag).is_ok() {
            let mut nonce = [0u8; 6];
            nonce.copy_from_slice(&raw[6..12]);
            return Ok(RouteHint {
                key_id,
                cluster: u16::from_be_bytes([raw[1], raw[2]]),
                transceiver: u16::from_be_bytes([raw[3], raw[4]]),
                worker: raw[5],
                nonce,
            });
        }
    }
    Err(if known {
        RouteError::BadMac
    } else {
        RouteError::UnknownKey
    })
}

/// ICE's ufrag grammar (RFC 8839 `ice-ufrag = 4*256ice-char`). Client ufrags come from browsers we do
/// not control and end up in logs and cache keys, so they are checked before use.
pub fn is_valid_ice_ufrag(s: &[u8]) -> bool {
    (4..=256).contains(&s.len()) && s.iter().all(|&c| is_ice_char(c))
}

/// A server ICE password. Not derived from the hint: the password is what actually authenticates ICE,
/// so it must stay unpredictable even to someone holding the routing key.
pub fn random_ice_pwd() -> String {
    let mut bytes = [0u8; ICE_PWD_LEN / 4 * 3];
    rand::rng().fill(&mut bytes);
    STANDARD_NO_PAD.encode(bytes)
}

fn is_ice_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'+' || c == b'/'
}

fn keyed(secret: &[u8], body: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(body);
    mac
}

/// base64 STANDARD decode table; 0xff marks bytes outside the alphabet.
const DECODE: [u8; 256] = {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut table = [0xffu8; 256];
    let mut i = 0;
    while i < alphabet.len() {
        table[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// A fixed-size decoder rather than the base64 crate's: the input is always exactly six whole quads, so
/// there are no padding or trailing-bit cases to get wrong, and the stack-only guarantee is visible here.
fn base64_decode_24(input: &[u8], out: &mut [u8; RAW_LEN]) -> Result<(), RouteError> {
    debug_assert_eq!(input.len(), UFRAG_LEN);
    for (quad, triple) in input.chunks_exact(4).zip(out.chunks_exact_mut(3)) {
        let mut acc = 0u32;
        for &c in quad {
            let v = DECODE[c as usize];
            if v == 0xff {
                return Err(RouteError::BadChar);
            }
            acc = (acc << 6) | u32::from(v);
        }
        triple.copy_from_slice(&acc.to_be_bytes()[1..]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    fn key(id: u8, fill: u8) -> RouteKey {
        RouteKey {
            id,
            secret: vec![fill; 32],
        }
    }

    fn keys() -> RouteKeys {
        RouteKeys::new(key(3, 0xa5))
    }

    #[test]
    fn round_trip_random_fields() {
        let keys = keys();
        let mut rng = rand::rng();
        for _ in 0..20_000 {
            let (cluster, transceiver, worker, nonce) = (
                rng.random::<u16>(),
                rng.random::<u16>(),
                rng.random::<u8>(),
                rng.random::<[u8; 6]>(),
            );
            let ufrag = mint_with_nonce(&keys, cluster, transceiver, worker, nonce);
            let hint = decode(ufrag.as_bytes(), &keys).unwrap();
            assert_eq!(
                hint,
                RouteHint {
                    key_id: 3,
                    cluster,
                    transceiver,
                    worker,
                    nonce
                }
            );
        }
    }

    #[test]
    fn random_mint_round_trips_and_differs() {
        let keys = keys();
        let a = mint(&keys, 7, 9, 2);
        let b = mint(&keys, 7, 9, 2);
        assert_ne!(a, b, "nonce must make per-session ufrags distinct");
        for u in [a, b] {
            let h = decode(u.as_bytes(), &keys).unwrap();
            assert_eq!((h.cluster, h.transceiver, h.worker), (7, 9, 2));
        }
    }

    #[test]
    fn minted_ufrags_obey_ice_rules() {
        let keys = keys();
        for _ in 0..2_000 {
            let u = mint(&keys, rand::random(), rand::random(), rand::random());
            assert_eq!(u.len(), UFRAG_LEN);
            assert!(is_valid_ice_ufrag(u.as_bytes()), "{u}");
        }
    }

    #[test]
    fn wire_layout_matches_spec() {
        let keys = keys();
        let nonce = [1, 2, 3, 4, 5, 6];
        let u = mint_with_nonce(&keys, 0x0102, 0x0304, 0x05, nonce);
        let raw = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(&u)
            .unwrap();
        assert_eq!(raw.len(), 18);
        assert_eq!(
            &raw[..12],
            &[0x13, 0x01, 0x02, 0x03, 0x04, 0x05, 1, 2, 3, 4, 5, 6]
        );
        let mut mac = HmacSha256::new_from_slice(&keys.current.secret).unwrap();
        mac.update(&raw[..12]);
        assert_eq!(&raw[12..], &mac.finalize().into_bytes()[..6]);
        // Our table decoder must agree with the base64 crate on every minted ufrag.
        let mut ours = [0u8; RAW_LEN];
        base64_decode_24(u.as_bytes(), &mut ours).unwrap();
        assert_eq!(&ours[..], &raw[..]);
    }

    #[test]
    fn known_answer() {
        // Computed independently (Python hmac + base64); catches silent format drift between releases,
        // which would strand every live session at deploy time.
        let u = mint_with_nonce(&keys(), 0x0102, 0x0304, 5, [1, 2, 3, 4, 5, 6]);
        assert_eq!(u, "EwECAwQFAQIDBAUGMvLaR/k6");
    }

    #[test]
    fn every_single_char_forgery_is_rejected() {
        let keys = keys();
        let u = mint_with_nonce(&keys, 1, 2, 3, [9; 6]);
        for pos in 0..UFRAG_LEN {
            for &c in ALPHABET {
                let mut forged = u.clone().into_bytes();
                if forged[pos] == c {
                    continue;
                }
                forged[pos] = c;
                let r = decode(&forged, &keys);
                assert!(r.is_err(), "pos {pos} char {} accepted: {r:?}", c as char);
            }
        }
    }

    #[test]
    fn every_bit_flip_is_rejected() {
        let keys = keys();
        let u = mint_with_nonce(&keys, 100, 200, 7, [0xee; 6]);
        let raw = STANDARD_NO_PAD.decode(&u).unwrap();
        for bit in 0..RAW_LEN * 8 {
            let mut forged = raw.clone();
            forged[bit / 8] ^= 1 << (bit % 8);
            let f = STANDARD_NO_PAD.encode(&forged);
            assert!(decode(f.as_bytes(), &keys).is_err(), "bit {bit} accepted");
        }
    }

    #[test]
    fn wrong_key_is_rejected() {
        let u = mint_with_nonce(&keys(), 1, 2, 3, [0; 6]);
        // Same id, different secret: the MAC is what fails.
        let other = RouteKeys::new(key(3, 0x5a));
        assert_eq!(decode(u.as_bytes(), &other), Err(RouteError::BadMac));
        // Different id entirely.
        let other = RouteKeys::new(key(4, 0xa5));
        assert_eq!(decode(u.as_bytes(), &other), Err(RouteError::UnknownKey));
    }

    #[test]
    fn rotation_accepts_previous_and_rejects_retired() {
        let old = RouteKeys::new(key(0, 0x11));
        let old_ufrag = mint_with_nonce(&old, 5, 6, 7, [3; 6]);

        let rotated = RouteKeys::new(key(1, 0x22)).with_previous(key(0, 0x11));
        let h = decode(old_ufrag.as_bytes(), &rotated).unwrap();
        assert_eq!((h.key_id, h.cluster, h.transceiver, h.worker), (0, 5, 6, 7));

        // Minting always uses the current key.
        let new_ufrag = mint_with_nonce(&rotated, 5, 6, 7, [3; 6]);
        assert_eq!(decode(new_ufrag.as_bytes(), &rotated).unwrap().key_id, 1);
        assert_eq!(
            decode(new_ufrag.as_bytes(), &old),
            Err(RouteError::UnknownKey)
        );

        // One more rotation retires key 0.
        let rotated_again = RouteKeys::new(key(2, 0x33)).with_previous(key(1, 0x22));
        assert_eq!(
            decode(old_ufrag.as_bytes(), &rotated_again),
            Err(RouteError::UnknownKey)
        );
        assert!(decode(new_ufrag.as_bytes(), &rotated_again).is_ok());
    }

    #[test]
    fn reused_key_id_across_rotation_still_verifies() {
        let a = RouteKeys::new(key(5, 0x01));
        let u = mint_with_nonce(&a, 1, 1, 1, [1; 6]);
        let both = RouteKeys::new(key(5, 0x02)).with_previous(key(5, 0x01));
        assert!(decode(u.as_bytes(), &both).is_ok());
    }

    #[test]
    fn length_charset_and_version_errors() {
        let keys = keys();
        let u = mint_with_nonce(&keys, 1, 2, 3, [4; 6]);
        let b = u.as_bytes();
        assert_eq!(decode(b"", &keys), Err(RouteError::BadLength));
        assert_eq!(decode(&b[..23], &keys), Err(RouteError::BadLength));
        let mut long = b.to_vec();
        long.push(b'A');
        assert_eq!(decode(&long, &keys), Err(RouteError::BadLength));
        for bad in [b'=', b'-', b'_', b':', b' ', 0, 0xff] {
            let mut f = b.to_vec();
            f[10] = bad;
            assert_eq!(decode(&f, &keys), Err(RouteError::BadChar));
        }

        // A correctly MAC'd hint with another version must still be refused.
        let mut raw = [0u8; RAW_LEN];
        raw[0] = (2 << 4) | 3;
        let tag = keyed(&keys.current.secret, &raw[..BODY_LEN])
            .finalize()
            .into_bytes();
        raw[BODY_LEN..].copy_from_slice(&tag[..MAC_LEN]);
        let v2 = STANDARD_NO_PAD.encode(raw);
        assert_eq!(decode(v2.as_bytes(), &keys), Err(RouteError::BadVersion));
    }

    #[test]
    fn from_hex_validates() {
        let hex32 = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        let k = RouteKeys::from_hex(2, hex32).unwrap();
        assert_eq!(k.current.id, 2);
        assert_eq!(k.current.secret.len(), 32);
        assert!(k.previous.is_none());
        assert_eq!(RouteKeys::from_hex(2, &format!(" {hex32}\n")).unwrap(), k);
        assert_eq!(
            RouteKeys::from_hex(2, "00112233445566778899aabbccddee"),
            Err(RouteError::BadSecret)
        );
        assert_eq!(
            RouteKeys::from_hex(2, "zz112233445566778899aabbccddeeff"),
            Err(RouteError::BadSecret)
        );
        assert_eq!(RouteKeys::from_hex(16, hex32), Err(RouteError::UnknownKey));
        assert!(RouteKeys::from_hex(15, &hex32[..32]).is_ok());
        assert!(!format!("{k:?}").contains("0011"), "Debug leaks the secret");
    }

    #[test]
    #[should_panic(expected = "4 bits")]
    fn minting_with_oversized_key_id_panics() {
        mint(&RouteKeys::new(key(16, 1)), 0, 0, 0);
    }

    #[test]
    fn ice_ufrag_rules() {
        assert!(!is_valid_ice_ufrag(b"abc"));
        assert!(is_valid_ice_ufrag(b"ab+/"));
        assert!(is_valid_ice_ufrag(&[b'x'; 256]));
        assert!(!is_valid_ice_ufrag(&[b'x'; 257]));
        assert!(!is_valid_ice_ufrag(b"abc="));
        assert!(!is_valid_ice_ufrag(b"ab:c"));
        assert!(!is_valid_ice_ufrag(b"ab-c"));
        assert!(!is_valid_ice_ufrag("abcé".as_bytes()));
    }

    #[test]
    fn ice_pwd_is_long_random_and_legal() {
        let a = random_ice_pwd();
        let b = random_ice_pwd();
        assert_eq!(a.len(), 24);
        assert!(a.len() >= 22);
        assert!(a.bytes().all(is_ice_char));
        assert_ne!(a, b);
    }

    #[test]
    fn decode_is_borrowing_and_copy() {
        // The relay hot path depends on this shape: borrowed input, stack-only `Copy` output.
        fn assert_copy<T: Copy>() {}
        assert_copy::<RouteHint>();
        assert_copy::<RouteError>();
        let _: fn(&[u8], &RouteKeys) -> Result<RouteHint, RouteError> = decode;
    }

    #[test]
    fn display_is_readable() {
        let h = RouteHint {
            key_id: 1,
            cluster: 2,
            transceiver: 3,
            worker: 4,
            nonce: [0xde, 0xad, 0xbe, 0xef, 0, 1],
        };
        assert_eq!(
            h.to_string(),
            "cluster 2 transceiver 3 worker 4 (key 1, nonce deadbeef0001)"
        );
    }
}
