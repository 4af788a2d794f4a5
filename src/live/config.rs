//! The Live session's configuration: the startup config `POST /v1/live/sessions` carries, its
//! checks, the `SessionResource` the server reports, and `session.update`'s narrower rules.
//!
//! Checks are strict, as the service's are: a key the `openai` types (npm 7.59.0,
//! `resources/live/live.ts`) do not have is refused (`unknown_parameter`) with its path, so an
//! app that misspells `delegation` learns it here rather than from a session that silently
//! behaves differently in production. What voice-edge does not implement (Decisions delegation
//! and triggers) is refused with a message saying so, never accepted and ignored.

use serde_json::{Map, Value, json};

use crate::realtime::{ClientError, Transport};

/// `MediaSessionConfig`: what a WebRTC session may be started with.
const SESSION_KEYS: &[&str] = &[
    "model",
    "audio",
    "client",
    "delegation",
    "input",
    "instructions",
    "safety_identifier",
    "store",
    "triggers",
];

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

/// `ResponsesDelegationConfig`'s keys.
const RESPONSES_KEYS: &[&str] = &[
    "model",
    "instructions",
    "max_output_tokens",
    "parallel_tool_calls",
    "reasoning",
    "service_tier",
    "text",
    "tool_choice",
    "tools",
];

/// A checked startup config: the session as `session.started` will report it, without the
/// fields the server fills in (`id`, `expires_at`, `status`). It crosses the control API to the
/// transceiver that runs the session, so it is plain JSON.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LiveStart {
    pub session: Value,
}

/// Who handles delegated tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelegationTarget {
    Client,
    Responses,
}

impl DelegationTarget {
    pub fn of(session: &Value) -> DelegationTarget {
        match session["delegation"]["type"].as_str() {
            Some("responses") => DelegationTarget::Responses,
            _ => DelegationTarget::Client,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DelegationTarget::Client => "client",
            DelegationTarget::Responses => "responses",
        }
    }
}

/// The `POST /v1/live/sessions` body: `{session, transport: {type: "webrtc", sdp}}`. Returns the
/// checked session and the offer.
pub fn parse_create(body: &Value) -> Result<(LiveStart, String), ClientError> {
    let obj = body
        .as_object()
        .ok_or_else(|| ClientError::wrong_type("body", "a JSON object"))?;
    only_keys(obj, &["session", "transport"], "")?;
    let transport = match obj.get("transport") {
        None | Some(Value::Null) => return Err(ClientError::missing("transport")),
        Some(Value::Object(t)) => t,
        Some(_) => return Err(ClientError::wrong_type("transport", "an object")),
    };
    only_keys(transport, &["type", "sdp"], "transport.")?;
    match transport.get("type") {
        None | Some(Value::Null) => return Err(ClientError::missing("transport.type")),
        Some(t) if t == "webrtc" => {}
        Some(_) => {
            return Err(ClientError::invalid(
                "transport.type",
                "this endpoint takes 'webrtc'; open a WebSocket for the other transports",
            ));
        }
    }
    let sdp = match transport.get("sdp") {
        None | Some(Value::Null) => return Err(ClientError::missing("transport.sdp")),
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::String(_)) => {
            return Err(ClientError::invalid("transport.sdp", "the offer is empty"));
        }
        Some(_) => return Err(ClientError::wrong_type("transport.sdp", "a string")),
    };
    let session = match obj.get("session") {
        None | Some(Value::Null) => return Err(ClientError::missing("session")),
        Some(s) => check_start(s, Transport::WebRtc)?,
    };
    Ok((session, sdp))
}

