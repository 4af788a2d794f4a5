//! The link header: parsed by a transceiver from anything that reaches its socket, and by a relay
//! from every reply, which it forwards to the address the header names.
//!
//! The header has exactly one spelling per value (so a reply built from a parsed header is the
//! header received), and every value round-trips, except the IPv6 flow info and scope id the
//! format deliberately drops.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::routing::link::{LINK_HEADER_LEN, LinkError, LinkHeader, encapsulate, is_link_packet};

pub fn link_header(data: &[u8]) {
    let parsed = LinkHeader::parse(data);
    match parsed {
        Ok((header, payload)) => {
            assert!(is_link_packet(data));
            let mut again = [0u8; LINK_HEADER_LEN];
            assert_eq!(header.write(&mut again), LINK_HEADER_LEN);
            assert_eq!(
                again[..],
                data[..LINK_HEADER_LEN],
                "parse accepted a spelling write never produces"
            );
            assert_eq!(payload, &data[LINK_HEADER_LEN..]);
            // A transceiver's reply reuses the header; the relay must read back the same client.
            let mut reply = Vec::new();
            encapsulate(&header, payload, &mut reply);
            assert_eq!(reply, data);
        }
        Err(LinkError::BadMagic) => assert!(!is_link_packet(data)),
        Err(_) => assert!(data.len() < LINK_HEADER_LEN || is_link_packet(data)),
    }

    // Write-then-parse for a header built from the fuzzer's bytes.
    let Some((&[family, i0, i1, i2, i3, p0, p1, f0, f1, s0, s1], rest)) =
        data.split_first_chunk::<11>()
    else {
        return;
    };
    let Some((ip, payload)) = rest.split_first_chunk::<16>() else {
        return;
    };
    let port = u16::from_be_bytes([p0, p1]);
    let client = if family & 1 == 0 {
        let [.., a, b, c, d] = *ip;
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(a, b, c, d), port))
    } else {
        let flowinfo = u32::from(u16::from_be_bytes([f0, f1]));
        let scope = u32::from(u16::from_be_bytes([s0, s1]));
        SocketAddr::V6(SocketAddrV6::new(
            Ipv6Addr::from(*ip),
            port,
            flowinfo,
            scope,
        ))
    };
    let header = LinkHeader {
        ingress: u32::from_be_bytes([i0, i1, i2, i3]),
        client,
    };
    let mut pkt = Vec::new();
    encapsulate(&header, payload, &mut pkt);
    let (back, inner) = LinkHeader::parse(&pkt).expect("a written header must parse");
    let expected = match client {
        SocketAddr::V6(v6) => SocketAddr::V6(SocketAddrV6::new(*v6.ip(), v6.port(), 0, 0)),
        v4 => v4,
    };
    assert_eq!(back.ingress, header.ingress);
    assert_eq!(back.client, expected);
    assert_eq!(inner, payload);
}
