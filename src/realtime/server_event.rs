//! The Realtime server events as types: what the turn engine emits, written to text only where a
//! transport sends it. A dialect on top of the engine (Live) matches on these variants, so the
//! compiler lists every place a new event must be handled, and a field renamed here is renamed
//! everywhere it is read.
//!
//! The names and fields follow the `openai` package's `RealtimeServerEvent` union (the e2e tests
//! check every frame against its `.d.ts`). Sessions, items and responses stay JSON objects: their
//! shapes are built and checked by `session_config`, `items` and `response`.

use serde::Serialize;
use serde_json::Value;

/// One server event, without its `event_id` (see [`ServerEventFrame`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum RealtimeServerEvent {
    #[serde(rename = "error")]
    Error { error: ErrorObject },
    #[serde(rename = "session.created")]
    SessionCreated { session: Value },
    #[serde(rename = "session.updated")]
    SessionUpdated { session: Value },
    #[serde(rename = "rate_limits.updated")]
    RateLimitsUpdated { rate_limits: Vec<RateLimit> },

    #[serde(rename = "conversation.item.added")]
    ConversationItemAdded(ItemInPlace),
    #[serde(rename = "conversation.item.done")]
    ConversationItemDone(ItemInPlace),
    #[serde(rename = "conversation.item.retrieved")]
    ConversationItemRetrieved { item: Value },
    #[serde(rename = "conversation.item.deleted")]
    ConversationItemDeleted { item_id: String },
    #[serde(rename = "conversation.item.truncated")]
    ConversationItemTruncated {
        item_id: String,
        content_index: usize,
        audio_end_ms: u64,
    },
    #[serde(rename = "conversation.item.input_audio_transcription.delta")]
    InputTranscriptionDelta {
        item_id: String,
        content_index: usize,
        delta: String,
    },
    #[serde(rename = "conversation.item.input_audio_transcription.completed")]
    InputTranscriptionCompleted {
        item_id: String,
        content_index: usize,
        transcript: String,
        usage: TranscriptionUsage,
    },
    #[serde(rename = "conversation.item.input_audio_transcription.failed")]
    InputTranscriptionFailed {
        item_id: String,
        content_index: usize,
        error: TranscriptionError,
    },

    #[serde(rename = "input_audio_buffer.speech_started")]
    SpeechStarted {
        item_id: String,
        audio_start_ms: u64,
    },
    #[serde(rename = "input_audio_buffer.speech_stopped")]
    SpeechStopped { item_id: String, audio_end_ms: u64 },
    #[serde(rename = "input_audio_buffer.timeout_triggered")]
    InputTimeoutTriggered {
        item_id: String,
        audio_start_ms: u64,
        audio_end_ms: u64,
    },
    #[serde(rename = "input_audio_buffer.committed")]
    InputCommitted {
        item_id: String,
        previous_item_id: Option<String>,
    },
    #[serde(rename = "input_audio_buffer.cleared")]
    InputCleared,

    /// WebRTC only: the server's playout of a response (see [`super::Transport`]).
    #[serde(rename = "output_audio_buffer.started")]
    OutputBufferStarted { response_id: Option<String> },
    #[serde(rename = "output_audio_buffer.stopped")]
    OutputBufferStopped { response_id: Option<String> },
    #[serde(rename = "output_audio_buffer.cleared")]
    OutputBufferCleared { response_id: Option<String> },

    #[serde(rename = "response.created")]
    ResponseCreated { response: Value },
    #[serde(rename = "response.done")]
    ResponseDone { response: Value },
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded(OutputItem),
    #[serde(rename = "response.output_item.done")]
    OutputItemDone(OutputItem),
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded {
        #[serde(flatten)]
        at: ContentRef,
        part: Value,
    },
    #[serde(rename = "response.content_part.done")]
    ContentPartDone {
        #[serde(flatten)]
        at: ContentRef,
        part: Value,
    },
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta {
        #[serde(flatten)]
        at: ContentRef,
        delta: String,
    },
    #[serde(rename = "response.output_text.done")]
    OutputTextDone {
        #[serde(flatten)]
        at: ContentRef,
        text: String,
    },
    #[serde(rename = "response.output_audio_transcript.delta")]
    OutputTranscriptDelta {
        #[serde(flatten)]
        at: ContentRef,
        delta: String,
    },
    #[serde(rename = "response.output_audio_transcript.done")]
    OutputTranscriptDone {
        #[serde(flatten)]
        at: ContentRef,
        transcript: String,
    },
    /// WebSocket only: base64 audio in the session's output format.
    #[serde(rename = "response.output_audio.delta")]
    OutputAudioDelta {
        #[serde(flatten)]
        at: ContentRef,
        delta: String,
    },
    #[serde(rename = "response.output_audio.done")]
    OutputAudioDone {
        #[serde(flatten)]
        at: ContentRef,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta {
        #[serde(flatten)]
        at: CallRef,
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.done")]
    FunctionCallArgumentsDone {
        #[serde(flatten)]
        at: CallRef,
        name: String,
        arguments: String,
    },

    /// A session's MCP server being listed (see `super::mcp`): the `mcp_list_tools` item.
    #[serde(rename = "mcp_list_tools.in_progress")]
    McpListToolsInProgress { item_id: String },
    #[serde(rename = "mcp_list_tools.completed")]
    McpListToolsCompleted { item_id: String },
    #[serde(rename = "mcp_list_tools.failed")]
    McpListToolsFailed { item_id: String },
    /// A response's `mcp_call` item: its arguments, then the server's answer.
    #[serde(rename = "response.mcp_call_arguments.delta")]
    McpCallArgumentsDelta {
        #[serde(flatten)]
        at: OutputRef,
        delta: String,
    },
    #[serde(rename = "response.mcp_call_arguments.done")]
    McpCallArgumentsDone {
        #[serde(flatten)]
        at: OutputRef,
        arguments: String,
    },
    #[serde(rename = "response.mcp_call.in_progress")]
    McpCallInProgress {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.mcp_call.completed")]
    McpCallCompleted {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.mcp_call.failed")]
    McpCallFailed {
        item_id: String,
        output_index: usize,
    },
}

/// An event as it leaves the engine: the event and the id the engine gave it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerEventFrame {
    pub event_id: String,
    #[serde(flatten)]
    pub event: RealtimeServerEvent,
}

impl ServerEventFrame {
    /// The text frame a transport sends: a JSON object with `type` and `event_id`.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("server events serialize")
    }

    /// The `type` on the wire, for logs and counters.
    pub fn kind(&self) -> &'static str {
        self.event.kind()
    }
}

