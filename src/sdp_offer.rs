//! Whether this server can honour an SDP offer, decided from the text alone before a
//! transceiver spends anything on it.
//!
//! The `rtc` core answers many offers it cannot then connect: a DTLS role or fingerprint it will
//! not use, a nonsensical SCTP port. Such a call got `201` and an answer, then could only time
//! out, and the client learnt nothing. This module names the problem instead, so signaling can
//! refuse with a `400`. It is pure (text in, verdict out) so it can be unit-tested against real
//! browsers' offers (`fixtures/sdp/`) and fuzzed.
//!
//! What it requires, and why:
//! - an audio m-line with a port, over DTLS-SRTP (`UDP/TLS/RTP/SAVPF`), offering Opus
//!   (`opus/48000/2`) or G.711 (`PCMU/8000`, `PCMA/8000`, or their static payload types 0 and 8
//!   without an `a=rtpmap`): the codecs and the transport a transceiver answers. The answer
//!   carries one codec, chosen by [`choose_audio_codec`]: Opus whenever it is offered (wideband,
//!   with loss concealment and FEC), else the first of PCMU and PCMA in the m-line's format order,
//!   which is the client's preference (a telephony client, or a browser whose
//!   `setCodecPreferences` left only G.711);
//! - one sha-256 certificate fingerprint: `rtc` takes the session-level one or each section's
//!   first, refuses the offer if they differ, and verifies the DTLS certificate against sha-256
//!   only, so md5/sha-1 (too weak) and sha-384/512 (not verified) cannot complete a handshake;
//! - `a=setup` of `actpass` or `active`, or none (RFC 4145's default is `active`): the server is
//!   always the DTLS server (its answers say `a=setup:passive`), so the client must be able to be
//!   the DTLS client;
//! - ICE credentials within RFC 8839's bounds (the client's ufrag is half of every STUN USERNAME);
//! - a data channel's `a=sctp-port` in 1–65535 and `a=max-message-size` a number;
//! - at most [`MAX_MEDIA_SECTIONS`] m-lines.

use crate::audio::Codec;

/// Offers from browsers are a few KB; anything near this is not an offer.
pub const MAX_OFFER_BYTES: usize = 64 * 1024;

/// A voice call is an audio line and a data channel; a few more (video, a second audio) are
/// answered as rejected. Dozens of m-lines are no real client's offer, and each costs the core
/// a transceiver to negotiate.
pub const MAX_MEDIA_SECTIONS: usize = 16;

/// RFC 8839 §5.4: `ice-ufrag` is 4–256 ice-chars, `ice-pwd` 22–256.
const UFRAG_LEN: std::ops::RangeInclusive<usize> = 4..=256;
const PWD_LEN: std::ops::RangeInclusive<usize> = 22..=256;

/// What an acceptable offer carries, for callers that log or fuzz it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferSummary {
    pub media_sections: usize,
    /// The codec the answer will carry (see [`choose_audio_codec`]).
    pub audio_codec: Codec,
    /// Its payload type on the audio line the call will use.
    pub audio_payload_type: u8,
    /// Whether it opens a data channel (`oai-events`); audio alone is a valid call too.
    pub data_channel: bool,
}

