//! The caller side of a turn: VAD edges from the media side become `speech_started`,
//! `speech_stopped`, a committed user item and (with `create_response`) a response; speech
//! during output interrupts it (barge-in).

use serde_json::json;

use super::Conversation;
use super::input::OpenSpeech;
use super::items::{AudioSource, user_audio_item};
use super::server_event::{
    ItemInPlace, RealtimeServerEvent, TranscriptionError, TranscriptionUsage,
};
use crate::model::{AudioTurn, Heard, Transcription};

impl Conversation {
    /// Optional: how much caller audio has arrived (ms since call start). It lets a manual
    /// `input_audio_buffer.commit` take audio that VAD has not closed, as the service's buffer
    /// would; without it, commits are bounded by VAD edges alone.
    pub fn on_input_audio(&mut self, input_ms: u64) {
        self.input.heard(input_ms);
    }

    /// Input time heard so far (ms of caller audio since its first packet).
    pub fn input_heard_ms(&self) -> u64 {
        self.input.heard_ms
    }

    /// Server VAD detected speech; `audio_start_ms` includes the prefix padding.
    pub fn on_speech_started(&mut self, audio_start_ms: u64) {
        self.input.heard(audio_start_ms);
        if self.input.open.is_some() {
            return;
        }
        let Some(td) = self.turn_detection() else {
            self.input.open = Some(OpenSpeech {
                item_id: None,
                start_ms: audio_start_ms,
            });
            return;
        };
        // The id of the user item that will be created when speech stops.
        let item_id = self.new_id("item");
        self.input.open = Some(OpenSpeech {
            item_id: Some(item_id.clone()),
            start_ms: audio_start_ms,
        });
        self.out.emit(RealtimeServerEvent::SpeechStarted {
            item_id,
            audio_start_ms,
        });
        let speaking = self.active.as_ref().is_some_and(|r| r.audio) || self.playout.is_some();
        if td.interrupt_response && speaking {
            self.barge_in();
        }
    }

    /// Server VAD detected the end of speech.
    pub fn on_speech_stopped(&mut self, audio_end_ms: u64) {
        self.input.heard(audio_end_ms);
        let Some(open) = self.input.open.take() else {
            return;
        };
        let start_ms = open.start_ms;
        let end_ms = audio_end_ms.max(start_ms);
        let Some(item_id) = open.item_id else {
            // Turn detection is off: only remember the speech for a manual commit, as one span
            // over every turn since the last one. Covering them by min/max rather than by
            // arrival keeps it a span whatever times are passed in (a later turn reported with
            // earlier times once made it end before it began).
            self.input.closed = Some(match self.input.closed {
                Some((s, e)) => (s.min(start_ms), e.max(end_ms)),
                None => (start_ms, end_ms),
            });
            return;
        };
        self.out.emit(RealtimeServerEvent::SpeechStopped {
            item_id: item_id.clone(),
            audio_end_ms: end_ms,
        });
        self.input.committed_upto = end_ms;
        self.input.closed = None;
        self.input.appended_ms = 0;
        self.commit_user_audio(item_id, AudioSource::Input { start_ms, end_ms });
        if self.turn_detection().is_some_and(|t| t.create_response) {
            self.request_auto_response();
        }
    }

    /// The media side's idle timer (`turn_detection.idle_timeout_ms`) fired with no speech
    /// since the last response: the silent span is committed and answered, as the service
    /// documents. Ignored while speech or a response is in progress, or with VAD off.
    pub fn on_idle_timeout(&mut self, audio_start_ms: u64, audio_end_ms: u64) {
        if self.turn_detection().is_none() || self.input.open.is_some() || self.active.is_some() {
            return;
        }
        self.input.heard(audio_end_ms);
        let end_ms = audio_end_ms.max(audio_start_ms);
        let item_id = self.new_id("item");
        self.out.emit(RealtimeServerEvent::InputTimeoutTriggered {
            item_id: item_id.clone(),
            audio_start_ms,
            audio_end_ms: end_ms,
        });
        self.input.committed_upto = end_ms;
        self.input.closed = None;
        self.commit_user_audio(
            item_id,
            AudioSource::Idle {
                start_ms: audio_start_ms,
                end_ms,
            },
        );
        self.request_auto_response();
    }

