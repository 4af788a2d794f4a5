//! The effective session and the `session.update` rules, as types.
//!
//! [`SessionConfig`] is the session `session.created`/`session.updated` carry, whole: every
//! field of `RealtimeSessionCreateRequest` in the `openai` types (npm 7.59.0,
//! `resources/realtime/realtime.d.ts`; the GA API) is a typed field, so what the engine acts on
//! is read from a type, not looked up in JSON. A [`SessionUpdate`] is an update as decoded:
//! `deny_unknown_fields` at every level refuses a key the types do not have with its path
//! (`unknown_parameter`, `session.audio.input.gain`), as the service refuses it, so an update
//! cannot grow the session with keys of its choosing and a typo is an error, not a default.
//!
//! Fields the engine does not act on (`prompt`, `reasoning`, `tracing`'s object) are kept as
//! the client sent them, for the round trip. The one open object is `turn_detection`, whose
//! unknown keys the SDK passes through (`model_version`); they are kept in its `extra`, bounded
//! on WebRTC by the whole-session limit of [`super::session_limits`] (a WebSocket message
//! may be 16 MiB).

use serde::de::{Deserializer, IgnoredAny};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::SessionType;
use super::client_event::decode_at;
use super::events::ClientError;
use crate::audio::codec::Codec;
use crate::model::tools::{Tool, ToolChoice};

/// The whole effective session, as the client sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionConfig {
    #[serde(rename = "type")]
    pub kind: SessionType,
    pub object: &'static str,
    pub id: String,
    /// Set by the transport (the engine has no clock); absent until then, as the types allow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Recorded verbatim; only our names switch the model (see `Conversation::new`).
    pub model: String,
    /// Exactly one: the service never produces audio and text at once.
    pub output_modalities: Vec<Modality>,
    pub instructions: String,
    pub tools: Vec<Tool>,
    pub tool_choice: ToolChoice,
    pub max_output_tokens: MaxTokens,
    pub tracing: Option<Tracing>,
    pub truncation: Truncation,
    pub prompt: Option<Map<String, Value>>,
    pub include: Option<Vec<String>>,
    /// Absent until a client sets it: the types give no default, and `true` is what is done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Map<String, Value>>,
    pub audio: AudioConfig,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Modality {
    Audio,
    Text,
}

/// `max_output_tokens`: a count, or `"inf"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokens {
    Inf,
    Limit(u32),
}

/// `tracing`: `"auto"` or a configuration object, kept as sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Tracing {
    Auto(AutoLiteral),
    Config(Map<String, Value>),
}

/// The literal `"auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AutoLiteral {
    #[serde(rename = "auto")]
    Auto,
}

