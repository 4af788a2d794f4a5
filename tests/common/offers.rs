//! Offers as browsers send them, as text: for tests that post many offers and never connect
//! them, where building a peer connection per offer would cost more than the test.

/// What Chromium offers for one microphone and the `oai-events` channel, trimmed to the lines
/// an answerer reads. The ICE credentials are ours, so the test can sign checks.
pub const CLIENT_UFRAG: &str = "cL1e";
pub const CLIENT_PWD: &str = "abcdefghijklmnopqrstuvwx";

pub fn chromium_like_offer() -> String {
    [
        "v=0",
        "o=- 4611731400430051336 2 IN IP4 127.0.0.1",
        "s=-",
        "t=0 0",
        "a=group:BUNDLE 0 1",
        "a=msid-semantic: WMS",
        "m=audio 9 UDP/TLS/RTP/SAVPF 111",
        "c=IN IP4 0.0.0.0",
        "a=rtcp:9 IN IP4 0.0.0.0",
        &format!("a=ice-ufrag:{CLIENT_UFRAG}"),
        &format!("a=ice-pwd:{CLIENT_PWD}"),
        "a=ice-options:trickle",
        "a=fingerprint:sha-256 7B:8B:F0:65:5F:78:E2:51:3B:AC:6F:F3:3F:46:1B:35:DC:B8:5F:64:1A:24:C2:43:F0:A1:58:D0:A1:2C:19:08",
        "a=setup:actpass",
        "a=mid:0",
        "a=sendrecv",
        "a=msid:- mic",
        "a=rtcp-mux",
        "a=rtpmap:111 opus/48000/2",
        "a=fmtp:111 minptime=10;useinbandfec=1",
        "a=ssrc:1001 cname:test",
        "m=application 9 UDP/DTLS/SCTP webrtc-datachannel",
        "c=IN IP4 0.0.0.0",
        &format!("a=ice-ufrag:{CLIENT_UFRAG}"),
        &format!("a=ice-pwd:{CLIENT_PWD}"),
        "a=ice-options:trickle",
        "a=fingerprint:sha-256 7B:8B:F0:65:5F:78:E2:51:3B:AC:6F:F3:3F:46:1B:35:DC:B8:5F:64:1A:24:C2:43:F0:A1:58:D0:A1:2C:19:08",
        "a=setup:actpass",
        "a=mid:1",
        "a=sctp-port:5000",
        "a=max-message-size:262144",
        "",
    ]
    .join("\r\n")
}