impl RealtimeServerEvent {
    /// The event's `type` as the wire names it.
    pub fn kind(&self) -> &'static str {
        use RealtimeServerEvent as E;
        match self {
            E::Error { .. } => "error",
            E::SessionCreated { .. } => "session.created",
            E::SessionUpdated { .. } => "session.updated",
            E::RateLimitsUpdated { .. } => "rate_limits.updated",
            E::ConversationItemAdded(_) => "conversation.item.added",
            E::ConversationItemDone(_) => "conversation.item.done",
            E::ConversationItemRetrieved { .. } => "conversation.item.retrieved",
            E::ConversationItemDeleted { .. } => "conversation.item.deleted",
            E::ConversationItemTruncated { .. } => "conversation.item.truncated",
            E::InputTranscriptionDelta { .. } => {
                "conversation.item.input_audio_transcription.delta"
            }
            E::InputTranscriptionCompleted { .. } => {
                "conversation.item.input_audio_transcription.completed"
            }
            E::InputTranscriptionFailed { .. } => {
                "conversation.item.input_audio_transcription.failed"
            }
            E::SpeechStarted { .. } => "input_audio_buffer.speech_started",
            E::SpeechStopped { .. } => "input_audio_buffer.speech_stopped",
            E::InputTimeoutTriggered { .. } => "input_audio_buffer.timeout_triggered",
            E::InputCommitted { .. } => "input_audio_buffer.committed",
            E::InputCleared => "input_audio_buffer.cleared",
            E::OutputBufferStarted { .. } => "output_audio_buffer.started",
            E::OutputBufferStopped { .. } => "output_audio_buffer.stopped",
            E::OutputBufferCleared { .. } => "output_audio_buffer.cleared",
            E::ResponseCreated { .. } => "response.created",
            E::ResponseDone { .. } => "response.done",
            E::OutputItemAdded(_) => "response.output_item.added",
            E::OutputItemDone(_) => "response.output_item.done",
            E::ContentPartAdded { .. } => "response.content_part.added",
            E::ContentPartDone { .. } => "response.content_part.done",
            E::OutputTextDelta { .. } => "response.output_text.delta",
            E::OutputTextDone { .. } => "response.output_text.done",
            E::OutputTranscriptDelta { .. } => "response.output_audio_transcript.delta",
            E::OutputTranscriptDone { .. } => "response.output_audio_transcript.done",
            E::OutputAudioDelta { .. } => "response.output_audio.delta",
            E::OutputAudioDone { .. } => "response.output_audio.done",
            E::FunctionCallArgumentsDelta { .. } => "response.function_call_arguments.delta",
            E::FunctionCallArgumentsDone { .. } => "response.function_call_arguments.done",
            E::McpListToolsInProgress { .. } => "mcp_list_tools.in_progress",
            E::McpListToolsCompleted { .. } => "mcp_list_tools.completed",
            E::McpListToolsFailed { .. } => "mcp_list_tools.failed",
            E::McpCallArgumentsDelta { .. } => "response.mcp_call_arguments.delta",
            E::McpCallArgumentsDone { .. } => "response.mcp_call_arguments.done",
            E::McpCallInProgress { .. } => "response.mcp_call.in_progress",
            E::McpCallCompleted { .. } => "response.mcp_call.completed",
            E::McpCallFailed { .. } => "response.mcp_call.failed",
        }
    }
}

