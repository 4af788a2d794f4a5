//! The little STUN a relay needs: which protocol a datagram belongs to, and the server ufrag inside a
//! binding request from a source it has never seen.
//!
//! The relay does not run ICE, so it does not verify MESSAGE-INTEGRITY or FINGERPRINT: the transceiver's
//! ICE agent does that with the password the relay never learns. The relay only needs enough parsing to
//! route safely, and the routing itself is authenticated by the MAC inside the ufrag.

/// Protocol of a datagram on a WebRTC 5-tuple, by first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketKind {
    Stun,
    Dtls,
    /// RTP and RTCP share the range; the relay never needs to tell them apart.
    Rtp,
    /// ZRTP, TURN channel data, and unassigned values: nothing a WebRTC peer sends us.
    Other,
}

/// RFC 7983 demultiplexing, because ICE, DTLS and SRTP all share one 5-tuple and the first byte is the
/// only thing they reliably disagree on.
pub fn classify(first_byte: u8) -> PacketKind {
    match first_byte {
        0..=3 => PacketKind::Stun,
        20..=63 => PacketKind::Dtls,
        128..=191 => PacketKind::Rtp,
        _ => PacketKind::Other,
    }
}

/// Why a datagram from an unknown source could not be routed; distinct so the relay can count them.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
pub enum PeekError {
    #[error("not a STUN message (RFC 7983 first byte)")]
    NotStun,
    #[error("STUN message is not a Binding Request")]
    NotBindingRequest,
    #[error("STUN magic cookie mismatch")]
    BadCookie,
    #[error("STUN message is truncated or its lengths are inconsistent")]
    Truncated,
    #[error("STUN Binding Request has no USERNAME before MESSAGE-INTEGRITY")]
    NoUsername,
    #[error("STUN USERNAME is not of the form serverUfrag:clientUfrag")]
    BadUsername,
}

const HEADER_LEN: usize = 20;
const MAGIC_COOKIE: [u8; 4] = 0x2112_A442u32.to_be_bytes();
const BINDING_REQUEST: u16 = 0x0001;
const ATTR_USERNAME: u16 = 0x0006;
const ATTR_MESSAGE_INTEGRITY: u16 = 0x0008;
const ATTR_MESSAGE_INTEGRITY_SHA256: u16 = 0x001C;

/// Returns the server's ufrag from a binding request's `USERNAME = serverUfrag:clientUfrag`.
///
/// Strict about framing (the length field must match the datagram exactly) because a lenient parser
/// on an open UDP port only widens what an attacker can feed the code behind it. The result borrows from
/// `pkt`, so the relay can decode the hint without copying.
///
/// Attributes after MESSAGE-INTEGRITY are ignored, as RFC 8489 §14.5 requires of receivers: the ICE
/// agent that finally handles this request will not see them either, so routing on them would let the
/// relay and the transceiver disagree about whose request it is.
pub fn peek_binding_username(pkt: &[u8]) -> Result<&[u8], PeekError> {
    match pkt.first() {
        Some(&b) if classify(b) == PacketKind::Stun => {}
        Some(_) => return Err(PeekError::NotStun),
        None => return Err(PeekError::Truncated),
    }
    if pkt.len() < HEADER_LEN {
        return Err(PeekError::Truncated);
    }
    // The cookie is what tells STUN apart from other 0..=3 traffic, so check it before trusting the type.
    if pkt[4..8] != MAGIC_COOKIE {
        return Err(PeekError::BadCookie);
    }
    if u16::from_be_bytes([pkt[0], pkt[1]]) != BINDING_REQUEST {
        return Err(PeekError::NotBindingRequest);
    }
    let body_len = usize::from(u16::from_be_bytes([pkt[2], pkt[3]]));
    if body_len != pkt.len() - HEADER_LEN || !body_len.is_multiple_of(4) {
        return Err(PeekError::Truncated);
    }

    let mut rest = &pkt[HEADER_LEN..];
    while !rest.is_empty() {
        // `rest` stays 4-aligned because the total is a multiple of 4 and every attribute is padded.
        let [t0, t1, l0, l1, ref tail @ ..] = *rest else {
            return Err(PeekError::Truncated);
        };
        let attr_type = u16::from_be_bytes([t0, t1]);
        let len = usize::from(u16::from_be_bytes([l0, l1]));
        if len > tail.len() {
            return Err(PeekError::Truncated);
        }
        match attr_type {
            ATTR_USERNAME => return server_ufrag(&tail[..len]),
            ATTR_MESSAGE_INTEGRITY | ATTR_MESSAGE_INTEGRITY_SHA256 => break,
            _ => {}
        }
        // Padding fits whenever the value does: the body length is a multiple of 4.
        rest = &tail[len.next_multiple_of(4)..];
    }
    Err(PeekError::NoUsername)
}

