//! The WebRTC side of a bridge: the call's codec both ways, the caller's audio on its way up,
//! the model's responses played out, and the latencies the edge measures of them.

use std::collections::VecDeque;
use std::time::Instant;

use crate::audio::Codec;
use crate::audio::codec::Decoder;
use crate::audio::player::Player;

/// One response's audio on its way to the caller.
pub(super) struct Playing {
    pub(super) player: Player,
    pub(super) response_id: String,
    pub(super) item_id: String,
    pub(super) content_index: u32,
    pub(super) started: bool,
}

/// The WebRTC side: the call's codec both ways, caller audio up, model audio played out.
pub(super) struct RtpAudio {
    pub(super) codec: Codec,
    pub(super) decoder: Decoder,
    /// 24 kHz caller audio not yet a whole append.
    pub(super) pending: Vec<i16>,
    pub(super) append_samples: usize,
    /// The response playing first, then any queued behind it.
    pub(super) playout: VecDeque<Playing>,
    /// Responses whose playout was stopped (barge-in, clear): deltas still on their way for
    /// them are dropped, not played after the interruption. The last few are enough.
    pub(super) interrupted: VecDeque<String>,
    /// The last 24 kHz sample of the model's audio, for interpolating the next delta's first.
    pub(super) last_model_sample: i16,
    pub(super) interrupt_response: bool,
    /// The upstream VAD's silence before it ends a turn: its `audio_end_ms` is that much after
    /// the speech's end.
    pub(super) silence_ms: u64,
    /// Caller audio sent up so far, in ms of the upstream's input timeline.
    pub(super) input_ms: u64,
    /// (input ms at a frame's start, its arrival) of recent frames: the upstream's VAD names
    /// input times, the timings need arrivals.
    pub(super) arrivals: VecDeque<(u64, Instant)>,
    /// Arrival of the caller's speech onset and end, from the upstream's VAD events.
    pub(super) onset_at: Option<Instant>,
    pub(super) speech_end_at: Option<Instant>,
    pub(super) last_sent_at: Option<Instant>,
    pub(super) timings: BridgeTimings,
}

/// Frames' arrival times kept for the timings (≈ 2 s of 20 ms frames).
pub(super) const ARRIVALS_KEPT: usize = 100;
/// Interrupted responses remembered, to drop their late deltas.
const INTERRUPTED_KEPT: usize = 8;

/// The edge's view of a bridged call's latencies, as the stubs' media side measures them:
/// the upstream's processing plus what the bridge adds, from arrival of the caller's audio to
/// the model's audio leaving for the caller.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BridgeTimings {
    /// Arrival of the frame holding the speech's end (the upstream's `speech_stopped`
    /// `audio_end_ms`, less its VAD's `silence_duration_ms`, which that includes) → the reply's
    /// first frame sent. With `semantic_vad` (no silence named) it runs from the VAD's decision.
    pub turn_ms: Option<u64>,
    /// Arrival of the frame holding a barge-in's onset → the last frame of the interrupted reply.
    pub barge_in_ms: Option<u64>,
    pub barge_ins: u64,
    pub turns_answered: u64,
}

impl RtpAudio {
    pub(super) fn new(codec: Codec, append_ms: u32) -> RtpAudio {
        RtpAudio {
            codec,
            decoder: Decoder::new(codec),
            pending: Vec::new(),
            append_samples: 24 * append_ms as usize,
            playout: VecDeque::new(),
            interrupted: VecDeque::new(),
            last_model_sample: 0,
            interrupt_response: true,
            silence_ms: 0,
            input_ms: 0,
            arrivals: VecDeque::with_capacity(ARRIVALS_KEPT),
            onset_at: None,
            speech_end_at: None,
            last_sent_at: None,
            timings: BridgeTimings::default(),
        }
    }

    /// When the frame holding input time `ms` arrived.
    /// Keeps `response_id` among the last [`INTERRUPTED_KEPT`] interrupted responses.
    pub(super) fn remember_interrupted(&mut self, response_id: String) {
        if self.interrupted.len() == INTERRUPTED_KEPT {
            self.interrupted.pop_front();
        }
        self.interrupted.push_back(response_id);
    }

    pub(super) fn arrival_of(&self, ms: u64) -> Option<Instant> {
        self.arrivals
            .iter()
            .rev()
            .find(|(at, _)| *at <= ms)
            .map(|(_, t)| *t)
    }
}