/// Checks a startup session config and fills in its defaults. Only a WebSocket session has an
/// `audio.format`; WebRTC negotiates its format in SDP.
pub fn check_start(session: &Value, transport: Transport) -> Result<LiveStart, ClientError> {
    let obj = session
        .as_object()
        .ok_or_else(|| ClientError::wrong_type("session", "an object"))?;
    only_keys(obj, SESSION_KEYS, "session.")?;
    let model = match obj.get("model") {
        None | Some(Value::Null) => return Err(ClientError::missing("session.model")),
        Some(Value::String(m)) if !m.trim().is_empty() => m.clone(),
        Some(Value::String(_)) => return Err(ClientError::invalid("session.model", "it is empty")),
        Some(_) => return Err(ClientError::wrong_type("session.model", "a string")),
    };
    let voice = check_audio(obj.get("audio"), transport)?;
    if let Some(c) = obj.get("client") {
        check_client(c)?;
    }
    let delegation = match obj.get("delegation") {
        None | Some(Value::Null) => Value::Null,
        Some(d) => check_delegation(d, "session.delegation", false)?,
    };
    let input = match obj.get("input") {
        None | Some(Value::Null) => Value::Array(Vec::new()),
        Some(i) => check_input(i)?,
    };
    let instructions = match obj.get("instructions") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) if s.chars().count() > MAX_INSTRUCTIONS_CHARS => {
            return Err(ClientError::invalid(
                "session.instructions",
                "instructions are limited to 16,384 tokens",
            ));
        }
        Some(Value::String(s)) => Value::from(s.clone()),
        Some(_) => return Err(ClientError::wrong_type("session.instructions", "a string")),
    };
    let store = match obj.get("store") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ClientError::wrong_type("session.store", "a boolean")),
    };
    let mut out = json!({
        "model": model,
        "audio": {"output": {"voice": voice}},
        "delegation": delegation,
        "input": input,
        "instructions": instructions,
        "store": store,
    });
    match obj.get("safety_identifier") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.len() <= 64 => {
            out["safety_identifier"] = Value::from(s.clone())
        }
        Some(Value::String(_)) => {
            return Err(ClientError::invalid(
                "session.safety_identifier",
                "it is longer than 64 characters",
            ));
        }
        Some(_) => {
            return Err(ClientError::wrong_type(
                "session.safety_identifier",
                "a string",
            ));
        }
    }
    if let Some(c) = obj.get("client") {
        out["client"] = c.clone();
    }
    if transport == Transport::WebSocket {
        out["audio"]["format"] = check_format(obj.get("audio").and_then(|a| a.get("format")))?;
    }
    if let Some(t) = obj.get("triggers") {
        check_triggers(t, "session.triggers")?;
        out["triggers"] = t.clone();
    }
    Ok(LiveStart { session: out })
}

/// A `session.update`'s `session`: only `delegation` and `triggers` may change after startup.
/// Returns the session with the change applied.
pub fn apply_update(current: &Value, update: &Value) -> Result<Value, ClientError> {
    let obj = update
        .as_object()
        .ok_or_else(|| ClientError::wrong_type("session", "an object"))?;
    for key in obj.keys() {
        if SESSION_KEYS.contains(&key.as_str())
            && !["delegation", "triggers"].contains(&key.as_str())
        {
            return Err(ClientError::new(
                "immutable_parameter",
                format!(
                    "'session.{key}' is fixed at startup; session.update changes only delegation and triggers."
                ),
            )
            .param(format!("session.{key}")));
        }
    }
    only_keys(obj, &["delegation", "triggers"], "session.")?;
    let mut next = current.clone();
    if let Some(d) = obj.get("delegation") {
        next["delegation"] = match d {
            Value::Null => Value::Null,
            d => {
                let checked = check_delegation(d, "session.delegation", true)?;
                merge_delegation(&current["delegation"], checked)?
            }
        };
    }
    if let Some(t) = obj.get("triggers") {
        check_triggers(t, "session.triggers")?;
        next["triggers"] = t.clone();
    }
    Ok(next)
}

/// An update of the same target keeps what it omits ("omission preserves the current value");
/// a switch to Responses needs the backend's model.
fn merge_delegation(current: &Value, update: Value) -> Result<Value, ClientError> {
    if current["type"] == update["type"] {
        let mut merged = current.clone();
        for (k, v) in update.as_object().into_iter().flatten() {
            if k == "responses" {
                for (rk, rv) in v.as_object().into_iter().flatten() {
                    merged["responses"][rk] = rv.clone();
                }
            } else {
                merged[k] = v.clone();
            }
        }
        return Ok(merged);
    }
    if update["type"] == "responses" && !update["responses"]["model"].is_string() {
        return Err(ClientError::missing("session.delegation.responses.model"));
    }
    Ok(update)
}

