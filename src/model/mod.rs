//! The model boundary: what answers a call, behind one per-call trait.
//!
//! The Realtime engine ([`crate::realtime::Conversation`]) owns one [`Model`] per call and asks it
//! two things at the level of the protocol: what a response does ([`Model::respond`]: speech or
//! text, tool calls, a failure) and what the caller said in a committed audio turn
//! ([`Model::transcribe`]). Frame-level models (`loopback`) also take the caller's encoded frames
//! and give frames back ([`Model::on_audio`] / [`Model::poll_audio`]). The transceiver knows none
//! of this: it feeds frames and renders the engine's actions, so a networked backend is one more
//! implementation here, with no transceiver code.
//!
//! Everything here is deterministic and clock-free: the stubs answer from the conversation alone,
//! which is what makes an app's tests against them repeatable. Slow rendering (speech synthesis)
//! is the media side's job and comes back through the worker's one "job done" path.
//!
//! Layout: `kind` parses model names, `echo`/`tts`/`loopback`/`script` are the stubs, `tools`
//! decides which tools a stub calls and `tool_args` makes their arguments from JSON Schema.

pub mod echo;
pub mod kind;
pub mod loopback;
pub mod script;
pub mod tool_args;
pub mod tools;
pub mod tts;

pub use kind::ModelKind;

use std::time::Instant;

/// One encoded audio frame from the caller, in the codec negotiated on the audio m-line (Opus,
/// or G.711 for telephony clients).
#[derive(Debug, Clone, Copy)]
pub struct AudioIn<'a> {
    pub payload: &'a [u8],
    pub rtp_timestamp: u32,
    pub sequence: u16,
    /// The negotiated codec's RTP clock (48 kHz Opus, 8 kHz G.711): what the timestamp counts.
    pub clock_hz: u32,
}

/// One encoded frame for the caller, with how much media time it covers in ticks of the
/// negotiated RTP clock, so the sender can advance its RTP timestamp without decoding.
#[derive(Debug, Clone)]
pub struct AudioOut {
    pub payload: bytes::Bytes,
    pub samples: u32,
}

/// What a response says, decided by the model and rendered by the media side. Not `Speech`:
/// that is [`crate::audio::tts::Speech`], the PCM a `Text` reply becomes once synthesized.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Play back the caller's own audio between these input times (the echo model).
    EchoInput {
        input_item_id: String,
        audio_start_ms: u64,
        audio_end_ms: u64,
    },
    /// Synthesize and speak this text. The text is exactly the transcript the client receives.
    Text { text: String },
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text { text: text.into() }
    }

    /// The transcript the client receives: the spoken text, or for an echo what it is doing.
    pub fn transcript(&self) -> String {
        match self {
            Reply::EchoInput {
                audio_start_ms,
                audio_end_ms,
                ..
            } => format!(
                "Echoing your {} second turn.",
                seconds(audio_end_ms - audio_start_ms)
            ),
            Reply::Text { text } => text.clone(),
        }
    }
}

/// Seconds with one decimal, as spoken ("2.4").
pub fn seconds(ms: u64) -> String {
    format!("{:.1}", ms as f64 / 1000.0)
}

/// The input a response answers, as the engine hands it to the model.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt<'a> {
    /// The caller's committed audio turn (input time), with its transcript when there is one.
    Audio {
        item_id: &'a str,
        start_ms: u64,
        end_ms: u64,
        transcript: Option<&'a str>,
    },
    /// The silent span an idle timeout committed.
    Idle,
    /// A user message's text (typed, or a client-made item's transcript).
    Text(String),
    /// Audio sent as data (`input_audio_buffer.append`), which the media side does not hold.
    AppendedAudio { ms: u64 },
    /// A user message with nothing readable in it (an image alone).
    Unreadable,
    /// What the app returned for the model's tool calls, oldest first.
    ToolOutputs(Vec<ToolOutput<'a>>),
    /// No unanswered input.
    Nothing,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput<'a> {
    pub call_id: &'a str,
    /// The called function, found from the `function_call` item with the same `call_id`.
    pub name: Option<&'a str>,
    pub output: &'a str,
}