/// Why an offer cannot be honoured; each message names the line to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfferError {
    #[error("the body is not an SDP offer (it must start with v=0)")]
    NotSdp,
    #[error("line {line} is not an SDP line (<letter>=<value>): {text:?}")]
    BadLine { line: usize, text: String },
    #[error("line {line}: the m-line {text:?} is not <media> <port> <proto> <format>…")]
    BadMediaLine { line: usize, text: String },
    #[error("the offer has {0} m-lines; at most {MAX_MEDIA_SECTIONS} are answered")]
    TooManyMediaSections(usize),
    #[error("the offer has no audio m-line")]
    NoAudio,
    #[error("every audio m-line is rejected (port 0); the call needs one to carry audio")]
    AudioRejected,
    #[error(
        "the audio m-line's transport is {0:?}; this server answers DTLS-SRTP only (UDP/TLS/RTP/SAVPF)"
    )]
    AudioNotDtlsSrtp(String),
    #[error(
        "the audio m-line offers no codec answered here: Opus (a=rtpmap:<pt> opus/48000/2), PCMU (0, PCMU/8000) or PCMA (8, PCMA/8000)"
    )]
    NoSupportedCodec,
    #[error(
        "the offer has no a=fingerprint line; DTLS-SRTP needs the client's certificate fingerprint"
    )]
    NoFingerprint,
    #[error("a=fingerprint:{0} is too weak a hash; offer a sha-256 fingerprint")]
    WeakFingerprint(String),
    #[error(
        "a=fingerprint:{0} cannot be verified here (its DTLS stack checks `sha-256`, spelled so, only); offer a sha-256 fingerprint, as browsers do"
    )]
    UnsupportedFingerprint(String),
    #[error("a=fingerprint {0:?} is not sha-256 and 32 hex bytes separated by colons")]
    MalformedFingerprint(String),
    #[error(
        "the a=fingerprint lines differ between the session and its m-lines; one DTLS certificate serves them all"
    )]
    ConflictingFingerprints,
    #[error(
        "a=setup:passive asks this server to be the DTLS client, but it is always the DTLS server (its answers say a=setup:passive); offer a=setup:actpass or a=setup:active"
    )]
    SetupPassive,
    #[error(
        "a=setup:{0} is not a DTLS role this server can answer; offer a=setup:actpass or a=setup:active"
    )]
    BadSetup(String),
    #[error("the offer has no a=ice-ufrag and a=ice-pwd; ICE needs the client's credentials")]
    NoIceCredentials,
    #[error("a=ice-{0} is not {1} characters of letters, digits, '+' and '/' (RFC 8839)")]
    BadIceCredential(&'static str, &'static str),
    #[error("a=sctp-port:{0} is not a port (1-65535)")]
    BadSctpPort(String),
    #[error("a=max-message-size:{0} is not a size in bytes")]
    BadMaxMessageSize(String),
}

impl OfferError {
    /// The Realtime error `code`: the long-standing ones for the three most common mistakes,
    /// `invalid_offer` for everything else (the message says which line).
    pub fn code(&self) -> &'static str {
        match self {
            OfferError::NotSdp => "invalid_sdp",
            OfferError::NoAudio | OfferError::AudioRejected => "no_audio",
            OfferError::NoFingerprint => "no_dtls_fingerprint",
            _ => "invalid_offer",
        }
    }
}

/// One SDP section: the session (before the first m-line) or a media section.
#[derive(Default)]
struct Section<'a> {
    /// The m-line's fields; `None` for the session section.
    media: Option<MediaLine<'a>>,
    attributes: Vec<(&'a str, Option<&'a str>)>,
}

struct MediaLine<'a> {
    kind: &'a str,
    port: &'a str,
    proto: &'a str,
    formats: Vec<&'a str>,
}

impl<'a> Section<'a> {
    fn attrs<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'a str> + 's {
        self.attributes
            .iter()
            .filter(move |(k, _)| *k == name)
            .map(|(_, v)| v.unwrap_or(""))
    }

    fn attr(&self, name: &str) -> Option<&'a str> {
        self.attrs(name).next()
    }
}

/// Checks `sdp` (an offer) against what this server can answer; see the module docs.
pub fn check_offer(sdp: &str) -> Result<OfferSummary, OfferError> {
    let sections = parse(sdp)?;
    let (session, media) = sections.split_first().expect("parse yields the session");
    if media.len() > MAX_MEDIA_SECTIONS {
        return Err(OfferError::TooManyMediaSections(media.len()));
    }
    let (audio_codec, audio_payload_type) = check_audio(media)?;
    check_fingerprint(session, media)?;
    for s in &sections {
        for role in s.attrs("setup") {
            check_setup(role)?;
        }
    }
    check_ice(session, media)?;
    let mut data_channel = false;
    for s in &sections {
        for port in s.attrs("sctp-port") {
            match port.trim().parse::<u16>() {
                Ok(p) if p > 0 => {}
                _ => return Err(OfferError::BadSctpPort(port.to_owned())),
            }
        }
        for size in s.attrs("max-message-size") {
            if size.trim().parse::<u64>().is_err() {
                return Err(OfferError::BadMaxMessageSize(size.to_owned()));
            }
        }
        data_channel |= s
            .media
            .as_ref()
            .is_some_and(|m| m.kind == "application" && m.port != "0");
    }
    Ok(OfferSummary {
        media_sections: media.len(),
        audio_codec,
        audio_payload_type,
        data_channel,
    })
}