fn check_audio(audio: Option<&Value>, transport: Transport) -> Result<Value, ClientError> {
    let default = Value::from("marin");
    let audio = match audio {
        None | Some(Value::Null) => return Ok(default),
        Some(Value::Object(a)) => a,
        Some(_) => return Err(ClientError::wrong_type("session.audio", "an object")),
    };
    if audio.contains_key("format") && transport == Transport::WebRtc {
        return Err(ClientError::new(
            "unknown_parameter",
            "Unknown parameter: 'session.audio.format'. WebRTC negotiates its audio format in SDP; \
             audio.format is for the WebSocket transport.",
        )
        .param("session.audio.format"));
    }
    only_keys(audio, &["format", "output"], "session.audio.")?;
    let output = match audio.get("output") {
        None | Some(Value::Null) => return Ok(default),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(ClientError::wrong_type("session.audio.output", "an object")),
    };
    only_keys(output, &["voice"], "session.audio.output.")?;
    let param = "session.audio.output.voice";
    match output.get("voice") {
        None | Some(Value::Null) => Ok(default),
        Some(Value::String(v)) if VOICES.contains(&v.as_str()) => Ok(Value::from(v.clone())),
        Some(Value::String(v)) => Err(ClientError::invalid(
            param,
            format!("'{v}' is not a built-in voice ({})", VOICES.join(", ")),
        )),
        Some(Value::Object(o)) => {
            only_keys(o, &["id"], "session.audio.output.voice.")?;
            match o.get("id") {
                Some(Value::String(id)) if !id.is_empty() => Ok(json!({ "id": id })),
                Some(_) => Err(ClientError::wrong_type(
                    "session.audio.output.voice.id",
                    "a string",
                )),
                None => Err(ClientError::missing("session.audio.output.voice.id")),
            }
        }
        Some(_) => Err(ClientError::wrong_type(param, "a voice name or {id}")),
    }
}

/// A WebSocket session's `audio.format` (`AudioFormat`): 24 kHz PCM16 (the default), or G.711.
/// The service also takes PCM at 16 kHz; voice-edge's codecs do not, and say so.
fn check_format(format: Option<&Value>) -> Result<Value, ClientError> {
    let param = "session.audio.format";
    let f = match format {
        None | Some(Value::Null) => return Ok(json!({"type": "audio/pcm", "rate": 24_000})),
        Some(Value::Object(f)) => f,
        Some(_) => return Err(ClientError::wrong_type(param, "an object")),
    };
    only_keys(f, &["type", "rate"], "session.audio.format.")?;
    let rate = f.get("rate").and_then(Value::as_u64);
    match (f.get("type").and_then(Value::as_str), rate) {
        (Some("audio/pcm"), None | Some(24_000)) => {
            Ok(json!({"type": "audio/pcm", "rate": 24_000}))
        }
        (Some("audio/pcm"), Some(16_000)) => Err(ClientError::invalid(
            "session.audio.format.rate",
            "voice-edge takes PCM at 24000 Hz only (16000 is not implemented)",
        )),
        (Some("audio/pcm"), Some(_)) => Err(ClientError::invalid(
            "session.audio.format.rate",
            "PCM is 16000 or 24000 Hz",
        )),
        (Some(t @ ("audio/pcmu" | "audio/pcma")), None | Some(8_000)) => {
            Ok(json!({"type": t, "rate": 8_000}))
        }
        (Some("audio/pcmu" | "audio/pcma"), Some(_)) => Err(ClientError::invalid(
            "session.audio.format.rate",
            "G.711 is 8000 Hz",
        )),
        (Some(other), _) => Err(ClientError::invalid(
            "session.audio.format.type",
            format!("'{other}' is not one of 'audio/pcm', 'audio/pcmu', 'audio/pcma'"),
        )),
        (None, _) => Err(ClientError::missing("session.audio.format.type")),
    }
}