    /// `committed`, then the user item (`added`, `done`), then its transcription if enabled.
    pub(super) fn commit_user_audio(&mut self, item_id: String, origin: AudioSource) {
        let item = user_audio_item(&item_id, origin);
        let value = item.value.clone();
        let previous = self.items.push(item);
        self.out.emit(RealtimeServerEvent::InputCommitted {
            item_id: item_id.clone(),
            previous_item_id: previous.clone(),
        });
        let placed = ItemInPlace {
            previous_item_id: previous,
            item: value,
        };
        self.out
            .emit(RealtimeServerEvent::ConversationItemAdded(placed.clone()));
        self.out
            .emit(RealtimeServerEvent::ConversationItemDone(placed));
        self.transcribe(&item_id);
    }

    /// With `audio.input.transcription` set, the item gets the model's transcript: a delta per
    /// word, as a streaming recognizer sends them, then `completed` (or `failed`). The stubs
    /// have no recognizer and say so in a bracketed note ("[speech, 2.4 s]"); a script gives the
    /// words. The SDK then retrieves the item and shows the transcript in its history.
    fn transcribe(&mut self, item_id: &str) {
        if self.config.audio.input.transcription.is_none() {
            return;
        }
        let Some(item) = self.items.get(item_id) else {
            return;
        };
        let (what, ms) = match item.origin {
            AudioSource::Input { start_ms, end_ms } => (Heard::Speech, end_ms - start_ms),
            AudioSource::Idle { start_ms, end_ms } => (Heard::Silence, end_ms - start_ms),
            AudioSource::Appended { ms } => (Heard::Appended, ms),
            _ => return,
        };
        let turn = AudioTurn {
            what,
            ms,
            next_response: self.responses_started,
        };
        let transcript = match self.model.transcribe(&turn) {
            Transcription::Text(t) => t,
            Transcription::Failed { code, message } => {
                self.out
                    .emit(RealtimeServerEvent::InputTranscriptionFailed {
                        item_id: item_id.to_owned(),
                        content_index: 0,
                        error: TranscriptionError {
                            kind: "transcription_error",
                            code,
                            message,
                        },
                    });
                return;
            }
        };
        for (i, word) in transcript.split_whitespace().enumerate() {
            let delta = if i == 0 {
                word.to_owned()
            } else {
                format!(" {word}")
            };
            self.out.emit(RealtimeServerEvent::InputTranscriptionDelta {
                item_id: item_id.to_owned(),
                content_index: 0,
                delta,
            });
        }
        if let Some(item) = self.items.get_mut(item_id) {
            item.value["content"][0]["transcript"] = json!(transcript);
        }
        self.out
            .emit(RealtimeServerEvent::InputTranscriptionCompleted {
                item_id: item_id.to_owned(),
                content_index: 0,
                transcript,
                usage: TranscriptionUsage::duration_ms(ms),
            });
    }

    fn request_auto_response(&mut self) {
        if self.session_type() == super::SessionType::Transcription {
            return; // transcribed in commit_user_audio; never answered
        }
        if self.active.is_some() {
            self.auto_response_queued = true;
        } else {
            self.start_response(Default::default());
        }
    }

    /// Speech during output with `interrupt_response`: stop the audio; a response still being
    /// made is cancelled (`turn_detected`), one already complete but still playing is not;
    /// either way the buffer is reported cleared and the item truncated to what was played.
    fn barge_in(&mut self) {
        if let Some(stopped) = self.cancel_and_clear("turn_detected") {
            // On a WebSocket the server cannot know what was played: the client truncates,
            // from its own playback clock, as the service expects (the SDK's interrupt() does).
            if stopped.in_conversation && self.transport == super::Transport::WebRtc {
                // The item holds what was made, which may run past what was heard.
                let _ = self.truncate_item(&stopped.item_id, 0, stopped.played_ms);
            }
        }
        self.clear_playout();
        // The caller is talking again; their new turn gets the next response.
        self.auto_response_queued = false;
    }
}
