//! An SDP offer, from the HTTP body to a registered call: signaling's cheap checks, then the
//! transceiver answering it on the `rtc` core, then a new offer on the live call (an ICE restart)
//! and a hang-up.
//!
//! Anyone holding a key (or an ephemeral one minted for a browser) can send an offer, and the
//! answer runs on a transceiver's socket loop, where a panic takes every call of that worker
//! down. So the whole path is driven, not just the parser, through [`Endpoint`], the API the
//! worker itself calls. Beyond "never panics": a refused offer leaves no session behind, and an
//! accepted one is answered with a ufrag that routes back to this transceiver and with no
//! candidate but the one address it advertises, and a renegotiation keeps that ufrag.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::Instant;

use crate::routing::ufrag;
use crate::sdp_offer::{MAX_OFFER_BYTES, check_offer};
use crate::transceiver::endpoint::Endpoint;
use crate::transceiver::{AnswerCandidate, Lifecycle, TransceiverConfig};

const CLUSTER: u16 = 7;
const TRANSCEIVER: u16 = 3;
const WORKER: u8 = 1;
/// A documentation address (RFC 5737): the answer must name it and nothing else.
const RELAY: &str = "192.0.2.1:3478";

thread_local! {
    /// One endpoint per thread, as a worker has: building it means generating a DTLS key, which
    /// would dwarf the work under test if done per input.
    static ENDPOINT: RefCell<Endpoint> = RefCell::new(endpoint());
}

fn endpoint() -> Endpoint {
    let relay: SocketAddr = RELAY.parse().unwrap();
    let cfg = TransceiverConfig {
        cluster: CLUSTER,
        id: TRANSCEIVER,
        bind: "127.0.0.1:0".parse().unwrap(),
        candidate: AnswerCandidate::Relay(relay),
        route_keys: super::route::keys().relay.clone(),
        lifecycle: Lifecycle::default(),
        workers: WORKER + 1,
        capacity: Default::default(),
        link_sources: Default::default(),
        upstream: None,
    };
    let certificate =
        crate::transceiver::generate_certificate().expect("DTLS certificate for the endpoint");
    Endpoint::new(Instant::now(), cfg, WORKER, relay, certificate)
}

pub fn sdp_offer(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A second session description in the input is the call's next offer (`PATCH`), as a
    // browser's ICE restart follows its first offer; without one, the first is sent again.
    let (offer, next) = match text.find("\nv=0") {
        Some(i) => (&text[..=i], &text[i + 1..]),
        None => (text, text),
    };
    if !admitted(offer) {
        return;
    }
    ENDPOINT.with_borrow_mut(|ep| {
        let now = Instant::now();
        let before = ep.len();
        match ep.create_call(now, offer.to_owned(), crate::model::ModelKind::Echo.into()) {
            Err(_) => assert_eq!(ep.len(), before, "a refused offer left a session behind"),
            Ok(call) => {
                assert_eq!(ep.len(), before + 1);
                let ufrag = check_answer(&call.answer_sdp);
                if admitted(next) {
                    let answer = ep
                        .renegotiate(now, &call.call_id, next.to_owned())
                        .expect("the call just created is live");
                    if let Ok(answer) = answer {
                        assert_eq!(
                            check_answer(&answer),
                            ufrag,
                            "a renegotiation changed the ufrag the relays route by"
                        );
                    }
                }
                assert!(ep.hangup(now, &call.call_id));
                assert_eq!(ep.len(), before, "hang-up left a session behind");
            }
        }
        // Close notifies and the like: nothing reads them here, and they must not pile up.
        while ep.poll_transmit().is_some() {}
        while ep.poll_job().is_some() {}
    });
}

/// What signaling lets through to a transceiver: at most the body limit (`read_offer`), text that
/// passes `check_offer`.
fn admitted(offer: &str) -> bool {
    offer.len() <= MAX_OFFER_BYTES && check_offer(offer).is_ok()
}

/// What every answer must say whatever the offer was: a routable ufrag, which it returns, and
/// only our address.
fn check_answer(answer: &str) -> String {
    let mut ufrags = answer
        .lines()
        .filter_map(|l| l.strip_prefix("a=ice-ufrag:"));
    let ufrag = ufrags.next().expect("the answer has an ice-ufrag");
    assert!(
        ufrags.all(|u| u == ufrag),
        "one call answers with one ufrag"
    );
    let hint = ufrag::decode(ufrag.trim_end().as_bytes(), &super::route::keys().relay)
        .expect("the answer's ufrag must route");
    assert_eq!(
        (hint.cluster, hint.transceiver, hint.worker),
        (CLUSTER, TRANSCEIVER, WORKER)
    );
    let relay: SocketAddr = RELAY.parse().unwrap();
    let (ip, port) = (relay.ip().to_string(), relay.port().to_string());
    for c in answer
        .lines()
        .filter_map(|l| l.strip_prefix("a=candidate:"))
    {
        let f: Vec<&str> = c.split_whitespace().collect();
        assert_eq!(f.get(1), Some(&"1"), "RTCP-component candidate in {c:?}");
        assert_eq!(
            (f.get(4), f.get(5)),
            (Some(&ip.as_str()), Some(&port.as_str())),
            "the answer names an address other than the relay: {c:?}"
        );
    }
    ufrag.trim_end().to_owned()
}
