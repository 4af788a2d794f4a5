//! The header the relay puts in front of a client datagram on its way to a transceiver, and that the
//! transceiver puts back in front of its reply.
//!
//! Carrying the client's address in-band lets the transceiver see the real client 5-tuple (ICE and
//! consent freshness key on it) while both sides keep a single socket, and lets the relay stay stateless
//! for the return direction: the reply says where it goes. The same header in both directions means a
//! transceiver answers by reusing the header it received.
//!
//! ```text
//! 0     2     3      4          8        10                  26
//! +-----+-----+------+----------+--------+-------------------+---------
//! | V E | ver |family| ingress  |  port  | client IP (16)    | payload
//! +-----+-----+------+----------+--------+-------------------+---------
//!                      u32 BE     u16 BE   IPv4 as ::ffff:a.b.c.d
//! ```
//!
//! The magic's first byte, 0x56, lies in a range RFC 7983 leaves unassigned (RFC 9443 later gives
//! 64..=127 to QUIC, which never appears on these sockets), so a transceiver that also accepts clients
//! directly can tell relayed datagrams from raw STUN/DTLS/RTP by the first byte alone. The fixed length
//! keeps parsing branch-light and lets the relay reserve the header room in its receive buffers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// "VE": voice-edge.
pub const MAGIC: [u8; 2] = [0x56, 0x45];
/// Bumped if the layout changes, so mixed-version deployments drop instead of misreading.
pub const VERSION: u8 = 1;
pub const LINK_HEADER_LEN: usize = 26;

const FAMILY_V4: u8 = 4;
const FAMILY_V6: u8 = 6;

#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
pub enum LinkError {
    #[error("link packet shorter than the {LINK_HEADER_LEN}-byte header")]
    Truncated,
    #[error("link packet does not start with the VE magic")]
    BadMagic,
    #[error("link header has an unsupported version")]
    BadVersion,
    #[error("link header has an unknown address family or a non-canonical IPv4 address")]
    BadFamily,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkHeader {
    /// Which relay instance/worker the datagram entered through, so the reply leaves from the same public
    /// socket (the client's NAT binding and ICE pair are tied to that address).
    pub ingress: u32,
    /// The client as the relay saw it. IPv6 flow info and scope id are not carried: they are meaningless
    /// on the far side of the relay, so they read back as 0.
    pub client: SocketAddr,
}

impl LinkHeader {
    /// Writes the header into `out[..LINK_HEADER_LEN]` and returns its length, so the hot path can build
    /// it in place in front of a payload already sitting in a preallocated buffer.
    ///
    /// # Panics
    /// If `out` is shorter than [`LINK_HEADER_LEN`]; buffers are sized once at startup, so a short one is
    /// a bug, not a runtime condition.
    pub fn write(&self, out: &mut [u8]) -> usize {
        assert!(
            out.len() >= LINK_HEADER_LEN,
            "link header needs {LINK_HEADER_LEN} bytes, buffer has {}",
            out.len()
        );
        let (family, ip) = match self.client.ip() {
            IpAddr::V4(v4) => (FAMILY_V4, v4.to_ipv6_mapped()),
            IpAddr::V6(v6) => (FAMILY_V6, v6),
        };
        out[0..2].copy_from_slice(&MAGIC);
        out[2] = VERSION;
        out[3] = family;
        out[4..8].copy_from_slice(&self.ingress.to_be_bytes());
        out[8..10].copy_from_slice(&self.client.port().to_be_bytes());
        out[10..26].copy_from_slice(&ip.octets());
        LINK_HEADER_LEN
    }

    /// Splits a link datagram into header and the inner (client) datagram, without copying.
    ///
    /// Family 4 requires an IPv4-mapped address, so every accepted header has exactly one encoding and
    /// `write` reproduces the input byte for byte.
    pub fn parse(pkt: &[u8]) -> Result<(LinkHeader, &[u8]), LinkError> {
        let Some((hdr, payload)) = pkt.split_first_chunk::<LINK_HEADER_LEN>() else {
            return Err(if is_link_packet(pkt) || MAGIC.starts_with(pkt) {
                LinkError::Truncated
            } else {
                LinkError::BadMagic
            });
        };
        if hdr[0..2] != MAGIC {
            return Err(LinkError::BadMagic);
        }
        if hdr[2] != VERSION {
            return Err(LinkError::BadVersion);
        }
        let ingress = u32::from_be_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]);
        let port = u16::from_be_bytes([hdr[8], hdr[9]]);
        let mut octets = [0u8; 16];
        octets.copy_from_slice(&hdr[10..26]);
        let ip = Ipv6Addr::from(octets);
        let client = match hdr[3] {
            FAMILY_V4 => {
                let v4: Ipv4Addr = ip.to_ipv4_mapped().ok_or(LinkError::BadFamily)?;
                SocketAddr::V4(SocketAddrV4::new(v4, port))
            }
            FAMILY_V6 => SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0)),
            _ => return Err(LinkError::BadFamily),
        };
        Ok((LinkHeader { ingress, client }, payload))
    }
}

