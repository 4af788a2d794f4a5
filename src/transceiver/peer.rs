//! Builds one answering peer connection on the sans-I/O `rtc` core.
//!
//! The async `webrtc::PeerConnection` binds sockets per connection; a transceiver instead owns one
//! shared socket, so it configures the sans-I/O core directly: ICE-lite (a server with a known
//! address never needs to gather or probe), credentials chosen by us (the ufrag carries the
//! route), exactly one host candidate (the relay's public address), and the DTLS server role,
//! which lets the browser start its handshake as soon as ICE is up.

use std::net::SocketAddr;
use std::time::Instant;

use rtc::interceptor::Registry;
use rtc::media_stream::MediaStreamTrack;
use rtc::peer_connection::certificate::RTCCertificate;
use rtc::peer_connection::configuration::RTCConfigurationBuilder;
use rtc::peer_connection::configuration::interceptor_registry::configure_rtcp_reports;
use rtc::peer_connection::configuration::media_engine::MediaEngine;
use rtc::peer_connection::configuration::setting_engine::{
    SctpMaxMessageSize, SettingEngineBuilder,
};
use rtc::peer_connection::sdp::RTCSessionDescription;
use rtc::peer_connection::transport::{
    CandidateConfig, CandidateHostConfig, RTCDtlsRole, RTCIceCandidate,
};
use rtc::peer_connection::{RTCPeerConnection, RTCPeerConnectionBuilder};
// `rtc`'s `rtp_transceiver` is WebRTC's RTP transceiver (one m-line's sender and receiver), not
// the transceiver role this crate module is; the alias keeps the word for the role alone here.
use rtc::rtp_transceiver as rtp;
use rtp::RTCRtpSenderId;

use crate::audio::Codec;
use rtp::rtp_sender::{
    RTCRtpCodec, RTCRtpCodecParameters, RTCRtpCodingParameters, RTCRtpEncodingParameters,
    RtpCodecKind,
};

// The setting engine below keeps rtc's SCTP max-message-size, and the Realtime engine sizes the
// session so that `session.updated` fits one message of it: the two must agree.
const _: () = assert!(
    crate::realtime::session_limits::DATA_CHANNEL_MESSAGE_LIMIT
        == SctpMaxMessageSize::DEFAULT_MESSAGE_SIZE as usize
);

/// Opus as browsers offer it; 111 is Chromium's and Firefox's payload type, and the answer
/// follows the offer's numbering anyway. Shared with the load generator and the tests' client,
/// so every side of a test call negotiates the same codec line.
pub fn opus() -> RTCRtpCodecParameters {
    codec_parameters(Codec::Opus)
}

/// A codec's line as `rtc` registers it: Opus as browsers offer it, G.711 on its static payload
/// type (0 PCMU, 8 PCMA), 8 kHz, as Chromium offers them.
pub fn codec_parameters(codec: Codec) -> RTCRtpCodecParameters {
    let (clock_rate, channels, fmtp, payload_type) = match codec {
        Codec::Opus => (48000, 2, "minptime=10;useinbandfec=1", 111),
        Codec::Pcmu => (8000, 0, "", 0),
        Codec::Pcma => (8000, 0, "", 8),
        // Never offered: the WebSocket transport's format, kept here only so every codec has
        // a line (a dynamic payload type, as L16 would be).
        Codec::Pcm24 => (24000, 1, "", 96),
        Codec::Pcm16 => (16000, 1, "", 97),
    };
    RTCRtpCodecParameters {
        rtp_codec: RTCRtpCodec {
            mime_type: codec.mime_type().to_owned(),
            clock_rate,
            channels,
            sdp_fmtp_line: fmtp.to_owned(),
            rtcp_feedback: vec![],
        },
        payload_type,
    }
}

pub struct AnsweredPeer {
    pub pc: RTCPeerConnection,
    pub answer_sdp: String,
    pub audio_sender: RTCRtpSenderId,
    pub audio_ssrc: u32,
    /// The one audio codec the answer carries.
    pub codec: Codec,
}

pub struct PeerParams<'a> {
    pub offer_sdp: String,
    pub ufrag: String,
    pub pwd: String,
    /// The one address the client is told to send to: the relay's public address, or the
    /// transceiver's own socket when clients connect directly.
    pub candidate: SocketAddr,
    pub certificate: &'a RTCCertificate,
    /// Names the answer's media stream, so `ontrack` gets `e.streams[0]` (the Realtime SDK reads
    /// it to play audio).
    pub stream_id: &'a str,
}