/// The codec (and its payload type) the answer to `sdp` carries: Opus if the first usable audio
/// m-line offers it, else the first G.711 codec in its format order. The transceiver builds its
/// media engine with this codec alone, so the answer names exactly one.
pub fn choose_audio_codec(sdp: &str) -> Result<(Codec, u8), OfferError> {
    let sections = parse(sdp)?;
    check_audio(&sections[1..])
}

fn parse(sdp: &str) -> Result<Vec<Section<'_>>, OfferError> {
    let mut lines = sdp
        .trim_start()
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .enumerate()
        .filter(|(_, l)| !l.is_empty());
    if lines.next().map(|(_, l)| l) != Some("v=0") {
        return Err(OfferError::NotSdp);
    }
    let mut sections = vec![Section::default()];
    for (i, line) in lines {
        let line_no = i + 1;
        let bad = || OfferError::BadLine {
            line: line_no,
            text: clip(line),
        };
        let (kind, value) = line.split_once('=').ok_or_else(bad)?;
        if kind.len() != 1 || !kind.as_bytes()[0].is_ascii_lowercase() {
            return Err(bad());
        }
        match kind {
            "m" => sections.push(Section {
                media: Some(media_line(value).ok_or_else(|| OfferError::BadMediaLine {
                    line: line_no,
                    text: clip(line),
                })?),
                attributes: vec![],
            }),
            "a" => {
                let attr = match value.split_once(':') {
                    Some((k, v)) => (k, Some(v)),
                    None => (value, None),
                };
                sections
                    .last_mut()
                    .expect("never empty")
                    .attributes
                    .push(attr);
            }
            _ => {}
        }
    }
    Ok(sections)
}

/// At most this much of a bad line is quoted back: enough to find it, not an echo of the body.
fn clip(line: &str) -> String {
    line.chars().take(80).collect()
}

fn media_line(value: &str) -> Option<MediaLine<'_>> {
    let mut f = value.split_whitespace();
    let (kind, port, proto) = (f.next()?, f.next()?, f.next()?);
    let formats: Vec<&str> = f.collect();
    // `<port>` or `<port>/<count>`.
    let number = port.split_once('/').map_or(port, |(p, _)| p);
    if formats.is_empty() || number.parse::<u16>().is_err() {
        return None;
    }
    Some(MediaLine {
        kind,
        port: number,
        proto,
        formats,
    })
}

/// The first audio line with a port must be DTLS-SRTP and offer a codec we answer; returns the
/// one chosen (see the module docs) and its payload type.
fn check_audio(media: &[Section<'_>]) -> Result<(Codec, u8), OfferError> {
    let mut audio = media
        .iter()
        .filter(|s| s.media.as_ref().is_some_and(|m| m.kind == "audio"))
        .peekable();
    if audio.peek().is_none() {
        return Err(OfferError::NoAudio);
    }
    let section = audio
        .find(|s| s.media.as_ref().is_some_and(|m| m.port != "0"))
        .ok_or(OfferError::AudioRejected)?;
    let m = section.media.as_ref().expect("filtered on media");
    if !["UDP/TLS/RTP/SAVPF", "UDP/TLS/RTP/SAVP"]
        .iter()
        .any(|p| p.eq_ignore_ascii_case(m.proto))
    {
        return Err(OfferError::AudioNotDtlsSrtp(m.proto.to_owned()));
    }
    // Each listed format's codec, in the m-line's (the client's preference) order: its
    // `a=rtpmap` if it has one, else what a static payload type stands for.
    let offered: Vec<(Codec, u8)> = m
        .formats
        .iter()
        .filter_map(|f| {
            let pt = f.parse::<u8>().ok()?;
            let rtpmap = section.attrs("rtpmap").find_map(|v| {
                let (p, encoding) = v.split_once(' ')?;
                (p.trim() == *f).then_some(encoding)
            });
            let codec = match rtpmap {
                Some(encoding) => Codec::from_rtpmap(encoding),
                None => Codec::from_static_payload_type(pt),
            }?;
            Some((codec, pt))
        })
        .collect();
    offered
        .iter()
        .find(|(c, _)| *c == Codec::Opus)
        .or_else(|| offered.first())
        .copied()
        .ok_or(OfferError::NoSupportedCodec)
}

/// Mirrors `rtc`: the session's first fingerprint and each m-line's first must agree, and that
/// one must be sha-256, the only hash its DTLS transport verifies.
fn check_fingerprint(session: &Section<'_>, media: &[Section<'_>]) -> Result<(), OfferError> {
    let mut found = session
        .attr("fingerprint")
        .into_iter()
        .chain(media.iter().filter_map(|s| s.attr("fingerprint")));
    let first = found.next().ok_or(OfferError::NoFingerprint)?;
    if found.any(|f| f != first) {
        return Err(OfferError::ConflictingFingerprints);
    }
    let mut parts = first.split(' ');
    let (Some(hash), Some(value), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(OfferError::MalformedFingerprint(clip(first)));
    };
    // `rtc` compares the name case-sensitively, so `SHA-256` would fail the handshake too.
    if hash != "sha-256" {
        return Err(match hash.to_ascii_lowercase().as_str() {
            "md2" | "md5" | "sha-1" | "sha-224" => OfferError::WeakFingerprint(clip(hash)),
            _ => OfferError::UnsupportedFingerprint(clip(hash)),
        });
    }
    let bytes: Vec<&str> = value.split(':').collect();
    let hex_byte = |b: &&str| b.len() == 2 && b.bytes().all(|c| c.is_ascii_hexdigit());
    if bytes.len() != 32 || !bytes.iter().all(hex_byte) {
        return Err(OfferError::MalformedFingerprint(clip(first)));
    }
    Ok(())
}

