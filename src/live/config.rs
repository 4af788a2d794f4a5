//! The Live session's configuration: the startup config `POST /v1/live/sessions` carries, its
//! checks, the `SessionResource` the server reports, and `session.update`'s narrower rules.
//!
//! Checks are strict, as the service's are: a key the `openai` types (npm 7.59.0,
//! `resources/live/live.ts`) do not have is refused (`unknown_parameter`) with its path, so an
//! app that misspells `delegation` learns it here rather than from a session that silently
//! behaves differently in production. The shapes are serde types with `deny_unknown_fields`,
//! decoded through `decode_at` so a refusal names its full path; the rules a type cannot state
//! (lengths, one text part, the built-in voices) are in `check`. What voice-edge does not
//! implement (Decisions delegation and triggers) is refused with a message saying so, never
//! accepted and ignored.

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::realtime::client_event::decode_at;
use crate::realtime::{AudioFormat, ClientError, Transport};

/// `BuiltInVoice`. A custom voice is an object `{id}`.
pub const VOICES: &[&str] = &[
    "alloy", "ash", "ballad", "beacon", "bossa", "cedar", "cinder", "coral", "delta", "echo",
    "gleam", "marin", "meridian", "quartz", "ripple", "sage", "shida", "shimmer", "stone", "tempo",
    "verse", "vesper", "willow",
];

/// "At most 128 messages" of startup history.
const MAX_INPUT_ITEMS: usize = 128;
/// Instructions are limited to 16,384 tokens; at the usual ~4 characters a token, this many
/// characters is the same bound without a tokenizer.
const MAX_INSTRUCTIONS_CHARS: usize = 16_384 * 4;
/// `session.*.append` content is limited to 500 tokens.
pub const MAX_APPEND_CHARS: usize = 500 * 4;

/// A checked startup config (`MediaSessionConfig`): the session as `session.started` reports
/// it, without the fields the server fills in (`id`, `expires_at`, `status`). It crosses the
/// control API to the transceiver that runs the session, and its serialised form decodes back
/// under the same rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveConfig {
    pub model: String,
    #[serde(default)]
    pub audio: LiveAudio,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientConfig>,
    /// `null` when the app handles delegated tasks itself and said nothing.
    #[serde(default)]
    pub delegation: Option<DelegationConfig>,
    #[serde(default)]
    pub input: Vec<InputMessage>,
    #[serde(default)]
    pub instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety_identifier: Option<String>,
    #[serde(default)]
    pub store: bool,
    /// Always empty: voice-edge runs no Decisions, and says so to an app that sends some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggers: Option<Vec<Value>>,
}