fn check_client(client: &Value) -> Result<(), ClientError> {
    let obj = client
        .as_object()
        .ok_or_else(|| ClientError::wrong_type("session.client", "an object"))?;
    only_keys(obj, &["data_channel"], "session.client.")?;
    let dc = match obj.get("data_channel") {
        Some(Value::Object(dc)) => dc,
        Some(_) => {
            return Err(ClientError::wrong_type(
                "session.client.data_channel",
                "an object",
            ));
        }
        None => return Err(ClientError::missing("session.client.data_channel")),
    };
    only_keys(
        dc,
        &["allowed_client_events", "allowed_server_events"],
        "session.client.data_channel.",
    )?;
    for (key, entry) in [
        ("allowed_client_events", "an event type"),
        ("allowed_server_events", "a {type} selector"),
    ] {
        let param = format!("session.client.data_channel.{key}");
        match dc.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s == "all" => {}
            Some(Value::Array(list)) => {
                for v in list {
                    let ok = match key {
                        "allowed_client_events" => v.is_string(),
                        _ => v["type"].is_string(),
                    };
                    if !ok {
                        return Err(ClientError::wrong_type(
                            &param,
                            &format!("'all' or a list of {entry}"),
                        ));
                    }
                }
            }
            Some(_) => return Err(ClientError::wrong_type(&param, "'all' or a list")),
        }
    }
    Ok(())
}

/// `delegation`: client or Responses. With `update`, Responses' settings may be partial.
fn check_delegation(d: &Value, param: &str, update: bool) -> Result<Value, ClientError> {
    let obj = d
        .as_object()
        .ok_or_else(|| ClientError::wrong_type(param, "an object or null"))?;
    let target = match obj.get("type") {
        None | Some(Value::Null) => return Err(ClientError::missing(&format!("{param}.type"))),
        Some(Value::String(t)) => t.as_str(),
        Some(_) => {
            return Err(ClientError::wrong_type(
                &format!("{param}.type"),
                "a string",
            ));
        }
    };
    match target {
        "client" => only_keys(
            obj,
            &["type", "acknowledgement_delay_ms"],
            &format!("{param}."),
        )?,
        "responses" => {
            only_keys(
                obj,
                &["type", "acknowledgement_delay_ms", "responses"],
                &format!("{param}."),
            )?;
            match obj.get("responses") {
                Some(Value::Object(r)) => {
                    check_responses(r, &format!("{param}.responses"), update)?
                }
                None if update => {}
                None => return Err(ClientError::missing(&format!("{param}.responses"))),
                Some(_) => {
                    return Err(ClientError::wrong_type(
                        &format!("{param}.responses"),
                        "an object",
                    ));
                }
            }
        }
        "decisions" => {
            return Err(ClientError::invalid(
                &format!("{param}.type"),
                "voice-edge does not implement Decisions delegation; use 'client' or 'responses'",
            ));
        }
        other => {
            return Err(ClientError::invalid(
                &format!("{param}.type"),
                format!("'{other}' is not one of 'client', 'responses', 'decisions'"),
            ));
        }
    }
    if let Some(v) = obj.get("acknowledgement_delay_ms")
        && !v.is_u64()
    {
        return Err(ClientError::wrong_type(
            &format!("{param}.acknowledgement_delay_ms"),
            "a non-negative integer",
        ));
    }
    Ok(d.clone())
}

fn check_responses(r: &Map<String, Value>, param: &str, update: bool) -> Result<(), ClientError> {
    only_keys(r, RESPONSES_KEYS, &format!("{param}."))?;
    match r.get("model") {
        Some(Value::String(m)) if !m.is_empty() => {}
        None if update => {}
        None | Some(Value::Null) => return Err(ClientError::missing(&format!("{param}.model"))),
        Some(_) => {
            return Err(ClientError::wrong_type(
                &format!("{param}.model"),
                "a string",
            ));
        }
    }
    match r.get("tools") {
        None | Some(Value::Null) => {}
        Some(Value::Array(tools)) => {
            for (i, t) in tools.iter().enumerate() {
                let at = format!("{param}.tools[{i}]");
                match t["type"].as_str() {
                    None => return Err(ClientError::missing(&format!("{at}.type"))),
                    Some("function") if !t["name"].is_string() => {
                        return Err(ClientError::missing(&format!("{at}.name")));
                    }
                    Some(_) => {}
                }
            }
        }
        Some(_) => {
            return Err(ClientError::wrong_type(
                &format!("{param}.tools"),
                "an array",
            ));
        }
    }
    Ok(())
}

