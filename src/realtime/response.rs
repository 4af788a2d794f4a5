//! One response's state and the wire objects built from it.
//!
//! Transcript pacing: the transcript is split into words, each owning an equal share of the
//! audio length, and a word's delta is sent once its whole share has been played. So the
//! deltas sent at any moment are exactly the words the caller has heard, which is also what a
//! barge-in truncation keeps. Lengths: an echo knows its length exactly; a TTS reply is
//! estimated at [`MS_PER_WORD`] until the media side reports the real length
//! (`on_audio_length`); whatever remains is sent at `on_audio_done`.

use serde_json::{Value, json};

use super::server_event::{ContentRef, RateLimit};

/// Speaking-rate estimate for pacing TTS text before its real length is known (150 wpm).
pub(super) const MS_PER_WORD: u64 = 400;
/// Bounds one reply's deltas and the text handed to the synthesizer, with
/// [`crate::audio::tts::MAX_TEXT_BYTES`]: the transcript is cut where the synthesizer would stop,
/// so the client reads exactly what it hears.
pub(super) const MAX_WORDS: usize = 1000;

/// A response that completed while its audio still plays (generation ran ahead of playback, on
/// WebRTC): the caller is still hearing it, so a barge-in or a clear truncates its item to what
/// was heard, and `output_audio_buffer.stopped` comes when the playout ends.
#[derive(Debug)]
pub(super) struct Playout {
    pub response_id: String,
    pub item_id: String,
    pub played_ms: u64,
    /// Its message is in the conversation (a truncation applies to it).
    pub in_conversation: bool,
}

/// Per-response overrides from `response.create`, already validated.
#[derive(Debug, Clone, Default)]
pub(super) struct ResponseRequest {
    pub instructions: Option<String>,
    pub text_only: Option<bool>,
    pub voice: Option<String>,
    /// `audio.output.format` for this response only (the session's otherwise).
    pub format: Option<super::session_config::AudioFormat>,
    pub metadata: Option<serde_json::Map<String, Value>>,
    pub max_output_tokens: Option<super::session_config::MaxTokens>,
    /// `conversation: "none"`: an out-of-band response whose item is not added.
    pub out_of_band: bool,
    /// `input`: the items an out-of-band response answers instead of the conversation.
    pub input: Option<Vec<super::items::Item>>,
    /// `tools` / `tool_choice` for this response only (the session's otherwise).
    pub tools: Option<Vec<crate::model::tools::Tool>>,
    pub tool_choice: Option<crate::model::tools::ToolChoice>,
    /// `parallel_tool_calls` for this response only (the session's otherwise).
    pub parallel_tool_calls: Option<bool>,
    /// It runs beside the active response (see `Conversation::respond_beside`): no plan delay.
    pub beside: bool,
    /// The MCP call the client approved: this response makes it, without asking the model.
    pub approved_mcp: Option<super::planned_mcp::PlannedMcp>,
}

#[derive(Debug)]
pub(super) struct ActiveResponse {
    pub id: String,
    pub item_id: String,
    pub audio: bool,
    /// It has a message output (spoken or text) at `message_index`; false for tool calls alone.
    pub message: bool,
    /// 0, or 1 when an MCP call's item comes first.
    pub message_index: usize,
    /// Its MCP call or approval request (see `super::mcp`).
    pub mcp: Option<super::planned_mcp::PlannedMcp>,
    /// Its MCP call is out and the message waits for the server's answer.
    pub awaiting_mcp: bool,
    /// Finished output items before the message (the MCP call), for `response.done`.
    pub lead: Vec<Value>,
    /// `max_output_tokens` as a limit, for a message planned after an MCP call.
    pub token_limit: Option<u64>,
    /// Function calls, output after the message once it is complete.
    pub calls: Vec<super::tool_calls::PlannedCall>,
    /// How it ends once its output is out (the model's plan).
    pub ending: crate::model::Ending,
    /// Waiting out the plan's delay before output that needs no playback (see `Action::Hold`).
    pub holding: bool,
    pub in_conversation: bool,
    pub words: Vec<String>,
    /// Words whose deltas have been sent.
    pub sent: usize,
    pub total_ms: u64,
    /// `total_ms` is the real length (echo, or reported), not the per-word estimate.
    pub length_known: bool,
    pub played_ms: u64,
    /// The voice it speaks in: the request's, else the session's.
    pub voice: String,
    /// On a WebSocket, its audio's codec when the request chose another format than the
    /// session's (see `Action::Speak`).
    pub codec: Option<crate::audio::Codec>,
    /// Its audio made so far: on WebRTC the model runs ahead of playback (`played_ms` times
    /// the conversation's generation pace), on a WebSocket what was sent. The transcript
    /// follows it, not playback.
    pub generated_ms: u64,
    /// The `response` object fields fixed at creation (`output_modalities`, `audio`, …).
    pub shell: Value,
    pub input_tokens: Value,
}

impl ActiveResponse {
    pub fn transcript(&self) -> String {
        self.words.join(" ")
    }

    pub fn transcript_so_far(&self) -> String {
        self.words[..self.sent].join(" ")
    }

