//! The relay on real UDP sockets: what it forwards, what it refuses, and that a transceiver can
//! answer through it. A plain UDP socket stands in for the transceiver, so these tests see
//! exactly the bytes the relay emits.

use crate::common;

use common::binding_request;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use voice_edge::membership::ClusterMembers;
use voice_edge::relay::{self, RelayConfig};
use voice_edge::routing::link::{LINK_HEADER_LEN, LinkHeader};
use voice_edge::routing::{RouteKeys, ufrag};

const SECRET: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

struct Fixture {
    relay: relay::RelayHandle,
    sink: UdpSocket,
    client: UdpSocket,
    keys: RouteKeys,
}

fn fixture() -> Fixture {
    fixture_with(|_| {})
}

fn fixture_with(tune: impl FnOnce(&mut RelayConfig)) -> Fixture {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let keys = RouteKeys::from_hex(0, SECRET).unwrap();
    let members = ClusterMembers::new(7).with(3, sink.local_addr().unwrap());
    let mut cfg = RelayConfig::new("127.0.0.1:0".parse().unwrap(), members, keys.clone());
    tune(&mut cfg);
    let relay = relay::spawn(cfg).unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    Fixture {
        relay,
        sink,
        client,
        keys,
    }
}

fn recv(s: &UdpSocket) -> Option<(Vec<u8>, SocketAddr)> {
    let mut buf = [0u8; 2048];
    s.recv_from(&mut buf)
        .ok()
        .map(|(n, a)| (buf[..n].to_vec(), a))
}

#[test]
fn unknown_source_that_is_not_a_binding_request_is_dropped() {
    let f = fixture();
    // A DTLS ClientHello-looking record and an RTP-looking packet from a source with no flow.
    f.client
        .send_to(
            &[22, 254, 253, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            f.relay.public_addr,
        )
        .unwrap();
    f.client
        .send_to(
            &[0x80, 111, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 9, 9],
            f.relay.public_addr,
        )
        .unwrap();
    assert!(
        recv(&f.sink).is_none(),
        "relay forwarded a packet from an unknown source"
    );
    let c = f.relay.counters();
    assert_eq!(c.dropped_not_stun, 2);
    assert_eq!(c.forwarded_in, 0);
    f.relay.stop();
}

#[test]
fn forged_or_foreign_ufrags_are_dropped() {
    let f = fixture();
    let good = ufrag::mint(&f.keys, 7, 3, 0);
    // Same fields, one character changed: the MAC no longer holds.
    let mut forged = good.clone().into_bytes();
    forged[5] = if forged[5] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).unwrap();
    f.client
        .send_to(
            &binding_request(&format!("{forged}:abcd")),
            f.relay.public_addr,
        )
        .unwrap();
    // Minted with another secret.
    let other = RouteKeys::from_hex(0, &"ab".repeat(32)).unwrap();
    f.client
        .send_to(
            &binding_request(&format!("{}:abcd", ufrag::mint(&other, 7, 3, 0))),
            f.relay.public_addr,
        )
        .unwrap();
    // Valid MAC but another cluster, and a transceiver id that is not a member.
    f.client
        .send_to(
            &binding_request(&format!("{}:abcd", ufrag::mint(&f.keys, 8, 3, 0))),
            f.relay.public_addr,
        )
        .unwrap();
    f.client
        .send_to(
            &binding_request(&format!("{}:abcd", ufrag::mint(&f.keys, 7, 9, 0))),
            f.relay.public_addr,
        )
        .unwrap();
    // Not even a username.
    f.client
        .send_to(&binding_request("nocolon"), f.relay.public_addr)
        .unwrap();
    assert!(recv(&f.sink).is_none(), "relay forwarded a forged route");
    let c = f.relay.counters();
    assert_eq!(c.dropped_bad_route, 2, "{c:?}");
    assert_eq!(c.dropped_wrong_cluster, 1, "{c:?}");
    assert_eq!(c.dropped_unknown_transceiver, 1, "{c:?}");
    assert_eq!(c.dropped_bad_stun, 1, "{c:?}");
    assert_eq!(c.flows_created, 0);
    f.relay.stop();
}