/// Why an offer could not be answered; each maps to a client-visible 4xx.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("the offer is not valid SDP: {0}")]
    BadSdp(String),
    #[error(
        "the offer has no audio m-line this server can answer (Opus, PCMU or PCMA over UDP/TLS/RTP/SAVPF)"
    )]
    NoAudio,
    #[error("could not answer the offer: {0}")]
    Negotiation(String),
    /// A stored session with no room for its recording (see [`crate::call::recording`]).
    /// Its message is [`crate::call::recording::no_room`]'s.
    #[error("{0}")]
    OverBudget(String),
}

pub fn answer(now: Instant, p: PeerParams<'_>) -> Result<AnsweredPeer, AnswerError> {
    // One codec, chosen from the offer as signaling's check chose it (Opus if offered, else the
    // client's first G.711 codec): the answer then names exactly that one, and the media side
    // knows what every packet is.
    let codec = crate::sdp_offer::choose_audio_codec(&p.offer_sdp);
    let offer = RTCSessionDescription::offer(p.offer_sdp)
        .map_err(|e| AnswerError::BadSdp(e.to_string()))?;
    let parsed = offer
        .unmarshal()
        .map_err(|e| AnswerError::BadSdp(e.to_string()))?;
    if !parsed
        .media_descriptions
        .iter()
        .any(|m| m.media_name.media == "audio")
    {
        return Err(AnswerError::NoAudio);
    }
    // Valid SDP (else BadSdp above) whose audio offers nothing we answer.
    let (codec, _) = codec.map_err(|_| AnswerError::NoAudio)?;

    let neg = |e: rtc::shared::error::Error| AnswerError::Negotiation(e.to_string());
    let mut media_engine = MediaEngine::default();
    media_engine
        .register_codec(codec_parameters(codec), RtpCodecKind::Audio)
        .map_err(neg)?;
    // Only RTCP sender/receiver reports (the browser's RTT and remote-outbound stats). Not the
    // defaults' NACK (browsers negotiate no NACK for Opus, yet the responder keeps a buffer of
    // sent packets per call) nor TWCC feedback (no congestion control to feed on a fixed-rate
    // voice stream): at 500 calls they cost about a fifth of the transceiver's CPU and memory.
    let registry = configure_rtcp_reports(Registry::new());

    // ICE-lite answers checks from wherever they come, so remote candidates are never needed;
    // resolving an offer's `.local` ones would only send mDNS queries on the client's say-so
    // (one offer with 1,000 of them made 10,020).
    let setting_engine = SettingEngineBuilder::new()
        .with_lite(true)
        .with_multicast_dns_mode(rtc::ice::mdns::MulticastDnsMode::Disabled)
        .with_ice_credentials(p.ufrag, p.pwd)
        .with_answering_dtls_role(RTCDtlsRole::Server)
        // No HelloVerifyRequest: its cookie proves the client's address, which the check that
        // let its ClientHello reach this stack already proved (vendor/rtc-dtls/PATCHED.md).
        // One round trip less before the call connects.
        .with_dtls_skip_hello_verify(true)
        .build();
    let config = RTCConfigurationBuilder::new()
        .with_certificates(vec![p.certificate.clone()])
        .build();
    let mut pc = RTCPeerConnectionBuilder::new()
        .with_configuration(config)
        .with_setting_engine(setting_engine)
        .with_media_engine(media_engine)
        .with_interceptor_registry(registry)
        .build(now)
        .map_err(neg)?;

    let audio_ssrc = rand::random::<u32>();
    let track = MediaStreamTrack::new(
        p.stream_id.to_owned(),
        format!("{}-audio", p.stream_id),
        "assistant audio".to_owned(),
        RtpCodecKind::Audio,
        vec![RTCRtpEncodingParameters {
            rtp_coding_parameters: RTCRtpCodingParameters {
                ssrc: Some(audio_ssrc),
                ..Default::default()
            },
            codec: codec_parameters(codec).rtp_codec,
            ..Default::default()
        }],
    );
    let audio_sender = pc.add_track(track).map_err(neg)?;

    pc.set_remote_description(now, offer).map_err(neg)?;

    add_host_candidate(&mut pc, p.candidate).map_err(neg)?;

    let answer_sdp = apply_answer(&mut pc, now)?;
    if !answers_audio(&answer_sdp) {
        return Err(AnswerError::NoAudio);
    }
    Ok(AnsweredPeer {
        pc,
        answer_sdp,
        audio_sender,
        audio_ssrc,
        codec,
    })
}