/// What `session.started`, `session.updated` and `session.closed` carry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionResource {
    pub id: String,
    pub expires_at: u64,
    pub status: &'static str,
    #[serde(flatten)]
    pub config: LiveConfig,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveAudio {
    /// Only a WebSocket session has one; WebRTC negotiates its format in SDP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<LiveFormat>,
    #[serde(default)]
    pub output: LiveOutput,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveOutput {
    #[serde(default)]
    pub voice: Voice,
}

/// A built-in voice by name, or a custom one by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged, try_from = "Value")]
pub enum Voice {
    Named(String),
    Custom { id: String },
}

impl Default for Voice {
    fn default() -> Self {
        Voice::Named("marin".into())
    }
}

impl TryFrom<Value> for Voice {
    type Error = String;
    fn try_from(v: Value) -> Result<Self, String> {
        match v {
            Value::String(name) if VOICES.contains(&name.as_str()) => Ok(Voice::Named(name)),
            Value::String(name) => Err(format!(
                "'{name}' is not a built-in voice ({})",
                VOICES.join(", ")
            )),
            Value::Object(mut o) => match (o.remove("id"), o.keys().next()) {
                (_, Some(k)) => Err(format!("unknown field `{k}`")),
                (Some(Value::String(id)), None) if !id.is_empty() => Ok(Voice::Custom { id }),
                (Some(_), None) => Err("invalid type: voice id, expected a string".into()),
                (None, None) => Err("missing field `id`".into()),
            },
            _ => Err("invalid type: voice, expected a voice name or {id}".into()),
        }
    }
}

/// A WebSocket session's `audio.format` (`AudioFormat`): PCM16 at 24 kHz (the default) or
/// 16 kHz, or G.711 at 8 kHz.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveFormat {
    #[serde(rename = "type")]
    pub kind: FormatKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FormatKind {
    #[serde(rename = "audio/pcm")]
    Pcm,
    #[serde(rename = "audio/pcmu")]
    Pcmu,
    #[serde(rename = "audio/pcma")]
    Pcma,
}

impl LiveFormat {
    pub const PCM_24K: LiveFormat = LiveFormat {
        kind: FormatKind::Pcm,
        rate: Some(24_000),
    };

    /// The same format as the turn engine names it.
    pub fn realtime(self) -> AudioFormat {
        match self.kind {
            FormatKind::Pcm => AudioFormat::Pcm {
                rate: Some(self.rate.unwrap_or(24_000)),
            },
            FormatKind::Pcmu => AudioFormat::Pcmu,
            FormatKind::Pcma => AudioFormat::Pcma,
        }
    }

    /// The format with its rate filled in, or why voice-edge does not take it.
    fn checked(self) -> Result<LiveFormat, ClientError> {
        let param = "session.audio.format.rate";
        let rate = match (self.kind, self.rate) {
            (FormatKind::Pcm, None | Some(24_000)) => 24_000,
            (FormatKind::Pcm, Some(16_000)) => 16_000,
            (FormatKind::Pcm, Some(_)) => {
                return Err(ClientError::invalid(param, "PCM is 16000 or 24000 Hz"));
            }
            (_, None | Some(8_000)) => 8_000,
            (_, Some(_)) => return Err(ClientError::invalid(param, "G.711 is 8000 Hz")),
        };
        Ok(LiveFormat {
            kind: self.kind,
            rate: Some(rate),
        })
    }
}

/// `client`: what the frontend's data channel may send and receive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    pub data_channel: DataChannelConfig,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataChannelConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_client_events: Option<Allowed<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_server_events: Option<Allowed<ServerEventSelector>>,
}

impl DataChannelConfig {
    pub fn is_empty(&self) -> bool {
        self.allowed_client_events.is_none() && self.allowed_server_events.is_none()
    }
}

/// `"all"`, or a list of what is allowed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Allowed<T> {
    All(AllKeyword),
    Only(Vec<T>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AllKeyword {
    #[serde(rename = "all")]
    All,
}

impl<T> Allowed<T> {
    /// Whether this permission lets `pass` through.
    pub fn allows(&self, pass: impl Fn(&T) -> bool) -> bool {
        match self {
            Allowed::All(_) => true,
            Allowed::Only(list) => list.iter().any(pass),
        }
    }
}

/// A server event the data channel receives: by type, and for `response.event` by the type of
/// the Responses event inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerEventSelector {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_event: Option<String>,
}

/// `delegation`: who handles the tasks the model hands off. In a `session.update`, Responses'
/// settings may be partial; at startup its `responses.model` is required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegationConfig {
    #[serde(rename = "type")]
    pub target: DelegationTarget,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledgement_delay_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responses: Option<ResponsesDelegation>,
    /// Named so a Decisions config is refused for what it is, not as an unknown key.
    #[serde(default, skip_serializing)]
    decisions: Option<IgnoredAny>,
}

/// Who handles delegated tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegationTarget {
    Client,
    Responses,
    /// Part of the protocol, not implemented here: refused by [`DelegationConfig::check`].
    Decisions,
}

impl DelegationTarget {
    /// The target of a session's delegation: the app unless it named Responses.
    pub fn of(config: &LiveConfig) -> DelegationTarget {
        config
            .delegation
            .as_ref()
            .map_or(DelegationTarget::Client, |d| d.target)
    }

