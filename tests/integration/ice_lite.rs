//! ICE-lite answers: the transceiver selects its pair on the client's first authenticated
//! check, so a browser's DTLS ClientHello (sent as soon as *its* check succeeds) is accepted
//! instead of dropped until a later check carries USE-CANDIDATE (~50 ms with Chromium; see
//! `vendor/rtc-ice/PATCHED.md` and `bench/connect`).

use crate::common;

use std::net::UdpSocket;
use std::time::Duration;

use common::{CLIENT_UFRAG, chromium_like_offer};
use rtc::stun::attributes::ATTR_USERNAME;
use rtc::stun::fingerprint::FINGERPRINT;
use rtc::stun::integrity::MessageIntegrity;
use rtc::stun::message::{BINDING_REQUEST, BINDING_SUCCESS, Message, TransactionId};
use rtc::stun::textattrs::Username;
use voice_edge::allinone::AllInOneConfig;

fn sdp_attr<'a>(sdp: &'a str, name: &str) -> &'a str {
    sdp.lines()
        .find_map(|l| l.strip_prefix(&format!("a={name}:")))
        .unwrap_or_else(|| panic!("answer has no a={name}:\n{sdp}"))
        .trim()
}

/// A connectivity check as a controlling browser sends it *before* nominating: USERNAME,
/// PRIORITY, ICE-CONTROLLING, MESSAGE-INTEGRITY (the server's password), FINGERPRINT, and no
/// USE-CANDIDATE.
fn plain_check(server_ufrag: &str, server_pwd: &str) -> (Vec<u8>, [u8; 12]) {
    check(server_ufrag, server_pwd, false)
}

/// The same check with USE-CANDIDATE, as the browser nominates.
fn nominating_check(server_ufrag: &str, server_pwd: &str) -> (Vec<u8>, [u8; 12]) {
    check(server_ufrag, server_pwd, true)
}

fn check(server_ufrag: &str, server_pwd: &str, nominate: bool) -> (Vec<u8>, [u8; 12]) {
    let provider = rtc::crypto::default_provider().unwrap();
    let mut m = Message::new();
    let txid = TransactionId::new();
    let mut attrs: Vec<Box<dyn rtc::stun::message::Setter>> = vec![
        Box::new(BINDING_REQUEST),
        Box::new(txid),
        Box::new(Username::new(
            ATTR_USERNAME,
            format!("{server_ufrag}:{CLIENT_UFRAG}"),
        )),
        Box::new(rtc::ice::attributes::priority::PriorityAttr(2_130_706_431)),
        Box::new(rtc::ice::attributes::control::AttrControlling(42)),
    ];
    if nominate {
        attrs.push(Box::new(
            rtc::ice::attributes::use_candidate::UseCandidateAttr,
        ));
    }
    attrs.push(Box::new(
        MessageIntegrity::new_short_term_integrity_with_provider(
            server_pwd.to_owned(),
            provider.crypto(),
        ),
    ));
    attrs.push(Box::new(FINGERPRINT));
    m.build(&attrs).unwrap();
    (m.raw.clone(), txid.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_plain_check_selects_the_pair_without_waiting_for_nomination() {
    let server = common::start_local(AllInOneConfig::default()).await;
    let r = common::http_post(
        server.http_addr,
        "/v1/realtime/calls?model=loopback",
        "application/sdp",
        chromium_like_offer().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body.contains("a=ice-lite"));
    let (ufrag, pwd) = (sdp_attr(&r.body, "ice-ufrag"), sdp_attr(&r.body, "ice-pwd"));

    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let (check, txid) = plain_check(ufrag, pwd);
    client.send_to(&check, server.media_addr).unwrap();

    // The check is answered (the transceiver verified our signature with its password)...
    let mut buf = [0u8; 1500];
    let mut answered = false;
    for _ in 0..8 {
        let Ok((n, _)) = client.recv_from(&mut buf) else {
            break;
        };
        let mut m = Message::new();
        m.raw = buf[..n].to_vec();
        if m.decode().is_ok() && m.typ == BINDING_SUCCESS && m.transaction_id.0 == txid {
            answered = true;
            break;
        }
    }
    assert!(answered, "no binding success for the check");

    // ...and ICE is up on that pair already, with DTLS not started: the server is ready for
    // the ClientHello that a browser sends right after its own check succeeds.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let calls = common::http_get(server.http_addr, "/admin/calls").await;
        let v: serde_json::Value = serde_json::from_str(&calls.body).unwrap();
        let call = &v["calls"][0];
        if call["ice_ms"].is_u64() {
            assert_eq!(call["state"], "connecting", "{call}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "ICE did not select the pair on a plain check: {call}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A nominating check is answered at once: the agent does not wait for a check of its own
    // to succeed first (what cost Firefox, which nominates on its first check, 2-5 round trips).
    // The triggered check a plain check still gets is skipped over here.
    let (nominating, txid) = nominating_check(ufrag, pwd);
    client.send_to(&nominating, server.media_addr).unwrap();
    client
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut answered = false;
    while let Ok((n, _)) = client.recv_from(&mut buf) {
        let mut m = Message::new();
        m.raw = buf[..n].to_vec();
        if m.decode().is_ok() && m.typ == BINDING_SUCCESS && m.transaction_id.0 == txid {
            answered = true;
            break;
        }
    }
    assert!(
        answered,
        "the nominating check was not answered within 100 ms (nothing answered our checks)"
    );
    server.shutdown().await;
}