/// Adds `addr` as a UDP host candidate (component 1: every side here uses rtcp-mux). Shared by
/// the answerer, the load generator's offerer and the endpoint's virtual-time peers, so all of
/// them describe an address the same way.
pub fn add_host_candidate(
    pc: &mut RTCPeerConnection,
    addr: SocketAddr,
) -> Result<(), rtc::shared::error::Error> {
    let candidate = CandidateHostConfig {
        base_config: CandidateConfig {
            network: "udp".to_owned(),
            address: addr.ip().to_string(),
            port: addr.port(),
            component: 1,
            ..Default::default()
        },
        ..Default::default()
    }
    .new_candidate_host()?;
    pc.add_local_candidate(RTCIceCandidate::from(&candidate).to_json()?)
}

/// Answers a new offer on a live call: an ICE restart (new client credentials, often from a new
/// network) or any other renegotiation. DTLS, SRTP and the data channel carry on; our own ufrag
/// stays the same, because it carries the route and the relay must keep finding this call.
/// (RFC 8839 asks the answerer for fresh credentials on a restart; browsers accept unchanged
/// ones, and changing the routed ufrag would break every flow the relays know.)
pub fn reanswer(
    pc: &mut RTCPeerConnection,
    now: Instant,
    offer_sdp: String,
) -> Result<String, AnswerError> {
    let offer =
        RTCSessionDescription::offer(offer_sdp).map_err(|e| AnswerError::BadSdp(e.to_string()))?;
    offer
        .unmarshal()
        .map_err(|e| AnswerError::BadSdp(e.to_string()))?;
    let neg = |e: rtc::shared::error::Error| AnswerError::Negotiation(e.to_string());
    pc.set_remote_description(now, offer).map_err(neg)?;
    let answer = apply_answer(pc, now)?;
    // The peer connection has taken this answer already, so the call is likely lost either way;
    // the client is at least told so, instead of getting a 200 it cannot use.
    if !answers_audio(&answer) {
        return Err(AnswerError::NoAudio);
    }
    Ok(answer)
}

/// Whether an answer accepts audio. The `rtc` answerer does not refuse an offer it cannot match:
/// it answers with no live audio m-line (for a re-offer that moves audio to another mid, with no
/// m-line at all), which no client can use.
fn answers_audio(answer: &str) -> bool {
    answer.contains("m=audio") && !answer.contains("m=audio 0 ")
}

/// Creates the answer to the remote offer just set, applies it, and returns it as sent.
fn apply_answer(pc: &mut RTCPeerConnection, now: Instant) -> Result<String, AnswerError> {
    let neg = |e: rtc::shared::error::Error| AnswerError::Negotiation(e.to_string());
    let answer = pc.create_answer(None).map_err(neg)?;
    pc.set_local_description(now, answer).map_err(neg)?;
    let sdp = pc
        .local_description()
        .map(|d| d.sdp)
        .ok_or_else(|| AnswerError::Negotiation("no local description".into()))?;
    Ok(drop_rtcp_component_candidates(&sdp))
}

/// The core writes every candidate twice, for RTP (component 1) and RTCP (component 2). Our
/// answers always carry `a=rtcp-mux` (browsers require it with BUNDLE), so component 2 can never
/// be used; dropping it keeps the answer to exactly one candidate, the relay.
fn drop_rtcp_component_candidates(sdp: &str) -> String {
    let mut out = String::with_capacity(sdp.len());
    for line in sdp.split_inclusive('\n') {
        let is_rtcp_candidate = line
            .strip_prefix("a=candidate:")
            .and_then(|rest| rest.split_whitespace().nth(1))
            == Some("2");
        if !is_rtcp_candidate {
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_component_one_candidates() {
        let sdp = "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=rtcp-mux\r\n\
                   a=candidate:1 1 udp 2130706431 127.0.0.1 3478 typ host\r\n\
                   a=candidate:1 2 udp 2130706431 127.0.0.1 3478 typ host\r\na=sendrecv\r\n";
        let out = drop_rtcp_component_candidates(sdp);
        assert_eq!(out.matches("a=candidate").count(), 1);
        assert!(out.contains("a=candidate:1 1 udp"));
        assert!(out.ends_with("a=sendrecv\r\n"));
    }
}