    pub fn name(self) -> &'static str {
        match self {
            DelegationTarget::Client => "client",
            DelegationTarget::Responses => "responses",
            DelegationTarget::Decisions => "decisions",
        }
    }
}

/// `ResponsesDelegationConfig`. The Responses API's own objects (`reasoning`, `text`, its tool
/// choices and hosted tools) are passed through as that API's JSON, not re-modelled here.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponsesDelegation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ResponsesTool>>,
}

impl ResponsesDelegation {
    /// This config with what `update` gives replacing what it had ("omission preserves the
    /// current value").
    fn updated(self, update: ResponsesDelegation) -> ResponsesDelegation {
        ResponsesDelegation {
            model: update.model.or(self.model),
            instructions: update.instructions.or(self.instructions),
            max_output_tokens: update.max_output_tokens.or(self.max_output_tokens),
            parallel_tool_calls: update.parallel_tool_calls.or(self.parallel_tool_calls),
            reasoning: update.reasoning.or(self.reasoning),
            service_tier: update.service_tier.or(self.service_tier),
            text: update.text.or(self.text),
            tool_choice: update.tool_choice.or(self.tool_choice),
            tools: update.tools.or(self.tools),
        }
    }
}

/// A Responses API tool. Only function tools reach the turn engine; the others (hosted tools)
/// are the backend's and kept as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponsesTool {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl DelegationConfig {
    /// The rules the shape does not state: which keys go with which target, and what
    /// voice-edge does not implement.
    fn check(&self, param: &str, update: bool) -> Result<(), ClientError> {
        match self.target {
            DelegationTarget::Client if self.responses.is_some() => {
                Err(ClientError::unknown_parameter(format!("{param}.responses")))
            }
            DelegationTarget::Client => Ok(()),
            DelegationTarget::Responses => match &self.responses {
                None if update => Ok(()),
                None => Err(ClientError::missing(&format!("{param}.responses"))),
                Some(r) => check_responses(r, &format!("{param}.responses"), update),
            },
            DelegationTarget::Decisions => Err(ClientError::invalid(
                &format!("{param}.type"),
                "voice-edge does not implement Decisions delegation; use 'client' or 'responses'",
            )),
        }
    }

    /// An update of the same target keeps what it omits; a switch to Responses needs the
    /// backend's model.
    fn updated(self, update: DelegationConfig) -> Result<DelegationConfig, ClientError> {
        if self.target == update.target {
            let responses = match (self.responses, update.responses) {
                (Some(current), Some(given)) => Some(current.updated(given)),
                (current, given) => given.or(current),
            };
            return Ok(DelegationConfig {
                target: self.target,
                acknowledgement_delay_ms: update
                    .acknowledgement_delay_ms
                    .or(self.acknowledgement_delay_ms),
                responses,
                decisions: None,
            });
        }
        if update.target == DelegationTarget::Responses
            && update.responses.as_ref().is_none_or(|r| r.model.is_none())
        {
            return Err(ClientError::missing("session.delegation.responses.model"));
        }
        Ok(update)
    }

    pub fn responses_model(&self) -> Option<&str> {
        self.responses.as_ref()?.model.as_deref()
    }
}

fn check_responses(r: &ResponsesDelegation, param: &str, update: bool) -> Result<(), ClientError> {
    match r.model.as_deref() {
        Some("") => {
            return Err(ClientError::invalid(
                &format!("{param}.model"),
                "it is empty",
            ));
        }
        None if !update => return Err(ClientError::missing(&format!("{param}.model"))),
        _ => {}
    }
    for (i, t) in r.tools.iter().flatten().enumerate() {
        if t.kind == "function" && t.name.is_none() {
            return Err(ClientError::missing(&format!("{param}.tools[{i}].name")));
        }
    }
    Ok(())
}