    /// The deltas due at `played_ms` (each word after the first carries its leading space, so
    /// the deltas concatenate to the transcript exactly).
    pub fn take_due(&mut self, all: bool) -> Vec<String> {
        let due = if all {
            self.words.len()
        } else {
            heard_words(&self.words, self.generated_ms, self.total_ms)
        };
        let mut out = Vec::new();
        while self.sent < due {
            let w = &self.words[self.sent];
            out.push(if self.sent == 0 {
                w.clone()
            } else {
                format!(" {w}")
            });
            self.sent += 1;
        }
        out
    }

    /// The assistant message as it stands: completed with the full text, or incomplete with
    /// what was sent.
    pub fn item(&self, status: &str) -> Value {
        let text = if status == "completed" {
            self.transcript()
        } else {
            self.transcript_so_far()
        };
        let part = if self.audio {
            json!({"type": "output_audio", "transcript": text})
        } else {
            json!({"type": "output_text", "text": text})
        };
        json!({
            "id": self.item_id,
            "object": "realtime.item",
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": [part]
        })
    }

    /// `part` of `response.content_part.*`: the SDK's enum accepts only `audio` and `text`.
    pub fn part(&self, text: &str) -> Value {
        if self.audio {
            json!({"type": "audio", "transcript": text})
        } else {
            json!({"type": "text", "text": text})
        }
    }

    /// The message's one content part (content 0), which every text and audio event names.
    pub fn locator(&self) -> ContentRef {
        ContentRef {
            response_id: self.id.clone(),
            item_id: self.item_id.clone(),
            output_index: self.message_index,
            content_index: 0,
        }
    }

    /// The `response` object for `response.created` (`output` empty, `usage` null) or
    /// `response.done`; `details` is its `status_details` (null when there is nothing to say).
    pub fn object(&self, status: &str, details: Value, output: Vec<Value>) -> Value {
        let mut obj = self.shell.clone();
        obj["status"] = Value::from(status);
        obj["status_details"] = details;
        obj["output"] = Value::Array(output);
        obj["usage"] = if status == "in_progress" {
            Value::Null
        } else {
            self.usage()
        };
        obj
    }

    /// Token counts at the rates the service bills by (input audio ~10 tokens/s, output audio
    /// ~20 tokens/s, text ~4 characters/token), so SDK usage accounting sees plausible numbers.
    fn usage(&self) -> Value {
        let text = self.transcript_so_far();
        let text_tokens = (text.len() as u64).div_ceil(4);
        let audio_tokens = if self.audio {
            self.generated_ms / 50
        } else {
            0
        };
        let input = self.input_tokens["text_tokens"].as_u64().unwrap_or(0)
            + self.input_tokens["audio_tokens"].as_u64().unwrap_or(0);
        let output = text_tokens + audio_tokens;
        json!({
            "total_tokens": input + output,
            "input_tokens": input,
            "output_tokens": output,
            "input_token_details": self.input_tokens,
            "output_token_details": {"text_tokens": text_tokens, "audio_tokens": audio_tokens}
        })
    }
}

/// `input_token_details` for a response over this much context.
pub(super) fn input_tokens(text_chars: u64, audio_ms: u64) -> Value {
    json!({
        "text_tokens": text_chars.div_ceil(4),
        "audio_tokens": audio_ms / 100,
        "image_tokens": 0,
        "cached_tokens": 0,
        "cached_tokens_details": {"text_tokens": 0, "audio_tokens": 0, "image_tokens": 0}
    })
}

/// `rate_limits.updated` payload: fixed generous limits, since nothing is actually metered.
pub(super) fn rate_limits(input_tokens: u64) -> Vec<RateLimit> {
    vec![
        RateLimit {
            name: "requests",
            limit: 5000,
            remaining: 4999,
            reset_seconds: 0.012,
        },
        RateLimit {
            name: "tokens",
            limit: 40000,
            remaining: 40000u64.saturating_sub(input_tokens),
            reset_seconds: 0.0,
        },
    ]
}

/// Words of a reply: at most [`MAX_WORDS`], and no more than fit in
/// [`crate::audio::tts::MAX_TEXT_BYTES`] joined by single spaces (a single word longer than that
/// is cut at a character boundary, as the synthesizer would cut it).
pub(super) fn words(text: &str) -> Vec<String> {
    let max = crate::audio::tts::MAX_TEXT_BYTES;
    let mut out: Vec<String> = Vec::new();
    let mut len = 0;
    for w in text.split_whitespace().take(MAX_WORDS) {
        let sep = usize::from(!out.is_empty());
        if len + sep + w.len() > max {
            if out.is_empty() {
                out.push(crate::audio::tts::bounded(w).to_owned());
            }
            break;
        }
        len += sep + w.len();
        out.push(w.to_owned());
    }
    out
}

/// The words of `words` heard in `played_ms` of `total_ms` (the same rule as the deltas).
pub(super) fn heard_words(words: &[String], played_ms: u64, total_ms: u64) -> usize {
    if total_ms == 0 || played_ms >= total_ms {
        return words.len();
    }
    ((played_ms.saturating_mul(words.len() as u64)) / total_ms) as usize
}