fn check_setup(role: &str) -> Result<(), OfferError> {
    match role.trim().to_ascii_lowercase().as_str() {
        "actpass" | "active" => Ok(()),
        "passive" => Err(OfferError::SetupPassive),
        _ => Err(OfferError::BadSetup(clip(role))),
    }
}

/// The credentials `rtc` will use: the session's, else the first m-line's that has them.
fn check_ice(session: &Section<'_>, media: &[Section<'_>]) -> Result<(), OfferError> {
    let find = |name: &str| {
        session
            .attr(name)
            .or_else(|| media.iter().find_map(|s| s.attr(name)))
    };
    let (Some(ufrag), Some(pwd)) = (find("ice-ufrag"), find("ice-pwd")) else {
        return Err(OfferError::NoIceCredentials);
    };
    let ice_chars = |s: &str| {
        s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
    };
    if !UFRAG_LEN.contains(&ufrag.len()) || !ice_chars(ufrag) {
        return Err(OfferError::BadIceCredential("ufrag", "4-256"));
    }
    if !PWD_LEN.contains(&pwd.len()) || !ice_chars(pwd) {
        return Err(OfferError::BadIceCredential("pwd", "22-256"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHROMIUM: &str = include_str!("../fixtures/sdp/chromium-offer.sdp");
    const FIREFOX: &str = include_str!("../fixtures/sdp/firefox-offer.sdp");

    /// Chromium's offer with `from` replaced by `to` (which must occur).
    fn chromium_with(from: &str, to: &str) -> String {
        assert!(CHROMIUM.contains(from), "{from:?} is not in the fixture");
        CHROMIUM.replace(from, to)
    }

    fn err(sdp: &str) -> OfferError {
        check_offer(sdp).expect_err("the offer was accepted")
    }

    #[test]
    fn real_browser_offers_are_accepted() {
        let c = check_offer(CHROMIUM).unwrap();
        assert_eq!(
            c,
            OfferSummary {
                media_sections: 2,
                audio_codec: Codec::Opus,
                audio_payload_type: 111,
                data_channel: true
            }
        );
        // Firefox: session-level fingerprint, Opus on 109, .local candidates, LF-only works too.
        let f = check_offer(FIREFOX).unwrap();
        assert_eq!(
            (f.audio_codec, f.audio_payload_type, f.data_channel),
            (Codec::Opus, 109, true)
        );
        assert!(check_offer(&FIREFOX.replace("\r\n", "\n")).is_ok());
        // Audio alone (no data channel) and a=setup:active are fine.
        let audio_only = CHROMIUM.split("m=application").next().unwrap();
        assert!(!check_offer(audio_only).unwrap().data_channel);
        assert!(check_offer(&CHROMIUM.replace("a=setup:actpass", "a=setup:active")).is_ok());
        // No a=setup at all: RFC 4145's default, active.
        assert!(check_offer(&CHROMIUM.replace("a=setup:actpass\r\n", "")).is_ok());
    }

    #[test]
    fn dtls_roles_the_server_cannot_take_are_refused() {
        assert_eq!(
            err(&chromium_with("a=setup:actpass", "a=setup:passive")),
            OfferError::SetupPassive
        );
        for bogus in ["bogus", "holdconn", ""] {
            let e = err(&chromium_with(
                "a=setup:actpass",
                &format!("a=setup:{bogus}"),
            ));
            assert!(matches!(e, OfferError::BadSetup(_)), "{bogus}: {e}");
            assert!(e.to_string().contains("a=setup:"), "{e}");
        }
        // Only in the second m-line: still refused.
        let (audio, data) = CHROMIUM.split_once("m=application").unwrap();
        let mixed = format!("{audio}m=application{}", data.replace("actpass", "passive"));
        assert_eq!(err(&mixed), OfferError::SetupPassive);
    }

    #[test]
    fn fingerprints_must_be_sha256() {
        let fp = CHROMIUM
            .lines()
            .find_map(|l| l.strip_prefix("a=fingerprint:"))
            .unwrap();
        let swap = |to: &str| CHROMIUM.replace(fp, to);
        let sha1 = "sha-1 AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01";
        assert_eq!(
            err(&swap(sha1)),
            OfferError::WeakFingerprint("sha-1".into())
        );
        assert!(matches!(
            err(&swap("md5 AB:CD")),
            OfferError::WeakFingerprint(_)
        ));
        let sha512 = format!("sha-512 {}", vec!["AB"; 64].join(":"));
        let e = err(&swap(&sha512));
        assert!(matches!(e, OfferError::UnsupportedFingerprint(_)), "{e}");
        for bad in [
            "sha-256 00:11",
            "sha-256 ZZ:CD:D6:62:77:A7:8F:8A:52:3E:6A:36:FF:09:40:02:4C:28:7B:DF:98:8B:88:F8:58:26:EB:D4:4E:79:F6:CB",
            "sha-256",
        ] {
            assert!(
                matches!(err(&swap(bad)), OfferError::MalformedFingerprint(_)),
                "{bad}"
            );
        }
        // Hex in either case is the same fingerprint; the hash's name must be spelled as `rtc`
        // compares it.
        assert!(check_offer(&CHROMIUM.replace(fp, &fp.to_ascii_lowercase())).is_ok());
        assert!(matches!(
            err(&CHROMIUM.replace("sha-256", "SHA-256")),
            OfferError::UnsupportedFingerprint(_)
        ));
        // Missing, or different in the two m-lines.
        let none: String = CHROMIUM
            .split_inclusive('\n')
            .filter(|l| !l.starts_with("a=fingerprint"))
            .collect();
        assert_eq!(err(&none), OfferError::NoFingerprint);
        let (audio, data) = CHROMIUM.split_once("m=application").unwrap();
        let other = format!("sha-256 {}", vec!["00"; 32].join(":"));
        let two = format!("{audio}m=application{}", data.replace(fp, &other));
        assert_eq!(err(&two), OfferError::ConflictingFingerprints);
    }

    #[test]
    fn g711_only_offers_are_answered_with_the_clients_first_g711_codec() {
        // Chromium with setCodecPreferences([PCMU]) / ([PCMA]): the m-line lists only that one.
        let pcmu = chromium_with("SAVPF 111 63 9 0 8 13 110 126", "SAVPF 0");
        assert_eq!(choose_audio_codec(&pcmu), Ok((Codec::Pcmu, 0)));
        let s = check_offer(&pcmu).unwrap();
        assert_eq!((s.audio_codec, s.audio_payload_type), (Codec::Pcmu, 0));
        let pcma = chromium_with("SAVPF 111 63 9 0 8 13 110 126", "SAVPF 8");
        assert_eq!(choose_audio_codec(&pcma), Ok((Codec::Pcma, 8)));
        // Both, in the client's order.
        let both = chromium_with("SAVPF 111 63 9 0 8 13 110 126", "SAVPF 8 0 126");
        assert_eq!(choose_audio_codec(&both), Ok((Codec::Pcma, 8)));
        // Opus wins whenever it is offered, even listed after G.711.
        let late_opus = chromium_with("SAVPF 111 63 9 0 8 13 110 126", "SAVPF 0 8 111");
        assert_eq!(choose_audio_codec(&late_opus), Ok((Codec::Opus, 111)));
        // Static payload types need no rtpmap (a SIP-style offer).
        let bare = chromium_with("SAVPF 111 63 9 0 8 13 110 126", "SAVPF 8")
            .replace("a=rtpmap:8 PCMA/8000\r\n", "");
        assert!(!bare.contains("PCMA"));
        assert_eq!(choose_audio_codec(&bare), Ok((Codec::Pcma, 8)));
        // G.722 and telephone-event alone are not answered.
        let g722 = chromium_with("SAVPF 111 63 9 0 8 13 110 126", "SAVPF 9 126");
        assert_eq!(err(&g722), OfferError::NoSupportedCodec);
        assert_eq!(err(&g722).code(), "invalid_offer");
    }

    #[test]
    fn audio_must_be_there_usable_and_opus() {
        let no_audio: String = {
            let (head, rest) = CHROMIUM.split_once("m=audio").unwrap();
            let data = rest.split_once("m=application").unwrap().1;
            format!("{head}m=application{data}")
        };
        assert_eq!(err(&no_audio), OfferError::NoAudio);
        assert_eq!(
            err(&chromium_with("m=audio 9 ", "m=audio 0 ")),
            OfferError::AudioRejected
        );
        assert!(matches!(
            err(&chromium_with("UDP/TLS/RTP/SAVPF", "RTP/AVP")),
            OfferError::AudioNotDtlsSrtp(_)
        ));
        assert_eq!(
            err(
                &chromium_with("SAVPF 111 63 9 0 8 13 110 126", "SAVPF 111 63 9 13 110 126")
                    .replace("a=rtpmap:111 opus/48000/2", "a=rtpmap:111 speex/16000")
            ),
            OfferError::NoSupportedCodec
        );
        // Opus mapped, but not listed on the m-line (and no G.711 either).
        assert_eq!(
            err(&chromium_with(
                "SAVPF 111 63 9 0 8 13 110 126",
                "SAVPF 63 9 13 110 126"
            )),
            OfferError::NoSupportedCodec
        );
    }

    #[test]
    fn sctp_and_ice_values_are_checked() {
        for bad in ["-5", "0", "65536", "x", ""] {
            let e = err(&chromium_with(
                "a=sctp-port:5000",
                &format!("a=sctp-port:{bad}"),
            ));
            assert_eq!(e, OfferError::BadSctpPort(bad.into()));
        }
        assert!(check_offer(&chromium_with("a=sctp-port:5000", "a=sctp-port:65535")).is_ok());
        assert!(matches!(
            err(&chromium_with(
                "a=max-message-size:262144",
                "a=max-message-size:-1"
            )),
            OfferError::BadMaxMessageSize(_)
        ));
        let no_ice: String = CHROMIUM
            .split_inclusive('\n')
            .filter(|l| !l.starts_with("a=ice-pwd"))
            .collect();
        assert_eq!(err(&no_ice), OfferError::NoIceCredentials);
        let attr = |name: &str| {
            CHROMIUM
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap()
                .to_owned()
        };
        assert!(matches!(
            err(&CHROMIUM.replace(&attr("a=ice-ufrag:"), "a=ice-ufrag:a:b")),
            OfferError::BadIceCredential("ufrag", _)
        ));
        assert!(matches!(
            err(&CHROMIUM.replace(&attr("a=ice-pwd:"), "a=ice-pwd:short")),
            OfferError::BadIceCredential("pwd", _)
        ));
    }

    #[test]
    fn text_that_is_not_sdp_is_named_as_such() {
        assert_eq!(err(""), OfferError::NotSdp);
        assert_eq!(err("hello"), OfferError::NotSdp);
        assert_eq!(err("v=01\r\n"), OfferError::NotSdp);
        let e = err("v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nthis is not sdp\r\n");
        assert_eq!(
            e,
            OfferError::BadLine {
                line: 3,
                text: "this is not sdp".into()
            }
        );
        assert_eq!(e.code(), "invalid_offer");
        assert!(matches!(
            err(&chromium_with(
                "m=application 9 UDP/DTLS/SCTP webrtc-datachannel",
                "m=application x"
            )),
            OfferError::BadMediaLine { .. }
        ));
        let many = format!(
            "{CHROMIUM}{}",
            "m=video 0 UDP/TLS/RTP/SAVPF 96\r\n".repeat(MAX_MEDIA_SECTIONS)
        );
        assert!(matches!(err(&many), OfferError::TooManyMediaSections(_)));
        // Long bad lines are quoted short.
        let long = format!("v=0\r\n{}\r\n", "x".repeat(10_000));
        assert!(err(&long).to_string().len() < 200);
    }
}