#[test]
fn a_valid_route_creates_a_flow_both_directions_work() {
    let f = fixture();
    let u = ufrag::mint(&f.keys, 7, 3, 0);
    let req = binding_request(&format!("{u}:clnt"));
    f.client.send_to(&req, f.relay.public_addr).unwrap();
    let (pkt, link_from) = recv(&f.sink).expect("binding request was not forwarded");
    let (h, inner) = LinkHeader::parse(&pkt).unwrap();
    assert_eq!(
        h.client,
        f.client.local_addr().unwrap(),
        "link header lost the client address"
    );
    assert_eq!(inner, &req[..]);
    assert_eq!(link_from, f.relay.link_addr);

    // Later non-STUN packets of the flow are forwarded by address alone.
    let dtls = [22u8, 254, 253, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    f.client.send_to(&dtls, f.relay.public_addr).unwrap();
    let (pkt, _) = recv(&f.sink).expect("flow packet was not forwarded");
    assert_eq!(&pkt[LINK_HEADER_LEN..], &dtls);

    // The transceiver answers with the same header; the client gets the bare payload from the
    // relay's public address.
    let mut reply = vec![0u8; LINK_HEADER_LEN];
    LinkHeader {
        ingress: h.ingress,
        client: h.client,
    }
    .write(&mut reply);
    reply.extend_from_slice(b"\x17answer");
    f.sink.send_to(&reply, f.relay.link_addr).unwrap();
    let (got, from) = recv(&f.client).expect("reply did not reach the client");
    assert_eq!(got, b"\x17answer");
    assert_eq!(from, f.relay.public_addr);

    // A non-member cannot make the relay speak from its public address.
    let intruder = UdpSocket::bind("127.0.0.1:0").unwrap();
    intruder.send_to(&reply, f.relay.link_addr).unwrap();
    assert!(recv(&f.client).is_none());

    // A datagram of the flow too large for a receive slot is dropped whole and counted, never
    // forwarded cut short; so is one from the transceiver.
    f.client
        .send_to(&[0x17; 4000], f.relay.public_addr)
        .unwrap();
    assert!(
        recv(&f.sink).is_none(),
        "an oversize datagram was forwarded"
    );
    let mut big = reply[..LINK_HEADER_LEN].to_vec();
    big.resize(4000, 0x17);
    f.sink.send_to(&big, f.relay.link_addr).unwrap();
    assert!(recv(&f.client).is_none(), "an oversize reply was forwarded");
    let c = f.relay.counters();
    assert_eq!(
        (
            c.flows_created,
            c.forwarded_in,
            c.forwarded_out,
            c.dropped_bad_link,
            c.dropped_oversize
        ),
        (1, 2, 1, 1, 2),
        "{c:?}"
    );
    f.relay.stop();
}

fn link_packet(client: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; LINK_HEADER_LEN];
    LinkHeader { ingress: 0, client }.write(&mut p);
    p.extend_from_slice(payload);
    p
}

#[test]
fn a_flow_is_learned_from_the_transceivers_outbound_packets() {
    let f = fixture();
    let client = f.client.local_addr().unwrap();
    // The relay has never seen this client (as after a restart); the transceiver sends to it.
    f.sink
        .send_to(&link_packet(client, b"\x80media"), f.relay.link_addr)
        .unwrap();
    let (got, _) = recv(&f.client).expect("outbound packet not delivered");
    assert_eq!(got, b"\x80media");
    // The client's next non-STUN packet now finds its flow.
    f.client.send_to(b"\x80reply", f.relay.public_addr).unwrap();
    let (pkt, _) = recv(&f.sink).expect("learned flow did not forward");
    assert_eq!(&pkt[LINK_HEADER_LEN..], b"\x80reply");
    let c = f.relay.counters();
    assert_eq!(
        (c.flows_learned_outbound, c.dropped_not_stun),
        (1, 0),
        "{c:?}"
    );
    f.relay.stop();
}