/// A startup history message: developer, user or assistant, with exactly one text part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputMessage {
    pub role: InputRole,
    pub content: Vec<TextPart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<MessageKind>,
}

impl InputMessage {
    /// Its text (checked at startup to be exactly one part).
    pub fn text(&self) -> &str {
        self.content.first().map_or("", |p| p.text.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputRole {
    Developer,
    User,
    Assistant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    Message,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextPart {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub text: String,
}

/// `session.update`'s `session`: only `delegation` and `triggers` may change after startup; the
/// startup keys are named so they are refused as immutable, not as unknown.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LiveUpdate {
    #[serde(default, deserialize_with = "present")]
    delegation: Option<Option<DelegationConfig>>,
    #[serde(default)]
    triggers: Option<Vec<Value>>,
    model: Option<IgnoredAny>,
    audio: Option<IgnoredAny>,
    client: Option<IgnoredAny>,
    input: Option<IgnoredAny>,
    instructions: Option<IgnoredAny>,
    safety_identifier: Option<IgnoredAny>,
    store: Option<IgnoredAny>,
}

/// Tells `"delegation": null` (back to the app) from no `delegation` (unchanged).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// The `POST /v1/live/sessions` body: `{session, transport: {type: "webrtc", sdp}}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateRequest {
    session: Value,
    transport: TransportRequest,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TransportRequest {
    #[serde(rename = "type")]
    kind: String,
    sdp: String,
}

/// Decodes `POST /v1/live/sessions`; returns the checked session and the offer.
pub fn parse_create(body: &Value) -> Result<(LiveConfig, String), ClientError> {
    if !body.is_object() {
        return Err(ClientError::wrong_type("body", "a JSON object"));
    }
    let request: CreateRequest = decode_at("", body.clone())?;
    let transport = request.transport;
    if transport.kind != "webrtc" {
        return Err(ClientError::invalid(
            "transport.type",
            "this endpoint takes 'webrtc'; open a WebSocket for the other transports",
        ));
    }
    if transport.sdp.trim().is_empty() {
        return Err(ClientError::invalid("transport.sdp", "the offer is empty"));
    }
    let session = check_start(&request.session, Transport::WebRtc)?;
    Ok((session, transport.sdp))
}

/// Checks a startup session config and fills in its defaults. Only a WebSocket session has an
/// `audio.format`; WebRTC negotiates its format in SDP.
pub fn check_start(session: &Value, transport: Transport) -> Result<LiveConfig, ClientError> {
    if session.is_null() {
        return Err(ClientError::missing("session"));
    }
    let mut config: LiveConfig = decode_at("session", session.clone())?;
    if transport == Transport::WebRtc && config.audio.format.is_some() {
        return Err(ClientError::new(
            "unknown_parameter",
            "Unknown parameter: 'session.audio.format'. WebRTC negotiates its audio format in SDP; \
             audio.format is for the WebSocket transport.",
        )
        .param("session.audio.format"));
    }
    config.check()?;
    if transport == Transport::WebSocket {
        let format = config.audio.format.unwrap_or(LiveFormat::PCM_24K);
        config.audio.format = Some(format.checked()?);
    }
    Ok(config)
}

impl LiveConfig {
    /// The rules the types do not state.
    fn check(&self) -> Result<(), ClientError> {
        if self.model.trim().is_empty() {
            return Err(ClientError::invalid("session.model", "it is empty"));
        }
        if let Some(d) = &self.delegation {
            d.check("session.delegation", false)?;
        }
        if self.input.len() > MAX_INPUT_ITEMS {
            return Err(ClientError::invalid(
                "session.input",
                format!(
                    "at most {MAX_INPUT_ITEMS} messages (got {})",
                    self.input.len()
                ),
            ));
        }
        if let Some(i) = self.input.iter().position(|m| m.content.len() != 1) {
            return Err(ClientError::invalid(
                &format!("session.input[{i}].content"),
                "a message has exactly one text part",
            ));
        }
        if self
            .instructions
            .as_ref()
            .is_some_and(|s| s.chars().count() > MAX_INSTRUCTIONS_CHARS)
        {
            return Err(ClientError::invalid(
                "session.instructions",
                "instructions are limited to 16,384 tokens",
            ));
        }
        if self
            .safety_identifier
            .as_ref()
            .is_some_and(|s| s.len() > 64)
        {
            return Err(ClientError::invalid(
                "session.safety_identifier",
                "it is longer than 64 characters",
            ));
        }
        check_triggers(self.triggers.as_deref())
    }

    /// A `session.update`'s `session` applied: the config it leaves, or why it is refused.
    pub fn updated(&self, update: &Value) -> Result<LiveConfig, ClientError> {
        if !update.is_object() {
            return Err(ClientError::wrong_type("session", "an object"));
        }
        let u: LiveUpdate = decode_at("session", update.clone())?;
        let fixed = [
            ("model", u.model.is_some()),
            ("audio", u.audio.is_some()),
            ("client", u.client.is_some()),
            ("input", u.input.is_some()),
            ("instructions", u.instructions.is_some()),
            ("safety_identifier", u.safety_identifier.is_some()),
            ("store", u.store.is_some()),
        ];
        if let Some((key, _)) = fixed.iter().find(|(_, given)| *given) {
            return Err(ClientError::new(
                "immutable_parameter",
                format!(
                    "'session.{key}' is fixed at startup; session.update changes only delegation and triggers."
                ),
            )
            .param(format!("session.{key}")));
        }
        let mut next = self.clone();
        match u.delegation {
            None => {}
            Some(None) => next.delegation = None,
            Some(Some(d)) => {
                d.check("session.delegation", true)?;
                next.delegation = Some(match self.delegation.clone() {
                    Some(current) => current.updated(d)?,
                    None => DelegationConfig {
                        target: DelegationTarget::Client,
                        acknowledgement_delay_ms: None,
                        responses: None,
                        decisions: None,
                    }
                    .updated(d)?,
                });
            }
        }
        if let Some(t) = u.triggers {
            check_triggers(Some(&t))?;
            next.triggers = Some(t);
        }
        Ok(next)
    }

    /// The Responses backend's model, when the session delegates to one.
    pub fn responses_model(&self) -> Option<&str> {
        self.delegation.as_ref()?.responses_model()
    }

    /// The data channel's permissions, if the session set any.
    pub fn data_channel(&self) -> Option<&DataChannelConfig> {
        self.client.as_ref().map(|c| &c.data_channel)
    }
}

/// Triggers run Decisions, which voice-edge does not implement: only an empty list (no
/// triggers) is taken.
fn check_triggers(t: Option<&[Value]>) -> Result<(), ClientError> {
    match t {
        Some(list) if !list.is_empty() => Err(ClientError::invalid(
            "session.triggers",
            "voice-edge does not implement Decisions triggers; send [] or omit them",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn create(session: Value) -> Result<LiveConfig, ClientError> {
        parse_create(&json!({"session": session, "transport": {"type": "webrtc", "sdp": "v=0"}}))
            .map(|(s, _)| s)
    }

    /// The config as `session.started` shows it.
    fn shown(config: &LiveConfig) -> Value {
        serde_json::to_value(config).unwrap()
    }

    fn code_param<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (String, Option<String>) {
        let e = r.unwrap_err();
        (e.code.into_owned(), e.param)
    }

    #[test]
    fn a_minimal_session_gets_the_documented_defaults() {
        let s = shown(&create(json!({"model": "gpt-live-1"})).unwrap());
        assert_eq!(s["model"], "gpt-live-1");
        assert_eq!(s["audio"]["output"]["voice"], "marin");
        assert_eq!(s["delegation"], Value::Null);
        assert_eq!(s["store"], false);
        assert_eq!(s["input"], json!([]));
    }

    #[test]
    fn unknown_keys_are_refused_with_their_path() {
        assert_eq!(
            code_param(create(json!({"model": "m", "delegaton": null}))),
            ("unknown_parameter".into(), Some("session.delegaton".into()))
        );
        assert_eq!(
            code_param(create(
                json!({"model": "m", "audio": {"output": {"speed": 1}}})
            )),
            (
                "unknown_parameter".into(),
                Some("session.audio.output.speed".into())
            )
        );
        assert_eq!(
            code_param(create(
                json!({"model": "m", "audio": {"format": {"type": "audio/pcm"}}})
            ))
            .1,
            Some("session.audio.format".into())
        );
        let top = parse_create(
            &json!({"session": {"model": "m"}, "transport": {"type": "webrtc", "sdp": "x"}, "x": 1}),
        );
        assert_eq!(top.unwrap_err().param.as_deref(), Some("x"));
    }

    #[test]
    fn required_fields_and_types() {
        assert_eq!(
            code_param(create(json!({}))),
            (
                "missing_required_parameter".into(),
                Some("session.model".into())
            )
        );
        assert_eq!(code_param(create(json!({"model": 3}))).0, "invalid_type");
        let no_sdp =
            parse_create(&json!({"session": {"model": "m"}, "transport": {"type": "webrtc"}}));
        assert_eq!(no_sdp.unwrap_err().param.as_deref(), Some("transport.sdp"));
        let ws = parse_create(
            &json!({"session": {"model": "m"}, "transport": {"type": "websocket", "sdp": "x"}}),
        );
        assert_eq!(ws.unwrap_err().code, "invalid_value");
    }

    #[test]
    fn voices_delegation_input_and_triggers() {
        assert_eq!(
            code_param(create(
                json!({"model": "m", "audio": {"output": {"voice": "nobody"}}})
            ))
            .0,
            "invalid_value"
        );
        let custom =
            create(json!({"model": "m", "audio": {"output": {"voice": {"id": "voice_1"}}}}));
        assert_eq!(
            shown(&custom.unwrap())["audio"]["output"]["voice"]["id"],
            "voice_1"
        );
        assert_eq!(
            code_param(create(
                json!({"model": "m", "delegation": {"type": "responses"}})
            ))
            .1,
            Some("session.delegation.responses".into())
        );
        let decisions =
            create(json!({"model": "m", "delegation": {"type": "decisions", "decisions": {}}}));
        assert!(
            decisions
                .unwrap_err()
                .message
                .contains("does not implement Decisions")
        );
        let ok = create(
            json!({"model": "m", "delegation": {"type": "responses", "responses": {
            "model": "gpt-5", "tools": [{"type": "function", "name": "get_weather"}]}}}),
        );
        assert!(ok.is_ok());
        let too_many: Vec<Value> = (0..129)
            .map(|_| json!({"role": "user", "content": [{"text": "hi"}]}))
            .collect();
        assert_eq!(
            code_param(create(json!({"model": "m", "input": too_many}))).0,
            "invalid_value"
        );
        let two_parts = json!([{"role": "user", "content": [{"text": "a"}, {"text": "b"}]}]);
        assert_eq!(
            code_param(create(json!({"model": "m", "input": two_parts}))).1,
            Some("session.input[0].content".into())
        );
        assert!(create(json!({"model": "m", "triggers": []})).is_ok());
        assert!(create(json!({"model": "m", "triggers": [{"type": "x"}]})).is_err());
    }

    #[test]
    fn only_a_websocket_session_has_an_audio_format() {
        let ws = |format: Value| {
            check_start(
                &json!({"model": "m", "audio": {"format": format}}),
                Transport::WebSocket,
            )
        };
        let s = shown(&check_start(&json!({"model": "m"}), Transport::WebSocket).unwrap());
        assert_eq!(
            s["audio"]["format"],
            json!({"type": "audio/pcm", "rate": 24000})
        );
        assert_eq!(
            shown(&ws(json!({"type": "audio/pcmu"})).unwrap())["audio"]["format"]["rate"],
            8000
        );
        let pcm16 = ws(json!({"type": "audio/pcm", "rate": 16000})).unwrap();
        assert_eq!(shown(&pcm16)["audio"]["format"]["rate"], 16000);
        assert_eq!(
            pcm16.audio.format.unwrap().realtime(),
            AudioFormat::Pcm { rate: Some(16_000) }
        );
        assert!(ws(json!({"type": "audio/pcm", "rate": 44100})).is_err());
        assert_eq!(
            ws(json!({"type": "audio/opus"}))
                .unwrap_err()
                .param
                .as_deref(),
            Some("session.audio.format.type")
        );
        assert_eq!(
            code_param(create(
                json!({"model": "m", "audio": {"format": {"type": "audio/pcm"}}})
            ))
            .0,
            "unknown_parameter"
        );
    }

    #[test]
    fn updates_change_only_delegation_and_triggers() {
        let s = create(json!({"model": "m", "delegation": {"type": "responses", "responses": {"model": "gpt-5"}}}))
            .unwrap();
        let e = s.updated(&json!({"instructions": "x"})).unwrap_err();
        assert_eq!(e.code, "immutable_parameter");
        // Omitted settings are kept; given ones replace.
        let next = shown(
            &s.updated(
                &json!({"delegation": {"type": "responses", "acknowledgement_delay_ms": 300,
                    "responses": {"instructions": "be brief"}}}),
            )
            .unwrap(),
        );
        assert_eq!(next["delegation"]["responses"]["model"], "gpt-5");
        assert_eq!(next["delegation"]["responses"]["instructions"], "be brief");
        assert_eq!(next["delegation"]["acknowledgement_delay_ms"], 300);
        let to_client = s
            .updated(&json!({"delegation": {"type": "client"}}))
            .unwrap();
        assert_eq!(DelegationTarget::of(&to_client), DelegationTarget::Client);
        let bad = to_client.updated(&json!({"delegation": {"type": "responses"}}));
        assert_eq!(bad.unwrap_err().code, "missing_required_parameter");
    }

    #[test]
    fn the_checked_config_crosses_the_control_api_unchanged() {
        let c = check_start(
            &json!({"model": "m", "audio": {"format": {"type": "audio/pcma"}, "output": {"voice": {"id": "v1"}}},
                    "client": {"data_channel": {"allowed_client_events": ["session.close"], "allowed_server_events": "all"}},
                    "delegation": {"type": "responses", "acknowledgement_delay_ms": 200,
                                   "responses": {"model": "gpt-5", "tools": [{"type": "web_search", "x": 1}]}},
                    "input": [{"role": "developer", "content": [{"type": "input_text", "text": "hi"}]}],
                    "store": true, "triggers": []}),
            Transport::WebSocket,
        )
        .unwrap();
        let back: LiveConfig = serde_json::from_value(shown(&c)).unwrap();
        assert_eq!(back, c);
        assert_eq!(shown(&c)["delegation"]["responses"]["tools"][0]["x"], 1);
        assert_eq!(
            shown(&c)["client"]["data_channel"]["allowed_server_events"],
            "all"
        );
        assert_eq!(c.audio.format.unwrap().rate, Some(8000));
    }

    #[test]
    fn a_delegation_null_update_hands_tasks_back_to_the_app() {
        let s = create(
            json!({"model": "m", "delegation": {"type": "client", "acknowledgement_delay_ms": 5}}),
        )
        .unwrap();
        assert_eq!(
            s.updated(&json!({"delegation": null})).unwrap().delegation,
            None
        );
        let kept = s.updated(&json!({"triggers": []})).unwrap();
        assert_eq!(kept.delegation, s.delegation);
        assert_eq!(
            code_param(s.updated(&json!({"delegaton": null}))),
            ("unknown_parameter".into(), Some("session.delegaton".into()))
        );
    }
}
