//! The USERNAME peek: the first code to touch a datagram from a source the relay has never seen.
//!
//! Besides never panicking, the peek must hand back a borrowed, non-empty server ufrag that sits
//! right before a `:` in the packet, and it must agree with the ICE agent's own STUN parser:
//! if the two read different USERNAMEs, the relay would route a request to a transceiver whose
//! agent then judges it by a different name.

use rtc::stun::attributes::ATTR_USERNAME;
use rtc::stun::message::Message;

use crate::routing::stun::{PacketKind, classify, peek_binding_username};

pub fn stun_peek(data: &[u8]) {
    let Ok(server_ufrag) = peek_binding_username(data) else {
        return;
    };
    assert_eq!(classify(data[0]), PacketKind::Stun);
    assert!(!server_ufrag.is_empty());
    assert!(!server_ufrag.contains(&b':'));
    let start = server_ufrag.as_ptr() as usize - data.as_ptr() as usize;
    let end = start + server_ufrag.len();
    assert!(end < data.len(), "peek must borrow from the packet");
    assert_eq!(&data[start..end], server_ufrag);
    assert_eq!(
        data[end], b':',
        "the server ufrag ends at the USERNAME's first colon"
    );

    let mut m = Message::new();
    if m.unmarshal_binary(data).is_ok() {
        let username = m
            .get(ATTR_USERNAME)
            .expect("the ICE agent's parser sees no USERNAME where the relay routed on one");
        assert!(
            username.starts_with(server_ufrag) && username.get(server_ufrag.len()) == Some(&b':'),
            "relay and ICE agent read different USERNAMEs"
        );
    }

    // What the relay does next with it.
    super::route::check_decode(server_ufrag);
}
