//! The caller's audio as it arrives: a bounded history of encoded frames (Opus or G.711, the
//! call's [`Codec`]) on an input-time axis, and the decode + VAD pipeline that runs over it.
//!
//! Input time is what Realtime events count in (`audio_start_ms`, `audio_end_ms`): milliseconds
//! of caller audio since the session began. It advances by each packet's duration, and across
//! gaps by the RTP timestamp delta (the codec's clock, wrap-safe), so a lost packet or a DTX pause
//! still takes its real time. Without a timestamp it advances by the packet's own duration.
//! Positions and durations here ("samples") are ticks of the codec's RTP clock.

use std::collections::VecDeque;

use bytes::Bytes;

use super::codec::{Codec, CodecError, Decoder};
use super::vad::{Vad, VadConfig, VadEvent};

/// How much caller audio is kept by default.
pub const DEFAULT_HISTORY_MS: u64 = 60_000;
/// A timestamp jump beyond this is a discontinuity (new source, clock reset), not a pause.
const MAX_GAP_MS: u64 = 10_000;
/// Lost time concealed frame by frame for the VAD; past this a gap is plain silence.
const MAX_CONCEAL_FRAMES: u64 = 10;

#[derive(Debug, Clone)]
struct Frame {
    start: u64,
    samples: u32,
    payload: Bytes,
}

/// Where an accepted packet landed on the input-time axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Input time of the packet's first sample, in RTP clock ticks.
    pub start_samples: u64,
    /// The packet's duration in RTP clock ticks.
    pub samples: u32,
    /// Missing time (loss or DTX) just before the packet, in RTP clock ticks.
    pub gap_samples: u64,
    /// Ticks per millisecond of the codec's clock.
    ticks_per_ms: u64,
}

impl Arrival {
    pub fn start_ms(&self) -> u64 {
        self.start_samples / self.ticks_per_ms
    }
}

/// The caller's recent encoded frames, keyed by input time.
#[derive(Debug, Clone)]
pub struct InputBuffer {
    codec: Codec,
    frames: VecDeque<Frame>,
    history_samples: u64,
    /// Input time at the end of the newest packet.
    end: u64,
    last_ts: Option<u32>,
    last_samples: u32,
}

impl Default for InputBuffer {
    fn default() -> Self {
        Self::new(DEFAULT_HISTORY_MS)
    }
}

impl InputBuffer {
    /// An Opus buffer keeping `history_ms`.
    pub fn new(history_ms: u64) -> Self {
        Self::with_codec(Codec::Opus, history_ms)
    }

    pub fn with_codec(codec: Codec, history_ms: u64) -> Self {
        Self {
            codec,
            frames: VecDeque::new(),
            history_samples: history_ms * codec.ticks_per_ms(),
            end: 0,
            last_ts: None,
            last_samples: 0,
        }
    }

    /// Input time at the end of the newest packet, ms.
    pub fn now_ms(&self) -> u64 {
        self.end / self.codec.ticks_per_ms()
    }

    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// Stores one received packet. Returns `Ok(None)` for a late or duplicate packet (its time
    /// has passed; it is dropped) and an error for one whose duration cannot be read (an Opus
    /// TOC that does not parse, an empty packet).
    pub fn push(
        &mut self,
        payload: Bytes,
        rtp_timestamp: Option<u32>,
    ) -> Result<Option<Arrival>, CodecError> {
        let samples = self.codec.packet_ticks(&payload)? as u32;
        let gap = match (rtp_timestamp, self.last_ts) {
            (Some(ts), Some(last)) => {
                let delta = ts.wrapping_sub(last) as i32;
                if delta <= 0 {
                    return Ok(None);
                }
                let gap = (delta as u64).saturating_sub(u64::from(self.last_samples));
                if gap > MAX_GAP_MS * self.codec.ticks_per_ms() {
                    0
                } else {
                    gap
                }
            }
            _ => 0,
        };
        if rtp_timestamp.is_some() {
            self.last_ts = rtp_timestamp;
        }
        self.last_samples = samples;
        let start = self.end + gap;
        self.end = start + u64::from(samples);
        self.frames.push_back(Frame {
            start,
            samples,
            payload,
        });
        while let Some(front) = self.frames.front() {
            if self.end - front.start <= self.history_samples {
                break;
            }
            self.frames.pop_front();
        }
        Ok(Some(Arrival {
            start_samples: start,
            samples,
            gap_samples: gap,
            ticks_per_ms: self.codec.ticks_per_ms(),
        }))
    }

