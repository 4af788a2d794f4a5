//! The relay's forwarding path allocates nothing per packet. A counting global allocator
//! measures the whole process while 20,000 datagrams cross an established flow both ways; the
//! only allocations allowed are a small constant (test plumbing, thread-locals), never one that
//! grows with the packet count.

mod common;

use common::binding_request;

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use voice_edge::membership::ClusterMembers;
use voice_edge::relay::{self, RelayConfig};
use voice_edge::routing::link::{LINK_HEADER_LEN, LinkHeader};
use voice_edge::routing::{RouteKeys, ufrag};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to the system allocator with the caller's arguments unchanged,
// so `Counting` upholds exactly the contract `System` does; counting touches only an atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's `GlobalAlloc::alloc` contract (non-zero size) is passed on as is.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from this allocator, i.e. from `System`, with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `dealloc`, `p` and `l` came from `System`; `n` is the caller's, checked
        // by the caller against `realloc`'s contract.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn forwarding_allocates_nothing_per_packet() {
    const PACKETS: usize = 10_000;
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let keys = RouteKeys::from_hex(0, &"17".repeat(32)).unwrap();
    let relay = relay::spawn(RelayConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        ClusterMembers::new(1).with(1, sink.local_addr().unwrap()),
        keys.clone(),
    ))
    .unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let client_addr = client.local_addr().unwrap();
    let mut buf = vec![0u8; 2048];
    let payload = [0x80u8; 200];
    let mut reply = vec![0u8; LINK_HEADER_LEN + 200];
    LinkHeader {
        ingress: 0,
        client: client_addr,
    }
    .write(&mut reply);
    reply[LINK_HEADER_LEN..].fill(0x81);

    // Create the flow and warm up both directions (first-use allocations happen here).
    client
        .send_to(
            &binding_request(&format!("{}:warm", ufrag::mint(&keys, 1, 1, 0))),
            relay.public_addr,
        )
        .unwrap();
    sink.recv_from(&mut buf).unwrap();
    let mut round = |n: usize| {
        for _ in 0..n {
            client.send_to(&payload, relay.public_addr).unwrap();
            sink.recv_from(&mut buf).unwrap();
            sink.send_to(&reply, relay.link_addr).unwrap();
            client.recv_from(&mut buf).unwrap();
        }
    };
    round(200);

    let before = ALLOCS.load(Ordering::Relaxed);
    round(PACKETS);
    let during = ALLOCS.load(Ordering::Relaxed) - before;
    let c = relay.counters();
    relay.stop();
    assert!(
        c.forwarded_in as usize > PACKETS && c.forwarded_out as usize > PACKETS,
        "{c:?}"
    );
    // 2 × PACKETS datagrams crossed the relay; allow a few allocations from housekeeping ticks.
    assert!(
        during < 50,
        "{during} allocations while forwarding {} datagrams",
        2 * PACKETS
    );
}