#[test]
fn a_flood_of_new_sources_never_evicts_an_established_flow() {
    let f = fixture_with(|c| c.max_flows = 4);
    let u = ufrag::mint(&f.keys, 7, 3, 0);
    f.client
        .send_to(&binding_request(&format!("{u}:live")), f.relay.public_addr)
        .unwrap();
    recv(&f.sink).expect("established flow not created");
    // 40 sources with valid routes and 40 with garbage, bounded and over in well under a second.
    let flood: Vec<UdpSocket> = (0..80)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    for (i, s) in flood.iter().enumerate() {
        let pkt = if i % 2 == 0 {
            binding_request(&format!("{}:fl{i:02}", ufrag::mint(&f.keys, 7, 3, 0)))
        } else {
            vec![0x80, 0, 0, i as u8, 1, 2, 3, 4]
        };
        s.send_to(&pkt, f.relay.public_addr).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    while recv(&f.sink).is_some() {}
    // The established call still flows.
    f.client
        .send_to(&[23, 254, 253, 0, 1], f.relay.public_addr)
        .unwrap();
    let (pkt, _) = recv(&f.sink).expect("established flow was evicted by the flood");
    assert_eq!(&pkt[LINK_HEADER_LEN..], &[23, 254, 253, 0, 1]);
    let c = f.relay.counters();
    assert_eq!(c.flows_created, 4, "{c:?}");
    assert_eq!(c.dropped_table_full, 37, "{c:?}");
    assert_eq!(c.dropped_not_stun, 40, "{c:?}");
    f.relay.stop();
}

/// Two sockets on consecutive ports, as a transceiver's workers 0 and 1 bind them.
fn worker_sinks() -> (UdpSocket, UdpSocket) {
    for _ in 0..32 {
        let w0 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let next = w0.local_addr().unwrap().port() + 1;
        if let Ok(w1) = UdpSocket::bind(("127.0.0.1", next)) {
            for s in [&w0, &w1] {
                s.set_read_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
            }
            return (w0, w1);
        }
    }
    panic!("no two consecutive free ports");
}

#[test]
fn the_worker_byte_picks_the_transceiver_worker_socket() {
    let (w0, w1) = worker_sinks();
    let keys = RouteKeys::from_hex(0, SECRET).unwrap();
    let members = ClusterMembers::new(7)
        .with(3, w0.local_addr().unwrap())
        .with_workers(2);
    let relay = relay::spawn(RelayConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        members,
        keys.clone(),
    ))
    .unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();

    // Worker 1's route goes to worker 0's port + 1, and only there.
    let req = binding_request(&format!("{}:clnt", ufrag::mint(&keys, 7, 3, 1)));
    client.send_to(&req, relay.public_addr).unwrap();
    let (pkt, _) = recv(&w1).expect("worker 1 did not get its binding request");
    assert_eq!(&pkt[LINK_HEADER_LEN..], &req[..]);
    assert!(recv(&w0).is_none(), "worker 0 got worker 1's packet");

    // Worker 1 answers from its own port: the relay knows it as transceiver 3.
    let (h, _) = LinkHeader::parse(&pkt).unwrap();
    let mut reply = vec![0u8; LINK_HEADER_LEN];
    h.write(&mut reply);
    reply.extend_from_slice(b"\x17from-worker-1");
    w1.send_to(&reply, relay.link_addr).unwrap();
    let (got, _) = recv(&client).expect("worker 1's reply did not reach the client");
    assert_eq!(got, b"\x17from-worker-1");

    // A worker the transceiver does not have is refused, even with a valid MAC.
    let other = UdpSocket::bind("127.0.0.1:0").unwrap();
    let req = binding_request(&format!("{}:clnt", ufrag::mint(&keys, 7, 3, 2)));
    other.send_to(&req, relay.public_addr).unwrap();
    assert!(recv(&w0).is_none() && recv(&w1).is_none());
    let c = relay.counters();
    assert_eq!(
        (
            c.flows_created,
            c.forwarded_out,
            c.dropped_unknown_transceiver
        ),
        (1, 1, 1),
        "{c:?}"
    );
    relay.stop();
}

/// A flow's owner gives the client up with an empty link datagram (its call ended, or it knows
/// no call for the client): the client's next check is routed by its own ufrag again. Only the
/// owner's word counts, and nothing of it reaches the client.
#[test]
fn only_its_owner_releases_a_flow_and_the_next_call_is_routed_afresh() {
    let other = UdpSocket::bind("127.0.0.1:0").unwrap();
    other
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let other_addr = other.local_addr().unwrap();
    let keys = RouteKeys::from_hex(0, SECRET).unwrap();
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let members = ClusterMembers::new(7)
        .with(3, sink.local_addr().unwrap())
        .with(4, other_addr);
    let mut cfg = RelayConfig::new("127.0.0.1:0".parse().unwrap(), members, keys.clone());
    // The release may reach either worker; the flow lives in one.
    cfg.workers = 2;
    let relay = relay::spawn(cfg).unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let me = client.local_addr().unwrap();

    let to_3 = binding_request(&format!("{}:old1", ufrag::mint(&keys, 7, 3, 0)));
    client.send_to(&to_3, relay.public_addr).unwrap();
    recv(&sink).expect("the first call's check did not reach transceiver 3");
    // The next call, placed on transceiver 4, still goes to 3 while the flow stands.
    let to_4 = binding_request(&format!("{}:new1", ufrag::mint(&keys, 7, 4, 0)));
    client.send_to(&to_4, relay.public_addr).unwrap();
    recv(&sink).expect("a known flow follows its owner");

    // Transceiver 4 cannot release 3's flow.
    other
        .send_to(&link_packet(me, b""), relay.link_addr)
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    client.send_to(&to_4, relay.public_addr).unwrap();
    recv(&sink).expect("another hop's release moved the flow");
    assert!(recv(&other).is_none());

    // Its owner can; the client hears nothing of it.
    sink.send_to(&link_packet(me, b""), relay.link_addr)
        .unwrap();
    assert!(recv(&client).is_none(), "the release reached the client");
    client.send_to(&to_4, relay.public_addr).unwrap();
    let (pkt, _) = recv(&other).expect("the next call's check was not routed afresh");
    assert_eq!(&pkt[LINK_HEADER_LEN..], &to_4[..]);
    assert!(recv(&sink).is_none());
    let c = relay.counters();
    assert_eq!((c.flows_released, c.flows_created), (1, 2), "{c:?}");
    relay.stop();
}