/// Startup history: developer, user and assistant messages with one text part each.
fn check_input(input: &Value) -> Result<Value, ClientError> {
    let items = input
        .as_array()
        .ok_or_else(|| ClientError::wrong_type("session.input", "an array"))?;
    if items.len() > MAX_INPUT_ITEMS {
        return Err(ClientError::invalid(
            "session.input",
            format!("at most {MAX_INPUT_ITEMS} messages (got {})", items.len()),
        ));
    }
    for (i, item) in items.iter().enumerate() {
        let at = format!("session.input[{i}]");
        let obj = item
            .as_object()
            .ok_or_else(|| ClientError::wrong_type(&at, "a message object"))?;
        only_keys(
            obj,
            &["role", "content", "id", "status", "type"],
            &format!("{at}."),
        )?;
        if obj.get("type").is_some_and(|t| t != "message") {
            return Err(ClientError::invalid(
                &format!("{at}.type"),
                "only 'message'",
            ));
        }
        let role = obj["role"].as_str().unwrap_or_default();
        if !["developer", "user", "assistant"].contains(&role) {
            return Err(ClientError::invalid(
                &format!("{at}.role"),
                "one of 'developer', 'user', 'assistant'",
            ));
        }
        let parts = obj["content"].as_array().map_or(&[][..], Vec::as_slice);
        if parts.len() != 1 || !parts[0]["text"].is_string() {
            return Err(ClientError::invalid(
                &format!("{at}.content"),
                "a message has exactly one text part",
            ));
        }
    }
    Ok(input.clone())
}

/// Triggers run Decisions, which voice-edge does not implement: only an empty list (no
/// triggers) is taken.
fn check_triggers(t: &Value, param: &str) -> Result<(), ClientError> {
    match t.as_array() {
        Some(list) if list.is_empty() => Ok(()),
        Some(_) => Err(ClientError::invalid(
            param,
            "voice-edge does not implement Decisions triggers; send [] or omit them",
        )),
        None => Err(ClientError::wrong_type(param, "an array")),
    }
}

/// The service's refusal of a key it does not know, naming its full path.
fn only_keys(obj: &Map<String, Value>, allowed: &[&str], prefix: &str) -> Result<(), ClientError> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(ClientError::unknown_parameter(format!("{prefix}{k}"))),
    }
}

/// The text of a startup history message (checked by [`check_start`]).
pub fn input_text(item: &Value) -> &str {
    item["content"][0]["text"].as_str().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(session: Value) -> Result<LiveStart, ClientError> {
        parse_create(&json!({"session": session, "transport": {"type": "webrtc", "sdp": "v=0"}}))
            .map(|(s, _)| s)
    }

    fn code_param(r: Result<LiveStart, ClientError>) -> (String, Option<String>) {
        let e = r.unwrap_err();
        (e.code.into_owned(), e.param)
    }

    #[test]
    fn a_minimal_session_gets_the_documented_defaults() {
        let s = create(json!({"model": "gpt-live-1"})).unwrap().session;
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
            custom.unwrap().session["audio"]["output"]["voice"]["id"],
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
        let s = check_start(&json!({"model": "m"}), Transport::WebSocket)
            .unwrap()
            .session;
        assert_eq!(
            s["audio"]["format"],
            json!({"type": "audio/pcm", "rate": 24000})
        );
        assert_eq!(
            ws(json!({"type": "audio/pcmu"})).unwrap().session["audio"]["format"]["rate"],
            8000
        );
        assert!(
            ws(json!({"type": "audio/pcm", "rate": 16000}))
                .unwrap_err()
                .message
                .contains("24000")
        );
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
            .unwrap()
            .session;
        let e = apply_update(&s, &json!({"instructions": "x"})).unwrap_err();
        assert_eq!(e.code, "immutable_parameter");
        // Omitted settings are kept; given ones replace.
        let next = apply_update(
            &s,
            &json!({"delegation": {"type": "responses", "acknowledgement_delay_ms": 300,
                    "responses": {"instructions": "be brief"}}}),
        )
        .unwrap();
        assert_eq!(next["delegation"]["responses"]["model"], "gpt-5");
        assert_eq!(next["delegation"]["responses"]["instructions"], "be brief");
        assert_eq!(next["delegation"]["acknowledgement_delay_ms"], 300);
        let to_client = apply_update(&s, &json!({"delegation": {"type": "client"}})).unwrap();
        assert_eq!(DelegationTarget::of(&to_client), DelegationTarget::Client);
        let bad = apply_update(&to_client, &json!({"delegation": {"type": "responses"}}));
        assert_eq!(bad.unwrap_err().code, "missing_required_parameter");
    }
}