/// Everything a model may consult to plan one response.
#[derive(Debug, Clone)]
pub struct ResponseContext<'a> {
    pub prompt: Prompt<'a>,
    /// `response.create`'s `instructions`, when given.
    pub instructions: Option<&'a str>,
    /// The tools in effect (the response's, else the session's).
    pub tools: &'a [tools::Tool],
    pub tool_choice: &'a tools::ToolChoice,
    pub parallel_tool_calls: bool,
    /// The tools the session's MCP servers listed (and `allowed_tools` lets through).
    pub mcp_tools: &'a [McpCallable],
    /// Responses this call started before this one (0 for the first).
    pub index: u64,
}

/// One tool an MCP server listed for this session, which a stub may call like a function.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCallable {
    pub server_label: String,
    pub name: String,
    pub input_schema: serde_json::Value,
}

/// A function call the model makes; the engine gives it its ids.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    /// A JSON object as text, as the `arguments` field carries it.
    pub arguments: String,
    /// The MCP server whose tool this is; `None` for a function the app runs.
    pub server_label: Option<String>,
}

/// How a response ends once its output is out.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Ending {
    #[default]
    Completed,
    /// `failed`, after an `error` event with this code and message.
    Failed { code: String, message: String },
    /// `incomplete` with reason `max_output_tokens`: the output was cut.
    Incomplete,
    /// The session hit its limit: `error` `session_expired`, then the call ends.
    SessionExpired,
}

/// What one response does, in order: wait, say `reply`, make `tool_calls`, end as `ending`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// Silence before the reply's audio starts (a slow model).
    pub delay_ms: u64,
    pub reply: Option<Reply>,
    pub tool_calls: Vec<ToolCall>,
    pub ending: Ending,
}

impl Plan {
    pub fn say(reply: Reply) -> Plan {
        Plan {
            reply: Some(reply),
            ..Plan::default()
        }
    }

    /// A response that fails at once with an `error` event saying why.
    pub fn fail(code: &str, message: impl Into<String>) -> Plan {
        Plan {
            ending: Ending::Failed {
                code: code.to_owned(),
                message: message.into(),
            },
            ..Plan::default()
        }
    }
}

/// A committed span of caller input to transcribe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AudioTurn {
    pub what: Heard,
    pub ms: u64,
    /// The response this turn will be answered by (responses started so far).
    pub next_response: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    Speech,
    Silence,
    /// Audio sent as data.
    Appended,
}

/// What a model says the caller said.
#[derive(Debug, Clone, PartialEq)]
pub enum Transcription {
    Text(String),
    /// `conversation.item.input_audio_transcription.failed` with this code and message.
    Failed {
        code: String,
        message: String,
    },
}

/// What a model with no recognizer says it heard: "[speech, 2.4 s]", never invented words.
pub fn bracketed_note(turn: &AudioTurn) -> Transcription {
    let what = match turn.what {
        Heard::Speech => "speech",
        Heard::Silence => "silence",
        Heard::Appended => "audio",
    };
    Transcription::Text(format!("[{what}, {} s]", seconds(turn.ms)))
}

/// One call's model. See the module docs.
pub trait Model: Send {
    fn kind(&self) -> ModelKind;

    /// Plans a response: the engine turns the plan into the Realtime events and media actions.
    fn respond(&mut self, ctx: &ResponseContext<'_>) -> Plan;

    /// The transcript of a committed turn, when the session asks for transcription. Stubs with
    /// no recognizer say what they heard in a bracketed note, never invented words.
    fn transcribe(&mut self, turn: &AudioTurn) -> Transcription {
        bracketed_note(turn)
    }

    /// A caller frame, for frame-level models; turn-based ones get turns from the engine.
    fn on_audio(&mut self, _now: Instant, _frame: AudioIn<'_>) {}

    /// The next frame to send now, for frame-level models.
    fn poll_audio(&mut self, _now: Instant) -> Option<AudioOut> {
        None
    }
}

/// The model a call starts with or switches to. An unknown script is not refused here (the
/// caller checks names it can); it becomes a script model that says so on every turn.
pub fn build(kind: &ModelKind) -> Box<dyn Model> {
    match kind {
        ModelKind::Echo => Box::new(echo::Echo),
        ModelKind::Tts => Box::new(tts::Tts),
        ModelKind::Loopback => Box::new(loopback::Loopback::default()),
        ModelKind::Script(name) => Box::new(script::ScriptModel::load(name)),
    }
}