fn server_ufrag(username: &[u8]) -> Result<&[u8], PeekError> {
    match username.iter().position(|&c| c == b':') {
        Some(0) | None => Err(PeekError::BadUsername),
        Some(i) => Ok(&username[..i]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(out: &mut Vec<u8>, t: u16, value: &[u8]) {
        out.extend_from_slice(&t.to_be_bytes());
        out.extend_from_slice(&(value.len() as u16).to_be_bytes());
        out.extend_from_slice(value);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
    }

    fn finish(msg_type: u16, cookie: [u8; 4], body: &[u8]) -> Vec<u8> {
        let mut pkt = Vec::new();
        pkt.extend_from_slice(&msg_type.to_be_bytes());
        pkt.extend_from_slice(&(body.len() as u16).to_be_bytes());
        pkt.extend_from_slice(&cookie);
        pkt.extend_from_slice(&[0x5a; 12]); // transaction id
        pkt.extend_from_slice(body);
        pkt
    }

    /// A binding request shaped like a browser's: USERNAME first, then PRIORITY, ICE-CONTROLLING,
    /// MESSAGE-INTEGRITY and FINGERPRINT (contents of the last two are not checked by the relay).
    fn request_with(msg_type: u16, cookie: [u8; 4], username: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        attr(&mut body, ATTR_USERNAME, username);
        attr(&mut body, 0x0024, &0x6e7f_00ffu32.to_be_bytes()); // PRIORITY
        attr(&mut body, 0x802A, &[7; 8]); // ICE-CONTROLLING tiebreaker
        attr(&mut body, ATTR_MESSAGE_INTEGRITY, &[0xaa; 20]);
        attr(&mut body, 0x8028, &[0xbb; 4]); // FINGERPRINT
        finish(msg_type, cookie, &body)
    }

    fn request(username: &[u8]) -> Vec<u8> {
        request_with(BINDING_REQUEST, MAGIC_COOKIE, username)
    }

    #[test]
    fn classify_follows_rfc7983() {
        assert_eq!(classify(0), PacketKind::Stun);
        assert_eq!(classify(3), PacketKind::Stun);
        assert_eq!(classify(4), PacketKind::Other);
        assert_eq!(classify(16), PacketKind::Other); // ZRTP
        assert_eq!(classify(20), PacketKind::Dtls);
        assert_eq!(classify(22), PacketKind::Dtls);
        assert_eq!(classify(63), PacketKind::Dtls);
        assert_eq!(classify(64), PacketKind::Other); // TURN channel
        assert_eq!(classify(0x56), PacketKind::Other); // our link header
        assert_eq!(classify(127), PacketKind::Other);
        assert_eq!(classify(128), PacketKind::Rtp);
        assert_eq!(classify(0x80), PacketKind::Rtp);
        assert_eq!(classify(191), PacketKind::Rtp);
        assert_eq!(classify(192), PacketKind::Other);
    }

    #[test]
    fn valid_request_yields_server_ufrag() {
        let pkt = request(b"SERVERufrag+/0123456789ab:cli1");
        assert_eq!(
            peek_binding_username(&pkt),
            Ok(&b"SERVERufrag+/0123456789ab"[..])
        );
        // Odd-length USERNAME exercises padding.
        let pkt = request(b"abcd:xyz");
        assert_eq!(peek_binding_username(&pkt), Ok(&b"abcd"[..]));
        // Client ufrags may contain more colons in malformed input; the first one splits.
        let pkt = request(b"abcd:x:y");
        assert_eq!(peek_binding_username(&pkt), Ok(&b"abcd"[..]));
    }

    #[test]
    fn username_not_first_is_found() {
        let mut body = Vec::new();
        attr(&mut body, 0x0024, &[0; 4]);
        attr(&mut body, 0xC057, &[1, 2, 3]); // unknown comprehension-optional, odd length
        attr(&mut body, ATTR_USERNAME, b"srv1:cli");
        attr(&mut body, ATTR_MESSAGE_INTEGRITY, &[0; 20]);
        let pkt = finish(BINDING_REQUEST, MAGIC_COOKIE, &body);
        assert_eq!(peek_binding_username(&pkt), Ok(&b"srv1"[..]));
    }

    #[test]
    fn username_after_message_integrity_is_ignored() {
        let mut body = Vec::new();
        attr(&mut body, ATTR_MESSAGE_INTEGRITY, &[0; 20]);
        attr(&mut body, ATTR_USERNAME, b"srv1:cli");
        let pkt = finish(BINDING_REQUEST, MAGIC_COOKIE, &body);
        assert_eq!(peek_binding_username(&pkt), Err(PeekError::NoUsername));
    }

    #[test]
    fn no_username() {
        let mut body = Vec::new();
        attr(&mut body, 0x0024, &[0; 4]);
        let pkt = finish(BINDING_REQUEST, MAGIC_COOKIE, &body);
        assert_eq!(peek_binding_username(&pkt), Err(PeekError::NoUsername));
        let pkt = finish(BINDING_REQUEST, MAGIC_COOKIE, &[]);
        assert_eq!(peek_binding_username(&pkt), Err(PeekError::NoUsername));
    }

    #[test]
    fn truncated_anywhere_is_rejected() {
        let pkt = request(b"abcd:efgh");
        assert_eq!(peek_binding_username(&[]), Err(PeekError::Truncated));
        // Every prefix, including mid-header, mid-attribute-header and mid-value.
        for n in 1..pkt.len() {
            let r = peek_binding_username(&pkt[..n]);
            assert_eq!(r, Err(PeekError::Truncated), "prefix {n}");
        }
        // Length field claiming more than an attribute holds.
        let mut bad = pkt.clone();
        bad[HEADER_LEN + 3] = 200; // USERNAME length
        assert_eq!(peek_binding_username(&bad), Err(PeekError::Truncated));
        // Trailing bytes beyond the header's length.
        let mut long = pkt.clone();
        long.extend_from_slice(&[0; 4]);
        assert_eq!(peek_binding_username(&long), Err(PeekError::Truncated));
        // Body length not a multiple of 4.
        let mut odd = pkt.clone();
        odd.push(0);
        odd[3] += 1;
        assert_eq!(peek_binding_username(&odd), Err(PeekError::Truncated));
    }

    #[test]
    fn wrong_cookie_is_rejected() {
        let pkt = request_with(BINDING_REQUEST, [0x21, 0x12, 0xa4, 0x43], b"abcd:efgh");
        assert_eq!(peek_binding_username(&pkt), Err(PeekError::BadCookie));
    }

    #[test]
    fn binding_success_response_is_not_a_request() {
        let pkt = request_with(0x0101, MAGIC_COOKIE, b"abcd:efgh");
        assert_eq!(
            peek_binding_username(&pkt),
            Err(PeekError::NotBindingRequest)
        );
        let indication = request_with(0x0011, MAGIC_COOKIE, b"abcd:efgh");
        assert_eq!(
            peek_binding_username(&indication),
            Err(PeekError::NotBindingRequest)
        );
    }

    #[test]
    fn non_stun_is_rejected() {
        // DTLS 1.2 ClientHello record header.
        let dtls = [
            0x16, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x30, 1, 0, 0, 0x24,
        ];
        assert_eq!(peek_binding_username(&dtls), Err(PeekError::NotStun));
        // RTP v2, PT 111 (Opus).
        let mut rtp = vec![
            0x80, 0x6f, 0x12, 0x34, 0, 0, 0, 0xa0, 0xde, 0xad, 0xbe, 0xef,
        ];
        rtp.extend_from_slice(&[0; 40]);
        assert_eq!(peek_binding_username(&rtp), Err(PeekError::NotStun));
        assert_eq!(peek_binding_username(&[0x56; 40]), Err(PeekError::NotStun));
    }

    #[test]
    fn username_without_colon_or_empty_server_part() {
        let pkt = request(b"justoneufrag");
        assert_eq!(peek_binding_username(&pkt), Err(PeekError::BadUsername));
        let pkt = request(b":cli1");
        assert_eq!(peek_binding_username(&pkt), Err(PeekError::BadUsername));
        let pkt = request(b"");
        assert_eq!(peek_binding_username(&pkt), Err(PeekError::BadUsername));
    }

    #[test]
    fn peeked_ufrag_borrows_from_packet() {
        let pkt = request(b"abcd:efgh");
        let u = peek_binding_username(&pkt).unwrap();
        let range = pkt.as_ptr_range();
        assert!(range.contains(&u.as_ptr()));
    }
}
