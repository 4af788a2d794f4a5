//! The caller's uncommitted audio, tracked by time only: the media side holds the samples.
//!
//! With turn detection on, a VAD start/stop pair is one turn and is committed at the stop. With
//! it off (`turn_detection: null`) the media side's VAD edges still arrive and are only
//! remembered, so a manual `input_audio_buffer.commit` can commit the speech rather than all the
//! silence since the last commit.

/// The service refuses commits shorter than this ("buffer too small").
pub(super) const MIN_COMMIT_MS: u64 = 100;

/// The protocol's `input_audio_buffer` as spans of input time. Not a buffer: the audio itself
/// is in [`crate::audio::InputBuffer`] on the media side, which this only points into.
#[derive(Debug, Default)]
pub(super) struct UncommittedInput {
    /// Speech in progress: the item id announced in `speech_started` (VAD on), and its start.
    pub open: Option<OpenSpeech>,
    /// Closed speech not yet committed (VAD off): first start .. last stop.
    pub closed: Option<(u64, u64)>,
    /// Latest input time known (from `on_input_audio` or VAD edges).
    pub heard_ms: u64,
    /// End of the last commit or clear; audio before it is gone.
    pub committed_upto: u64,
    /// Audio that arrived as `input_audio_buffer.append` since the last commit.
    pub appended_ms: u64,
}

#[derive(Debug, Clone)]
pub(super) struct OpenSpeech {
    pub item_id: Option<String>,
    pub start_ms: u64,
}

/// What a manual commit takes.
#[derive(Debug, PartialEq)]
pub(super) enum Pending {
    Span {
        item_id: Option<String>,
        start_ms: u64,
        end_ms: u64,
    },
    Appended {
        ms: u64,
    },
}

impl UncommittedInput {
    pub fn heard(&mut self, ms: u64) {
        self.heard_ms = self.heard_ms.max(ms);
    }

    /// Takes what a manual commit would commit, preferring speech over bare buffer time, or
    /// `None` when there is less than [`MIN_COMMIT_MS`] of anything. `whole` takes all the
    /// buffer since the last commit instead (a WebSocket client appended exactly what it
    /// wants committed; a microphone's stream is trimmed to its speech).
    pub fn take_pending(&mut self, whole: bool) -> Option<Pending> {
        let pending = if whole && self.heard_ms > self.committed_upto {
            Pending::Span {
                item_id: self.open.as_ref().and_then(|o| o.item_id.clone()),
                start_ms: self.committed_upto,
                end_ms: self.heard_ms,
            }
        } else if let Some(open) = &self.open {
            Pending::Span {
                item_id: open.item_id.clone(),
                start_ms: open.start_ms,
                end_ms: self.heard_ms.max(open.start_ms),
            }
        } else if let Some((start_ms, end_ms)) = self.closed {
            Pending::Span {
                item_id: None,
                start_ms,
                end_ms,
            }
        } else if self.heard_ms > self.committed_upto {
            Pending::Span {
                item_id: None,
                start_ms: self.committed_upto,
                end_ms: self.heard_ms,
            }
        } else {
            Pending::Appended {
                ms: self.appended_ms,
            }
        };
        let long_enough = match &pending {
            Pending::Span {
                start_ms, end_ms, ..
            } => end_ms - start_ms >= MIN_COMMIT_MS,
            Pending::Appended { ms } => *ms >= MIN_COMMIT_MS,
        };
        if !long_enough {
            return None;
        }
        if let Pending::Span { end_ms, .. } = &pending {
            self.committed_upto = *end_ms;
        }
        self.open = None;
        self.closed = None;
        self.appended_ms = 0;
        Some(pending)
    }

    pub fn clear(&mut self) {
        self.open = None;
        self.closed = None;
        self.appended_ms = 0;
        self.committed_upto = self.heard_ms;
    }
}