/// `error.error`: what was refused or failed, echoing the client's `event_id` when a client
/// event caused it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorObject {
    #[serde(rename = "type")]
    pub kind: String,
    pub code: String,
    pub message: String,
    pub param: Option<String>,
    pub event_id: Option<String>,
}

/// An item and where it sits in the conversation (`conversation.item.added` / `.done`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemInPlace {
    pub previous_item_id: Option<String>,
    pub item: Value,
}

/// A response's output item at its index (`response.output_item.added` / `.done`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputItem {
    pub response_id: String,
    pub output_index: usize,
    pub item: Value,
}

/// Which content part of which output item of which response an event is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContentRef {
    pub response_id: String,
    pub item_id: String,
    pub output_index: usize,
    pub content_index: usize,
}

/// Which output item of which response an event is about (MCP call events).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutputRef {
    pub response_id: String,
    pub item_id: String,
    pub output_index: usize,
}

/// Which function call of which response an arguments event is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallRef {
    pub response_id: String,
    pub item_id: String,
    pub output_index: usize,
    pub call_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateLimit {
    pub name: &'static str,
    pub limit: u64,
    pub remaining: u64,
    pub reset_seconds: f64,
}

/// A transcription's cost by input duration, the form the service reports for audio models.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TranscriptionUsage {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub seconds: f64,
}

