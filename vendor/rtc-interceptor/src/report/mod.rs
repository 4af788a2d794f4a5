//! RTCP report interceptors (internal module).
//!
//! `SenderReportInterceptor` and `ReceiverReportInterceptor` are re-exported from the crate
//! root, where the user-facing documentation and examples live so that rustdoc renders them.
//!
//! # References
//!
//! - [RFC 3550](https://datatracker.ietf.org/doc/html/rfc3550) - RTP (Sender/Receiver Reports)
//! - [RFC 3611](https://datatracker.ietf.org/doc/html/rfc3611) - RTCP Extended Reports (XR)
pub(crate) mod receiver;
pub(crate) mod receiver_stream;
pub(crate) mod sender;
pub(crate) mod sender_stream;

/// voice-edge patch: what the report interceptors' in-place passage (`read_in_place`,
/// `write_in_place`) must keep: every packet counted, and a report queued on a timeout sent
/// before the media written after it.
#[cfg(test)]
mod in_place_tests {
    use crate::{
        AttributedPacket, Interceptor, Packet, ReceiverReportBuilder, Registry,
        SenderReportBuilder, Slot, StreamInfo, TaggedPacket,
    };
    use sansio::Protocol;
    use shared::TransportContext;
    use std::time::{Duration, Instant};

    const SSRC: u32 = 4242;

    fn rtp(now: Instant, seq: u16) -> TaggedPacket {
        TaggedPacket {
            now,
            transport: TransportContext::default(),
            message: AttributedPacket::new(Packet::Rtp(rtp::Packet {
                header: rtp::header::Header {
                    ssrc: SSRC,
                    sequence_number: seq,
                    timestamp: u32::from(seq) * 960,
                    ..Default::default()
                },
                payload: vec![1u8, 2, 3].into(),
            })),
        }
    }

    fn reports() -> impl Interceptor {
        let mut chain = Registry::new()
            .with(Slot::ReceiverReport, ReceiverReportBuilder::new().build())
            .with(Slot::SenderReport, SenderReportBuilder::new().build())
            .build();
        let info = StreamInfo {
            ssrc: SSRC,
            clock_rate: 48_000,
            ..Default::default()
        };
        chain.bind_local_stream(&info);
        chain.bind_remote_stream(&info);
        chain
    }

    fn seq_of(p: &TaggedPacket) -> Option<u16> {
        match &p.message.packet {
            Packet::Rtp(r) => Some(r.header.sequence_number),
            _ => None,
        }
    }

    #[test]
    fn media_passes_both_ways_and_every_packet_reaches_the_reports() {
        let mut chain = reports();
        let t0 = Instant::now();
        for seq in 0..10u16 {
            let now = t0 + Duration::from_millis(20 * u64::from(seq));
            chain.handle_write(rtp(now, seq)).unwrap();
            assert_eq!(chain.poll_write().as_ref().and_then(seq_of), Some(seq));
            assert!(chain.poll_write().is_none());
            chain.handle_read(rtp(now, 100 + seq)).unwrap();
            assert_eq!(chain.poll_read().as_ref().and_then(seq_of), Some(100 + seq));
            assert!(chain.poll_read().is_none());
        }
        let later = t0 + Duration::from_secs(2);
        chain.handle_timeout(later).unwrap();
        let mut sent = 0;
        let mut received = None;
        while let Some(p) = chain.poll_write() {
            let Packet::Rtcp(rtcp) = &p.message.packet else {
                panic!("only reports were due");
            };
            for r in rtcp {
                if let Some(sr) = r
                    .as_any()
                    .downcast_ref::<rtcp::sender_report::SenderReport>()
                {
                    sent = sr.packet_count;
                }
                if let Some(rr) = r
                    .as_any()
                    .downcast_ref::<rtcp::receiver_report::ReceiverReport>()
                {
                    received = rr.reports.first().map(|b| b.last_sequence_number);
                }
            }
        }
        assert_eq!(sent, 10, "the sender report counts every packet written");
        assert_eq!(
            received,
            Some(109),
            "the receiver report saw the last packet read"
        );
    }

    #[test]
    fn a_report_queued_on_a_timeout_leaves_before_the_media_written_after_it() {
        let mut chain = reports();
        let t0 = Instant::now();
        chain.handle_write(rtp(t0, 1)).unwrap();
        assert_eq!(chain.poll_write().as_ref().and_then(seq_of), Some(1));
        chain.handle_timeout(t0 + Duration::from_secs(2)).unwrap();
        // The reports now wait in the interceptors' queues; the next packet may not overtake them.
        chain
            .handle_write(rtp(t0 + Duration::from_secs(2), 2))
            .unwrap();
        let mut order = Vec::new();
        while let Some(p) = chain.poll_write() {
            order.push(seq_of(&p));
        }
        assert!(order.len() >= 2, "reports and the packet: {order:?}");
        assert_eq!(
            order.last(),
            Some(&Some(2)),
            "media after the reports: {order:?}"
        );
        assert!(order[..order.len() - 1].iter().all(Option::is_none));
    }
}