    /// The stored frames that overlap `[start_ms, end_ms)`, in order, each with its duration in
    /// RTP clock ticks, ready to be sent again as they came. Gaps between them (loss, DTX) are
    /// filled with 20 ms silence frames ([`Codec::silence_frame`]) so a replay keeps the
    /// caller's timing.
    pub fn frames_between(&self, start_ms: u64, end_ms: u64) -> Vec<(Bytes, u32)> {
        let per_ms = self.codec.ticks_per_ms();
        let (start, end) = (start_ms * per_ms, end_ms * per_ms);
        let frame = self.codec.frame_ticks();
        let silence = self.codec.silence_frame();
        let first = self
            .frames
            .partition_point(|f| f.start + u64::from(f.samples) <= start);
        let mut out = Vec::new();
        let mut cursor: Option<u64> = None;
        for f in self.frames.range(first..) {
            if f.start >= end {
                break;
            }
            if let Some(mut c) = cursor {
                while f.start >= c + u64::from(frame) {
                    out.push((silence.clone(), frame));
                    c += u64::from(frame);
                }
            }
            out.push((f.payload.clone(), f.samples));
            cursor = Some(f.start + u64::from(f.samples));
        }
        out
    }

    /// Forgets the stored frames (`input_audio_buffer.clear`); input time keeps running.
    pub fn clear(&mut self) {
        self.frames.clear();
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

/// Everything done with one caller's packets: keep them, decode them (concealing losses so the
/// VAD sees continuous time) and run server VAD.
#[derive(Debug)]
pub struct Listener {
    pub buffer: InputBuffer,
    decoder: Decoder,
    vad: Vad,
}

impl Listener {
    /// A listener for an Opus call.
    pub fn new(cfg: VadConfig) -> Self {
        Self::with_codec(Codec::Opus, cfg)
    }

    pub fn with_codec(codec: Codec, cfg: VadConfig) -> Self {
        Self {
            buffer: InputBuffer::with_codec(codec, DEFAULT_HISTORY_MS),
            decoder: Decoder::new(codec),
            vad: Vad::new(cfg),
        }
    }

    pub fn vad(&self) -> &Vad {
        &self.vad
    }

    pub fn vad_mut(&mut self) -> &mut Vad {
        &mut self.vad
    }

    /// Takes one received packet; returns the VAD events it caused (usually none; never
    /// allocates then). Losses up to 200 ms are concealed frame by frame (the frame right before
    /// the packet from its in-band FEC); a longer gap counts as silence.
    pub fn on_packet(&mut self, payload: Bytes, rtp_timestamp: Option<u32>) -> Vec<VadEvent> {
        let mut events = Vec::new();
        let Ok(Some(arrival)) = self.buffer.push(payload.clone(), rtp_timestamp) else {
            return events;
        };
        let gap = arrival.gap_samples;
        let codec = self.buffer.codec();
        let per_ms = codec.ticks_per_ms();
        if gap > 0 {
            let gap_start = arrival.start_samples - gap;
            let frame = u64::from(codec.frame_ticks());
            if gap <= MAX_CONCEAL_FRAMES * frame {
                let mut t = gap_start;
                while t + frame < arrival.start_samples {
                    let pcm = self.decoder.decode_lost(frame as usize);
                    events.extend(self.vad.push_frame(pcm, t / per_ms));
                    t += frame;
                }
                let rest = (arrival.start_samples - t) as usize;
                let pcm = match self.decoder.decode_fec(&payload, rest) {
                    Ok(pcm) => pcm,
                    Err(_) => self.decoder.decode_lost(rest),
                };
                events.extend(self.vad.push_frame(pcm, t / per_ms));
            } else {
                for i in 0..MAX_CONCEAL_FRAMES {
                    let pcm = self.decoder.decode_lost(frame as usize);
                    events.extend(self.vad.push_frame(pcm, (gap_start + i * frame) / per_ms));
                }
            }
        }
        let start_ms = arrival.start_ms();
        let pcm = match self.decoder.decode(&payload) {
            Ok(pcm) => pcm,
            Err(_) => self.decoder.decode_lost(arrival.samples as usize),
        };
        events.extend(self.vad.push_frame(pcm, start_ms));
        events
    }

    /// `input_audio_buffer.clear`: forgets the stored audio and any turn in progress.
    pub fn clear(&mut self) {
        self.buffer.clear();
        self.vad.reset_turn();
    }

    /// Lets input time pass when packets have stopped arriving (see [`Vad::advance_to`]); `ms` of
    /// input time past the newest packet. Call it from a timer, e.g. every 100 ms without packets.
    pub fn idle_for(&mut self, ms: u64) -> Option<VadEvent> {
        self.vad.advance_to(self.buffer.now_ms() + ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::codec::{Encoder, FRAME_SAMPLES, OpusDecoder, OpusEncoder, SILENCE_FRAME};

    fn pkt(tag: u8) -> Bytes {
        // CELT FB 20 ms; the second byte tells packets apart.
        Bytes::from(vec![0xf8, tag, 0x00])
    }

    #[test]
    fn time_follows_rtp_timestamps_with_wrap_gaps_and_late_packets() {
        let mut b = InputBuffer::default();
        let ts0 = u32::MAX - 960; // wraps after the first packet
        let a = b.push(pkt(0), Some(ts0)).unwrap().unwrap();
        assert_eq!((a.start_ms(), a.gap_samples), (0, 0));
        let a = b
            .push(pkt(1), Some(ts0.wrapping_add(960)))
            .unwrap()
            .unwrap();
        assert_eq!((a.start_ms(), a.gap_samples), (20, 0));
        // Two packets lost.
        let a = b
            .push(pkt(4), Some(ts0.wrapping_add(4 * 960)))
            .unwrap()
            .unwrap();
        assert_eq!((a.start_ms(), a.gap_samples), (80, 1920));
        // A late one and a duplicate are dropped.
        assert_eq!(
            b.push(pkt(2), Some(ts0.wrapping_add(2 * 960))).unwrap(),
            None
        );
        assert_eq!(
            b.push(pkt(4), Some(ts0.wrapping_add(4 * 960))).unwrap(),
            None
        );
        // A jump of an hour is a discontinuity, not an hour of silence.
        let a = b
            .push(pkt(5), Some(ts0.wrapping_add(3600 * 48_000)))
            .unwrap()
            .unwrap();
        assert_eq!((a.start_ms(), a.gap_samples), (100, 0));
        // Without timestamps, 20 ms a packet.
        let a = b.push(pkt(6), None).unwrap().unwrap();
        assert_eq!(a.start_ms(), 120);
        assert_eq!(b.now_ms(), 140);
        assert!(b.push(Bytes::new(), Some(0)).is_err());
    }

    #[test]
    fn frames_between_returns_the_overlap_and_fills_gaps() {
        let mut b = InputBuffer::default();
        for i in [0u32, 1, 2, 5, 6] {
            b.push(pkt(i as u8), Some(1000 + i * 960)).unwrap();
        }
        let tags = |v: &[(Bytes, u32)]| -> Vec<i32> {
            v.iter()
                .map(|(p, n)| {
                    assert_eq!(*n, 960);
                    if p[..] == SILENCE_FRAME {
                        -1
                    } else {
                        i32::from(p[1])
                    }
                })
                .collect()
        };
        assert_eq!(
            tags(&b.frames_between(0, 1000)),
            vec![0, 1, 2, -1, -1, 5, 6]
        );
        // Partial overlap at both ends counts.
        assert_eq!(tags(&b.frames_between(30, 101)), vec![1, 2, -1, -1, 5]);
        assert!(b.frames_between(140, 200).is_empty());
        b.clear();
        assert!(b.frames_between(0, 1000).is_empty());
        // Time continues after clear.
        assert_eq!(
            b.push(pkt(7), Some(1000 + 7 * 960))
                .unwrap()
                .unwrap()
                .start_ms(),
            140
        );
    }

    #[test]
    fn history_is_bounded() {
        let mut b = InputBuffer::new(1000);
        for i in 0..200u32 {
            b.push(pkt(0), Some(i * 960)).unwrap();
        }
        assert_eq!(b.len(), 50);
        assert_eq!(b.frames_between(0, 5000).len(), 50);
        assert_eq!(b.frames_between(0, 3100).len(), 5);
    }

    #[test]
    fn silence_frame_decodes_to_silence() {
        let mut dec = OpusDecoder::new();
        let pcm = dec.decode(&SILENCE_FRAME).unwrap();
        assert_eq!(pcm.len(), 960);
        assert!(pcm.iter().all(|&s| s.abs() <= 1));
    }

    #[test]
    fn listener_detects_a_turn_through_losses() {
        let mut enc = OpusEncoder::default();
        let mut l = Listener::new(VadConfig::default());
        let mut events = Vec::new();
        // 1 s quiet, 1 s tone, 2 s quiet; every 7th packet lost; RTP starts near the wrap.
        for i in 0..200u32 {
            let t = i as usize * 960;
            let frame: Vec<i16> = (t..t + 960)
                .map(|n| {
                    if (48_000..96_000).contains(&n) {
                        (4000.0 * (n as f32 * 300.0 * std::f32::consts::TAU / 48_000.0).sin())
                            as i16
                    } else {
                        0
                    }
                })
                .collect();
            let p = Bytes::copy_from_slice(enc.encode(&frame).unwrap());
            if i % 7 == 3 {
                continue;
            }
            events.extend(l.on_packet(p, Some((u32::MAX - 5000).wrapping_add(i * 960))));
        }
        assert_eq!(events.len(), 2, "{events:?}");
        let VadEvent::SpeechStarted { audio_start_ms } = events[0] else {
            panic!()
        };
        let VadEvent::SpeechStopped { speech_end_ms, .. } = events[1] else {
            panic!()
        };
        // Opus adds ~6.5 ms of delay; allow a frame either way.
        assert!(audio_start_ms.abs_diff(700) <= 20, "{audio_start_ms}");
        assert!(speech_end_ms.abs_diff(2000) <= 40, "{speech_end_ms}");
        // The echo model fetches the turn: ~1.3 s of frames with the losses filled.
        let frames = l.buffer.frames_between(audio_start_ms, speech_end_ms);
        assert!((64..=68).contains(&frames.len()), "{}", frames.len());
    }

    #[test]
    fn listener_idle_ends_a_turn_when_packets_stop() {
        let mut enc = OpusEncoder::default();
        let mut l = Listener::new(VadConfig::default());
        let mut started = false;
        for i in 0..50u32 {
            let frame: Vec<i16> = (0..960)
                .map(|n| {
                    (4000.0 * (n as f32 * 300.0 * std::f32::consts::TAU / 48_000.0).sin()) as i16
                })
                .collect();
            let p = Bytes::copy_from_slice(enc.encode(&frame).unwrap());
            started |= !l.on_packet(p, Some(i * 960)).is_empty();
        }
        assert!(started && l.vad().is_speaking());
        assert_eq!(l.idle_for(400), None);
        assert!(matches!(
            l.idle_for(600),
            Some(VadEvent::SpeechStopped {
                audio_end_ms: 1500,
                speech_end_ms: 1000
            })
        ));
    }

    #[test]
    fn listener_finds_the_spoken_turn_in_the_fixture_and_reports_its_cost() {
        // fixtures/speech.wav: ~3.1 s of espeak speech (two sentences), then 1 s of silence.
        let wav = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/speech.wav"))
            .expect("fixtures/speech.wav");
        let (_, pcm) = crate::audio::wav::parse_wav(&wav).unwrap();
        let mut enc = OpusEncoder::default();
        let t = std::time::Instant::now();
        let packets: Vec<Bytes> = pcm
            .chunks_exact(FRAME_SAMPLES)
            .map(|f| Bytes::copy_from_slice(enc.encode(f).unwrap()))
            .collect();
        let encode_us = t.elapsed().as_secs_f64() * 1e6 / packets.len() as f64;

        let mut l = Listener::new(VadConfig::default());
        let t = std::time::Instant::now();
        let events: Vec<VadEvent> = packets
            .iter()
            .enumerate()
            .flat_map(|(i, p)| l.on_packet(p.clone(), Some(i as u32 * 960)))
            .collect();
        let listen_us = t.elapsed().as_secs_f64() * 1e6 / packets.len() as f64;
        println!(
            "per 20 ms frame: decode+VAD+store {listen_us:.1} µs, encode {encode_us:.1} µs \
             ({} frames); events {events:?}",
            packets.len()
        );
        assert_eq!(events.len(), 2, "one turn: {events:?}");
        assert_eq!(events[0], VadEvent::SpeechStarted { audio_start_ms: 0 });
        let VadEvent::SpeechStopped {
            speech_end_ms,
            audio_end_ms,
        } = events[1]
        else {
            panic!("{events:?}")
        };
        assert!((2900..=3300).contains(&speech_end_ms), "{speech_end_ms}");
        assert_eq!(audio_end_ms, speech_end_ms + 500);
    }

    #[test]
    fn g711_listener_finds_the_turn_on_its_8_khz_clock() {
        let wav = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/speech.wav"))
            .expect("fixtures/speech.wav");
        let (_, pcm) = crate::audio::wav::parse_wav(&wav).unwrap();
        for codec in [Codec::Pcmu, Codec::Pcma] {
            let mut enc = Encoder::new(codec);
            let mut l = Listener::with_codec(codec, VadConfig::default());
            let mut events = Vec::new();
            for (i, f) in pcm.chunks_exact(FRAME_SAMPLES).enumerate() {
                let p = Bytes::copy_from_slice(enc.encode(f).unwrap());
                assert_eq!(p.len(), 160);
                if i % 9 == 4 {
                    continue; // lost: 20 ms of time still passes
                }
                let ts = 7u32.wrapping_add(i as u32 * 160);
                events.extend(l.on_packet(p, Some(ts)));
            }
            // Input time runs on the 8 kHz clock: the fixture's length, give or take the last frame.
            let len_ms = (pcm.len() / FRAME_SAMPLES * 20) as u64;
            assert!(
                l.buffer.now_ms().abs_diff(len_ms) <= 20,
                "{}",
                l.buffer.now_ms()
            );
            assert_eq!(events.len(), 2, "{codec:?}: {events:?}");
            let VadEvent::SpeechStopped { speech_end_ms, .. } = events[1] else {
                panic!("{events:?}")
            };
            assert!((2900..=3300).contains(&speech_end_ms), "{speech_end_ms}");
            // The turn's frames come back as 160-byte frames of 160 ticks, losses filled.
            let frames = l.buffer.frames_between(0, 900);
            assert_eq!(frames.len(), 45);
            assert!(frames.iter().all(|(p, n)| p.len() == 160 && *n == 160));
            assert_eq!(frames[4].0, codec.silence_frame());
        }
    }
}