impl TranscriptionUsage {
    pub fn duration_ms(ms: u64) -> Self {
        TranscriptionUsage {
            kind: "duration",
            seconds: ms as f64 / 1000.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TranscriptionError {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub code: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every variant's `kind()` is the `type` serde writes, so logs and the wire agree.
    #[test]
    fn kind_is_the_serialized_type() {
        let at = ContentRef {
            response_id: "resp_1".into(),
            item_id: "item_1".into(),
            output_index: 0,
            content_index: 0,
        };
        let call = CallRef {
            response_id: "resp_1".into(),
            item_id: "item_2".into(),
            output_index: 1,
            call_id: "call_1".into(),
        };
        let mcp = OutputRef {
            response_id: "resp_1".into(),
            item_id: "item_3".into(),
            output_index: 0,
        };
        let placed = ItemInPlace {
            previous_item_id: None,
            item: json!({}),
        };
        let output = OutputItem {
            response_id: "resp_1".into(),
            output_index: 0,
            item: json!({}),
        };
        use RealtimeServerEvent as E;
        let all = vec![
            E::Error {
                error: ErrorObject {
                    kind: "invalid_request_error".into(),
                    code: "x".into(),
                    message: "m".into(),
                    param: None,
                    event_id: None,
                },
            },
            E::SessionCreated { session: json!({}) },
            E::SessionUpdated { session: json!({}) },
            E::RateLimitsUpdated {
                rate_limits: Vec::new(),
            },
            E::ConversationItemAdded(placed.clone()),
            E::ConversationItemDone(placed),
            E::ConversationItemRetrieved { item: json!({}) },
            E::ConversationItemDeleted {
                item_id: "i".into(),
            },
            E::ConversationItemTruncated {
                item_id: "i".into(),
                content_index: 0,
                audio_end_ms: 1,
            },
            E::InputTranscriptionDelta {
                item_id: "i".into(),
                content_index: 0,
                delta: "d".into(),
            },
            E::InputTranscriptionCompleted {
                item_id: "i".into(),
                content_index: 0,
                transcript: "t".into(),
                usage: TranscriptionUsage::duration_ms(1500),
            },
            E::InputTranscriptionFailed {
                item_id: "i".into(),
                content_index: 0,
                error: TranscriptionError {
                    kind: "transcription_error",
                    code: "c".into(),
                    message: "m".into(),
                },
            },
            E::SpeechStarted {
                item_id: "i".into(),
                audio_start_ms: 0,
            },
            E::SpeechStopped {
                item_id: "i".into(),
                audio_end_ms: 0,
            },
            E::InputTimeoutTriggered {
                item_id: "i".into(),
                audio_start_ms: 0,
                audio_end_ms: 0,
            },
            E::InputCommitted {
                item_id: "i".into(),
                previous_item_id: None,
            },
            E::InputCleared,
            E::OutputBufferStarted { response_id: None },
            E::OutputBufferStopped { response_id: None },
            E::OutputBufferCleared { response_id: None },
            E::ResponseCreated {
                response: json!({}),
            },
            E::ResponseDone {
                response: json!({}),
            },
            E::OutputItemAdded(output.clone()),
            E::OutputItemDone(output),
            E::ContentPartAdded {
                at: at.clone(),
                part: json!({}),
            },
            E::ContentPartDone {
                at: at.clone(),
                part: json!({}),
            },
            E::OutputTextDelta {
                at: at.clone(),
                delta: "d".into(),
            },
            E::OutputTextDone {
                at: at.clone(),
                text: "t".into(),
            },
            E::OutputTranscriptDelta {
                at: at.clone(),
                delta: "d".into(),
            },
            E::OutputTranscriptDone {
                at: at.clone(),
                transcript: "t".into(),
            },
            E::OutputAudioDelta {
                at: at.clone(),
                delta: "AAAA".into(),
            },
            E::OutputAudioDone { at },
            E::FunctionCallArgumentsDelta {
                at: call.clone(),
                delta: "{".into(),
            },
            E::FunctionCallArgumentsDone {
                at: call,
                name: "n".into(),
                arguments: "{}".into(),
            },
            E::McpListToolsInProgress {
                item_id: "i".into(),
            },
            E::McpListToolsCompleted {
                item_id: "i".into(),
            },
            E::McpListToolsFailed {
                item_id: "i".into(),
            },
            E::McpCallArgumentsDelta {
                at: mcp.clone(),
                delta: "{".into(),
            },
            E::McpCallArgumentsDone {
                at: mcp,
                arguments: "{}".into(),
            },
            E::McpCallInProgress {
                item_id: "i".into(),
                output_index: 0,
            },
            E::McpCallCompleted {
                item_id: "i".into(),
                output_index: 0,
            },
            E::McpCallFailed {
                item_id: "i".into(),
                output_index: 0,
            },
        ];
        for event in all {
            let frame = ServerEventFrame {
                event_id: "event_000001".into(),
                event,
            };
            let v: Value = serde_json::from_str(&frame.to_text()).unwrap();
            assert_eq!(v["type"], frame.kind(), "{v}");
            assert_eq!(v["event_id"], "event_000001");
        }
    }

    #[test]
    fn locators_are_flattened_into_the_event() {
        let frame = ServerEventFrame {
            event_id: "event_000002".into(),
            event: RealtimeServerEvent::OutputTranscriptDelta {
                at: ContentRef {
                    response_id: "resp_1".into(),
                    item_id: "item_1".into(),
                    output_index: 0,
                    content_index: 0,
                },
                delta: "Hello".into(),
            },
        };
        let v: Value = serde_json::from_str(&frame.to_text()).unwrap();
        assert_eq!(
            v,
            json!({"type": "response.output_audio_transcript.delta", "event_id": "event_000002",
                   "response_id": "resp_1", "item_id": "item_1", "output_index": 0,
                   "content_index": 0, "delta": "Hello"})
        );
    }
}