/// First-byte-and-magic demux for a transceiver socket that receives both relayed and direct traffic;
/// [`LinkHeader::parse`] still validates the rest.
pub fn is_link_packet(pkt: &[u8]) -> bool {
    pkt.starts_with(&MAGIC)
}

/// Allocating convenience for tests, tools and cold paths; the relay's hot path uses
/// [`LinkHeader::write`] into its own buffers instead.
pub fn encapsulate(header: &LinkHeader, payload: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + LINK_HEADER_LEN, 0);
    header.write(&mut out[start..]);
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4() -> LinkHeader {
        LinkHeader {
            ingress: 0x0102_0304,
            client: "203.0.113.7:54321".parse().unwrap(),
        }
    }

    fn v6() -> LinkHeader {
        LinkHeader {
            ingress: u32::MAX,
            client: "[2001:db8::1:2]:443".parse().unwrap(),
        }
    }

    #[test]
    fn round_trip_v4() {
        let mut buf = Vec::new();
        encapsulate(&v4(), b"payload", &mut buf);
        assert_eq!(buf.len(), LINK_HEADER_LEN + 7);
        assert_eq!(
            &buf[..LINK_HEADER_LEN],
            &[
                0x56, 0x45, 1, 4, 1, 2, 3, 4, 0xd4, 0x31, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
                203, 0, 113, 7
            ]
        );
        assert!(is_link_packet(&buf));
        let (h, p) = LinkHeader::parse(&buf).unwrap();
        assert_eq!(h, v4());
        assert_eq!(p, b"payload");
    }

    #[test]
    fn round_trip_v6_and_empty_payload() {
        let mut buf = [0u8; 64];
        let n = v6().write(&mut buf);
        assert_eq!(n, LINK_HEADER_LEN);
        assert_eq!(buf[3], 6);
        let (h, p) = LinkHeader::parse(&buf[..n]).unwrap();
        assert_eq!(h, v6());
        assert!(p.is_empty());
    }

    #[test]
    fn v4_mapped_v6_client_keeps_its_family() {
        // A dual-stack socket reports v4 clients this way; the transceiver must see the same address.
        let h = LinkHeader {
            ingress: 9,
            client: "[::ffff:192.0.2.1]:5000".parse().unwrap(),
        };
        let mut buf = Vec::new();
        encapsulate(&h, b"x", &mut buf);
        assert_eq!(LinkHeader::parse(&buf).unwrap().0, h);
    }

    #[test]
    fn reply_reuses_header() {
        let mut inbound = Vec::new();
        encapsulate(&v4(), b"stun request", &mut inbound);
        let (h, _) = LinkHeader::parse(&inbound).unwrap();
        let mut reply = Vec::new();
        encapsulate(&h, b"stun response", &mut reply);
        assert_eq!(inbound[..LINK_HEADER_LEN], reply[..LINK_HEADER_LEN]);
    }

    #[test]
    fn truncated() {
        let mut buf = Vec::new();
        encapsulate(&v6(), b"", &mut buf);
        for n in 0..LINK_HEADER_LEN {
            assert_eq!(
                LinkHeader::parse(&buf[..n]),
                Err(LinkError::Truncated),
                "{n}"
            );
        }
    }

    #[test]
    fn bad_magic() {
        let mut buf = Vec::new();
        encapsulate(&v4(), b"abc", &mut buf);
        for i in 0..2 {
            let mut b = buf.clone();
            b[i] ^= 0x01;
            assert_eq!(LinkHeader::parse(&b), Err(LinkError::BadMagic));
            assert!(!is_link_packet(&b));
        }
        // Raw STUN/DTLS/RTP arriving directly is never mistaken for a link packet.
        for first in [0x00, 0x01, 0x16, 0x80, 0xbf] {
            assert!(!is_link_packet(&[first, 0x45, 0, 0]));
            assert_eq!(LinkHeader::parse(&[first]), Err(LinkError::BadMagic));
        }
        assert_eq!(
            crate::routing::stun::classify(MAGIC[0]),
            crate::routing::stun::PacketKind::Other
        );
    }

    #[test]
    fn bad_version_and_family() {
        let mut buf = Vec::new();
        encapsulate(&v4(), b"abc", &mut buf);
        let mut b = buf.clone();
        b[2] = 2;
        assert_eq!(LinkHeader::parse(&b), Err(LinkError::BadVersion));
        let mut b = buf.clone();
        b[3] = 5;
        assert_eq!(LinkHeader::parse(&b), Err(LinkError::BadFamily));
        // Family 4 with an address that is not IPv4-mapped has no canonical meaning.
        let mut b = buf.clone();
        b[10] = 0x20;
        assert_eq!(LinkHeader::parse(&b), Err(LinkError::BadFamily));
    }

    #[test]
    #[should_panic(expected = "link header needs")]
    fn write_into_short_buffer_panics() {
        v4().write(&mut [0u8; LINK_HEADER_LEN - 1]);
    }
}