/// `truncation`: `"auto"`, `"disabled"` or a retention object, kept as sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Truncation {
    Mode(TruncationMode),
    Config(Map<String, Value>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TruncationMode {
    Auto,
    Disabled,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AudioConfig {
    pub input: AudioInput,
    pub output: AudioOutput,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AudioInput {
    pub format: AudioFormat,
    pub transcription: Option<Transcription>,
    pub noise_reduction: Option<NoiseReduction>,
    pub turn_detection: Option<TurnDetectionConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AudioOutput {
    pub format: AudioFormat,
    pub voice: Voice,
    pub speed: f64,
}

/// The format of base64 audio in events (not of RTP, though clients set it on WebRTC too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum AudioFormat {
    #[serde(rename = "audio/pcm")]
    Pcm {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rate: Option<u32>,
    },
    #[serde(rename = "audio/pcmu")]
    Pcmu,
    #[serde(rename = "audio/pcma")]
    Pcma,
}

impl AudioFormat {
    pub const PCM_24K: AudioFormat = AudioFormat::Pcm { rate: Some(24_000) };

    /// The codec a WebSocket session's audio in this format is carried in, its PCM rate
    /// included.
    pub fn codec(self) -> Codec {
        match self {
            AudioFormat::Pcm { rate: Some(16_000) } => Codec::Pcm16,
            AudioFormat::Pcm { .. } => Codec::Pcm24,
            AudioFormat::Pcmu => Codec::Pcmu,
            AudioFormat::Pcma => Codec::Pcma,
        }
    }

    /// Its `type`.
    pub fn name(self) -> &'static str {
        match self {
            AudioFormat::Pcm { .. } => "audio/pcm",
            AudioFormat::Pcmu => "audio/pcmu",
            AudioFormat::Pcma => "audio/pcma",
        }
    }

    /// The format named by its `type` (PCM at 24 kHz).
    pub fn from_name(name: &str) -> Option<AudioFormat> {
        match name {
            "audio/pcm" => Some(AudioFormat::PCM_24K),
            "audio/pcmu" => Some(AudioFormat::Pcmu),
            "audio/pcma" => Some(AudioFormat::Pcma),
            _ => None,
        }
    }

    /// Bytes per millisecond of its audio (16-bit 24 kHz PCM, or 8-bit 8 kHz G.711).
    pub fn bytes_per_ms(self) -> u64 {
        match self {
            AudioFormat::Pcm { rate: Some(16_000) } => 32,
            AudioFormat::Pcm { .. } => 48,
            AudioFormat::Pcmu | AudioFormat::Pcma => 8,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transcription {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
}

/// The types make `type` optional: `{}` is a valid noise reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoiseReduction {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<NoiseKind>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoiseKind {
    NearField,
    FarField,
}

/// A built-in voice's name, or a custom voice `{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Voice {
    Name(String),
    Custom { id: String },
}

impl Voice {
    /// Responses carry a voice as a string (the SDK's schema wants one): a custom voice's id.
    pub fn name(&self) -> &str {
        match self {
            Voice::Name(n) => n,
            Voice::Custom { id } => id,
        }
    }
}

/// `turn_detection`, complete (an update's fields merged over the current settings or the
/// type's defaults, see [`merge_turn_detection`]), with the keys the types do not name kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TurnDetectionConfig {
    ServerVad(ServerVad),
    SemanticVad(SemanticVad),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerVad {
    pub threshold: f64,
    pub prefix_padding_ms: u32,
    pub silence_duration_ms: u32,
    pub create_response: bool,
    pub interrupt_response: bool,
    pub idle_timeout_ms: Option<u32>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SemanticVad {
    pub eagerness: Eagerness,
    pub create_response: bool,
    pub interrupt_response: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Eagerness {
    Low,
    Medium,
    High,
    Auto,
}

/// The real service's defaults (docs/realtime-protocol.md §5); no client package states the
/// `create_response`/`interrupt_response` defaults, so they are true, as the service is believed
/// to do.
impl TurnDetectionConfig {
    fn server_vad() -> Self {
        TurnDetectionConfig::ServerVad(ServerVad {
            threshold: 0.5,
            prefix_padding_ms: 300,
            silence_duration_ms: 500,
            create_response: true,
            interrupt_response: true,
            idle_timeout_ms: None,
            extra: Map::new(),
        })
    }

    fn semantic_vad() -> Self {
        TurnDetectionConfig::SemanticVad(SemanticVad {
            eagerness: Eagerness::Auto,
            create_response: true,
            interrupt_response: true,
            extra: Map::new(),
        })
    }

    fn type_name(&self) -> &'static str {
        match self {
            TurnDetectionConfig::ServerVad(_) => "server_vad",
            TurnDetectionConfig::SemanticVad(_) => "semantic_vad",
        }
    }
}

/// The turn-detection settings the media side's VAD should use.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnDetection {
    /// `"server_vad"` or `"semantic_vad"`.
    pub kind: String,
    pub threshold: f32,
    pub prefix_padding_ms: u32,
    pub silence_duration_ms: u32,
    pub create_response: bool,
    pub interrupt_response: bool,
    pub idle_timeout_ms: Option<u32>,
}

impl SessionConfig {
    pub(super) fn new(session_id: &str, model: &str) -> Self {
        SessionConfig {
            kind: SessionType::Realtime,
            object: "realtime.session",
            id: session_id.to_owned(),
            expires_at: None,
            model: model.to_owned(),
            output_modalities: vec![Modality::Audio],
            instructions: String::new(),
            tools: Vec::new(),
            tool_choice: ToolChoice::default(),
            max_output_tokens: MaxTokens::Inf,
            tracing: None,
            truncation: Truncation::Mode(TruncationMode::Auto),
            prompt: None,
            include: None,
            parallel_tool_calls: None,
            reasoning: None,
            audio: AudioConfig {
                input: AudioInput {
                    format: AudioFormat::PCM_24K,
                    transcription: None,
                    noise_reduction: None,
                    turn_detection: Some(TurnDetectionConfig::server_vad()),
                },
                output: AudioOutput {
                    format: AudioFormat::PCM_24K,
                    voice: Voice::Name("alloy".into()),
                    speed: 1.0,
                },
            },
        }
    }

    /// Reads the effective turn detection. `semantic_vad` is served by the same energy VAD,
    /// with its eagerness mapped to a silence wait (high 300 ms, medium/auto 500 ms, low
    /// 1000 ms): the real semantic model ends turns by meaning within 2/4/8 s caps that a VAD
    /// cannot reproduce, so the mapping keeps the ordering of eagerness levels and the
    /// server_vad default feel.
    pub(super) fn turn_detection(&self) -> Option<TurnDetection> {
        let td = self.audio.input.turn_detection.as_ref()?;
        let kind = td.type_name().to_owned();
        Some(match td {
            TurnDetectionConfig::ServerVad(v) => TurnDetection {
                kind,
                threshold: v.threshold as f32,
                prefix_padding_ms: v.prefix_padding_ms,
                silence_duration_ms: v.silence_duration_ms,
                create_response: v.create_response,
                interrupt_response: v.interrupt_response,
                idle_timeout_ms: v.idle_timeout_ms,
            },
            TurnDetectionConfig::SemanticVad(v) => TurnDetection {
                kind,
                threshold: 0.5,
                prefix_padding_ms: 300,
                silence_duration_ms: match v.eagerness {
                    Eagerness::High => 300,
                    Eagerness::Low => 1000,
                    Eagerness::Medium | Eagerness::Auto => 500,
                },
                create_response: v.create_response,
                interrupt_response: v.interrupt_response,
                idle_timeout_ms: None,
            },
        })
    }

    pub fn text_only(&self) -> bool {
        self.output_modalities == [Modality::Text]
    }

    /// Applies a decoded `session.update` and returns the new effective config, or an error
    /// and no change at all (validation runs on the merged result before anything is
    /// committed).
    ///
    /// Merge rules: the session, `audio`, `audio.input` and `audio.output` objects merge key
    /// by key; every other value replaces (so `null` clears, `[]` empties `tools`, and a new
    /// `format` does not inherit the old `rate`). `turn_detection` merges into the current
    /// settings when the type is unchanged and starts from that type's defaults when it
    /// changes, so `{type:"semantic_vad"}` becomes a complete semantic config. `voice_locked`
    /// refuses a voice change once assistant audio exists, as the service documents.
    pub(super) fn updated(
        &self,
        update: SessionUpdate,
        voice_locked: bool,
    ) -> Result<SessionConfig, ClientError> {
        let mut next = self.clone();
        let u = update;
        if let Some(kind) = u.kind
            && kind != self.kind
        {
            return Err(ClientError::invalid(
                "session.type",
                format!(
                    "this connection's session is '{}'; its type cannot change",
                    self.kind.name()
                ),
            ));
        }
        set(&mut next.model, u.model);
        set(&mut next.instructions, u.instructions);
        set(&mut next.output_modalities, u.output_modalities);
        set(&mut next.tools, u.tools);
        set(&mut next.tool_choice, u.tool_choice);
        set(&mut next.max_output_tokens, u.max_output_tokens);
        set(&mut next.truncation, u.truncation);
        set(&mut next.tracing, u.tracing);
        set(&mut next.prompt, u.prompt);
        set(&mut next.include, u.include);
        set(&mut next.parallel_tool_calls, u.parallel_tool_calls);
        set(&mut next.reasoning, u.reasoning);
        if let Some(audio) = u.audio {
            if let Some(input) = audio.input {
                let i = &mut next.audio.input;
                set(&mut i.format, input.format);
                set(&mut i.transcription, input.transcription);
                set(&mut i.noise_reduction, input.noise_reduction);
                if let Some(td) = input.turn_detection {
                    i.turn_detection = match td {
                        None => None,
                        Some(fields) => {
                            Some(merge_turn_detection(i.turn_detection.as_ref(), fields)?)
                        }
                    };
                }
            }
            if let Some(output) = audio.output {
                let o = &mut next.audio.output;
                set(&mut o.format, output.format);
                set(&mut o.voice, output.voice);
                set(&mut o.speed, output.speed);
            }
        }
        next.validate()?;
        if voice_locked && self.audio.output.voice != next.audio.output.voice {
            return Err(ClientError::new(
                "cannot_update_voice",
                "Cannot update a conversation's voice if assistant audio is present.",
            )
            .param("session.audio.output.voice"));
        }
        Ok(next)
    }

    /// The rules a type alone cannot state: ranges, and the one-modality rule.
    fn validate(&self) -> Result<(), ClientError> {
        check_modalities(&self.output_modalities, "session.output_modalities")?;
        check_max_tokens(self.max_output_tokens, "session.max_output_tokens")?;
        check_format(self.audio.input.format, "session.audio.input.format")?;
        check_format(self.audio.output.format, "session.audio.output.format")?;
        let voice = &self.audio.output.voice;
        if voice.name().is_empty() {
            return Err(ClientError::invalid("session.audio.output.voice", "''"));
        }
        let speed = self.audio.output.speed;
        if !crate::audio::tts::SPEEDS.contains(&speed) {
            return Err(ClientError::invalid(
                "session.audio.output.speed",
                format!("{speed} (must be between 0.25 and 1.5)"),
            ));
        }
        Ok(())
    }
}

/// An update's value for a field, if it has one.
fn set<T>(field: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *field = v;
    }
}

/// A `session.update`'s session, as decoded: `None` leaves a field as it is; for the nullable
/// fields `Some(None)` is an explicit `null`, which clears. `id`, `object` and `expires_at` are
/// the server's (a client may send back a session it was given) and are ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct SessionUpdate {
    #[serde(rename = "type", deserialize_with = "present")]
    pub kind: Option<SessionType>,
    #[serde(deserialize_with = "present")]
    pub model: Option<String>,
    #[serde(deserialize_with = "present")]
    pub instructions: Option<String>,
    #[serde(deserialize_with = "present")]
    pub output_modalities: Option<Vec<Modality>>,
    #[serde(deserialize_with = "present")]
    pub tools: Option<Vec<Tool>>,
    #[serde(deserialize_with = "present")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(deserialize_with = "present")]
    pub max_output_tokens: Option<MaxTokens>,
    #[serde(deserialize_with = "present")]
    pub truncation: Option<Truncation>,
    #[serde(deserialize_with = "nullable")]
    pub tracing: Option<Option<Tracing>>,
    #[serde(deserialize_with = "nullable")]
    pub prompt: Option<Option<Map<String, Value>>>,
    #[serde(deserialize_with = "nullable")]
    pub include: Option<Option<Vec<String>>>,
    #[serde(deserialize_with = "nullable")]
    pub parallel_tool_calls: Option<Option<bool>>,
    #[serde(deserialize_with = "nullable")]
    pub reasoning: Option<Option<Map<String, Value>>>,
    #[serde(deserialize_with = "present")]
    pub audio: Option<AudioUpdate>,
    #[serde(rename = "id")]
    _id: IgnoredAny,
    #[serde(rename = "object")]
    _object: IgnoredAny,
    #[serde(rename = "expires_at")]
    _expires_at: IgnoredAny,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct AudioUpdate {
    #[serde(deserialize_with = "present")]
    input: Option<AudioInputUpdate>,
    #[serde(deserialize_with = "present")]
    output: Option<AudioOutputUpdate>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct AudioInputUpdate {
    #[serde(deserialize_with = "present")]
    format: Option<AudioFormat>,
    #[serde(deserialize_with = "nullable")]
    transcription: Option<Option<Transcription>>,
    #[serde(deserialize_with = "nullable")]
    noise_reduction: Option<Option<NoiseReduction>>,
    /// Open: merged as JSON, then checked and typed (see [`merge_turn_detection`]).
    #[serde(deserialize_with = "nullable")]
    turn_detection: Option<Option<Map<String, Value>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct AudioOutputUpdate {
    #[serde(deserialize_with = "present")]
    format: Option<AudioFormat>,
    #[serde(deserialize_with = "present")]
    voice: Option<Voice>,
    #[serde(deserialize_with = "present")]
    speed: Option<f64>,
}

impl SessionUpdate {
    /// Decodes a `session` object, errors naming the field under `session.`.
    pub(super) fn decode(session: &Value) -> Result<SessionUpdate, ClientError> {
        decode_at("session", session.clone())
    }
}

/// A field that, when present, must hold a value (`null` is refused as the wrong type).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A field where `null` means "clear it", apart from absent ("leave it").
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

impl Serialize for MaxTokens {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MaxTokens::Inf => s.serialize_str("inf"),
            MaxTokens::Limit(n) => s.serialize_u32(*n),
        }
    }
}

impl<'de> Deserialize<'de> for MaxTokens {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match Value::deserialize(d)? {
            Value::String(s) if s == "inf" => Ok(MaxTokens::Inf),
            Value::Number(n) => match n.as_u64().map(u32::try_from) {
                Some(Ok(n)) => Ok(MaxTokens::Limit(n)),
                _ => Err(D::Error::custom(format!(
                    "{n} (expected 1..4096 or \"inf\")"
                ))),
            },
            other => Err(D::Error::custom(format!(
                "{other} (expected 1..4096 or \"inf\")"
            ))),
        }
    }
}

impl MaxTokens {
    pub fn limit(self) -> Option<u64> {
        match self {
            MaxTokens::Inf => None,
            MaxTokens::Limit(n) => Some(u64::from(n)),
        }
    }
}

/// Exactly one of `audio`/`text`: the service never produces both at once.
pub(super) fn check_modalities(m: &[Modality], param: &str) -> Result<(), ClientError> {
    if m.len() == 1 {
        return Ok(());
    }
    let sent = serde_json::to_string(m).unwrap_or_default();
    Err(ClientError::invalid(
        param,
        format!("{sent} (expected [\"audio\"] or [\"text\"])"),
    ))
}

pub(super) fn check_max_tokens(m: MaxTokens, param: &str) -> Result<(), ClientError> {
    match m {
        MaxTokens::Limit(n) if !(1..=4096).contains(&n) => Err(ClientError::invalid(
            param,
            format!("{n} (expected 1..4096 or \"inf\")"),
        )),
        _ => Ok(()),
    }
}

/// PCM is 24 kHz only: the stubs and the media side speak nothing else.
pub(super) fn check_format(f: AudioFormat, param: &str) -> Result<(), ClientError> {
    match f {
        AudioFormat::Pcm { rate: Some(r) } if r != 24_000 => Err(ClientError::invalid(
            &format!("{param}.rate"),
            format!("{r} (only 24000 is supported)"),
        )),
        _ => Ok(()),
    }
}

/// An update's `turn_detection` over the current one: merged key by key when the type is
/// unchanged, over the new type's defaults when it changes; then checked, naming the key.
fn merge_turn_detection(
    current: Option<&TurnDetectionConfig>,
    update: Map<String, Value>,
) -> Result<TurnDetectionConfig, ClientError> {
    const P: &str = "session.audio.input.turn_detection";
    let new_type = match update.get("type") {
        None => current.map_or("server_vad", TurnDetectionConfig::type_name),
        Some(Value::String(t)) if t == "server_vad" || t == "semantic_vad" => t.as_str(),
        Some(other) => {
            return Err(ClientError::invalid(
                &format!("{P}.type"),
                format!("{other} (expected 'server_vad' or 'semantic_vad')"),
            ));
        }
    };
    let base = match current {
        Some(c) if c.type_name() == new_type => c.clone(),
        _ if new_type == "semantic_vad" => TurnDetectionConfig::semantic_vad(),
        _ => TurnDetectionConfig::server_vad(),
    };
    let Ok(Value::Object(mut merged)) = serde_json::to_value(&base) else {
        unreachable!("turn detection serialises as an object");
    };
    check_turn_detection_fields(&update)?;
    merged.extend(update);
    serde_json::from_value(Value::Object(merged)).map_err(|e| ClientError::invalid(P, e))
}

/// The known keys' rules, checked on the update as sent so that the error names the key.
fn check_turn_detection_fields(fields: &Map<String, Value>) -> Result<(), ClientError> {
    const P: &str = "session.audio.input.turn_detection";
    for key in ["create_response", "interrupt_response"] {
        if fields.get(key).is_some_and(|v| !v.is_boolean()) {
            return Err(ClientError::wrong_type(&format!("{P}.{key}"), "a boolean"));
        }
    }
    if let Some(t) = fields.get("threshold")
        && t.as_f64().is_none_or(|t| !(0.0..=1.0).contains(&t))
    {
        return Err(ClientError::invalid(&format!("{P}.threshold"), t));
    }
    for key in ["prefix_padding_ms", "silence_duration_ms"] {
        if let Some(v) = fields.get(key)
            && v.as_u64().is_none_or(|ms| ms > 10_000)
        {
            return Err(ClientError::invalid(&format!("{P}.{key}"), v));
        }
    }
    if let Some(v) = fields.get("idle_timeout_ms")
        && !v.is_null()
        && v.as_u64()
            .is_none_or(|ms| ms == 0 || ms > u64::from(u32::MAX))
    {
        return Err(ClientError::invalid(&format!("{P}.idle_timeout_ms"), v));
    }
    if let Some(v) = fields.get("eagerness")
        && !matches!(v.as_str(), Some("low" | "medium" | "high" | "auto"))
    {
        return Err(ClientError::invalid(&format!("{P}.eagerness"), v));
    }
    Ok(())
}
